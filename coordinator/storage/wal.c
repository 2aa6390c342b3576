#define LOG_PREFIX "wal: "
#include "coordinator/storage/wal.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "common/logger.h"
#include "coordinator/storage/region.h"
#include "coordinator/storage/region_wire.h"
#include "common/sys.h"

/* Copies LEN bytes (a multiple of 8) of the region at SRC into BUF.
 * Other threads and peers keep writing the region (acks, status words,
 * the next entries) with plain stores, as peers in other processes do:
 * this is a snapshot by design (whatever changes later and must be
 * durable is persisted again), so it is hidden from ThreadSanitizer. */
__attribute__((no_sanitize_thread))
static void snapshot(uint64_t *buf, const volatile uint64_t *src, size_t len)
{
	for (size_t i = 0; i < len / 8; i++)
		buf[i] = src[i];
}

/* Writes region bytes [OFF, OFF+LEN) (8-byte aligned: entries are) at the
 * same offset of the copy, through a bounce buffer. */
static int put(struct wal *w, size_t off, size_t len)
{
	uint64_t buf[4096];

	while (len) {
		size_t chunk = len < sizeof(buf) ? len : sizeof(buf), done = 0;

		snapshot(buf, (const volatile uint64_t *)(const void *)(w->region + off), chunk);
		while (done < chunk) {
			ssize_t k = pwrite(w->fd, (char *)buf + done, chunk - done, (off_t)(off + done));

			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0)
				return -1;
			done += (size_t)k;
		}
		off += chunk;
		len -= chunk;
	}
	return 0;
}

/* Log positions [LO, HI) into the copy (two writes when they wrap). */
static int put_log(struct wal *w, uint64_t lo, uint64_t hi)
{
	uint64_t a, b;

	if (hi - lo >= w->log_size)
		return put(w, REGION_CTL_SIZE, w->log_size);
	a = lo % w->log_size;
	b = a + (hi - lo);
	if (b <= w->log_size)
		return put(w, REGION_CTL_SIZE + a, b - a);
	return put(w, REGION_CTL_SIZE + a, w->log_size - a) ||
	       put(w, REGION_CTL_SIZE, b - w->log_size);
}

static void sync_copy(struct wal *w)
{
	if (fdatasync(w->fd) < 0)
		pr_perror("cannot sync the durable copy of the log");
}

/* Copies the log chunks that hold anything into an emptied copy (a fresh
 * log is mostly zeros, and the copy stays sparse there). */
static int put_nonzero_log(struct wal *w)
{
	static const char zero[65536];

	for (uint64_t at = 0; at < w->log_size; at += sizeof(zero)) {
		size_t len = w->log_size - at < sizeof(zero) ? w->log_size - at : sizeof(zero);

		if (memcmp(w->region + REGION_CTL_SIZE + at, zero, len) &&
		    put(w, REGION_CTL_SIZE + at, len))
			return -1;
	}
	return 0;
}

/* The region's durable words now. */
static void words_now(const struct wal *w, struct wal_words *out)
{
	const struct region_ctl *ctl = (const struct region_ctl *)(const void *)w->region;

	_Static_assert(sizeof(*out) % 8 == 0 &&
			       offsetof(struct region_ctl, hint) ==
				       offsetof(struct region_ctl, dur) + sizeof(struct durable),
		       "the durable words are one aligned run");
	snapshot((uint64_t *)(void *)out, (const volatile uint64_t *)(const void *)&ctl->dur,
		 sizeof(*out));
}

int wal_open(struct wal *w, const struct apus_config *cfg, int node, const char *region,
	     const struct region_origin *origin)
{
	char path[PATH_MAX];
	size_t size = region_size_for(cfg->log_size);
	int err;

	memset(w, 0, sizeof(*w));
	w->fd = -1;
	w->policy = cfg->fsync;
	w->region = region;
	w->log_size = cfg->log_size;
	w->lo = UINT64_MAX;
	pthread_mutex_init(&w->lock, NULL);
	if (config_node_path(cfg, node, WAL_FILE, path, sizeof(path)))
		return -ENAMETOOLONG;
	if (!origin->in_memory || cfg->fsync == FSYNC_NONE) {
		/* Nothing keeps it up to date from now on: never recover from it. */
		if (unlink(path) < 0 && errno != ENOENT)
			pr_perror("cannot remove the stale %s", path);
		return 0;
	}
	w->fd = sys.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (w->fd < 0) {
		err = -errno;
		pr_perror("cannot open %s", path);
		return err;
	}
	words_now(w, &w->saved);	/* before the page is written: see save_ctl */
	/* Recovered from this copy: it already holds the log.  Otherwise it
	 * starts empty and takes what the region holds. */
	if ((!origin->from_wal && ftruncate(w->fd, 0) < 0) || ftruncate(w->fd, (off_t)size) < 0 ||
	    (!origin->from_wal && origin->recovered && put_nonzero_log(w)) ||
	    put(w, 0, REGION_CTL_SIZE) || fdatasync(w->fd) < 0) {
		err = errno ? -errno : -EIO;
		pr_perror("cannot write %s", path);
		sys.close(w->fd);
		w->fd = -1;
		return err;
	}
	return 0;
}

void wal_persist(struct wal *w, uint64_t pos, size_t len)
{
	if (w->policy == FSYNC_ALWAYS) {
		if (put_log(w, pos, pos + len))
			pr_perror("cannot write the log's durable copy");
		sync_copy(w);
		return;
	}
	pthread_mutex_lock(&w->lock);
	if (pos < w->lo)
		w->lo = pos;
	if (pos + len > w->hi)
		w->hi = pos + len;
	pthread_mutex_unlock(&w->lock);
}

/* The words are taken before the page is written: one that changes
 * meanwhile differs from SAVED, and the next pass writes it again. */
static void save_ctl(struct wal *w, const struct wal_words *words)
{
	if (put(w, 0, REGION_CTL_SIZE))
		pr_perror("cannot write the durable words' copy");
	sync_copy(w);
	pthread_mutex_lock(&w->lock);
	w->saved = *words;
	pthread_mutex_unlock(&w->lock);
}

void wal_save_ctl(struct wal *w)
{
	struct wal_words words;

	words_now(w, &words);
	save_ctl(w, &words);
}

void wal_pass(struct wal *w)
{
	struct wal_words words;
	uint64_t lo, hi;
	int same;

	/* Bytes persisted after we took the range are in the next pass; an
	 * entry rewritten at the same place (log repair) is persisted again. */
	words_now(w, &words);
	pthread_mutex_lock(&w->lock);
	lo = w->lo;
	hi = w->hi;
	w->lo = UINT64_MAX;
	w->hi = 0;
	same = !memcmp(&words, &w->saved, sizeof(words));
	pthread_mutex_unlock(&w->lock);
	if (hi <= lo && same)
		return;
	if (hi > lo && put_log(w, lo, hi))
		pr_perror("cannot write the log's durable copy");
	save_ctl(w, &words);
}
