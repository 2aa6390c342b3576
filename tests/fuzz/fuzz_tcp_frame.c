/* A writer's byte stream after admission, as the tcp transport receives
 * it: a 4-byte region size (at most 64 KiB), then frames {off, len, pad,
 * payload}.  Each header tcp_frame_parse accepts is applied as in_receive
 * applies it (payload at off, its last word last) into a region of exactly
 * that size, so ASan sees any accepted frame that reaches outside it; the
 * first refused header ends the stream, as it drops the connection.
 * Invariants: an accepted frame has off + len <= size, and a header is
 * refused exactly when it reaches past the region. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/transport/transport.h"
#include "tests/fuzz/fuzz.h"

#define MAX_REGION (64 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t rsize;
	uint8_t *region;
	size_t at = 4;

	if (size < 4)
		return 0;
	memcpy(&rsize, data, 4);
	rsize %= MAX_REGION + 1;
	region = malloc(rsize ? rsize : 1);
	FUZZ_CHECK(region);
	while (size - at >= TCP_FRAME_HDR_LEN) {
		uint64_t off = 0, woff;
		uint32_t len = 0, wlen;
		int rc = tcp_frame_parse(data + at, rsize, &off, &len);

		memcpy(&woff, data + at, 8);
		memcpy(&wlen, data + at + 8, 4);
		FUZZ_CHECK(!rc == (woff <= rsize && (uint64_t)wlen <= rsize - woff));
		if (rc)
			break;
		FUZZ_CHECK(off == woff && len == wlen && off + len <= rsize);
		at += TCP_FRAME_HDR_LEN;
		/* A short stream: the rest of the frame never came. */
		if (size - at < len)
			break;
		if (len >= 8) {
			memcpy(region + off, data + at, len - 8);
			memcpy(region + off + len - 8, data + at + len - 8, 8);
		} else if (len) {
			memcpy(region + off, data + at, len);
		}
		at += len;
	}
	free(region);
	return 0;
}
