#include "checker/outhash.h"

#include "checker/crc64.h"

void out_hash_feed(struct out_hash *h, const void *buf, size_t len,
		   void (*fn)(void *arg, uint64_t offset, uint64_t crc), void *arg)
{
	const char *p = buf;

	while (len) {
		size_t to_fold = OUT_FOLD - (size_t)(h->off % OUT_FOLD);
		size_t n = len < to_fold ? len : to_fold;

		h->crc = crc64(h->crc, p, n);
		h->off += n;
		p += n;
		len -= n;
		if (h->off % OUT_FOLD == 0 && fn)
			fn(arg, h->off, h->crc);
	}
}
