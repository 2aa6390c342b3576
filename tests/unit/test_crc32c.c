/* CRC-32C check value, and incremental CRC over random splits equals one shot. */
#include <string.h>

#include "coordinator/crc32c.h"
#include "tests/unit/unit.h"

int main(void)
{
	unsigned char buf[4096];
	uint32_t whole;

	CHECK(crc32c(0, "123456789", 9) == 0xE3069283u, "crc32c(123456789) = %08x",
	      crc32c(0, "123456789", 9));
	srand(7);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)rand();
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
