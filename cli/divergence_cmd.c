/* apus divergence: gathers every node's divergence records (JSON lines in
 * <data_dir>/divergence.jsonl) into one report. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checker/divergence.h"
#include "cli.h"

static const char usage[] =
	"usage: apus divergence --config FILE [--json] [--since T] [--node N]\n"
	"\n"
	"Reports where a replica's output differed from the leader's: per node,\n"
	"how many connections and records, the first and last time, and every\n"
	"record (connection, byte offset, both CRC-64s, log index, excerpt).\n"
	"\n"
	"  -c, --config FILE   cluster configuration (default: $APUS_CONFIG)\n"
	"  -n, --node N        only this node's records\n"
	"  -j, --json          one JSON object: {total, nodes: [{node, records,\n"
	"                      connections, first_ms, last_ms}], records: [...]}\n"
	"  -s, --since T       only records from T on: a Unix time in seconds, or\n"
	"                      an age such as 90s, 15m, 2h, 1d\n"
	"  -h, --help          this text\n";

int cmd_divergence(int argc, char **argv)
{
	struct cli c;
	unsigned long long since_ms = 0, total = 0;
	int rc, first_out = 1;
	char *line = NULL;
	size_t cap = 0;

	rc = cli_parse(&c, "divergence", usage, argc, argv);
	if (rc)
		return rc > 0 ? 0 : 2;
	if (c.since) {
		char *end;
		unsigned long long v = strtoull(c.since, &end, 10);
		unsigned long long mult = 0;

		switch (*end) {
		case '\0': since_ms = v * 1000; break;
		case 's': mult = 1; break;
		case 'm': mult = 60; break;
		case 'h': mult = 3600; break;
		case 'd': mult = 86400; break;
		}
		if (end == c.since || (*end && (!mult || end[1]))) {
			cli_error("divergence: --since wants a Unix time or an age like 15m, not '%s'",
				  c.since);
			return 2;
		}
		if (mult)
			since_ms = ((unsigned long long)time(NULL) - v * mult) * 1000;
	}

	if (c.json)
		printf("{\"records\":[");
	else
		printf("%-4s %-20s %-14s %12s %-16s %-16s %8s  %s\n", "node", "time", "connection",
		       "offset", "leader_crc", "replica_crc", "index", "replica output before offset");
	unsigned long long per_records[APUS_MAX_NODES] = { 0 }, per_first[APUS_MAX_NODES] = { 0 },
			   per_last[APUS_MAX_NODES] = { 0 }, per_conns[APUS_MAX_NODES] = { 0 };
	for (int i = 0; i < c.cfg.nnodes; i++) {
		char path[PATH_MAX], conn[64], lc[32], rcrc[32], ex[600], prev[64] = "";
		FILE *f;

		if (c.node >= 0 && i != c.node)
			continue;
		if (config_node_path(&c.cfg, i, DIVERGENCE_FILE, path, sizeof(path)) ||
		    !(f = fopen(path, "re")))
			continue;
		while (getline(&line, &cap, f) > 0) {
			unsigned long long t = divergence_field_u64(line, "time_ms");

			if (t < since_ms || !strstr(line, "\"conn\""))
				continue;
			line[strcspn(line, "\n")] = '\0';
			divergence_field_str(line, "conn", conn, sizeof(conn));
			total++;
			per_records[i]++;
			if (strcmp(conn, prev))
				per_conns[i]++;	/* records of one connection are adjacent */
			snprintf(prev, sizeof(prev), "%s", conn);
			if (!per_first[i] || t < per_first[i])
				per_first[i] = t;
			if (t > per_last[i])
				per_last[i] = t;
			if (c.json) {
				printf("%s%s", first_out ? "" : ",", line);
				first_out = 0;
				continue;
			}
			time_t sec = (time_t)(t / 1000);
			struct tm tm;
			char when[32];
			localtime_r(&sec, &tm);
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
			divergence_field_str(line, "leader_crc", lc, sizeof(lc));
			divergence_field_str(line, "replica_crc", rcrc, sizeof(rcrc));
			divergence_field_str(line, "replica_excerpt", ex, sizeof(ex));
			printf("%-4d %-20s %-14s %12llu %-16s %-16s %8llu  \"%.60s\"\n", i, when, conn,
			       divergence_field_u64(line, "offset"), lc, rcrc, divergence_field_u64(line, "index"), ex);
		}
		fclose(f);
	}
	free(line);
	if (c.json) {
		printf("],\"total\":%llu,\"nodes\":[", total);
		for (int i = 0, first = 1; i < c.cfg.nnodes; i++) {
			if (c.node >= 0 && i != c.node)
				continue;
			printf("%s{\"node\":%d,\"records\":%llu,\"connections\":%llu,\"first_ms\":%llu,"
			       "\"last_ms\":%llu}",
			       first ? "" : ",", i, per_records[i], per_conns[i], per_first[i], per_last[i]);
			first = 0;
		}
		printf("]}\n");
	} else {
		printf("%llu record(s)", total);
		for (int i = 0; i < c.cfg.nnodes; i++)
			if (per_records[i])
				printf("; node %d: %llu connection(s) disagree with the leader", i,
				       per_conns[i]);
		printf("\n");
	}
	return 0;
}
