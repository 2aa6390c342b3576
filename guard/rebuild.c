/* Rebuilding a replica from a live peer's snapshot; see rebuild.h. */
#include "rebuild.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/atomic64.h"
#include "coordinator/node/members.h"
#include "coordinator/storage/recovery.h"
#include "coordinator/storage/region.h"
#include "coordinator/storage/region_mail.h"
#include "coordinator/storage/region_status.h"
#include "checkpoint.h"
#include "host.h"
#include "snapshot_net.h"

/* How long the new node may take to load the snapshot and join; the
 * peer's hold ends at 30 s by itself (coordinator/node/checkpoint.c). */
#define JOIN_TIMEOUT_MS 25000
/* snapshot_connections = none: how long a hold looks for an entry where no
 * client is connected. */
#define CONNS_WAIT_MS 30000
/* ... and one where its server answered every read it made (snapshot.c's
 * MID_REQUEST_GIVE_UP_NS). */
#define MID_WAIT_MS 5000

/* A live backup synced to its leader and not left behind. */
int rebuild_source_ok(const struct apus_config *cfg, int k, uint64_t *applied)
{
	pid_t pid = host_node_pid(cfg, k);
	const struct region_ctl *ctl;
	int ok = 0;

	if (!pid || !(ctl = region_map_ctl(cfg, k)))
		return 0;
	const struct node_status *s = region_status(ctl);
	if (s->pid == (uint64_t)pid && s->role == ROLE_BACKUP && s->synced && !s->behind) {
		ok = 1;
		*applied = load64(&s->applied);
	}
	region_unmap_ctl(ctl);
	return ok;
}

/* The peers to take the snapshot from, best first, into CAND: FROM alone
 * if given; else every other node, the live synced backups of this host
 * (most caught up first), then those of other hosts (their guards refuse
 * if they cannot serve).  Returns how many, or -1 with ERR set. */
static int pick_sources(const struct apus_config *cfg, int node, int from, int *cand,
			char *err, size_t errlen)
{
	uint64_t applied[APUS_MAX_NODES], a;
	int n = 0;

	if (from >= 0) {
		if (from == node || from >= cfg->nnodes) {
			snprintf(err, errlen, "--from %d: pick another node of the cluster", from);
			return -1;
		}
		if (host_node_is_local(cfg, from) && !cfg->nodes[from].guard_port &&
		    !rebuild_source_ok(cfg, from, &a)) {
			snprintf(err, errlen, "node %d is not a live backup synced to its leader (the "
					      "leader is never paused; see apus status)", from);
			return -1;
		}
		cand[0] = from;
		return 1;
	}
	for (int k = 0; k < cfg->nnodes; k++) {
		if (k == node)
			continue;
		if (rebuild_source_ok(cfg, k, &a)) {
			int i = n++;
			for (; i > 0 && (applied[i - 1] < a); i--) {
				cand[i] = cand[i - 1];
				applied[i] = applied[i - 1];
			}
			cand[i] = k;
			applied[i] = a;
		}
	}
	/* Nodes of other hosts: only their guards can tell. */
	for (int k = 0; k < cfg->nnodes; k++)
		if (k != node && cfg->nodes[k].guard_port && !host_node_is_local(cfg, k)) {
			int dup = 0;
			for (int i = 0; i < n; i++)
				dup |= cand[i] == k;
			if (!dup)
				cand[n++] = k;
		}
	if (!n)
		snprintf(err, errlen, "no live backup synced to its leader to rebuild node %d from "
				      "(the leader is never paused)", node);
	return n ? n : -1;
}

/* Makes FILE (in NODE's data directory) NODE's recovery point at entry
 * INDEX (log position POS, view VIEW; the generator's RAND_MARK, UINT64_MAX
 * when unknown).  0, or -1 with ERR set. */
static int make_recovery_point(const struct apus_config *cfg, int node, const char *file,
			       uint64_t index, uint64_t pos, uint64_t view, uint64_t rand_mark,
			       char *err, size_t errlen)
{
	struct recovery_point rp = { index, pos, view, 0, rand_mark };
	int rc = recovery_commit(cfg, node, file, &rp);

	if (rc)
		snprintf(err, errlen, "cannot make %s node %d's recovery point: %s", file, node,
			 strerror(-rc));
	return rc ? -1 : 0;
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
	int rc = ckpt_run(argv, cfg->nodes[from].netns, log, RUN_NOW);
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

/* Copies file NAME of FROM's data directory to NODE's snapshot_file
 * (aside, renamed). */
static int copy_snapshot(const struct apus_config *cfg, int from, const char *name, int node)
{
	char src[PATH_MAX], dst[PATH_MAX], tmp[PATH_MAX + 8];

	if (config_node_path(cfg, from, name, src, sizeof(src)) ||
	    config_node_path(cfg, node, cfg->snapshot_file, dst, sizeof(dst)))
		return -1;
	snprintf(tmp, sizeof(tmp), "%s.tmp", dst);
	char *argv[] = { "cp", "--", src, tmp, NULL };
	if (ckpt_run(argv, NULL, NULL, RUN_NOW))
		return -1;
	return rename(tmp, dst);
}

/* Waits until NODE's server (PID) follows its leader with the copied log.
 * 0, or -1 with ERR set. */
static int wait_joined(const struct apus_config *cfg, int node, pid_t pid, uint64_t index,
		       char *err, size_t errlen)
{
	for (uint64_t start = host_mono_ms(); host_mono_ms() - start < JOIN_TIMEOUT_MS;
	     host_sleep_ms(10)) {
		waitpid(pid, NULL, WNOHANG);	/* ours if we started it: no zombie */
		if (!host_pid_alive(pid)) {
			snprintf(err, errlen, "node %d's server exited while loading the snapshot "
					      "(see its apus.log)", node);
			return -1;
		}
		const struct region_ctl *ctl = region_map_ctl(cfg, node);
		if (!ctl)
			continue;
		const struct node_status *s = region_status(ctl);
		int mine = s->pid == (uint64_t)pid, behind = s->behind;
		int joined = s->synced && s->role == ROLE_BACKUP;
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

int snapshot_hold(const struct apus_config *cfg, int node, const char *log,
		  struct held_snapshot *h, char *err, size_t errlen)
{
	const struct ckpt_words *w;

	memset(h, 0, sizeof(*h));
	if (!cfg->snapshot_cmd[0]) {
		snprintf(err, errlen, "the config sets no snapshot_cmd / snapshot_file");
		return -1;
	}
	h->ctl = region_map_ctl_rw(cfg, node);
	if (!h->ctl) {
		snprintf(err, errlen, "cannot open node %d's region: %s", node, strerror(errno));
		return -1;
	}
	w = &region_mail(h->ctl)->ckpt;
	for (uint64_t t0 = host_mono_ms();;) {
		uint64_t open, mid;

		h->req = ckpt_hold(h->ctl, node, err, errlen);
		if (!h->req) {
			region_unmap_ctl(h->ctl);
			h->ctl = NULL;	/* the caller's snapshot_release must not write it */
			return -1;
		}
		open = load64(&w->open_conns);
		mid = load64(&w->mid_requests);
		/* A request the server read only the first part of is no part
		 * of a snapshot either (its rest would be replayed alone): an
		 * entry where every read was answered, for MID_WAIT_MS at most
		 * (a client may keep it reading without answers). */
		if ((cfg->snapshot_connections != SNAPSHOT_CONNECTIONS_NONE || !open) &&
		    (!mid || host_mono_ms() - t0 > MID_WAIT_MS))
			break;
		/* A session is no part of a snapshot: a point where a client is
		 * connected would lose it (the node's own snapshots wait for such
		 * an entry too: coordinator/node/snapshot.c).  Another entry, soon. */
		store64(&region_mail(h->ctl)->ckpt.release, h->req);
		if (open && host_mono_ms() - t0 > CONNS_WAIT_MS) {
			snprintf(err, errlen, "node %d had %llu client connection%s open at every entry "
					      "for %d s: a snapshot there would lose %s (snapshot_connections = "
					      "none); try again when clients disconnect", node,
				 (unsigned long long)open, open == 1 ? "" : "s", CONNS_WAIT_MS / 1000,
				 open == 1 ? "its session" : "their sessions");
			region_unmap_ctl(h->ctl);
			h->ctl = NULL;	/* the caller's snapshot_release must not write it */
			return -1;
		}
		usleep(100 * 1000);
	}
	h->held_at_ms = host_mono_ms();
	h->index = load64(&w->idx);
	h->log_pos = load64(&w->pos);
	h->view = load64(&w->view);
	h->rand_mark = load64(&w->rand_mark);
	if (!load64(&w->drained))
		snprintf(err, errlen, "node %d's server did not take the entries sent to it in time; "
				      "try again", node);
	else if (take_snapshot(cfg, node, log, &h->bytes, err, errlen))
		;
	else if (load64(&w->broken) == h->req)
		/* Elected meanwhile: it executed on, and the file may hold more
		 * than entry index (a node started from it would apply those
		 * entries twice). */
		snprintf(err, errlen, "node %d left its hold (it was elected) while its server wrote "
				      "the snapshot; try another peer", node);
	else if (!config_node_path(cfg, node, cfg->snapshot_file, h->path, sizeof(h->path))) {
		/* The snapshot stays in NODE's data directory: its recovery point. */
		if (!make_recovery_point(cfg, node, h->path, h->index, h->log_pos, h->view,
					 h->rand_mark, err, errlen))
			return 0;
	}
	snapshot_release(h);
	return -1;
}

uint64_t snapshot_release(struct held_snapshot *h)
{
	uint64_t ms = host_mono_ms() - h->held_at_ms;

	if (h->ctl) {
		store64(&region_mail(h->ctl)->ckpt.release, h->req);
		region_unmap_ctl(h->ctl);
		h->ctl = NULL;
	}
	return ms;
}

/* Gets the snapshot of peer FROM into NODE's data directory and NODE's
 * seed beside it, leaving FROM held: through FROM's guard (*FD is the
 * connection that holds it) or from its data directory on this host (*H).
 * 0, or -1 with ERR set. */
static int get_snapshot(const struct apus_config *cfg, int node, int from, const char *log,
			struct rebuild_info *r, int *fd, struct held_snapshot *h, char *err,
			size_t errlen)
{
	char dst[PATH_MAX];
	struct snap_meta m;

	if (cfg->nodes[from].guard_port) {
		if (config_node_path(cfg, node, cfg->snapshot_file, dst, sizeof(dst))) {
			snprintf(err, errlen, "node %d's data_dir is too long", node);
			return -1;
		}
		*fd = snapnet_fetch(cfg, node, from, dst, &m, err, errlen);
		if (*fd < 0)
			return -1;
		r->index = m.index, r->log_pos = m.log_pos, r->view = m.view;
		r->rand_mark = m.rand_mark;
		r->snapshot_bytes = m.bytes;
	} else {
		if (snapshot_hold(cfg, from, log, h, err, errlen))
			return -1;
		r->index = h->index, r->log_pos = h->log_pos, r->view = h->view;
		r->rand_mark = h->rand_mark;
		r->snapshot_bytes = h->bytes;
		if (copy_snapshot(cfg, from, cfg->snapshot_file, node) ||
		    members_copy(cfg, from, node)) {
			snprintf(err, errlen, "cannot copy %s (and its membership) to %s", h->path,
				 cfg->nodes[node].data_dir);
			return -1;
		}
	}
	if (config_node_path(cfg, node, cfg->snapshot_file, dst, sizeof(dst))) {
		snprintf(err, errlen, "node %d's data_dir is too long", node);
		return -1;
	}
	return make_recovery_point(cfg, node, dst, r->index, r->log_pos, r->view, r->rand_mark,
				   err, errlen);
}

/* Without a live synced backup to hold (the cluster's only other
 * recoverable node may be its leader, which is never paused): the stored
 * recovery point of the leader on this host, which its log still covers
 * (the leader reclaims no log its own snapshot does not cover).  0 with R
 * set and NODE's recovery point made, or -1. */
static int stored_snapshot(const struct apus_config *cfg, int node, struct rebuild_info *r,
			   char *err, size_t errlen)
{
	char dst[PATH_MAX];
	struct recovery_point rp;

	for (int k = 0; k < cfg->nnodes; k++) {
		const struct region_ctl *ctl;
		pid_t pid = host_node_pid(cfg, k);
		int leads = 0;

		if (k == node || !pid || !(ctl = region_map_ctl(cfg, k)))
			continue;
		const struct node_status *s = region_status(ctl);
		leads = s->pid == (uint64_t)pid && s->role == ROLE_LEADER && s->recoverable;
		region_unmap_ctl(ctl);
		if (!leads || recovery_peek(cfg, k, &rp) || copy_snapshot(cfg, k, SNAPSHOT_FILE, node) ||
		    config_node_path(cfg, node, cfg->snapshot_file, dst, sizeof(dst)))
			continue;
		if (members_copy(cfg, k, node))
			continue;
		r->from = k;
		r->index = rp.index, r->log_pos = rp.log_pos, r->view = rp.view;
		r->rand_mark = rp.rand_mark;
		r->snapshot_bytes = rp.bytes;
		return make_recovery_point(cfg, node, dst, rp.index, rp.log_pos, rp.view, rp.rand_mark,
					   err, errlen);
	}
	return -1;
}

int node_rebuild(const struct apus_config *cfg, int node, int from, const char *lib,
		 struct rebuild_info *out, void (*progress)(const char *step), char *err,
		 size_t errlen)
{
	struct rebuild_info r = { 0 };
	struct held_snapshot h = { 0 };
	char log[PATH_MAX];
	uint64_t t0 = host_mono_ms(), held = 0;
	pid_t running = host_node_pid(cfg, node);
	int rc = -1, fd = -1, cand[APUS_MAX_NODES], ncand;

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
	ncand = from == REBUILD_FROM_LEADER ? 0 : pick_sources(cfg, node, from, cand, err, errlen);
	if (host_mkdirs(cfg->nodes[node].data_dir) ||
	    config_node_path(cfg, node, "apus.rebuild.log", log, sizeof(log))) {
		snprintf(err, errlen, "cannot create %s: %s", cfg->nodes[node].data_dir,
			 strerror(errno));
		return -1;
	}
	if (ncand <= 0 && from < 0) {
		if (from == REBUILD_FROM_LEADER)
			snprintf(err, errlen, "no leader on this host with a recovery point");
		if (stored_snapshot(cfg, node, &r, err, errlen))
			return -1;
		ckpt_say(progress, "no live backup to hold: took leader node %d's recovery point "
				   "(entry %llu, %.1f MB)", r.from, (unsigned long long)r.index,
			 r.snapshot_bytes / 1e6);
		ncand = 0;
	} else if (ncand <= 0) {
		return -1;
	}
	/* The first peer that can give its snapshot gives it. */
	for (int i = 0; i < ncand; i++) {
		r.from = cand[i];
		ckpt_say(progress, "holding node %d at its next entry for a snapshot of its server%s",
		     r.from, cfg->nodes[r.from].guard_port ? " (through its guard)" : "");
		held = host_mono_ms();
		if (!get_snapshot(cfg, node, r.from, log, &r, &fd, &h, err, errlen))
			break;
		if (fd >= 0)
			close(fd);
		fd = -1;
		snapshot_release(&h);
		if (i + 1 == ncand)
			return -1;
		ckpt_say(progress, "node %d: %s", r.from, err);
	}
	ckpt_say(progress, "node %d holds at entry %llu; copied %.1f MB; starting node %d from entry %llu",
	     r.from, (unsigned long long)r.index, r.snapshot_bytes / 1e6, node,
	     (unsigned long long)r.index + 1);
	r.pid = host_spawn_node(cfg, node, lib);
	if (r.pid < 0) {
		snprintf(err, errlen, "cannot start node %d", node);
		goto out;
	}
	/* The peer stays held (pinning the leader's log) until we joined. */
	if (wait_joined(cfg, node, r.pid, r.index, err, errlen)) {
		/* Not half a replica: a retry starts from scratch. */
		kill(r.pid, SIGKILL);
		waitpid(r.pid, NULL, 0);
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		snapnet_done(fd);
	snapshot_release(&h);
	r.hold_ms = held ? host_mono_ms() - held : 0;	/* 0: a stored snapshot */
	r.total_ms = host_mono_ms() - t0;
	if (!rc)
		*out = r;
	return rc;
}
