/* The guard's half of the checkpoint protocol: hold a backup at an entry
 * (through the checkpoint words of its region), dump it with CRIU while it
 * keeps running, copy its data directory, checksum everything (into the
 * store, ckpt_store.c); and restore one, refusing damaged images.  Layout
 * and format: checkpoint.h. */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/atomic64.h"
#include "common/clock.h"
#include "coordinator/storage/filemode.h"
#include "coordinator/storage/recovery.h"
#include "coordinator/storage/region.h"
#include "coordinator/storage/region_mail.h"
#include "coordinator/storage/region_status.h"
#include "coordinator/storage/region_wire.h"
#include "host.h"
#include "owner.h"

#define ACK_TIMEOUT_MS 5000
#define WATCH_POLL_MS 20
#define TARGET_DEAD_MS 2000	/* CRIU's own failure, once its task died, comes sooner */
#define RESTORE_TRIES 25	/* 200 ms apart: a killed pid may stay taken ~1.6 s */

static void seterr(char *err, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void seterr(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

const char *criu_binary(void)
{
	const char *c = getenv("APUS_CRIU");

	return c && *c ? c : "criu";
}

int ckpt_run(char *const argv[], const char *netns, const char *log, int prio)
{
	return ckpt_run_watching(argv, netns, log, prio, 0);
}

int ckpt_run_watching(char *const argv[], const char *netns, const char *log, int prio,
		      pid_t target)
{
	pid_t pid = fork();
	int st, dead_ms = 0;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		host_redirect_stdio(log);
		if (prio == RUN_BACKGROUND)
			(void)!nice(19);
		if (netns && *netns && host_enter_netns(netns) < 0)
			_exit(126);
		execvp(argv[0], argv);
		_exit(127);
	}
	for (;;) {
		pid_t got = waitpid(pid, &st, target > 0 ? WNOHANG : 0);

		if (got == pid)
			break;
		if (got < 0 && errno != EINTR)
			return -1;
		if (got != 0)
			continue;
		/* A task killed while CRIU holds it (ptrace-seized) can leave
		 * CRIU waiting for ever on a zombie it traces: the guard would
		 * never restore it, nor serve a peer's rebuild.  Stop CRIU. */
		dead_ms = host_pid_alive(target) ? 0 : dead_ms + WATCH_POLL_MS;
		if (dead_ms >= TARGET_DEAD_MS) {
			kill(pid, SIGKILL);
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			return RUN_TARGET_DIED;
		}
		host_sleep_ms(WATCH_POLL_MS);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The first line of FILE that mentions "Error" (the cause; later ones
 * are its consequences), for a one-line report. */
static void first_error_line(const char *file, char *out, size_t len)
{
	char line[512];
	FILE *f = fopen(file, "re");

	snprintf(out, len, "see %s", file);
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "Error") && !strstr(line, "RLIMIT_NOFILE")) {
			char *p = line + strspn(line, " 0123456789:");
			p[strcspn(p, "\n")] = '\0';
			snprintf(out, len, "%s", p);
			break;
		}
	fclose(f);
}

int criu_usable(char *why, size_t len)
{
	char tmpl[] = "/tmp/apus-criu-check.XXXXXX", line[256];
	char *argv[] = { (char *)criu_binary(), "check", NULL };
	int fd = mkstemp(tmpl), rc, good = 0;
	FILE *f;

	if (fd < 0) {
		seterr(why, len, "cannot run criu check: %s", strerror(errno));
		return -1;
	}
	close(fd);
	rc = ckpt_run(argv, NULL, tmpl, RUN_NOW);
	f = fopen(tmpl, "re");
	while (f && fgets(line, sizeof(line), f))
		good |= strstr(line, "Looks good") != NULL;
	if (f)
		fclose(f);
	if (rc == 127)
		seterr(why, len, "%s not found (scripts/install-criu.sh installs one)",
		       criu_binary());
	else if (rc || !good) {
		first_error_line(tmpl, why, len);
		char first[200];
		snprintf(first, sizeof(first), "%s", why);
		seterr(why, len, "criu check failed: %s", first);
	}
	unlink(tmpl);
	return rc || !good ? -1 : 0;
}

/* OUT = A/B; -1 if it does not fit. */
/* --- data directory --- */

/* Copies the server's files of SRC (not ours: apus.*, checkpoints/,
 * sockets, nor the snapshot file SKIP: it goes with apus.seed, see
 * rebuild.h) into DST with cp -a.  0 or -1. */
static int copy_data(const char *src, const char *dst, const char *skip, int prio)
{
	char *argv[256 + 8], paths[256][PATH_MAX];
	struct dirent *d;
	int argc = 0, n = 0, rc = 0;
	DIR *dir = opendir(src);

	if (!dir)
		return -1;
	argv[argc++] = "cp";
	argv[argc++] = "-a";
	argv[argc++] = "--";
	while ((d = readdir(dir)) && n < 256) {
		struct stat st;

		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, "..") ||
		    !strncmp(d->d_name, "apus.", 5) || !strcmp(d->d_name, CKPT_DIR) ||
		    (skip[0] && !strcmp(d->d_name, skip)))
			continue;
		snprintf(paths[n], PATH_MAX, "%s/%s", src, d->d_name);
		if (lstat(paths[n], &st) < 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))
			continue;
		argv[argc++] = paths[n++];
	}
	closedir(dir);
	if (n) {
		argv[argc++] = (char *)dst;
		argv[argc] = NULL;
		rc = ckpt_run(argv, NULL, NULL, prio) ? -1 : 0;
	}
	return rc;
}

/* --- take --- */

void ckpt_say(void (*progress)(const char *), const char *fmt, ...)
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

/* A checkpoint that failed, in the node's control page: apus status and
 * the metrics endpoint show it (a recovery point that cannot be made is
 * the operator's business, not a line in the guard's log). */
static void note_failure(struct region_ctl *ctl, const char *err)
{
	struct ckpt_words *w = &region_mail(ctl)->ckpt;

	snprintf(w->error, sizeof(w->error), "%s", err);
	store64(&w->error_ms, realtime_ms());
	store64(&w->failures, load64(&w->failures) + 1);
}

uint64_t ckpt_hold(struct region_ctl *ctl, int node, char *err, size_t errlen)
{
	struct ckpt_words *w = &region_mail(ctl)->ckpt;
	uint64_t req = load64(&w->req);
	uint64_t start = host_mono_ms();

	if (load64(&w->ack) > req)
		req = load64(&w->ack);
	req++;
	store64(&w->req, req);
	while (load64(&w->ack) != req) {
		if (host_mono_ms() - start > ACK_TIMEOUT_MS) {
			seterr(err, errlen, "node %d did not answer the checkpoint request in %d ms",
			       node, ACK_TIMEOUT_MS);
			store64(&w->release, req);
			return 0;
		}
		host_sleep_ms(1);
	}
	if (load64(&w->refused)) {
		seterr(err, errlen, "node %d leads: the leader is never checkpointed", node);
		return 0;
	}
	return req;
}

/* NODE's control page, if NODE is a backup: only a backup waits at an
 * entry, so only its image is the state at a known one. */
static struct region_ctl *map_backup(const struct apus_config *cfg, int node, char *err,
				     size_t errlen)
{
	struct region_ctl *ctl = region_map_ctl_rw(cfg, node);
	const struct node_status *s;

	if (!ctl) {
		seterr(err, errlen, "cannot open node %d's region: %s", node, strerror(errno));
		return NULL;
	}
	s = region_status(ctl);
	if (s->role != ROLE_BACKUP) {
		seterr(err, errlen, "node %d is a %s, not a backup: only backups are checkpointed",
		       node, role_label(s->role));
		region_unmap_ctl(ctl);
		return NULL;
	}
	return ctl;
}

/* Holds the backup at its next entry and notes that entry into C.  The
 * request to release once dumped, or 0 (nothing held, the failure noted;
 * ERR says why). */
static uint64_t hold_for_dump(struct region_ctl *ctl, int node, struct ckpt_info *c,
			      void (*progress)(const char *), char *err, size_t errlen)
{
	struct ckpt_words *w = &region_mail(ctl)->ckpt;
	uint64_t req;

	ckpt_say(progress, "holding node %d at its next entry", node);
	req = ckpt_hold(ctl, node, err, errlen);
	if (!req) {
		note_failure(ctl, err);
		return 0;
	}
	c->index = load64(&w->idx);
	c->log_pos = load64(&w->pos);
	c->view = load64(&w->view);
	c->drained = load64(&w->drained) != 0;
	if (load64(&w->unaccepted)) {
		/* CRIU refuses a listening socket with connections in its
		 * backlog ("In-flight connection"): say why, dump nothing. */
		seterr(err, errlen, "node %d's server had not accepted %llu of its replay's connections "
				    "in time; try again", node, (unsigned long long)load64(&w->unaccepted));
		store64(&w->release, req);
		note_failure(ctl, err);
		return 0;
	}
	return req;
}

/* Dumps the held server (C->pid) into IMG with CRIU, leaving it running,
 * then releases hold REQ whatever happened: the server executes again.
 * 0, or -1 (ERR says why). */
static int dump_held(const struct apus_config *cfg, int node, struct ckpt_info *c,
		     struct ckpt_words *w, uint64_t req, const char *img, const char *dlog,
		     void (*progress)(const char *), char *err, size_t errlen)
{
	char pidarg[16], ghost[32];
	uint64_t t0;
	int rc;

	ckpt_say(progress, "dumping pid %d at entry %llu (criu, left running)", (int)c->pid,
	    (unsigned long long)c->index);
	snprintf(pidarg, sizeof(pidarg), "%d", (int)c->pid);
	/* A peer's region file that was replaced (it restarted, or fenced
	 * someone) stays mapped for a moment (transport_shm.c retires it for
	 * a second): CRIU copies such a deleted file into the image, up to
	 * --ghost-limit, which is 1 MB unless raised to a region's size. */
	snprintf(ghost, sizeof(ghost), "%llu",
		 (unsigned long long)region_size_for(cfg->log_size) + (1ULL << 20));
	/* No network lock: CRIU's nftables lock is a table of the task's
	 * connections' four-tuples that drops their packets, left in place
	 * when CRIU is killed or hangs; it then silently drops any later
	 * connection that reuses such a four-tuple (a replay connection from
	 * the same local port: the server never accepts it).  We need none:
	 * the task is frozen while its sockets are read, the replay's
	 * connections have both ends inside it, and a restored node drops its
	 * peer connections (a new incarnation). */
	char *dump[] = { (char *)criu_binary(), "dump", "-t", pidarg, "-D", (char *)img,
			 "--leave-running", "--tcp-established", "--network-lock", "skip",
			 "--file-locks", "--ghost-limit", ghost, "-o", "dump.log", NULL };
	t0 = host_mono_ms();
	rc = ckpt_run_watching(dump, cfg->nodes[node].netns, dlog, RUN_BACKGROUND, c->pid);
	c->dump_ms = host_mono_ms() - t0;
	/* The server executes again whatever happened. */
	store64(&w->release, req);
	if (rc) {
		char line[400], dl[PATH_MAX + 112];
		snprintf(dl, sizeof(dl), "%s/dump.log", img);
		first_error_line(dl, line, sizeof(line));
		if (rc == RUN_TARGET_DIED)
			seterr(err, errlen, "node %d's server died during its dump (pid %d); criu "
			       "stopped", node, (int)c->pid);
		else
			seterr(err, errlen, "criu dump of node %d failed (%s)",
			       node, rc == 127 ? "criu not found" : line);
		return -1;
	}
	return 0;
}

/* Completes the checkpoint in TMP (the data directory's copy in DATA,
 * checksums, meta) and renames it to its own name under ROOT, into
 * C->dir: a checkpoint under its own name is a whole one.  0, or -1 (ERR
 * says why). */
static int seal_checkpoint(const struct apus_config *cfg, int node, struct ckpt_info *c,
			   const char *root, const char *tmp, const char *data,
			   void (*progress)(const char *), char *err, size_t errlen)
{
	char sums[PATH_MAX + 96];

	ckpt_say(progress, "dumped in %llu ms; copying the data directory",
	    (unsigned long long)c->dump_ms);
	if (copy_data(cfg->nodes[node].data_dir, data, cfg->snapshot_file, RUN_BACKGROUND)) {
		seterr(err, errlen, "copying %s failed", cfg->nodes[node].data_dir);
		return -1;
	}
	ckpt_say(progress, "checksumming");
	snprintf(sums, sizeof(sums), "%s/SHA256SUMS", tmp);
	if (ckpt_write_sums(tmp, sums, &c->image_bytes, &c->data_bytes) ||
	    ckpt_meta_write(c, tmp)) {
		seterr(err, errlen, "cannot write the checksums and meta of %s", tmp);
		return -1;
	}
	if (ckpt_join_path(c->dir, sizeof(c->dir), root, c->id) || rename(tmp, c->dir) < 0) {
		seterr(err, errlen, "cannot rename %s: %s", tmp, strerror(errno));
		return -1;
	}
	return 0;
}

int ckpt_take(const struct apus_config *cfg, int node, struct ckpt_info *out,
	      void (*progress)(const char *step), char *err, size_t errlen)
{
	char root[PATH_MAX], tmp[PATH_MAX + 80], img[PATH_MAX + 96], dlog[PATH_MAX + 112];
	char data[PATH_MAX + 96];
	struct ckpt_info c = { 0 };
	const struct node_status *s;
	struct region_ctl *ctl;
	struct ckpt_words *w;
	uint64_t req;

	c.pid = host_node_pid(cfg, node);
	if (!c.pid) {
		seterr(err, errlen, "node %d is not running", node);
		return -1;
	}
	if (ckpt_root(cfg, node, root, sizeof(root)) || (mkdir(root, 0700) < 0 && errno != EEXIST)) {
		seterr(err, errlen, "cannot create %s: %s", root, strerror(errno));
		return -1;
	}
	ctl = map_backup(cfg, node, err, errlen);
	if (!ctl)
		return -1;
	w = &region_mail(ctl)->ckpt;
	s = region_status(ctl);
	req = hold_for_dump(ctl, node, &c, progress, err, errlen);
	if (!req) {
		region_unmap_ctl(ctl);
		return -1;
	}
	c.time_ms = realtime_ms();
	snprintf(c.id, sizeof(c.id), "%012llu-%llu", (unsigned long long)c.index,
		 (unsigned long long)c.time_ms);
	snprintf(tmp, sizeof(tmp), "%s/.tmp-%s", root, c.id);
	snprintf(img, sizeof(img), "%s/images", tmp);
	snprintf(data, sizeof(data), "%s/data", tmp);
	snprintf(dlog, sizeof(dlog), "%s/criu-dump.out", tmp);
	if (mkdir(tmp, 0700) < 0 || mkdir(img, 0700) < 0 || mkdir(data, 0700) < 0) {
		seterr(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
		store64(&w->release, req);
		goto fail;
	}
	if (dump_held(cfg, node, &c, w, req, img, dlog, progress, err, errlen))
		goto fail;
	/* A node elected during the dump (or held past its limit) left its
	 * hold and executed on: the image may hold more than entry index, and
	 * a restore would execute those entries twice. */
	if (load64(&w->broken) == req || s->role != ROLE_BACKUP) {
		seterr(err, errlen, "node %d left its hold at entry %llu during the dump (it was "
				    "elected?): the image is not at that entry; not kept",
		       node, (unsigned long long)c.index);
		goto fail;
	}
	if (seal_checkpoint(cfg, node, &c, root, tmp, data, progress, err, errlen))
		goto fail;
	/* For the node's metrics endpoint (coordinator/node/metrics.c). */
	store64(&w->dump_ms, c.dump_ms);
	store64(&w->image_bytes, c.image_bytes);
	__atomic_fetch_add(&w->taken, 1, __ATOMIC_RELEASE);
	store64(&w->failures, 0);
	region_unmap_ctl(ctl);
	*out = c;
	return 0;
fail:
	note_failure(ctl, err);
	region_unmap_ctl(ctl);
	ckpt_remove_tree(tmp);
	return -1;
}

/* --- restore --- */

/* Drops the nftables table a failed CRIU run may leave (it blocks the
 * restored connections' packets). */
static void drop_criu_tables(const char *netns)
{
	char *argv[] = { "sh", "-c",
			 "nft list tables 2>/dev/null | awk '$3 ~ /^CRIU-/ { print $2, $3 }' | "
			 "while read f t; do nft delete table \"$f\" \"$t\"; done",
			 NULL };

	ckpt_run(argv, netns, NULL, RUN_NOW);
}

static int restore_from(const struct apus_config *cfg, int node, const struct ckpt_info *c,
			char *err, size_t errlen)
{
	char img[PATH_MAX + 16], data[PATH_MAX + 16], out[PATH_MAX + 32];
	const char *netns = cfg->nodes[node].netns;
	struct region_ctl *ctl = region_map_ctl_rw(cfg, node);
	int rc = -1;

	if (!ctl) {
		seterr(err, errlen, "node %d has no region file to restore into (%s)", node,
		       strerror(errno));
		return -1;
	}
	/* Tell the restored process it came back; nothing holds it. */
	struct ckpt_words *w = &region_mail(ctl)->ckpt;
	store64(&w->ack, load64(&w->req));
	store64(&w->release, load64(&w->req));
	store64(&w->restore_gen, load64(&w->restore_gen) + 1);
	region_unmap_ctl(ctl);

	int left = node_end_leftovers(cfg, node, LEFTOVER_WAIT_MS);
	if (left) {
		seterr(err, errlen, "%d process%s of node %d's previous server outlived SIGKILL for "
		       "%d ms", left, left == 1 ? "" : "es", node, LEFTOVER_WAIT_MS);
		return -1;
	}
	snprintf(data, sizeof(data), "%s/data", c->dir);
	if (copy_data(data, cfg->nodes[node].data_dir, cfg->snapshot_file, RUN_NOW)) {
		seterr(err, errlen, "cannot copy the checkpoint's data into %s",
		       cfg->nodes[node].data_dir);
		return -1;
	}
	/* CRIU gives the server its pid back: a dead one's zombie holds it
	 * until its parent (init, for a server whose starter exited) reaps it,
	 * which some inits do only now and then. */
	for (int waited = 0; kill(c->pid, 0) == 0 && !host_pid_alive(c->pid) && waited < 15000;
	     waited += 100)
		host_sleep_ms(100);
	if (host_pid_alive(c->pid)) {
		seterr(err, errlen, "pid %d, which checkpoint %s's server had, is taken by another "
		       "process: node %d cannot be restored from it", (int)c->pid, c->id, node);
		return -1;
	}
	snprintf(img, sizeof(img), "%s/images", c->dir);
	snprintf(out, sizeof(out), "%s/criu-restore.out", c->dir);
	char first[PATH_MAX + 64];
	snprintf(first, sizeof(first), "%s/restore-first.log", img);
	unlink(first);
	char *restore[] = { (char *)criu_binary(), "restore", "-D", img, "-d", "--tcp-established",
			    "--file-locks", "-o", "restore.log", NULL };
	for (int i = 0; i < RESTORE_TRIES; i++) {
		rc = ckpt_run(restore, netns, out, RUN_NOW);
		if (!rc || rc == 127)
			break;
		drop_criu_tables(netns);
		if (i == 0) {	/* the first failure says why; later ones may only echo it */
			char a[PATH_MAX + 64], b[PATH_MAX + 64];
			snprintf(a, sizeof(a), "%s/restore.log", img);
			snprintf(b, sizeof(b), "%s/restore-first.log", img);
			rename(a, b);
		}
		host_sleep_ms(200);
	}
	if (rc) {
		char line[400], rl[PATH_MAX + 64];
		/* A failed try leaves its server's pid taken a while (a zombie of
		 * init), so later tries say only that: the first one says why. */
		snprintf(rl, sizeof(rl), "%s/restore-first.log", img);
		if (access(rl, F_OK))
			snprintf(rl, sizeof(rl), "%s/restore.log", img);
		first_error_line(rl, line, sizeof(line));
		seterr(err, errlen, "criu restore of node %d from %s failed (%s)", node, c->id,
		       rc == 127 ? "criu not found" : line);
		return -1;
	}
	if (!host_pid_alive(c->pid)) {
		seterr(err, errlen, "node %d's restored process (pid %d) is gone", node, (int)c->pid);
		return -1;
	}
	host_write_pidfile(cfg, node, "apus.pid", c->pid);
	return 0;
}

int ckpt_restore(const struct apus_config *cfg, int node, const char *id, struct ckpt_info *used,
		 void (*warn)(const char *msg), char *err, size_t errlen)
{
	struct ckpt_info list[CKPT_MAX];
	char why[300], msg[600], root[PATH_MAX];
	int n, tried = 0;
	pid_t running = host_node_pid(cfg, node);

	if (running) {
		seterr(err, errlen, "node %d is running (pid %d): stop it before restoring it", node,
		       (int)running);
		return -1;
	}
	/* CRIU restores whatever the images say, as root: images that
	 * someone else could have written are never restored. */
	if (ckpt_root(cfg, node, root, sizeof(root)) == 0 && access(root, F_OK) == 0 &&
	    filemode_check_path(root, "checkpoint directory", FILEMODE_OTHERS_WRITE, err, errlen))
		return -1;
	n = ckpt_list(cfg, node, list, CKPT_MAX);
	if (n < 0) {
		seterr(err, errlen, "cannot list node %d's checkpoints: %s", node, strerror(errno));
		return -1;
	}
	/* One recovery model: an image and the node's snapshot are two
	 * recovery points, and a restart uses the newer.  An image at or
	 * below the snapshot would bring back an older state (and one whose
	 * entries the log may no longer hold). */
	struct recovery_point snap;
	uint64_t floor = !id && !recovery_peek(cfg, node, &snap) ? snap.index : 0;
	for (int i = 0; i < n; i++) {
		if (id && strcmp(list[i].id, id))
			continue;
		if (floor && list[i].index <= floor) {
			seterr(err, errlen, "node %d's snapshot (entry %llu) is newer than its %s "
			       "checkpoint (entry %llu): a start loads it", node,
			       (unsigned long long)floor, tried ? "newest intact" : "newest",
			       (unsigned long long)list[i].index);
			return -1;
		}
		if (filemode_check_path(list[i].dir, "checkpoint directory", FILEMODE_OTHERS_WRITE,
					err, errlen))
			return -1;
		tried++;
		if (ckpt_verify(&list[i], why, sizeof(why))) {
			snprintf(msg, sizeof(msg), "checkpoint %.63s of node %d is damaged: %.299s%s", list[i].id,
				 node, why, id ? "" : "; trying an older one");
			if (id) {
				seterr(err, errlen, "%s", msg);
				return -1;
			}
			if (warn)
				warn(msg);
			continue;
		}
		if (restore_from(cfg, node, &list[i], err, errlen))
			return -1;
		*used = list[i];
		return 0;
	}
	if (id && !tried)
		seterr(err, errlen, "node %d has no checkpoint %s (see apus checkpoints --node %d)",
		       node, id, node);
	else
		seterr(err, errlen, "node %d has no %scheckpoint to restore from", node,
		       tried ? "intact " : "");
	return -1;
}
