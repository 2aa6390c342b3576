/* divergence.jsonl records as `apus divergence` reads them back; the
 * first byte picks what the rest is:
 *   even  one arbitrary line, every field read with divergence_field_u64
 *         and divergence_field_str: the string read is NUL-ended within
 *         its buffer and is a piece of the line;
 *   odd   a record made from the bytes (numbers, then the replica's
 *         output excerpt), written by divergence_format and read back:
 *         every field comes back as written, the excerpt as json_escape
 *         wrote it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checker/divergence.h"
#include "tests/fuzz/fuzz.h"

static const char *const str_keys[] = { "conn", "leader_crc", "replica_crc", "why",
					"replica_excerpt" };
static const char *const num_keys[] = { "time_ms", "node", "offset", "index" };

static void any_line(const uint8_t *d, size_t n)
{
	char *line = malloc(n + 1), out[600];

	FUZZ_CHECK(line);
	memcpy(line, d, n);
	line[n] = '\0';
	for (size_t k = 0; k < sizeof(num_keys) / sizeof(num_keys[0]); k++)
		(void)divergence_field_u64(line, num_keys[k]);
	for (size_t k = 0; k < sizeof(str_keys) / sizeof(str_keys[0]); k++) {
		/* Both buffers the CLI uses, 64 and 600 bytes. */
		for (size_t len = 64; len <= sizeof(out); len += sizeof(out) - 64) {
			memset(out, 'x', sizeof(out));
			divergence_field_str(line, str_keys[k], out, len);
			FUZZ_CHECK(memchr(out, '\0', len));
			FUZZ_CHECK(!out[0] || strstr(line, out));
		}
	}
	free(line);
}

static void round_trip(const uint8_t *d, size_t n)
{
	struct divergence v;
	uint64_t num[6];
	char line[1024], got[600], want[600], esc[512];
	int len;

	if (n < sizeof(num) + 1)
		return;
	memcpy(num, d, sizeof(num));
	v = (struct divergence){ .node = d[sizeof(num)] & 7, .time_ms = num[0],
				 .conn_view = num[1], .conn_idx = num[2], .offset = num[3],
				 .leader_crc = num[4], .replica_crc = num[5],
				 .index = num[0] ^ num[3],
				 .why = d[sizeof(num)] & 8 ? "length" : "hash",
				 .excerpt = d + sizeof(num) + 1,
				 .excerpt_len = n - sizeof(num) - 1 };
	len = divergence_format(line, sizeof(line), &v);
	FUZZ_CHECK(len > 0 && (size_t)len < sizeof(line) && line[len - 1] == '\n');
	line[len - 1] = '\0';
	FUZZ_CHECK(divergence_field_u64(line, "time_ms") == v.time_ms);
	FUZZ_CHECK(divergence_field_u64(line, "node") == (uint64_t)v.node);
	FUZZ_CHECK(divergence_field_u64(line, "offset") == v.offset);
	FUZZ_CHECK(divergence_field_u64(line, "index") == v.index);
	divergence_field_str(line, "conn", got, sizeof(got));
	snprintf(want, sizeof(want), "%llu.%llu", (unsigned long long)v.conn_view,
		 (unsigned long long)v.conn_idx);
	FUZZ_CHECK(!strcmp(got, want));
	divergence_field_str(line, "leader_crc", got, sizeof(got));
	snprintf(want, sizeof(want), "%016llx", (unsigned long long)v.leader_crc);
	FUZZ_CHECK(!strcmp(got, want));
	divergence_field_str(line, "replica_crc", got, sizeof(got));
	snprintf(want, sizeof(want), "%016llx", (unsigned long long)v.replica_crc);
	FUZZ_CHECK(!strcmp(got, want));
	divergence_field_str(line, "why", got, sizeof(got));
	FUZZ_CHECK(!strcmp(got, v.why));
	divergence_field_str(line, "replica_excerpt", got, sizeof(got));
	json_escape(esc, sizeof(esc), v.excerpt, v.excerpt_len);
	FUZZ_CHECK(!strcmp(got, esc));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	if (data[0] & 1)
		round_trip(data + 1, size - 1);
	else
		any_line(data + 1, size - 1);
	return 0;
}
