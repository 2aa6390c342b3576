/* shm backend: replicas on one host.  A peer's region is its region file,
 * mapped MAP_SHARED; a write is a copy followed by a release store of the
 * last word, the doorbell is a futex in the peer's control page. */
#define LOG_PREFIX "shm: "
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "futex.h"
#include "logger.h"
#include "region.h"
#include "transport.h"

struct shm_peer {
	char *base;		/* atomic: other threads may be writing through it */
	size_t size;
	ino_t ino;		/* the region file we mapped: a restarted peer makes a new one */
	char *retired;		/* the mapping before a disconnection, unmapped later */
	uint64_t retired_ns;
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

	if (!s)
		return -ENOMEM;
	s->t.ops = &transport_shm_ops;
	s->cfg = cfg;
	s->self = self;
	s->local = region;
	s->local_size = size;
	*out = &s->t;
	return 0;
}

/* The region's owner is alive: a region file left by a dead process is
 * not a peer. */
static int owner_alive(const struct region_ctl *ctl)
{
	pid_t pid = (pid_t)ctl->status.pid;

	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

static int shm_connect(struct transport *t, int peer)
{
	struct shm_transport *s = SHM(t);
	size_t want = region_size_for(s->cfg->log_size);
	char path[PATH_MAX];
	struct region_ctl *ctl;
	struct stat st;
	void *m;
	int fd;

	if (peer_base(&s->peers[peer]))
		return 0;
	if (config_node_path(s->cfg, peer, REGION_FILE, path, sizeof(path)))
		return -ENAMETOOLONG;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -EAGAIN : -errno;
	if (fstat(fd, &st) < 0 || (size_t)st.st_size != want) {
		close(fd);
		return -EAGAIN;
	}
	m = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -errno;
	ctl = m;
	/* Pairs with the release store of magic in region_create(). */
	if (load64(&ctl->magic) != REGION_MAGIC || ctl->log_size != s->cfg->log_size ||
	    ctl->node != (uint32_t)peer || !owner_alive(ctl)) {
		munmap(m, want);
		return -EAGAIN;
	}
	s->peers[peer].size = want;
	s->peers[peer].ino = st.st_ino;
	/* Pairs with the acquire load in peer_base(). */
	__atomic_store_n(&s->peers[peer].base, (char *)m, __ATOMIC_RELEASE);
	return 0;
}

/* Another thread may be in the middle of a write through the mapping:
 * it is retired, and unmapped only once it has been retired long enough. */
static void shm_disconnect(struct shm_peer *p)
{
	uint64_t now = now_ns();

	if (p->retired && now - p->retired_ns > RETIRE_NS) {
		munmap(p->retired, p->size);
		p->retired = NULL;
	}
	if (!p->retired) {
		p->retired = p->base;
		p->retired_ns = now;
	}	/* else: two restarts within a second; the older mapping is kept for good */
	__atomic_store_n(&p->base, NULL, __ATOMIC_RELEASE);
}

static int shm_check(struct transport *t, int peer)
{
	struct shm_transport *s = SHM(t);
	struct shm_peer *p = &s->peers[peer];
	char path[PATH_MAX];
	struct stat st;

	if (!peer_base(p))
		return -ENOTCONN;
	if (config_node_path(s->cfg, peer, REGION_FILE, path, sizeof(path)) == 0 &&
	    stat(path, &st) == 0 && st.st_ino == p->ino && owner_alive(ctl_of(p->base)))
		return 0;
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
	return 0;
}

static void shm_ring(struct transport *t, int peer)
{
	char *base = peer_base(&SHM(t)->peers[peer]);

	if (base)
		bell_ring(&ctl_of(base)->bell, &ctl_of(base)->sleepers);
}

static int shm_poll(struct transport *t)
{
	(void)t;
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

static int shm_fence(struct transport *t, int peer)
{
	(void)t;
	(void)peer;
	/* Peers write straight into our file mapping; fencing needs a new
	 * region incarnation and comes with leader election. */
	return -ENOTSUP;
}

static void shm_close(struct transport *t)
{
	struct shm_transport *s = SHM(t);

	for (int i = 0; i < APUS_MAX_NODES; i++) {
		if (s->peers[i].base)
			munmap(s->peers[i].base, s->peers[i].size);
		if (s->peers[i].retired)
			munmap(s->peers[i].retired, s->peers[i].size);
	}
	free(s);
}

const struct transport_ops transport_shm_ops = {
	.name = "shm",
	.open = shm_open_ep,
	.connect = shm_connect,
	.connected = shm_connected,
	.check = shm_check,
	.write = shm_write,
	.ring = shm_ring,
	.poll = shm_poll,
	.bell = shm_bell,
	.wait = shm_wait,
	.wake = shm_wake,
	.fence = shm_fence,
	.close = shm_close,
};
