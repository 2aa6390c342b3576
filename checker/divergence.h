/* Divergence records: a replica's output on a connection differed from
 * the leader's.  One JSON object per line in <data_dir>/divergence.jsonl,
 * appended, so nothing is lost across restarts. */
#ifndef APUS_DIVERGENCE_H
#define APUS_DIVERGENCE_H

#include <stddef.h>
#include <stdint.h>

#define DIVERGENCE_FILE "divergence.jsonl"

struct divergence {
	int node;
	uint64_t conn_view, conn_idx;	/* the connection (conn_vs) */
	uint64_t offset;		/* byte offset of the output stream compared */
	uint64_t leader_crc, replica_crc;
	uint64_t index;			/* the log entry that carried the leader's mark */
	uint64_t time_ms;		/* CLOCK_REALTIME */
	const char *why;		/* "hash" or "length" */
	const void *excerpt;		/* the replica's output just before offset */
	size_t excerpt_len;
};

/* Appends D to PATH as one JSON line.  Returns 0 or -errno. */
int divergence_append(const char *path, const struct divergence *d);

/* D as one JSON line (with its newline) in LINE; returns its length, or
 * -EOVERFLOW if it does not fit in LEN. */
int divergence_format(char *line, size_t len, const struct divergence *d);

/* Reading a record back (apus divergence): the number after "KEY": in
 * LINE, or 0; the string value of "KEY" copied into OUT ("" if none). */
unsigned long long divergence_field_u64(const char *line, const char *key);
void divergence_field_str(const char *line, const char *key, char *out, size_t len);

/* Writes S (LEN bytes) as a JSON string body (no quotes) into OUT. */
void json_escape(char *out, size_t outlen, const void *s, size_t len);

#endif
