/* Randomness as an input of the log.  A server that draws random numbers
 * while it handles a client's input (Redis: SPOP, SRANDMEMBER, RANDOMKEY)
 * must draw the same on every replica, including one restarted from a
 * recovery point whose generator state was never saved.
 *
 * So the numbers are not carried in the log: they are a function of where
 * they are drawn.  Inside the window of entry I (input_clock.h: from the
 * read that hands entry I's bytes to a server thread until that thread
 * next waits for events), the N-th number the thread draws is
 * SipHash-2-4(cluster key, I, N), the same wherever and whenever entry I
 * is executed.  Nothing is on the hot path unless the server draws.
 *
 * Outside a window (the server's start, its timers), reads of the random
 * devices and getrandom() draw from the boot stream instead:
 * SipHash(key, boot, N) for the process's N-th draw.  That makes a
 * server's start-up seeds (Redis's dict hash seed) equal on every replica
 * and after each restart.  libc's rand()/random() outside a window stay
 * libc's (seeded by the server).
 *
 * The key is derived from the cluster's secret_file, or from its name
 * where there is none: numbers are unpredictable to whoever lacks the
 * secret, equal on every replica, and the same on every start.  A server
 * that makes long-lived keys from its random numbers (TLS) is better run
 * with `randomness = machine`, which turns all of this off.
 *
 * A server's own generator.  libc calls can be interposed, but a server's
 * private generator cannot (Redis: genrand64, seeded from the clock and
 * its pid).  `seed_function = NAME` names a function the server exports
 * (Redis links with -rdynamic) that seeds it from one 64-bit value.  The
 * shim seeds it with f(b) = SipHash(key, seed, b) for a block b = I /
 * seed_every of entries, so that the generator's state at entry I is the
 * same on every replica, including one restarted from a recovery point.
 *
 * Lazy seeding.  Seeding costs (Redis's init_genrand64: ~0.5 us, the
 * leader's biggest item of user time under SET) and most entries draw
 * nothing.  So at start (seed_state.h) the shim finds the generator's
 * state, a span of the server's data, and keeps the span's bytes right
 * after each seed.  The state is then "pristine f(j)" (j: the block last
 * seeded) until something draws.  Who draws decides what to do:
 *   - a window (the same on every replica: it executes the same entry
 *     from the same state): the state is dirty, and the next window of
 *     another block seeds f(its block);
 *   - a timer, outside every window (at different times on different
 *     replicas, or not at all): the next window seeds f(j) again, so
 *     every replica is back at pristine f(j), as if no timer had drawn;
 *   - nobody: nothing to do.
 * Where a change of the span happened is known from where it was seen:
 * the span is compared when a window opens and when it closes (the thread
 * waits for events), so a change between an enter and the next leave or
 * enter was made inside a window, and one between a leave and the next
 * enter outside.  Every decision thus depends on draws made inside
 * windows alone, which are the same everywhere, and the state at entry I
 * is the same function of the log on every replica: f(j) or f(I's block)
 * followed by I's own draws.  (A timer that runs inside a window, as
 * Redis's cron can in the window of the last entry it read, counts as the
 * window's: doc/limits.md.)
 *
 * A restart from a recovery point.  Its state is f(j), or dirty, at the
 * entry it ends at: the node records input_random_mark() when its server
 * forks the snapshot, in the recovery point, and hands it to
 * input_random_resume() at restart.  The first window seeds f(j) (dirty
 * or unknown: f(its block), which is what the others seed next when
 * seed_every = 1).  Without the state found, every new block is seeded as
 * it opens.  A larger seed_every also leaves a dirty state dirty until the
 * block ends: up to seed_every - 1 entries after a restart from a recovery
 * point in which the restarted replica's draws may differ (the checker
 * reports them, divergence = repair repairs). */
#ifndef APUS_INPUT_RANDOM_H
#define APUS_INPUT_RANDOM_H

#include <stddef.h>
#include <stdint.h>

struct apus_config;

/* Sets the key and finds the seed function, from CFG (once, when the node
 * started in this process).  Returns 0, or -1 with ERR set (the seed
 * function is not exported by the server). */
int input_random_init(const struct apus_config *cfg, char *err, size_t errlen);

/* Whether the server's randomness comes from here (randomness = log and
 * input_random_init() ran). */
int input_random_on(void);

/* The calling thread opens the window of entry IDX (a new one: the
 * thread's draws start again from 0); seeds the server's generator when
 * IDX starts a new block. */
void input_random_enter(uint64_t idx);

/* Lazy seeding: the calling thread's window is open. */
extern __thread int input_random_window;

/* The calling thread's window closes (input_window_leave). */
void input_random_leave(void);

/* On the server's thread when it forks a snapshot: the block j whose
 * pristine f(j) the generator holds, or UINT64_MAX (dirty, or unknown). */
uint64_t input_random_mark(void);

/* Lazy seeding: how many threads have a window open (0 without it).
 * While none is, input_random_mark() holds from any thread (the node's,
 * while a guard holds its server between entries). */
int input_random_windows_open(void);

/* Before the first window of a server restarted from a recovery point:
 * MARK is that point's input_random_mark(). */
void input_random_resume(uint64_t mark);

/* The next number of the calling thread's window, or of the boot stream
 * outside a window (input_clock_ms == 0). */
uint64_t input_random_next(void);

/* Fills BUF with LEN bytes of input_random_next(). */
void input_random_fill(void *buf, size_t len);

/* SipHash-2-4 of the two words (A, B) under KEY (exposed for the tests). */
uint64_t input_random_siphash(const uint64_t key[2], uint64_t a, uint64_t b);

#endif
