/* Config parsing: a good file gives the values; each bad one gives one line
 * naming the file, the line and the problem. */
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "tests/unit/unit.h"

static char path[] = "/tmp/apus-config-XXXXXX";

static int load(const char *text, struct apus_config *c, char *err, size_t len)
{
	FILE *f = fopen(path, "w");

	CHECK(f, "cannot write %s", path);
	fputs(text, f);
	fclose(f);
	return config_load(path, c, err, len);
}

static void expect_error(const char *text, int line, const char *needle)
{
	static struct apus_config c;
	char err[600], prefix[128];

	CHECK(load(text, &c, err, sizeof(err)) == -1, "accepted:\n%s", text);
	if (line)
		snprintf(prefix, sizeof(prefix), "%s:%d: ", path, line);
	else
		snprintf(prefix, sizeof(prefix), "%s: ", path);
	CHECK(!strncmp(err, prefix, strlen(prefix)), "'%s' does not start with '%s'", err, prefix);
	CHECK(strstr(err, needle), "'%s' does not say '%s'", err, needle);
	CHECK(!strchr(err, '\n'), "more than one line: '%s'", err);
}

#define NODES "app_cmd = x {port}\n[node 0]\napp_port = 7001\ndata_dir = /tmp/a\n"

int main(void)
{
	static struct apus_config c;
	char err[600], cmd[256];
	int fd = mkstemp(path);

	CHECK(fd >= 0, "mkstemp");
	close(fd);
	CHECK(load("# comment\ncluster = t1\ntransport = shm\nlog_size = 1M\nfsync = always\n"
		   "heartbeat_ms = 5\napp_cmd = redis-server --port {port} --dir {data_dir} # c\n"
		   "[node 0]\naddress = 127.0.0.1\napp_port = 7001\ndata_dir = rel/n0\n"
		   "[node 1]\napp_port = 7002\ndata_dir = /tmp/n1\n",
		   &c, err, sizeof(err)) == 0, "%s", err);
	CHECK(c.nnodes == 2 && c.log_size == 1 << 20 && c.fsync == FSYNC_ALWAYS && c.heartbeat_ms == 5,
	      "values");
	CHECK(!strcmp(c.nodes[1].address, "127.0.0.1"), "default address");
	CHECK(c.suspect_ms == 50, "suspect_ms defaults to ten heartbeats: %d", c.suspect_ms);
	CHECK(!strncmp(c.nodes[0].data_dir, "/tmp/", 5) && strstr(c.nodes[0].data_dir, "/rel/n0"),
	      "relative data_dir not resolved: %s", c.nodes[0].data_dir);
	CHECK(config_app_cmd(&c, 1, cmd, sizeof(cmd)) == 0 &&
		      !strcmp(cmd, "redis-server --port 7002 --dir /tmp/n1"),
	      "expanded '%s'", cmd);
	CHECK(config_quorum(&c) == 2, "quorum of 2");
	/* The cluster key: beside the config by default, per node if set. */
	CHECK(strstr(c.secret_file, "/apus.key") && c.secret_file[0] == '/', "%s", c.secret_file);
	CHECK(!strcmp(c.nodes[1].secret_file, c.secret_file), "node key defaults to the cluster's");
	CHECK(load("transport = tcp\nsecret_file = /etc/k\napp_cmd = x\n[node 0]\naddress = 10.1.0.1\n"
		   "app_port = 1\npeer_port = 2\ndata_dir = /a\nnetns = ns-0\n"
		   "[node 1]\naddress = 10.1.0.2\napp_port = 1\npeer_port = 2\ndata_dir = /b\n"
		   "secret_file = k1\n", &c, err, sizeof(err)) == 0, "%s", err);
	CHECK(!strcmp(c.nodes[0].secret_file, "/etc/k") && !strcmp(c.nodes[0].netns, "ns-0") &&
	      !c.nodes[1].netns[0] && strstr(c.nodes[1].secret_file, "/k1"), "secret_file, netns");

	expect_error("foo = 1\n" NODES, 1, "unknown key 'foo'");
	expect_error("log_size = lots\n" NODES, 1, "not a size");
	expect_error("heartbeat_ms = 0\n" NODES, 1, "out of range");
	expect_error("transport = carrier-pigeon\n" NODES, 1, "not one of shm, tcp, rdma");
	expect_error("fsync = sometimes\n" NODES, 1, "fsync");
	expect_error("app_cmd = x\n", 0, "no [node N] section");
	expect_error(NODES "[node 0]\n", 5, "duplicate node id 0");
	expect_error(NODES "[node 2]\napp_port = 1\ndata_dir = /b\n", 5, "node 1 is missing");
	expect_error(NODES "[node 1]\napp_port = x\n", 6, "not a number");
	expect_error(NODES "[node 1]\ndata_dir = /b\n", 5, "no app_port");
	expect_error("just words\n", 1, "expected 'key = value'");
	expect_error("transport = tcp\n" NODES, 3, "has no peer_port");
	expect_error("[nodes 1]\n", 1, "bad section");
	expect_error("transport = tcp\napp_cmd = x\n[node 0]\naddress = db1\napp_port = 1\n"
		     "peer_port = 2\ndata_dir = /a\n", 3, "not a numeric IPv4/IPv6 address");
	expect_error(NODES "netns = a/b\n", 5, "not a namespace name");
	expect_error("heartbeat_ms = 10\nsuspect_ms = 15\n" NODES, 2, "at least two heartbeat periods");
	expect_error("[node 0]\napp_port = 1\ndata_dir = /a\n", 0, "app_cmd is not set");
	/* Rebuilding from a peer: a command and the file it writes, both or neither. */
	expect_error("snapshot_file = ../x\n" NODES, 1, "a file name inside data_dir");
	expect_error("snapshot_file = apus.region\n" NODES, 1, "not apus.*");
	expect_error("snapshot_cmd = save {data_dir}\n" NODES, 0, "go together");
	/* A greeting the checker skips: only a backup that replays in place
	 * knows which output came before its server's first read. */
	expect_error("checker_greeting = ignore\n" NODES, 1, "not one of compare, skip");
	expect_error("checker_greeting = skip\nreplay_in_place = off\n" NODES, 0,
		     "needs replay_in_place = on");
	CHECK(load(NODES, &c, err, sizeof(err)) == 0 && c.checker_greeting == GREETING_COMPARE,
	      "default checker_greeting: %d", c.checker_greeting);
	CHECK(load("checker_greeting = skip\n" NODES, &c, err, sizeof(err)) == 0 &&
		      c.checker_greeting == GREETING_SKIP, "checker_greeting skip: %s", err);
	/* A diverged backup is repaired unless the config says otherwise. */
	CHECK(load(NODES, &c, err, sizeof(err)) == 0 && c.divergence == DIVERGENCE_REPAIR &&
		      c.repair_interval_s == 60,
	      "default divergence %d, repair_interval_s %d", c.divergence, c.repair_interval_s);
	CHECK(load("divergence = report\nrepair_interval_s = 5\n" NODES, &c, err, sizeof(err)) == 0 &&
		      c.divergence == DIVERGENCE_REPORT && c.repair_interval_s == 5,
	      "divergence report: %s", err);
	expect_error("divergence = fix\n" NODES, 1, "not one of report, unhealthy, repair");
	expect_error("repair_interval_s = 0\n" NODES, 1, "repair_interval_s");
	/* Where the regions live: a memory file system by default. */
	expect_error("region_dir = shm\n" NODES, 1, "absolute directory or 'none'");
	CHECK(load(NODES, &c, err, sizeof(err)) == 0 && !strcmp(c.region_dir, "/dev/shm"),
	      "default region_dir: '%s'", c.region_dir);
	CHECK(load("region_dir = none\n" NODES, &c, err, sizeof(err)) == 0 &&
		      !strcmp(c.region_dir, "none"), "region_dir none: %s", err);
	CHECK(load("snapshot_cmd = cli -s {data_dir}/s SAVE\nsnapshot_file = dump.rdb\n" NODES, &c,
		   err, sizeof(err)) == 0, "%s", err);
	CHECK(config_expand(&c, 0, c.snapshot_cmd, cmd, sizeof(cmd)) == 0 &&
		      !strcmp(cmd, "cli -s /tmp/a/s SAVE") && !strcmp(c.snapshot_file, "dump.rdb"),
	      "snapshot_cmd expanded '%s'", cmd);
	/* apus verify's sweep: relative to the config's folder, or a template. */
	CHECK(load(NODES, &c, err, sizeof(err)) == 0 && !c.verify_cmd[0], "verify_cmd unset: '%s'",
	      c.verify_cmd);
	CHECK(load("verify_cmd = sweep.txt\n" NODES, &c, err, sizeof(err)) == 0 &&
		      !strcmp(c.verify_cmd, "/tmp/sweep.txt"), "relative verify_cmd: '%s'", c.verify_cmd);
	CHECK(load("verify_cmd = {config_dir}/v.txt\n" NODES, &c, err, sizeof(err)) == 0 &&
		      config_expand(&c, 0, c.verify_cmd, cmd, sizeof(cmd)) == 0 &&
		      !strcmp(cmd, "/tmp/v.txt"), "verify_cmd expanded '%s'", cmd);
	/* The metrics endpoint: per node, or a default for all; off when unset. */
	CHECK(load(NODES, &c, err, sizeof(err)) == 0 && !c.nodes[0].metrics_port,
	      "metrics_port unset: %d", c.nodes[0].metrics_port);
	CHECK(load(NODES "metrics_port = 7011\n[node 1]\napp_port = 7002\ndata_dir = /tmp/b\n"
		   "metrics_port = 7012\n", &c, err, sizeof(err)) == 0 &&
		      c.nodes[0].metrics_port == 7011 && c.nodes[1].metrics_port == 7012,
	      "per-node metrics_port: %s", err);
	CHECK(load("metrics_port = 7130\napp_cmd = x\n[node 0]\naddress = 10.1.0.1\napp_port = 1\n"
		   "data_dir = /a\n[node 1]\naddress = 10.1.0.2\napp_port = 1\ndata_dir = /b\n",
		   &c, err, sizeof(err)) == 0 && c.nodes[1].metrics_port == 7130,
	      "global metrics_port: %s", err);
	expect_error(NODES "metrics_port = 0\n", 5, "out of range");
	expect_error(NODES "metrics_port = 70000\n", 5, "out of range");
	expect_error(NODES "metrics_port = 7001\n", 2, "metrics_port 7001 is also its app_port");
	expect_error(NODES "guard_port = 9\nmetrics_port = 9\n", 2, "metrics_port 9 is also");
	expect_error("metrics_port = 7010\n" NODES "[node 1]\napp_port = 7002\ndata_dir = /b\n", 6,
		     "same address and metrics_port as node 0");
	/* The replacement of a dead node may take its ports, not its data. */
	CHECK(load("metrics_port = 7010\n" NODES "[node 1]\napp_port = 7001\ndata_dir = /b\n"
		   "replaces = 0\n", &c, err, sizeof(err)) == 0 && c.nodes[1].replaces == 0,
	      "a replacement on its node's ports: %s", err);
	expect_error(NODES "[node 1]\napp_port = 7001\ndata_dir = /tmp/a\nreplaces = 0\n", 5,
		     "shares data_dir with node 0");
	unlink(path);
	CHECK(config_load(path, &c, err, sizeof(err)) == -1 && strstr(err, "cannot open"), "%s", err);
	return 0;
}
