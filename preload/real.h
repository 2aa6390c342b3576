/* The libc entry points the shim replaces, resolved once with
 * dlsym(RTLD_NEXT) and called through this table only. */
#ifndef APUS_REAL_H
#define APUS_REAL_H

#include "common/sys.h"	/* struct socket_calls */

extern struct socket_calls real;

extern int real_resolved;
void real_resolve_slow(void);

/* Fills `real` (once; safe to call from any wrapper at any time). */
static inline void real_resolve(void)
{
	/* Pairs with the release store at the end of resolving. */
	if (__builtin_expect(!__atomic_load_n(&real_resolved, __ATOMIC_ACQUIRE), 0))
		real_resolve_slow();
}

#endif
