/* One replica: its configuration, region, transport, role and threads.
 * The shim creates exactly one per server process (node_start) and calls
 * node_propose from the server's own threads when it leads. */
#ifndef APUS_NODE_H
#define APUS_NODE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/uio.h>

#include "clock.h"
#include "config.h"
#include "entry.h"
#include "region.h"
#include "transport.h"

struct replay;

struct node {
	struct apus_config cfg;
	int self;
	int quorum;
	int role;		/* enum node_role */
	int leader;
	uint64_t view;

	char *region;
	size_t region_size;
	int region_fd;
	struct region_ctl *ctl;
	char *log;		/* region + ctl->log_off */
	uint64_t log_size;

	struct transport *tp;
	const struct transport_ops *ops;
	int stopping;
	uint64_t spin_ns;	/* how long a wait spins before it sleeps (APUS_SPIN_US) */
	pthread_t thread;	/* leader: heartbeats; backup: agree/ack/execute */
	pthread_t sync_thread;	/* fsync = batch */
	int sync_started;

	/* Leader.  `lock` orders proposals: it covers slot reservation and the
	 * writes to peers, so every backup receives entries in log order. */
	pthread_mutex_t lock;
	uint64_t last_idx;	/* under lock */
	uint64_t tail;		/* under lock: next free log position */
	uint64_t self_acked;	/* atomic: highest index this node persisted */
	uint64_t commit;	/* atomic */
	uint32_t connected;	/* atomic bitmap of peers that receive entries */

	/* Backup. */
	struct replay *replay;
	uint64_t applied;	/* atomic */
};

/* Starts node SELF of the cluster in CONFIG_PATH inside this process.
 * Returns the node (its threads running) or NULL with *ERR describing why. */
struct node *node_start(const char *config_path, int self, char *err, size_t errlen);

/* Leader: replicates one inbound event and returns once a majority holds it.
 * ACCEPT names a new connection (CONN is ignored; the entry's viewstamp is
 * returned in *VS); RECV carries LEN bytes from IOV; CLOSE ends CONN.
 * Returns 0, or -EPERM when this node does not lead. */
int node_propose(struct node *n, int type, struct viewstamp conn,
		 const struct iovec *iov, int iovcnt, size_t len, struct viewstamp *vs);

/* Leader: logs LEN bytes of DATA as an entry of TYPE without waiting for
 * it to commit (the checker's output checkpoints).  0 or -EPERM. */
int node_record(struct node *n, int type, const void *data, size_t len);

/* Leader with commit_wait = reply: returns once everything proposed so far
 * is committed, so a reply never reveals state a failover could lose. */
void node_wait_output(struct node *n);

/* Internal, shared by node.c, leader.c and backup.c. */
void *leader_main(void *arg);
void *backup_main(void *arg);
void node_update_status(struct node *n);
void node_persist(struct node *n, uint64_t pos, size_t len);

static inline uint64_t node_log_off(const struct node *n, uint64_t pos)
{
	return REGION_CTL_SIZE + pos % n->log_size;
}

#endif
