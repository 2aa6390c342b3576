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
 * (Redis links with -rdynamic) that seeds it from one 64-bit value; the
 * shim calls it with SipHash(key, seed, I / seed_every) when a window
 * opens in a new block of seed_every entries.  With seed_every = 1 the
 * server's generator state is a function of the entry alone: exact on a
 * replica restarted from any recovery point.  A larger seed_every saves
 * the seeding's cost (Redis's init_genrand64: ~0.5 us) at the price of up
 * to seed_every - 1 entries after a restart from a recovery point in which
 * the restarted replica's draws may differ (the checker reports them,
 * divergence = repair repairs). */
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

/* The next number of the calling thread's window, or of the boot stream
 * outside a window (input_clock_ms == 0). */
uint64_t input_random_next(void);

/* Fills BUF with LEN bytes of input_random_next(). */
void input_random_fill(void *buf, size_t len);

/* SipHash-2-4 of the two words (A, B) under KEY (exposed for the tests). */
uint64_t input_random_siphash(const uint64_t key[2], uint64_t a, uint64_t b);

#endif
