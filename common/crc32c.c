#include "common/crc32c.h"

#include <pthread.h>
#include <string.h>

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static int have_sse42;

static uint32_t crc_soft(uint32_t crc, const unsigned char *p, size_t len);
#if defined(__x86_64__)
static void build_shift_table(void);
#endif

static void build_tables(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		table[0][i] = c;
	}
	for (int t = 1; t < 8; t++)
		for (int i = 0; i < 256; i++)
			table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	have_sse42 = __builtin_cpu_supports("sse4.2");
	if (have_sse42)
		build_shift_table();
#endif
}

static uint32_t crc_soft(uint32_t crc, const unsigned char *p, size_t len)
{
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		w ^= crc;
		crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^
		      table[5][(w >> 16) & 0xff] ^ table[4][(w >> 24) & 0xff] ^
		      table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
		      table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
	return crc;
}

#if defined(__x86_64__)
/* The crc32 instruction takes 3 cycles but issues every cycle, so three
 * independent streams over three blocks of STRIPE bytes run three times
 * as fast as one; the blocks' CRCs are then combined (the register is
 * linear: crc(r, A|B) = crc(r, A) shifted over |B| zero bytes ^ crc(0, B)). */
#define STRIPE 256
static uint32_t shift_table[4][256];	/* the register shifted over STRIPE zero bytes */

static void build_shift_table(void)
{
	static const unsigned char zeros[STRIPE];

	for (int k = 0; k < 4; k++)
		for (uint32_t b = 0; b < 256; b++)
			shift_table[k][b] = crc_soft(b << (8 * k), zeros, STRIPE);
}

static uint32_t shift_stripe(uint32_t crc)
{
	return shift_table[0][crc & 0xff] ^ shift_table[1][(crc >> 8) & 0xff] ^
	       shift_table[2][(crc >> 16) & 0xff] ^ shift_table[3][crc >> 24];
}

__attribute__((target("sse4.2")))
static uint64_t crc_words(uint64_t c, const unsigned char *p, size_t words)
{
	while (words--) {
		uint64_t w;
		memcpy(&w, p, 8);
		c = __builtin_ia32_crc32di(c, w);
		p += 8;
	}
	return c;
}

__attribute__((target("sse4.2")))
static uint32_t crc_hw(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t c = crc;

	while (len >= 3 * STRIPE) {
		uint64_t c1 = 0, c2 = 0;

		for (size_t i = 0; i < STRIPE; i += 8) {
			uint64_t w0, w1, w2;
			memcpy(&w0, p + i, 8);
			memcpy(&w1, p + STRIPE + i, 8);
			memcpy(&w2, p + 2 * STRIPE + i, 8);
			c = __builtin_ia32_crc32di(c, w0);
			c1 = __builtin_ia32_crc32di(c1, w1);
			c2 = __builtin_ia32_crc32di(c2, w2);
		}
		c = shift_stripe(shift_stripe((uint32_t)c) ^ (uint32_t)c1) ^ (uint32_t)c2;
		p += 3 * STRIPE;
		len -= 3 * STRIPE;
	}
	c = crc_words(c, p, len / 8);
	p += len & ~(size_t)7;
	len &= 7;
	crc = (uint32_t)c;
	while (len--)
		crc = __builtin_ia32_crc32qi(crc, *p++);
	return crc;
}
#endif

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&table_once, build_tables);
	crc = ~crc;
#if defined(__x86_64__)
	if (have_sse42)
		return ~crc_hw(crc, buf, len);
#endif
	return ~crc_soft(crc, buf, len);
}
