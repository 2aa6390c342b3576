#include "checker/crc64.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x95ac9329ac4bc9b5ULL	/* 0xad93d23594c935a9 bit-reversed */

static uint64_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_tables(void)
{
	for (int i = 0; i < 256; i++) {
		uint64_t c = (uint64_t)i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
		table[0][i] = c;
	}
	for (int t = 1; t < 8; t++)
		for (int i = 0; i < 256; i++)
			table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
}

uint64_t crc64(uint64_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	pthread_once(&table_once, build_tables);
	/* Slicing by 8: eight table lookups per 8 bytes. */
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		w ^= crc;
		crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^
		      table[4][(w >> 24) & 0xff] ^ table[3][(w >> 32) & 0xff] ^
		      table[2][(w >> 40) & 0xff] ^ table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}
