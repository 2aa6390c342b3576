/* Finds a server generator's state (seed_state.h).  Seeding with three
 * different values changes exactly the words a seed sets; counting only
 * the changes between seeds leaves out what the first seed alone changes
 * (an "initialised" flag, an index set to the same value by every seed),
 * which is the same after every seed anyway. */
#include "coordinator/input/seed_state.h"

#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_SEGS 8

struct seg {
	uint64_t *p;		/* the segment's first aligned word */
	size_t n;		/* its words */
	uint64_t *prev;		/* their values after the previous seed */
	unsigned char *hit;	/* per word: changed between two seeds */
};

struct object {
	uintptr_t fn;		/* an address inside the object */
	int nseg;
	struct seg seg[MAX_SEGS];
};

/* dl_iterate_phdr's callback: the writable PT_LOAD segments of the
 * object that holds o->fn. */
static int find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct object *o = arg;
	int holds = 0;

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;

		holds |= ph->p_type == PT_LOAD && o->fn >= a && o->fn < a + ph->p_memsz;
	}
	if (!holds)
		return 0;
	for (int i = 0; i < info->dlpi_phnum && o->nseg < MAX_SEGS; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr, end = a + ph->p_memsz;

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W))
			continue;
		a = (a + 7) & ~(uintptr_t)7;
		if (end > a)
			o->seg[o->nseg++] = (struct seg){ (uint64_t *)a, (end - a) / 8, NULL, NULL };
	}
	return 1;
}

/* Marks the words of S that changed since the last call (FIRST: none
 * did); keeps them.  The segment holds every global of its object, with
 * AddressSanitizer's red zones between them: read as raw words. */
__attribute__((no_sanitize("address"))) static void diff(struct seg *s, int first)
{
	for (size_t i = 0; i < s->n; i++) {
		s->hit[i] |= !first && s->prev[i] != s->p[i];
		s->prev[i] = s->p[i];
	}
}

/* The span of the changed words, when it is one generator's. */
static unsigned char *span_of(const struct object *o, size_t *len, char *why, size_t whylen)
{
	const struct seg *in = NULL;
	size_t lo = 0, hi = 0, hits = 0;

	for (int k = 0; k < o->nseg; k++)
		for (size_t i = 0; i < o->seg[k].n; i++) {
			if (!o->seg[k].hit[i])
				continue;
			if (in && in != &o->seg[k]) {
				snprintf(why, whylen, "it changes more than one segment");
				return NULL;
			}
			if (!in)
				in = &o->seg[k], lo = i;
			hi = i + 1;
			hits++;
		}
	if (!in) {
		snprintf(why, whylen, "it changes nothing in its object's data");
		return NULL;
	}
	if ((hi - lo) * 8 > SEED_STATE_MAX || hits * 2 < hi - lo) {
		snprintf(why, whylen, "the %zu words it changes span %zu bytes", hits, (hi - lo) * 8);
		return NULL;
	}
	*len = (hi - lo) * 8;
	return (unsigned char *)(in->p + lo);
}

unsigned char *seed_state_find(void (*seed)(unsigned long long), size_t *len, char *why,
			       size_t whylen)
{
	static const unsigned long long seeds[3] = { 0x9e3779b97f4a7c15ULL, 0xbf58476d1ce4e5b9ULL,
						     0x94d049bb133111ebULL };
	struct object o = { .fn = (uintptr_t)seed };
	unsigned char *span = NULL;
	int k, ok = 1;

	dl_iterate_phdr(find_object, &o);
	for (k = 0; k < o.nseg; k++) {
		o.seg[k].prev = malloc(o.seg[k].n * 8);
		o.seg[k].hit = calloc(o.seg[k].n, 1);
		ok &= o.seg[k].prev && o.seg[k].hit;
	}
	if (!o.nseg || !ok) {
		snprintf(why, whylen, "%s", o.nseg ? "out of memory" : "its object has no data");
	} else {
		for (int i = 0; i < 3; i++) {
			seed(seeds[i]);
			for (k = 0; k < o.nseg; k++)
				diff(&o.seg[k], !i);
		}
		span = span_of(&o, len, why, whylen);
	}
	for (k = 0; k < o.nseg; k++) {
		free(o.seg[k].prev);
		free(o.seg[k].hit);
	}
	return span;
}
