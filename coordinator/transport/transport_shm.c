/* shm backend: replicas on one host.  A peer's region is its region file,
 * mapped MAP_SHARED; a write is a copy followed by a release store of the
 * last word, the doorbell is a futex in the peer's control page.
 *
 * Fencing.  Peers copy straight into our file mapping, so the only way to
 * refuse a peer's writes is to take the file away from it: fence() builds
 * a copy of our region with fenced_inc[peer] set, renames it over our
 * region path and maps it in place of the old one (same address, same
 * incarnation).  The fenced process, if it ever runs again, writes into the
 * old file, which nobody reads any more; its check() finds the new file
 * refusing it and its connect() is refused.  Every other peer's check()
 * finds a new file of the same incarnation and follows it silently.  A
 * restart of the fenced node has a new incarnation and is admitted. */
#define LOG_PREFIX "shm: "
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/atomic64.h"
#include "common/clock.h"
#include "common/futex.h"
#include "common/logger.h"
#include "coordinator/storage/region.h"
#include "coordinator/storage/region_status.h"
#include "coordinator/storage/region_wire.h"
#include "common/sys.h"
#include "coordinator/transport/transport.h"

/* Mappings retired and not yet unmapped, per peer: a peer may swap its
 * file (fencing) or restart more than once within RETIRE_NS. */
#define RETIRED_MAX 4

struct shm_peer {
	char *base;		/* atomic: other threads may be writing through it */
	size_t size;
	ino_t ino;		/* the region file we mapped: a restarted peer makes a new one */
	char *retired[RETIRED_MAX];	/* earlier mappings, unmapped later */
	uint64_t retired_ns[RETIRED_MAX];
	int refused;		/* the peer fenced us: said once */
	uint64_t inc;		/* the peer's incarnation we last reached (0: never) */
	uint64_t stamp_seen;	/* its status stamp at our last check (owner_ran) */
};

/* How long a retired mapping stays: longer than any write in flight. */
#define RETIRE_NS (1000 * 1000000ULL)

static char *peer_base(struct shm_peer *p)
{
	return __atomic_load_n(&p->base, __ATOMIC_ACQUIRE);
}

struct shm_transport {
	struct transport t;
	const struct apus_config *cfg;
	int self;
	char *local;
	size_t local_size;
	/* The file behind LOCAL, which fence() replaces (0: none found). */
	dev_t local_dev;
	ino_t local_ino;
	struct shm_peer peers[APUS_MAX_NODES];
};

#define SHM(t) ((struct shm_transport *)(t))

static struct region_ctl *ctl_of(char *base)
{
	return (struct region_ctl *)base;
}

static int shm_open_ep(const struct apus_config *cfg, int self, void *region, size_t size,
		       struct transport **out)
{
	struct shm_transport *s = calloc(1, sizeof(*s));
	char path[PATH_MAX];
	struct stat st;

	if (!s)
		return -ENOMEM;
	s->t.ops = &transport_shm_ops;
	s->cfg = cfg;
	s->self = self;
	s->local = region;
	s->local_size = size;
	/* REGION is the mapping of this file (region_create() just put it
	 * there); fence() checks it still is before replacing it. */
	if (config_node_path(cfg, self, REGION_FILE, path, sizeof(path)) == 0 &&
	    stat(path, &st) == 0) {
		s->local_dev = st.st_dev;
		s->local_ino = st.st_ino;
	}
	*out = &s->t;
	return 0;
}

/* The region's owner is alive: a region file left by a dead process is
 * not a peer.  A killed process stays a zombie until its parent (often a
 * slow PID 1) reaps it: that counts as dead, so failover need not wait. */
static int owner_alive(const struct region_ctl *ctl)
{
	pid_t pid = (pid_t)region_status(ctl)->pid;
	char path[64], buf[256], *paren;
	ssize_t k;
	int fd;

	if (pid <= 0 || (kill(pid, 0) < 0 && errno != EPERM))
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = sys.open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;	/* no /proc: trust kill() */
	k = sys.read(fd, buf, sizeof(buf) - 1);
	sys.close(fd);
	if (k <= 0)
		return 1;
	buf[k] = '\0';
	/* "pid (comm) S ...": the state follows the last ')'. */
	paren = strrchr(buf, ')');
	return !(paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'));
}

/* The owner of P's region (control page CTL) wrote its status stamp since
 * our last check: it ran after that check, so kill() and /proc need not
 * be asked (four system calls a peer a check: what an idle leader spent
 * most of its calls on).  An owner that stopped writing (dead, a zombie,
 * stopped) is asked at the next check, at most one check later than
 * before.  Its status is written into the file it runs on: one that
 * restarted or swapped its file writes into another, which stat() tells. */
static int owner_ran(struct shm_peer *p, const struct region_ctl *ctl)
{
	uint64_t stamp = load64(&region_status(ctl)->updated_ms);

	if (stamp == p->stamp_seen)
		return 0;
	p->stamp_seen = stamp;
	return 1;
}

/* PEER's region (control page CTL) refuses this incarnation of ours. */
static int fenced_by(struct shm_transport *s, const struct region_ctl *ctl)
{
	uint64_t inc = ctl_of(s->local)->incarnation;

	return inc && load64(&ctl->fenced_inc[s->self]) == inc;
}

/* Maps the region file now at PEER's path.  Returns 0 with *MP and *INO
 * set, -EAGAIN if there is no live region of PEER there (yet), or -errno. */
static int map_peer(struct shm_transport *s, int peer, char **mp, ino_t *ino)
{
	size_t want = region_size_for(s->cfg->log_size);
	char path[PATH_MAX];
	struct region_ctl *ctl;
	struct stat st;
	void *m;
	int fd;

	if (config_node_path(s->cfg, peer, REGION_FILE, path, sizeof(path)))
		return -ENAMETOOLONG;
	fd = sys.open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -EAGAIN : -errno;
	if (fstat(fd, &st) < 0 || (size_t)st.st_size != want) {
		sys.close(fd);
		return -EAGAIN;
	}
	m = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		int err = -errno;
		sys.close(fd);
		return err;
	}
	ctl = m;
	/* Pairs with the release store of magic in region_create(). */
	if (load64(&ctl->magic) != REGION_MAGIC || ctl->log_size != s->cfg->log_size ||
	    ctl->node != (uint32_t)peer || !owner_alive(ctl)) {
		munmap(m, want);
		sys.close(fd);
		return -EAGAIN;
	}
	region_prefault(fd, m, want);
	sys.close(fd);
	*mp = m;
	*ino = st.st_ino;
	return 0;
}

/* Returns 0 connected, -EAGAIN not yet, -EACCES if PEER fenced this
 * incarnation of ours (it never admits it again: only a restart of this
 * node, with a new incarnation, is), or another -errno. */
static int shm_connect(struct transport *t, int peer)
{
	struct shm_transport *s = SHM(t);
	struct shm_peer *p = &s->peers[peer];
	char *m;
	ino_t ino;
	int rc;

	if (peer_base(p))
		return 0;
	rc = map_peer(s, peer, &m, &ino);
	if (rc)
		return rc;
	if (fenced_by(s, ctl_of(m))) {
		munmap(m, region_size_for(s->cfg->log_size));
		if (!p->refused)
			pr_warn("node %d fenced this incarnation of node %d: it takes no writes from it",
				peer, s->self);
		p->refused = 1;
		return -EACCES;
	}
	p->refused = 0;
	p->size = region_size_for(s->cfg->log_size);
	p->ino = ino;
	p->inc = ctl_of(m)->incarnation;
	/* Pairs with the acquire load in peer_base(). */
	__atomic_store_n(&p->base, m, __ATOMIC_RELEASE);
	return 0;
}

/* Unmaps P's retired mappings once no write can be in flight through
 * them.  Left mapped, a peer's replaced region file (it restarted, or
 * fenced someone) is a deleted file this process still maps: a CRIU dump
 * of it must then copy the whole file into the image (a ghost file). */
static void shm_reap(struct shm_peer *p)
{
	uint64_t now = now_ns();

	for (int i = 0; i < RETIRED_MAX; i++)
		if (p->retired[i] && now - p->retired_ns[i] > RETIRE_NS) {
			munmap(p->retired[i], p->size);
			p->retired[i] = NULL;
		}
}

/* Takes mapping M out of use: another thread may be in the middle of a
 * write through it, so it is unmapped only once retired for RETIRE_NS. */
static void shm_retire(struct shm_peer *p, char *m)
{
	int slot = -1;

	shm_reap(p);
	for (int i = 0; i < RETIRED_MAX; i++)
		if (!p->retired[i] && slot < 0)
			slot = i;
	if (slot >= 0) {
		p->retired[slot] = m;
		p->retired_ns[slot] = now_ns();
	}	/* else: that many restarts or swaps within a second; M is kept for good */
}

static void shm_disconnect(struct shm_peer *p)
{
	char *m = p->base;

	__atomic_store_n(&p->base, NULL, __ATOMIC_RELEASE);
	shm_retire(p, m);
}

/* 0: still the incarnation we reached (which may have swapped its file);
 * -ECONNRESET: it restarted or died, or fenced us, which to the protocol
 * is a lost peer too. */
static int shm_check(struct transport *t, int peer)
{
	struct shm_transport *s = SHM(t);
	struct shm_peer *p = &s->peers[peer];
	char path[PATH_MAX], *base = peer_base(p), *m;
	struct stat st;
	ino_t ino;

	if (!base)
		return -ENOTCONN;
	if (config_node_path(s->cfg, peer, REGION_FILE, path, sizeof(path)) ||
	    stat(path, &st) < 0)
		goto reset;
	if (st.st_ino == p->ino) {
		if (owner_ran(p, ctl_of(base)) || owner_alive(ctl_of(base)))
			return 0;
		goto reset;
	}
	/* Another file.  Of another incarnation: PEER restarted.  Of the same
	 * one: PEER swapped its file to fence some node, and unless that node
	 * is us we follow it there (what we wrote since the swap into the old
	 * file is lost: see swap_region()). */
	if (map_peer(s, peer, &m, &ino))
		goto reset;
	if (ctl_of(m)->incarnation != ctl_of(base)->incarnation) {
		munmap(m, p->size);
		goto reset;
	}
	if (fenced_by(s, ctl_of(m))) {
		munmap(m, p->size);
		pr_warn("node %d fenced this incarnation of node %d: it takes no writes from it",
			peer, s->self);
		p->refused = 1;
		goto reset;
	}
	p->ino = ino;
	__atomic_store_n(&p->base, m, __ATOMIC_RELEASE);
	shm_retire(p, base);
	return 0;
reset:
	shm_disconnect(p);
	return -ECONNRESET;
}

static int shm_connected(struct transport *t, int peer)
{
	return peer_base(&SHM(t)->peers[peer]) != NULL;
}

static int shm_write(struct transport *t, int peer, uint64_t off, const void *buf, size_t len)
{
	struct shm_peer *p = &SHM(t)->peers[peer];
	char *base = peer_base(p);

	if (!base)
		return -ENOTCONN;
	if (off > p->size || len > p->size - off)
		return -ERANGE;
	if (len >= 8 && !(off & 7) && !(len & 7)) {
		memcpy(base + off, buf, len - 8);
		uint64_t last;
		memcpy(&last, (const char *)buf + len - 8, 8);
		/* Pairs with the reader's acquire load of this word (the canary,
		 * or a control word). */
		__atomic_store_n((uint64_t *)(base + off + len - 8), last, __ATOMIC_RELEASE);
	} else if (len) {
		/* Unaligned or short: the last byte is released last instead. */
		memcpy(base + off, buf, len - 1);
		__atomic_store_n(base + off + len - 1, ((const char *)buf)[len - 1],
				 __ATOMIC_RELEASE);
	}
	status_add(&region_status(ctl_of(SHM(t)->local))->sent_bytes[peer], len);
	return 0;
}

static void shm_ring(struct transport *t, int peer)
{
	char *base = peer_base(&SHM(t)->peers[peer]);

	if (base)
		bell_ring(&ctl_of(base)->bell, &ctl_of(base)->sleepers);
}

/* On the role thread, every pass of its loop: the one thread that
 * retires mappings, so the only one that may unmap them. */
static int shm_poll(struct transport *t)
{
	struct shm_transport *s = SHM(t);

	for (int i = 0; i < s->cfg->nnodes; i++)
		shm_reap(&s->peers[i]);
	return 0;
}

static uint32_t shm_bell(struct transport *t)
{
	return region_bell(ctl_of(SHM(t)->local));
}

static void shm_wait(struct transport *t, uint32_t seen, int timeout_us)
{
	struct region_ctl *c = ctl_of(SHM(t)->local);

	bell_wait(&c->bell, &c->sleepers, seen, timeout_us);
}

static void shm_wake(struct transport *t)
{
	struct region_ctl *c = ctl_of(SHM(t)->local);

	bell_ring(&c->bell, &c->sleepers);
}

/* Whether the process of CTL may still write as a leader: it leads, or
 * leads no more but has not re-executed yet.  A deposed leader comes back
 * as a new incarnation that starts as a backup, and may reach us before
 * we fence the old one: fencing that one would keep it out for good. */
static int may_lead(const struct region_ctl *ctl)
{
	int32_t role = __atomic_load_n(&region_status(ctl)->role, __ATOMIC_ACQUIRE);

	return role == ROLE_LEADER || role == ROLE_DEPOSED;
}

/* The incarnation of PEER to fence: the one we reached if we are
 * connected, else the one whose region file is there now.  Returns 0 with
 * *INC = 0 when that process is not running (a dead process writes
 * nothing: the common case, a killed leader), or -errno. */
static int fence_target(struct shm_transport *s, int peer, uint64_t *inc)
{
	char *base = peer_base(&s->peers[peer]);
	const struct region_ctl *ctl;

	*inc = 0;
	if (base) {
		if (owner_alive(ctl_of(base)) && may_lead(ctl_of(base)))
			*inc = ctl_of(base)->incarnation;
		return 0;
	}
	ctl = region_map_ctl(s->cfg, peer);
	if (!ctl)
		return errno == ENOENT || errno == EINVAL ? 0 : -errno;
	/* The process we knew, if it still runs.  One that restarted since
	 * (a deposed leader re-executes itself as a backup) is not the one to
	 * stop: fencing it would keep it out for good. */
	if (ctl->node == (uint32_t)peer && owner_alive(ctl) && may_lead(ctl) &&
	    (!s->peers[peer].inc || ctl->incarnation == s->peers[peer].inc))
		*inc = ctl->incarnation;
	region_unmap_ctl(ctl);
	return 0;
}

/* Copies bytes [FROM, TO) of file IN to the same offsets of OUT. */
static int copy_range(int in, int out, off_t from, off_t to)
{
	static const size_t chunk = 1 << 20;
	char *buf = NULL;

	while (from < to) {
		off64_t a = from, b = from;
		ssize_t k = copy_file_range(in, &a, out, &b, (size_t)(to - from), 0);

		if (k <= 0) {
			if (k == 0)
				return -EIO;	/* IN is shorter than it said */
			if (errno != EXDEV && errno != EINVAL && errno != ENOSYS &&
			    errno != EOPNOTSUPP)
				return -errno;
			break;	/* no in-kernel copy here: through a buffer */
		}
		from += k;
	}
	if (from < to && !(buf = malloc(chunk)))
		return -ENOMEM;
	while (from < to) {
		size_t len = (size_t)(to - from) < chunk ? (size_t)(to - from) : chunk;
		ssize_t k;

		errno = 0;
		k = pread(in, buf, len, from);
		if (k <= 0 || pwrite(out, buf, (size_t)k, from) != k) {
			int err = errno ? errno : EIO;	/* 0: end of file, or a short write */

			free(buf);
			return -err;
		}
		from += k;
	}
	free(buf);
	return 0;
}

/* Copies the SIZE bytes of file IN to OUT, data extents only: the holes
 * of a mostly empty log stay holes in the copy. */
static int copy_extents(int in, int out, off_t size)
{
	off_t pos = 0;

	while (pos < size) {
		off_t data = lseek(in, pos, SEEK_DATA), hole;
		int rc;

		if (data < 0 && errno == ENXIO)
			break;	/* nothing but a hole is left */
		if (data < 0) {
			data = pos;	/* no SEEK_DATA here: all of it */
			hole = size;
		} else {
			hole = lseek(in, data, SEEK_HOLE);
			if (hole < 0 || hole > size)
				hole = size;
		}
		rc = copy_range(in, out, data, hole);
		if (rc)
			return rc;
		pos = hole;
	}
	return 0;
}

/* Points every descriptor of this process still open on the file OLD at
 * file descriptor FD instead: the node keeps its region file open for
 * fdatasync() (fsync = batch), which must go on syncing the file we map. */
static void repoint_fds(const struct stat *old, int fd)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	if (!d) {
		pr_perror("cannot list /proc/self/fd: syncing the region may go to the old file");
		return;
	}
	while ((e = readdir(d))) {
		int k = atoi(e->d_name), flags;
		struct stat st;

		if (e->d_name[0] == '.' || k == dirfd(d) || k == fd || fstat(k, &st) < 0 ||
		    st.st_dev != old->st_dev || st.st_ino != old->st_ino)
			continue;
		flags = fcntl(k, F_GETFD);
		if (dup3(fd, k, flags >= 0 && (flags & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0)
			pr_perror("cannot point descriptor %d at the new region file", k);
	}
	closedir(d);
}

/* Replaces our region file with a copy that refuses incarnation INC of
 * PEER, and maps the copy where the old file was.
 *
 * What peers write into the old file after it was copied is lost: the
 * fence comes with an election, when the only messages in flight are
 * election messages, which candidates and voters repeat until answered;
 * a write racing with the swap and landing in the old file is harmless by
 * design.  What other threads of ours write into the region between its
 * copy and the remap is lost too (the control page is copied last, so for
 * it that is microseconds; for the log, the whole copy): the caller must
 * not have them writing the region meanwhile.  A thread asleep on our
 * doorbell is woken (the futex word moves with the file). */
static int swap_region(struct shm_transport *s, int peer, uint64_t inc)
{
	char path[PATH_MAX], tmp[PATH_MAX + 32];
	union {
		struct region_ctl c;
		char b[REGION_CTL_SIZE];
	} page;
	struct stat st, nst;
	int in = -1, out = -1, rc = 0;
	void *m;

	/* The file itself, not <data_dir>/apus.region linking to it. */
	rc = region_backing_path(s->cfg, s->self, path);
	if (rc)
		return rc;
	snprintf(tmp, sizeof(tmp), "%s.%d.fence", path, (int)getpid());
	in = sys.open(path, O_RDONLY | O_CLOEXEC);
	if (in < 0 || fstat(in, &st) < 0) {
		rc = -errno;
		pr_perror("cannot open our region file %s", path);
		goto out;
	}
	if (st.st_dev != s->local_dev || st.st_ino != s->local_ino ||
	    (size_t)st.st_size != s->local_size) {
		pr_err("%s is not the region file we map: cannot fence node %d", path, peer);
		rc = -ESTALE;
		goto out;
	}
	out = sys.open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0) {
		rc = -errno;
		pr_perror("cannot create %s", tmp);
		goto out;
	}
	/* The copy goes file to file (the mapping's pages are the file's), so
	 * it reads exactly what our mapping shows. */
	if (ftruncate(out, (off_t)s->local_size) < 0) {
		rc = -errno;
		pr_perror("cannot size %s", tmp);
		goto fail;
	}
	rc = copy_extents(in, out, (off_t)s->local_size);
	if (rc) {
		errno = -rc;
		pr_perror("cannot copy our region into %s", tmp);
		goto fail;
	}
	if (s->cfg->fsync != FSYNC_NONE && fdatasync(out) < 0) {
		rc = -errno;
		pr_perror("cannot sync %s", tmp);
		goto fail;
	}
	/* The control page once more, last: our own threads keep updating it
	 * (status, votes).  The fence word goes in before the file has its
	 * name, so no peer ever maps this file without seeing it. */
	if (pread(in, page.b, sizeof(page.b), 0) != (ssize_t)sizeof(page.b)) {
		rc = -EIO;
		pr_err("cannot read back our control page");
		goto fail;
	}
	page.c.fenced_inc[peer] = inc;
	if (pwrite(out, page.b, sizeof(page.b), 0) != (ssize_t)sizeof(page.b) ||
	    (s->cfg->fsync != FSYNC_NONE && fdatasync(out) < 0)) {
		rc = errno ? -errno : -EIO;
		pr_perror("cannot write the control page of %s", tmp);
		goto fail;
	}
	if (rename(tmp, path) < 0) {
		rc = -errno;
		pr_perror("cannot rename %s to %s", tmp, path);
		goto fail;
	}
	/* From here on peers that connect or check find the new file.  Map it
	 * where the old one was: MAP_FIXED replaces the mapping in one step,
	 * so every thread of ours reads and writes the new file from its next
	 * access on, through the same pointers. */
	m = mmap(s->local, s->local_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, out, 0);
	if (m == MAP_FAILED) {
		rc = -errno;
		pr_perror("cannot map the new region file over the old one");
		goto out;
	}
	if (s->cfg->fsync != FSYNC_NONE) {
		int dfd;

		if (config_node_path(s->cfg, s->self, ".", tmp, sizeof(tmp)) == 0 &&
		    (dfd = sys.open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
			if (fsync(dfd) < 0)
				pr_perror("cannot sync %s", tmp);
			sys.close(dfd);
		}
	}
	/* Threads asleep on our doorbell sleep on the old file's word (a
	 * shared futex is keyed by the file's page): wake them. */
	m = mmap(NULL, REGION_CTL_SIZE, PROT_READ, MAP_SHARED, in, 0);
	if (m != MAP_FAILED) {
		futex_wake_all(&ctl_of(m)->bell);
		munmap(m, REGION_CTL_SIZE);
	}
	sys.close(in);
	in = -1;
	repoint_fds(&st, out);
	if (fstat(out, &nst) == 0) {
		s->local_dev = nst.st_dev;
		s->local_ino = nst.st_ino;
	}
	goto out;
fail:
	unlink(tmp);
out:
	if (out >= 0)
		sys.close(out);
	if (in >= 0)
		sys.close(in);
	return rc;
}

/* Stops PEER's current incarnation from writing into our region; see the
 * top of this file.  Our incarnation does not change: we are the same
 * process.  Fencing an incarnation fenced already does nothing. */
static int shm_fence(struct transport *t, int peer)
{
	struct shm_transport *s = SHM(t);
	uint64_t start = now_ns(), inc;
	int rc;

	if (peer < 0 || peer >= s->cfg->nnodes || peer == s->self)
		return -EINVAL;
	rc = fence_target(s, peer, &inc);
	if (rc || !inc)
		return rc;
	if (load64(&ctl_of(s->local)->fenced_inc[peer]) == inc)
		return 0;
	rc = swap_region(s, peer, inc);
	if (rc)
		return rc;
	pr_info("fenced node %d (incarnation %llu): region file swapped in %.2f ms", peer,
		(unsigned long long)inc, (double)(now_ns() - start) / 1e6);
	return 0;
}

static void shm_close(struct transport *t)
{
	struct shm_transport *s = SHM(t);

	for (int i = 0; i < APUS_MAX_NODES; i++) {
		if (s->peers[i].base)
			munmap(s->peers[i].base, s->peers[i].size);
		for (int j = 0; j < RETIRED_MAX; j++)
			if (s->peers[i].retired[j])
				munmap(s->peers[i].retired[j], s->peers[i].size);
	}
	free(s);
}

/* The peer maps our current file; clearing the word lets its next check()
 * or connect() through (its writes to the older file stay lost). */
static void shm_unfence(struct transport *t, int peer)
{
	struct shm_transport *s = SHM(t);
	uint64_t *w = &ctl_of(s->local)->fenced_inc[peer];

	if (load64(w)) {
		store64(w, 0);
		pr_info("node %d: fence lifted", peer);
	}
}

const struct transport_ops transport_shm_ops = {
	.name = "shm",
	.open = shm_open_ep,
	.connect = shm_connect,
	.connected = shm_connected,
	.check = shm_check,
	.write = shm_write,
	.writes_land = 1,
	.ring = shm_ring,
	.poll = shm_poll,
	.bell = shm_bell,
	.wait = shm_wait,
	.wake = shm_wake,
	.fence = shm_fence,
	.unfence = shm_unfence,
	.close = shm_close,
};
