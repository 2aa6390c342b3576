/* Futex wait/wake on a 32-bit word that may live in a mapping shared
 * between processes (so never the _PRIVATE variants). */
#ifndef APUS_FUTEX_H
#define APUS_FUTEX_H

#include <limits.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static inline void futex_wait(uint32_t *word, uint32_t seen, int timeout_us)
{
	struct timespec ts = { timeout_us / 1000000, (long)(timeout_us % 1000000) * 1000 };

	syscall(SYS_futex, word, FUTEX_WAIT, seen, timeout_us >= 0 ? &ts : NULL, NULL, 0);
}

static inline void futex_wake_one(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static inline void futex_wake_all(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Doorbell protocol (pairs: ring's add on bell / load of sleepers against
 * the waiter's add on sleepers / futex's load of bell; all seq_cst, so one
 * side always sees the other and no wake-up is lost). */
static inline void bell_ring(uint32_t *bell, uint32_t *sleepers)
{
	__atomic_add_fetch(bell, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST))
		futex_wake_all(bell);
}

static inline void bell_wait(uint32_t *bell, uint32_t *sleepers, uint32_t seen, int timeout_us)
{
	__atomic_add_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(bell, __ATOMIC_SEQ_CST) == seen)
		futex_wait(bell, seen, timeout_us);
	__atomic_sub_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

#endif
