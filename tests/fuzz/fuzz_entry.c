/* Arbitrary bytes as a stretch of a log region, scanned as a reader does:
 * entry_check and entry_landed at every 64-byte slot, for the index the
 * slot's own header claims.  Invariants: an entry accepted lies wholly
 * inside the bytes given (data and canary within ROOM), has a known type,
 * and passed entry_landed too; written again by entry_write from its
 * fields and data, it is accepted and has the same fields, data and
 * canary, stamp (and CRC, when its flags are 0). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/storage/entry.h"
#include "tests/fuzz/fuzz.h"

static void check_slot(const uint8_t *at, size_t room)
{
	const struct entry_hdr *e = (const void *)at;
	uint64_t idx = 0;

	if (room >= ENTRY_REPLICATED_OFF + 8)
		memcpy(&idx, at + ENTRY_REPLICATED_OFF, 8);
	/* Another index than the one written is never accepted. */
	FUZZ_CHECK(!entry_landed(at, idx + 1, room) || room < ENTRY_MIN_SIZE);
	if (!entry_check(at, idx, room))
		return;
	FUZZ_CHECK(entry_landed(at, idx, room));
	FUZZ_CHECK(room >= ENTRY_MIN_SIZE);
	FUZZ_CHECK(e->data_sz <= room && entry_canary_off(e->data_sz) + 8 <= room);
	FUZZ_CHECK(e->type >= ENTRY_NOOP && e->type <= ENTRY_CHILD);
	uint64_t canary;
	memcpy(&canary, at + entry_canary_off(e->data_sz), 8);
	FUZZ_CHECK(canary == entry_canary(e->view, e->idx));

	struct entry_meta m = { .idx = e->idx, .view = e->view, .committed = e->committed,
				.conn = { e->conn_view, e->conn_idx }, .type = e->type,
				.node = e->node, .stamp_ms = e->stamp_ms };
	struct iovec iov = { (void *)entry_data(e), e->data_sz };
	size_t need = entry_size(e->data_sz);
	void *p;
	FUZZ_CHECK(!posix_memalign(&p, ENTRY_ALIGN, need));
	uint8_t *out = p;
	size_t n = entry_write(out, &m, &iov, 1, 0, e->data_sz);
	const struct entry_hdr *o = (const void *)out;
	FUZZ_CHECK(n == entry_canary_off(e->data_sz) + 8 && n <= room);
	FUZZ_CHECK(entry_check(out, idx, n) && !entry_check(out, idx, n - 1));
	FUZZ_CHECK(o->idx == e->idx && o->view == e->view && o->committed == e->committed &&
		   o->conn_view == e->conn_view && o->conn_idx == e->conn_idx &&
		   o->data_sz == e->data_sz && o->type == e->type && o->node == e->node &&
		   o->stamp_ms == e->stamp_ms);
	FUZZ_CHECK(!memcmp(entry_data(o), entry_data(e), e->data_sz));
	FUZZ_CHECK(!memcmp(out + entry_canary_off(e->data_sz), &canary, 8));
	if (!e->flags)
		FUZZ_CHECK(o->crc == e->crc);
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy of exactly SIZE bytes (ASan sees any read past it), aligned
	 * like a region: entries start on 64-byte boundaries. */
	void *p;

	FUZZ_CHECK(!posix_memalign(&p, ENTRY_ALIGN, size ? size : 1));
	uint8_t *buf = p;
	if (size)
		memcpy(buf, data, size);
	for (size_t off = 0; off < size || off == 0; off += ENTRY_ALIGN)
		check_slot(buf + off, size - off);
	free(buf);
	return 0;
}
