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
#include <unistd.h>

#include "futex.h"
#include "logger.h"
#include "region.h"
#include "transport.h"

struct shm_peer {
	char *base;
	size_t size;
	ino_t ino;		/* the region file we mapped: a restarted peer makes a new one */
};

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

	if (s->peers[peer].base)
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
	s->peers[peer].base = m;
	s->peers[peer].size = want;
	s->peers[peer].ino = st.st_ino;
	return 0;
}

static void shm_disconnect(struct shm_peer *p)
{
	munmap(p->base, p->size);
	p->base = NULL;
}

static int shm_check(struct transport *t, int peer)
{
	struct shm_transport *s = SHM(t);
	struct shm_peer *p = &s->peers[peer];
	char path[PATH_MAX];
	struct stat st;

	if (!p->base)
		return -ENOTCONN;
	if (config_node_path(s->cfg, peer, REGION_FILE, path, sizeof(path)) == 0 &&
	    stat(path, &st) == 0 && st.st_ino == p->ino && owner_alive(ctl_of(p->base)))
		return 0;
	shm_disconnect(p);
	return -ECONNRESET;
}

static int shm_connected(struct transport *t, int peer)
{
	return SHM(t)->peers[peer].base != NULL;
}

static int shm_write(struct transport *t, int peer, uint64_t off, const void *buf, size_t len)
{
	struct shm_peer *p = &SHM(t)->peers[peer];

	if (!p->base)
		return -ENOTCONN;
	if (off > p->size || len > p->size - off)
		return -ERANGE;
	if (len >= 8 && !(off & 7) && !(len & 7)) {
		memcpy(p->base + off, buf, len - 8);
		uint64_t last;
		memcpy(&last, (const char *)buf + len - 8, 8);
		/* Pairs with the reader's acquire load of this word (the canary,
		 * or a control word). */
		__atomic_store_n((uint64_t *)(p->base + off + len - 8), last, __ATOMIC_RELEASE);
	} else {
		__atomic_thread_fence(__ATOMIC_RELEASE);
		memcpy(p->base + off, buf, len);
	}
	return 0;
}

static void shm_ring(struct transport *t, int peer)
{
	struct shm_peer *p = &SHM(t)->peers[peer];

	if (p->base)
		bell_ring(&ctl_of(p->base)->bell, &ctl_of(p->base)->sleepers);
}

static int shm_poll(struct transport *t)
{
	(void)t;
	return 0;
}

static uint32_t shm_bell(struct transport *t)
{
	return __atomic_load_n(&ctl_of(SHM(t)->local)->bell, __ATOMIC_SEQ_CST);
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

	for (int i = 0; i < APUS_MAX_NODES; i++)
		if (s->peers[i].base)
			shm_disconnect(&s->peers[i]);
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
