#include "coordinator/storage/entry.h"

#include <string.h>

#include "common/crc32c.h"

uint64_t entry_canary(uint64_t view, uint64_t idx)
{
	/* splitmix64 of the viewstamp: never the same for two viewstamps in practice,
	 * and never 0, the value of a fresh log. */
	uint64_t z = view * 0x9E3779B97F4A7C15ULL + idx + 0x632BE59BD9B4E019ULL;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	z ^= z >> 31;
	return z ? z : 1;
}

void iov_gather(void *dst, const struct iovec *iov, int iovcnt, size_t skip, size_t len)
{
	char *d = dst;

	for (int i = 0; i < iovcnt && len; i++) {
		size_t l = iov[i].iov_len;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		l -= skip;
		if (l > len)
			l = len;
		memcpy(d, (const char *)iov[i].iov_base + skip, l);
		d += l;
		len -= l;
		skip = 0;
	}
}

size_t iov_scatter(const struct iovec *iov, int iovcnt, const void *src, size_t len)
{
	const char *p = src;
	size_t done = 0;

	for (int i = 0; i < iovcnt && done < len; i++) {
		size_t k = iov[i].iov_len < len - done ? iov[i].iov_len : len - done;
		memcpy(iov[i].iov_base, p + done, k);
		done += k;
	}
	return done;
}

static uint32_t entry_crc(const struct entry_hdr *e)
{
	struct entry_hdr h = *e;
	uint32_t c;

	h.crc = 0;
	c = crc32c(0, &h.idx, sizeof(h) - ENTRY_REPLICATED_OFF);
	return crc32c(c, entry_data(e), e->data_sz);
}

size_t entry_write(void *at, const struct entry_meta *m, const struct iovec *iov,
		   int iovcnt, size_t skip, uint32_t len)
{
	struct entry_hdr *e = at;
	size_t coff = entry_canary_off(len);

	e->idx = m->idx;
	e->view = m->view;
	e->committed = m->committed;
	e->conn_view = m->conn.view;
	e->conn_idx = m->conn.idx;
	e->data_sz = len;
	e->type = m->type;
	e->node = m->node;
	e->flags = m->flags;
	e->stamp_ms = m->stamp_ms;
	if (len)
		iov_gather(e + 1, iov, iovcnt, skip, len);
	/* Zero the padding so the replicated bytes are fully determined. */
	memset((char *)(e + 1) + len, 0, coff - sizeof(*e) - len);
	e->crc = entry_crc(e);
	/* Pairs with the acquire load of the canary in entry_check(). */
	__atomic_store_n((uint64_t *)((char *)at + coff), entry_canary(m->view, m->idx),
			 __ATOMIC_RELEASE);
	return coff + 8;
}

int entry_check(const void *at, uint64_t idx, size_t room)
{
	return entry_landed(at, idx, room) && entry_crc(at) == ((const struct entry_hdr *)at)->crc;
}

int entry_landed(const void *at, uint64_t idx, size_t room)
{
	const struct entry_hdr *e = at;
	uint64_t view, canary;
	uint32_t sz;
	size_t coff;

	if (room < ENTRY_MIN_SIZE)
		return 0;
	if (__atomic_load_n(&e->idx, __ATOMIC_RELAXED) != idx)
		return 0;
	sz = __atomic_load_n(&e->data_sz, __ATOMIC_RELAXED);
	view = __atomic_load_n(&e->view, __ATOMIC_RELAXED);
	coff = entry_canary_off(sz);
	if (sz > room || coff + 8 > room)
		return 0;
	/* Pairs with the release store in entry_write() (or the transport's
	 * release of the last word): everything before the canary is visible. */
	canary = __atomic_load_n((const uint64_t *)((const char *)at + coff), __ATOMIC_ACQUIRE);
	if (canary != entry_canary(view, idx))
		return 0;
	/* The fields read before the barrier may have been torn: re-check them. */
	if (e->idx != idx || e->data_sz != sz || e->view != view)
		return 0;
	return e->type >= ENTRY_NOOP && e->type <= ENTRY_CHILD_EXIT;
}
