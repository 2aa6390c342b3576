/* The 64-bit words of a region that another thread or process reads while
 * this one writes them: a release store publishes what was written before
 * it, the acquire load that sees it pairs with it. */
#ifndef APUS_ATOMIC64_H
#define APUS_ATOMIC64_H

#include <stdint.h>

static inline uint64_t load64(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline void store64(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

#endif
