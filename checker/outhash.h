/* The running CRC-64 of one connection's output stream, marked at
 * every multiple of OUT_FOLD bytes (one MTU): the leader logs its
 * marks, each replica compares its own at the same offsets. */
#ifndef APUS_OUTHASH_H
#define APUS_OUTHASH_H

#include <stddef.h>
#include <stdint.h>

#define OUT_FOLD 1536

struct out_hash {
	uint64_t crc;	/* CRC-64/Jones of the first `off` bytes */
	uint64_t off;
};

/* One mark of one connection, as the leader logs it (ENTRY_HASH
 * data holds an array of these; a CLOSE entry holds the final one). */
struct out_record {
	uint64_t conn_view, conn_idx;
	uint64_t offset;
	uint64_t crc;
};

/* Feeds LEN bytes; calls FN(ARG, offset, crc) at every multiple of
 * OUT_FOLD the stream reaches. */
void out_hash_feed(struct out_hash *h, const void *buf, size_t len,
		   void (*fn)(void *arg, uint64_t offset, uint64_t crc), void *arg);

#endif
