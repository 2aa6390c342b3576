/* Arbitrary bytes as a cluster config file (written to a private temp
 * directory per run) for config_load, then every command template
 * expanded and every node path built as the CLI does.  Invariants: an
 * error is one NUL-ended line; an accepted config has 1..APUS_MAX_NODES
 * nodes numbered 0..N-1, NUL-ended strings, absolute paths, a
 * max_entry within a quarter of the log, suspect_ms at least two
 * heartbeats, distinct data_dirs, and expansions that fit or say -1. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "tests/fuzz/fuzz.h"

#define TERMINATED(s) (memchr((s), '\0', sizeof(s)) != NULL)

static void expand(const struct apus_config *c, int node, const char *tmpl)
{
	char out[4096];

	if (config_expand(c, node, tmpl, out, sizeof(out)) == 0)
		FUZZ_CHECK(strlen(out) < sizeof(out));
	/* A tiny buffer: the bounds checks, not the happy path. */
	if (config_expand(c, node, tmpl, out, 8) == 0)
		FUZZ_CHECK(strlen(out) < 8);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct apus_config c;
	char err[512], path[PATH_MAX];

	err[0] = '\0';
	if (config_load(fuzz_file("cluster.conf", data, size, 0644), &c, err, sizeof(err))) {
		FUZZ_CHECK(err[0] && TERMINATED(err) && !strchr(err, '\n'));
		return 0;
	}
	FUZZ_CHECK(c.nnodes >= 1 && c.nnodes <= APUS_MAX_NODES);
	FUZZ_CHECK(TERMINATED(c.path) && c.path[0] == '/');
	FUZZ_CHECK(TERMINATED(c.cluster) && TERMINATED(c.transport) && TERMINATED(c.app_cmd) &&
		   TERMINATED(c.leader_hook) && TERMINATED(c.snapshot_cmd) &&
		   TERMINATED(c.snapshot_file) && TERMINATED(c.secret_file) &&
		   TERMINATED(c.region_dir) && TERMINATED(c.run_dir) && TERMINATED(c.verify_cmd));
	FUZZ_CHECK(!c.verify_cmd[0] || c.verify_cmd[0] == '/' || c.verify_cmd[0] == '{');
	FUZZ_CHECK(c.secret_file[0] == '/' && c.app_cmd[0]);
	FUZZ_CHECK(c.max_entry <= c.log_size / 4);
	FUZZ_CHECK(c.suspect_ms >= 2 * c.heartbeat_ms);
	FUZZ_CHECK(c.snapshot_log_bytes <= c.log_size / 2 || !c.log_size);
	for (int i = 0; i < c.nnodes; i++) {
		const struct node_conf *n = &c.nodes[i];

		FUZZ_CHECK(n->id == i && n->app_port);
		FUZZ_CHECK(TERMINATED(n->address) && TERMINATED(n->data_dir) &&
			   TERMINATED(n->secret_file) && TERMINATED(n->netns) &&
			   TERMINATED(n->run_dir));
		FUZZ_CHECK(n->data_dir[0] == '/' && n->run_dir[0] == '/' &&
			   n->secret_file[0] == '/');
		for (int j = 0; j < i; j++)
			FUZZ_CHECK(strcmp(n->data_dir, c.nodes[j].data_dir) &&
				   strcmp(n->run_dir, c.nodes[j].run_dir));
		expand(&c, i, c.app_cmd);
		expand(&c, i, c.leader_hook);
		expand(&c, i, c.snapshot_cmd);
		expand(&c, i, c.verify_cmd);
		if (!config_node_path(&c, i, "divergence.jsonl", path, sizeof(path)))
			FUZZ_CHECK(strlen(path) < sizeof(path));
		if (!config_run_path(&c, i, "apus.lock", path, sizeof(path)))
			FUZZ_CHECK(strlen(path) < sizeof(path));
	}
	for (int i = c.nnodes; i < APUS_MAX_NODES; i++)
		FUZZ_CHECK(c.nodes[i].id < 0);
	return 0;
}
