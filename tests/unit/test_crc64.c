/* CRC-64/Jones: the check value Redis documents, and incremental hashing
 * over random splits equals one-shot hashing. */
#include <string.h>

#include "checker/crc64.h"
#include "tests/unit/unit.h"

int main(void)
{
	static unsigned char buf[100000];
	uint64_t whole;

	CHECK(crc64(0, "123456789", 9) == 0xe9c6d914c4b8d9caULL, "crc64(123456789) = %016llx",
	      (unsigned long long)crc64(0, "123456789", 9));
	CHECK(crc64(0, "", 0) == 0, "empty input");
	srand(17);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)rand();
	whole = crc64(0, buf, sizeof(buf));
	for (int t = 0; t < 500; t++) {
		uint64_t c = 0;
		size_t off = 0;
		while (off < sizeof(buf)) {
			size_t n = (size_t)rand() % 3000;
			if (n > sizeof(buf) - off)
				n = sizeof(buf) - off;
			c = crc64(c, buf + off, n);
			off += n;
		}
		CHECK(c == whole, "round %d: %016llx != %016llx", t, (unsigned long long)c,
		      (unsigned long long)whole);
	}
	/* Any single flipped bit changes it. */
	buf[99999] ^= 1;
	CHECK(crc64(0, buf, sizeof(buf)) != whole, "a flipped last bit went unnoticed");
	return 0;
}
