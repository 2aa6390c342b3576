/* One entry of the replicated log, and where entries sit in the circular log.
 *
 *   [ reply slots | idx view committed conn_vs size type node flags crc | data | pad | canary ]
 *
 * The reply slots belong to the leader's copy: backup k acknowledges entry i
 * by writing i into reply[k] there.  Everything from `idx` on is replicated
 * byte for byte to the same offset of every backup's log.  The canary is the
 * last 8-byte word and is derived from the entry's viewstamp, so the previous
 * pass's bytes in a reused slot can never pass for it; the CRC catches the
 * rest (a torn header, flipped bits). */
#ifndef APUS_ENTRY_H
#define APUS_ENTRY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/config.h"

enum entry_type {
	ENTRY_NOOP = 1,		/* a new leader's first entry */
	ENTRY_ACCEPT = 2,	/* a client connected; its viewstamp names the connection */
	ENTRY_RECV = 3,		/* bytes the server read from a connection */
	ENTRY_CLOSE = 4,	/* the connection ended */
	ENTRY_WRAP = 5,		/* the rest of this lap is unused: continue at offset 0 */
	ENTRY_HASH = 6,		/* output marks (hashes) of the leader's connections (checker/) */
	ENTRY_MEMBERS = 7,	/* the cluster's new membership (members.h), as config text */
	ENTRY_CHILD = 8,	/* the leader's server learned a child's end (input_child.h) */
	ENTRY_CHILD_EXIT = 9,	/* a child of the leader's server had exited (input_child.h) */
};

struct viewstamp {
	uint64_t view;
	uint64_t idx;
};

struct entry_hdr {
	uint64_t reply[APUS_MAX_NODES];
	uint64_t idx;
	uint64_t view;
	uint64_t committed;	/* the leader's commit index when it proposed this */
	uint64_t conn_view;	/* conn_vs: viewstamp of the connection's ACCEPT */
	uint64_t conn_idx;
	uint32_t data_sz;
	uint16_t type;
	uint8_t node;
	uint8_t flags;		/* ENTRY_F_* */
	uint32_t crc;		/* CRC-32C of idx..stamp_ms (crc = 0) and the data */
	/* The input clock when the leader logged it: the low 32 bits of a
	 * CLOCK_REALTIME in ms (input_clock.h); 0 from an apus without it. */
	uint32_t stamp_ms;
};

/* RECV, CLOSE: when the leader's server got these bytes (or the end of
 * stream) it had written to the connection since it last read from it (it
 * had answered).  A backup's server gets them only once it has too:
 * requests reach every replica's server no earlier, relative to its
 * answers, than the leader's (turns.h).  The first entry of a read only. */
#define ENTRY_F_ANSWERED 0x01

#define ENTRY_ALIGN 64
#define ENTRY_REPLICATED_OFF offsetof(struct entry_hdr, idx)
#define ENTRY_MIN_SIZE entry_size(0)

static inline uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* Offset of the canary word from the entry's start. */
static inline size_t entry_canary_off(uint32_t data_sz)
{
	return sizeof(struct entry_hdr) + align_up(data_sz, 8);
}

/* Bytes an entry with DATA_SZ bytes of data takes in the log. */
static inline size_t entry_size(uint32_t data_sz)
{
	return align_up(entry_canary_off(data_sz) + 8, ENTRY_ALIGN);
}

uint64_t entry_canary(uint64_t view, uint64_t idx);

/* What the leader puts in an entry besides the data. */
struct entry_meta {
	uint64_t idx, view, committed;
	struct viewstamp conn;
	uint16_t type;
	uint8_t node;
	uint8_t flags;
	uint32_t stamp_ms;
};

/* Writes a complete entry at AT: header, LEN data bytes gathered from IOV
 * starting SKIP bytes in, CRC, and last the canary (release store: pairs
 * with the acquire load in entry_check).  Reply slots are left alone.
 * Returns the bytes written from AT up to and including the canary. */
size_t entry_write(void *at, const struct entry_meta *m, const struct iovec *iov,
		   int iovcnt, size_t skip, uint32_t len);

/* 1 if a whole, intact entry with index IDX is at AT, 0 if not (yet).
 * ROOM bounds how far from AT the entry may reach (to the end of the log),
 * so a torn size field can never send the reader out of the log. */
int entry_check(const void *at, uint64_t idx, size_t room);
/* The same without the CRC: for an entry this reader checked whole before
 * (the canary still says it is the same entry). */
int entry_landed(const void *at, uint64_t idx, size_t room);

static inline const void *entry_data(const struct entry_hdr *e)
{
	return e + 1;
}

/* --- Positions in the circular log ---
 * A position is a byte count that only grows; its offset in the log is
 * pos % log_size.  An entry never straddles the end: if it does not fit in
 * the rest of the lap, a WRAP marker is written there (when there is room
 * for one) and the entry goes to the start of the next lap. */

/* Where an entry of NEED bytes starting at POS goes; sets *WRAP when it
 * goes to the next lap (a marker is due at POS if log_pos_marker_fits). */
static inline uint64_t log_pos_place(uint64_t log_size, uint64_t pos, uint64_t need, int *wrap)
{
	uint64_t off = pos % log_size;

	*wrap = off + need > log_size;
	return *wrap ? pos + (log_size - off) : pos;
}

/* A WRAP marker fits at POS; otherwise the rest of the lap is skipped silently. */
static inline int log_pos_marker_fits(uint64_t log_size, uint64_t pos)
{
	return log_size - pos % log_size >= ENTRY_MIN_SIZE;
}

static inline uint64_t log_pos_next_lap(uint64_t log_size, uint64_t pos)
{
	return pos + (log_size - pos % log_size);
}

/* Copies LEN bytes starting SKIP bytes into IOV to DST. */
void iov_gather(void *dst, const struct iovec *iov, int iovcnt, size_t skip, size_t len);
/* The inverse: copies at most LEN bytes of SRC into IOV; returns how many. */
size_t iov_scatter(const struct iovec *iov, int iovcnt, const void *src, size_t len);

static inline size_t iov_total(const struct iovec *iov, int iovcnt)
{
	size_t t = 0;

	for (int i = 0; i < iovcnt; i++)
		t += iov[i].iov_len;
	return t;
}

#endif
