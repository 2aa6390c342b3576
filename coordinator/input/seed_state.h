/* Where a server's private random generator keeps its state, found
 * without knowing the server: the words of its writable data that its
 * seed function changes (input_random.h says what that is for). */
#ifndef APUS_SEED_STATE_H
#define APUS_SEED_STATE_H

#include <stddef.h>

/* The largest state taken: a span any bigger is not one generator's. */
#define SEED_STATE_MAX (64 * 1024)

/* Calls SEED (a function of the server's, which seeds its generator from
 * one value) three times and diffs the writable segments of the object
 * that holds it.  Returns the span of the words that changed, with *LEN
 * set, when it is dense (at least half its words changed) and at most
 * SEED_STATE_MAX; else NULL with WHY set.  Only while the process runs
 * nothing else of the server's (its constructors' time). */
unsigned char *seed_state_find(void (*seed)(unsigned long long), size_t *len, char *why,
			       size_t whylen);

#endif
