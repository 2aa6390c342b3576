/* Rebuilding a replica from a live peer's snapshot; see rebuild.h. */
#include "rebuild.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../coordinator/node.h"
#include "../coordinator/region.h"
#include "checkpoint.h"
#include "cli.h"

/* How long the new node may take to load the snapshot and join; the
 * peer's hold ends at 30 s by itself (coordinator/checkpoint.c). */
#define JOIN_TIMEOUT_MS 25000

static void step(void (*progress)(const char *), const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void step(void (*progress)(const char *), const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (!progress)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	progress(line);
}

/* A live backup synced to its leader and not behind, else NULL-status 0. */
static int caught_up_backup(const struct apus_config *cfg, int k, uint64_t *applied)
{
	pid_t pid = cli_node_pid(cfg, k);
	const struct region_ctl *ctl;
	int ok = 0;

	if (!pid || !(ctl = region_map_ctl(cfg, k)))
		return 0;
	if (ctl->status.pid == (uint64_t)pid && ctl->status.role == ROLE_BACKUP &&
	    ctl->status.synced && !ctl->status.behind) {
		ok = 1;
		*applied = load64(&ctl->status.applied);
	}
	region_unmap_ctl(ctl);
	return ok;
}

static int pick_source(const struct apus_config *cfg, int node, int from, char *err,
		       size_t errlen)
{
	uint64_t applied, best_applied = 0;
	int best = -1;

	if (from >= 0) {
		if (from == node || from >= cfg->nnodes) {
			snprintf(err, errlen, "--from %d: pick another node of the cluster", from);
			return -1;
		}
		if (!caught_up_backup(cfg, from, &applied)) {
			snprintf(err, errlen, "node %d is not a live backup synced to its leader (the "
					      "leader is never paused; see apus status)", from);
			return -1;
		}
		return from;
	}
	for (int k = 0; k < cfg->nnodes; k++)
		if (k != node && caught_up_backup(cfg, k, &applied) &&
		    (best < 0 || applied > best_applied)) {
			best = k;
			best_applied = applied;
		}
	if (best < 0)
		snprintf(err, errlen, "no live backup synced to its leader to rebuild node %d from "
				      "(the leader is never paused)", node);
	return best;
}

/* Writes NODE's apus.seed: its snapshot holds the server after entry
 * INDEX (log position POS, view VIEW).  Written aside, renamed in place. */
static int write_seed(const struct apus_config *cfg, int node, uint64_t index, uint64_t pos,
		      uint64_t view)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	FILE *f;

	if (config_node_path(cfg, node, SEED_FILE, path, sizeof(path)))
		return -1;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "we");
	if (!f)
		return -1;
	fprintf(f, "index = %llu\nlog_pos = %llu\nview = %llu\n", (unsigned long long)index,
		(unsigned long long)pos, (unsigned long long)view);
	if (fflush(f) || fsync(fileno(f)) || fclose(f))
		return -1;
	return rename(tmp, path);
}

/* Runs snapshot_cmd for node FROM (in its namespace); checks that it wrote
 * the snapshot file after STARTED.  0 with *BYTES set, or -1 with ERR. */
static int take_snapshot(const struct apus_config *cfg, int from, const char *log,
			 uint64_t *bytes, char *err, size_t errlen)
{
	char cmd[8192], path[PATH_MAX];
	struct timespec started;
	struct stat st;

	if (config_expand(cfg, from, cfg->snapshot_cmd, cmd, sizeof(cmd)) ||
	    config_node_path(cfg, from, cfg->snapshot_file, path, sizeof(path))) {
		snprintf(err, errlen, "snapshot_cmd or snapshot_file is too long once expanded");
		return -1;
	}
	/* File times come from the coarse clock. */
	clock_gettime(CLOCK_REALTIME_COARSE, &started);
	char *argv[] = { "sh", "-c", cmd, NULL };
	int rc = ckpt_run(argv, cfg->nodes[from].netns, log);
	if (rc) {
		snprintf(err, errlen, "snapshot_cmd on node %d exited with %d (see %s)", from, rc, log);
		return -1;
	}
	if (stat(path, &st) < 0 || st.st_mtim.tv_sec < started.tv_sec ||
	    (st.st_mtim.tv_sec == started.tv_sec && st.st_mtim.tv_nsec < started.tv_nsec)) {
		snprintf(err, errlen, "snapshot_cmd on node %d did not write %s (see %s)", from, path,
			 log);
		return -1;
	}
	*bytes = (uint64_t)st.st_size;
	return 0;
}

/* Copies FROM's snapshot file to NODE's data directory (aside, renamed). */
static int copy_snapshot(const struct apus_config *cfg, int from, int node)
{
	char src[PATH_MAX], dst[PATH_MAX], tmp[PATH_MAX + 8];

	if (config_node_path(cfg, from, cfg->snapshot_file, src, sizeof(src)) ||
	    config_node_path(cfg, node, cfg->snapshot_file, dst, sizeof(dst)))
		return -1;
	snprintf(tmp, sizeof(tmp), "%s.tmp", dst);
	char *argv[] = { "cp", "--", src, tmp, NULL };
	if (ckpt_run(argv, NULL, NULL))
		return -1;
	return rename(tmp, dst);
}

/* Waits until NODE's server (PID) follows its leader with the copied log.
 * 0, or -1 with ERR set. */
static int wait_joined(const struct apus_config *cfg, int node, pid_t pid, uint64_t index,
		       char *err, size_t errlen)
{
	for (uint64_t start = cli_mono_ms(); cli_mono_ms() - start < JOIN_TIMEOUT_MS;
	     cli_sleep_ms(10)) {
		waitpid(pid, NULL, WNOHANG);	/* ours if we started it: no zombie */
		if (!cli_pid_alive(pid)) {
			snprintf(err, errlen, "node %d's server exited while loading the snapshot "
					      "(see its apus.log)", node);
			return -1;
		}
		const struct region_ctl *ctl = region_map_ctl(cfg, node);
		if (!ctl)
			continue;
		int mine = ctl->status.pid == (uint64_t)pid, behind = ctl->status.behind;
		int joined = ctl->status.synced && ctl->status.role == ROLE_BACKUP;
		region_unmap_ctl(ctl);
		if (mine && behind) {
			snprintf(err, errlen, "the leader's log moved past entry %llu before node %d "
					      "joined", (unsigned long long)index, node);
			return -1;
		}
		if (mine && joined)
			return 0;
	}
	snprintf(err, errlen, "node %d did not join its leader within %d ms (see its apus.log)",
		 node, JOIN_TIMEOUT_MS);
	return -1;
}

int node_rebuild(const struct apus_config *cfg, int node, int from, const char *lib,
		 struct rebuild_info *out, void (*progress)(const char *step), char *err,
		 size_t errlen)
{
	struct rebuild_info r = { 0 };
	char log[PATH_MAX];
	struct region_ctl *ctl;
	uint64_t t0 = cli_mono_ms(), req, held;
	pid_t running = cli_node_pid(cfg, node);
	int rc = -1;

	if (!cfg->snapshot_cmd[0]) {
		snprintf(err, errlen, "node %d cannot be rebuilt from a peer: the config sets no "
				      "snapshot_cmd / snapshot_file (a CRIU image belongs to the node "
				      "it was taken of)", node);
		return -1;
	}
	if (running) {
		snprintf(err, errlen, "node %d is running (pid %d): stop it before rebuilding it",
			 node, (int)running);
		return -1;
	}
	r.from = pick_source(cfg, node, from, err, errlen);
	if (r.from < 0)
		return -1;
	if (cli_mkdirs(cfg->nodes[node].data_dir) ||
	    config_node_path(cfg, node, "apus.rebuild.log", log, sizeof(log))) {
		snprintf(err, errlen, "cannot create %s: %s", cfg->nodes[node].data_dir,
			 strerror(errno));
		return -1;
	}
	ctl = region_map_ctl_rw(cfg, r.from);
	if (!ctl) {
		snprintf(err, errlen, "cannot open node %d's region: %s", r.from, strerror(errno));
		return -1;
	}
	step(progress, "holding node %d at its next entry", r.from);
	req = ckpt_hold(ctl, r.from, err, errlen);
	if (!req)
		goto out_unmap;
	held = cli_mono_ms();
	r.index = load64(&ctl->ckpt.idx);
	r.log_pos = load64(&ctl->ckpt.pos);
	r.view = load64(&ctl->ckpt.view);
	if (!load64(&ctl->ckpt.drained)) {
		snprintf(err, errlen, "node %d's server did not take the entries sent to it in time; "
				      "try again", r.from);
		goto out_release;
	}
	step(progress, "node %d holds at entry %llu: snapshot of its server", r.from,
	     (unsigned long long)r.index);
	if (take_snapshot(cfg, r.from, log, &r.snapshot_bytes, err, errlen))
		goto out_release;
	/* The snapshot stays in the peer's data directory: seed it to match. */
	if (write_seed(cfg, r.from, r.index, r.log_pos, r.view) ||
	    copy_snapshot(cfg, r.from, node) ||
	    write_seed(cfg, node, r.index, r.log_pos, r.view)) {
		snprintf(err, errlen, "cannot copy the snapshot to %s: %s", cfg->nodes[node].data_dir,
			 strerror(errno));
		goto out_release;
	}
	step(progress, "copied %.1f MB; starting node %d from entry %llu", r.snapshot_bytes / 1e6,
	     node, (unsigned long long)r.index + 1);
	r.pid = cli_spawn_node(cfg, node, lib);
	if (r.pid < 0) {
		snprintf(err, errlen, "cannot start node %d", node);
		goto out_release;
	}
	/* The peer stays held (pinning the leader's log) until we joined. */
	if (wait_joined(cfg, node, r.pid, r.index, err, errlen)) {
		/* Not half a replica: a retry starts from scratch. */
		kill(r.pid, SIGKILL);
		waitpid(r.pid, NULL, 0);
		goto out_release;
	}
	rc = 0;
out_release:
	store64(&ctl->ckpt.release, req);
	r.hold_ms = cli_mono_ms() - held;
out_unmap:
	region_unmap_ctl(ctl);
	r.total_ms = cli_mono_ms() - t0;
	if (!rc)
		*out = r;
	return rc;
}
