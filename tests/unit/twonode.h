/* A two-node cluster inside one test process: node 1 (backup) and node 0
 * (leader) run their real threads over the real shm transport, with their
 * regions in a temporary directory.  With two nodes the quorum is both, so
 * every proposal that returns is held by the backup too. */
#ifndef APUS_TWONODE_H
#define APUS_TWONODE_H

#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "coordinator/transport/admission.h"
#include "coordinator/node/node_internal.h"
#include "coordinator/storage/region_status.h"
#include "tests/unit/testdir.h"
#include "tests/unit/unit.h"

struct twonode {
	char dir[64];
	struct node *leader, *backup;
};

/* Starts node 1 (backup) and node 0 (leader) of the config at PATH and
 * waits until the leader reached the backup. */
static inline void twonode_start_conf(struct twonode *c, const char *path)
{
	char err[512];

	c->backup = node_start(path, 1, err, sizeof(err));
	CHECK(c->backup, "backup: %s", err);
	/* No server here: let the backup execute (replay finds no listener). */
	__atomic_store_n(&c->backup->status->app_listening, 1, __ATOMIC_RELEASE);
	c->leader = node_start(path, 0, err, sizeof(err));
	CHECK(c->leader, "leader: %s", err);
	for (int i = 0; i < 10000 && !(__atomic_load_n(&c->leader->connected, __ATOMIC_ACQUIRE) & 2);
	     i++)
		usleep(1000);
	CHECK(__atomic_load_n(&c->leader->connected, __ATOMIC_ACQUIRE) & 2, "backup never connected");
}

/* Starts the pair; FSYNC is the policy of both ("none", "batch", "always"),
 * TRANSPORT the backend ("shm", "tcp", "rdma": peers on 127.0.0.1, ports from
 * the pid; a fresh cluster key in the directory). */
static inline void twonode_start_with(struct twonode *c, const char *log_size, const char *max_entry,
				      const char *fsync, const char *transport)
{
	/* Below the ephemeral range, where an outgoing connection may hold a port. */
	int base = 20000 + (int)(getpid() % 6000) * 2;
	char path[128];
	FILE *f;

	strcpy(c->dir, "/tmp/apus-unit-XXXXXX");
	CHECK(mkdtemp(c->dir), "mkdtemp");
	snprintf(path, sizeof(path), "%s/n0", c->dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/n1", c->dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/c.conf", c->dir);
	f = fopen(path, "w");
	CHECK(f, "config");
	fprintf(f, "cluster = unit\nlog_size = %s\nmax_entry = %s\nfsync = %s\ntransport = %s\n"
		   "app_cmd = true\n[node 0]\napp_port = 1\npeer_port = %d\ndata_dir = n0\n"
		   "[node 1]\napp_port = 2\npeer_port = %d\ndata_dir = n1\n", log_size, max_entry,
		fsync, transport, base, base + 1);
	fclose(f);
	/* The cluster key beside the config (the default secret_file). */
	snprintf(path, sizeof(path), "%s/apus.key", c->dir);
	CHECK(admit_key_generate(path) == 1, "key file");
	snprintf(path, sizeof(path), "%s/c.conf", c->dir);
	twonode_start_conf(c, path);
}

static inline void twonode_start_fsync(struct twonode *c, const char *log_size,
				       const char *max_entry, const char *fsync)
{
	twonode_start_with(c, log_size, max_entry, fsync, "shm");
}

static inline void twonode_start(struct twonode *c, const char *log_size, const char *max_entry)
{
	twonode_start_with(c, log_size, max_entry, "none", "shm");
}

/* Waits until the backup applied everything the leader proposed. */
static inline void twonode_settle(struct twonode *c)
{
	for (int i = 0; i < 10000 && __atomic_load_n(&c->backup->exec.applied, __ATOMIC_ACQUIRE) <
					       c->leader->lead.last_idx; i++)
		usleep(1000);
	CHECK(__atomic_load_n(&c->backup->exec.applied, __ATOMIC_ACQUIRE) ==
		      c->leader->lead.last_idx,
	      "backup applied %llu of %llu", (unsigned long long)c->backup->exec.applied,
	      (unsigned long long)c->leader->lead.last_idx);
}

/* Stopped nodes: node_stop leaves a node's memory and mappings (a
 * transport has no close yet), kept here so they are not leaks. */
static struct node *twonode_stopped[32];
static int twonode_nstopped;

/* Stops both nodes' threads: nothing of this pair runs when the next one
 * starts. */
static inline void twonode_stop(struct twonode *c)
{
	CHECK(node_stop(c->leader, 5000) == 0, "the leader's threads did not stop");
	CHECK(node_stop(c->backup, 5000) == 0, "the backup's threads did not stop");
	if (twonode_nstopped + 2 <= 32) {
		twonode_stopped[twonode_nstopped++] = c->leader;
		twonode_stopped[twonode_nstopped++] = c->backup;
	}
}

/* twonode_stop, then removes their files. */
static inline void twonode_cleanup(struct twonode *c)
{
	twonode_stop(c);
	if (testdir_remove(c->dir) != 0)
		fprintf(stderr, "cannot remove %s\n", c->dir);
}

/* Calls FN for every entry between log positions FROM and TO of N's log. */
static inline void twonode_walk(struct node *n, uint64_t from, uint64_t to,
			 void (*fn)(struct node *, uint64_t pos, const struct entry_hdr *, void *),
			 void *arg)
{
	while (from < to) {
		if (!log_pos_marker_fits(n->log_size, from)) {
			from = log_pos_next_lap(n->log_size, from);
			continue;
		}
		const struct entry_hdr *e = (const void *)(n->log + from % n->log_size);
		if (e->type == ENTRY_WRAP) {
			from = log_pos_next_lap(n->log_size, from);
			continue;
		}
		fn(n, from, e, arg);
		from += entry_size(e->data_sz);
	}
}

struct twonode_cmp {
	struct node *backup;
	int compared;
};

/* A twonode_walk() visitor: the entry at POS is whole in the leader's log
 * and byte-identical at the same offset in the backup's. */
static inline void twonode_same_on_backup(struct node *leader, uint64_t pos,
					  const struct entry_hdr *e, void *arg)
{
	struct twonode_cmp *cmp = arg;
	size_t off = pos % leader->log_size, len = entry_canary_off(e->data_sz) + 8;

	CHECK(entry_check(e, e->idx, leader->log_size - off), "leader entry %llu broken",
	      (unsigned long long)e->idx);
	CHECK(!memcmp(leader->log + off + ENTRY_REPLICATED_OFF,
		      cmp->backup->log + off + ENTRY_REPLICATED_OFF, len - ENTRY_REPLICATED_OFF),
	      "entry %llu differs at offset %zu", (unsigned long long)e->idx, off);
	cmp->compared++;
}

/* Wrap-around: ENTRIES entries of random sizes (rand()) through the pair's
 * log, which must wrap many times.  Every entry sits at the same offset,
 * byte for byte, in the leader's log and the backup's, and the backup
 * applies all of them. */
static inline void twonode_wrap(struct twonode *c, int entries)
{
	static char buf[6000];
	struct twonode_cmp cmp = { c->backup, 0 };

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)rand();
	for (int i = 0; i < entries; i++) {
		size_t len = (size_t)rand() % 3000 + 1;
		struct iovec iov = { buf + rand() % 1000, len };
		uint64_t before = c->leader->lead.tail;

		CHECK(node_propose(c->leader, ENTRY_RECV, 0, (struct viewstamp){ 0, 1u << 30 }, &iov, 1,
				   len, NULL) == 0, "propose %d", i);
		twonode_walk(c->leader, before, c->leader->lead.tail, twonode_same_on_backup, &cmp);
	}
	CHECK(c->leader->lead.tail > 20 * c->leader->log_size,
	      "only %llu bytes: the log did not wrap enough",
	      (unsigned long long)c->leader->lead.tail);
	CHECK(cmp.compared == entries, "compared %d of %d", cmp.compared, entries);
	twonode_settle(c);
}

#endif
