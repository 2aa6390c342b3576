/* The cluster configuration file: one file describes every node.
 *
 *   cluster = NAME            transport = shm|tcp|rdma
 *   log_size = 64M            max_entry = 64K
 *   fsync = none|batch|always fsync_interval_ms = 50
 *   commit_wait = read|reply  checker = on|off
 *   divergence = repair|report|unhealthy
 *   randomness = log|machine  (log: the server's random numbers are a
 *             function of the entry it handles; input_random.h)
 *   seed_function = NAME      seed_every = 1  (the server's own generator,
 *             reseeded from the log through a function it exports)
 *   checker_greeting = compare|skip  (skip: what the server writes to a
 *             connection before it first reads from it is not compared)
 *   read_ahead = on|off       (leader: one commit round per event-loop pass)
 *   replay_in_place = on|off  (backup: replayed bytes skip the loopback socket)
 *   thread_order = reads|requests  (what the log orders across the server's
 *             threads: their reads, or whole requests; doc/configuration.md)
 *   heartbeat_ms = 10         suspect_ms = 10 x heartbeat_ms
 *   start_timeout_ms = 15000
 *   app_cmd = redis-server --port {port} ...
 *   app_reset_cmd = ...       (a server with state of its own on disk: puts
 *             back the state the log starts from, in every fresh start)
 *   snapshot_cmd = apps/redis/snapshot.sh {data_dir}/redis.sock   snapshot_file = dump.rdb
 *             (how a node has its server write its state: every node's
 *             recovery point, the log's base, and apus rebuild's source)
 *   snapshot_log_bytes = log_size/4   snapshot_interval_s = 0
 *             (a node snapshots itself after this much log, or this often)
 *   snapshot_leader = on|off  (off: snapshot_cmd is not fork-based, only
 *             held backups take snapshots; two of them are the majority)
 *   snapshot_load_cmd = ...   (puts snapshot_file into a server that loads
 *             nothing by itself, before the node executes the log after it)
 *   snapshot_connections = any|none|stateless  (none: recovery points only
 *             where no client connection is open: servers with sessions;
 *             stateless: even inside a request, for servers whose
 *             requests leave nothing behind: clamd's scans)
 *   secret_file = apus.key    (tcp/rdma peer admission, see admission.h)
 *   verify_cmd = {config_dir}/verify.txt  (apus verify's default sweep: a
 *             file of bytes it sends through the leader; cli/verify.c)
 *   region_dir = /dev/shm     (memory file system holding the regions; none:
 *                             in data_dir, written back by msync; see wal.h)
 *   run_dir = /run/apus       (pid files and owner locks: <run_dir>/<cluster>-n<N>;
 *                             default: each node's data_dir)
 *   [node N]  address = A   app_port = P   peer_port = Q   data_dir = D
 *             netns = NAME  (run the node's server in that network namespace)
 *             guard_port = G (its guard serves snapshots for apus rebuild)
 *             metrics_port = M (Prometheus metrics of the node; metrics.h)
 *             secret_file = F (this node's copy of the key, if elsewhere)
 *             run_dir = R (this node's pid files and lock, exactly there)
 *             member = voter|learner|removed (written by apus add / remove /
 *             replace: what the cluster agreed the node is; members.h)
 *             replaces = N (apus replace: the node this one takes over from)
 *
 * Relative paths are taken from the config file's directory. */
#ifndef APUS_CONFIG_H
#define APUS_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define APUS_MAX_NODES 8

enum fsync_policy { FSYNC_NONE = 0, FSYNC_BATCH, FSYNC_ALWAYS };
enum snapshot_connections {
	SNAPSHOT_CONNECTIONS_ANY = 0,
	SNAPSHOT_CONNECTIONS_NONE,
	SNAPSHOT_CONNECTIONS_STATELESS,
};
/* What the log orders across a server's threads.  READS: each thread's
 * reads of replicated input follow the log.  REQUESTS: moreover a thread
 * that got input runs alone until it asks for more, so requests execute
 * one at a time in log order on every replica (doc/operator-guide.md,
 * "Multi-threaded servers"). */
enum thread_order { ORDER_READS = 0, ORDER_REQUESTS };

/* When the leader waits for a majority (doc/configuration.md, commit_wait):
 * READ: the server's read() returns bytes only once they are committed;
 * REPLY: read() returns at once, and the server's replies to clients are
 * held until everything it has read so far is committed. */
enum commit_wait { COMMIT_WAIT_READ = 0, COMMIT_WAIT_REPLY };

/* What the output checker makes of a server's greeting: the bytes it
 * writes to a connection before it first reads from it (MySQL's carries
 * a random scramble; SMTP's and FTP's often the time).  Either way the
 * client gets them. */
enum checker_greeting { GREETING_COMPARE = 0, GREETING_SKIP };

/* What a replica does when its output diverges from the leader's: record
 * it; and show healthy: false; or record it and have its guard rebuild it
 * from the leader's state once apus verify confirms (guard/repair.h). */
enum divergence_policy { DIVERGENCE_REPORT = 0, DIVERGENCE_UNHEALTHY, DIVERGENCE_REPAIR };
enum randomness { RANDOMNESS_LOG = 0, RANDOMNESS_MACHINE };

/* What a node is in the cluster's membership (coordinator/node/members.h).  A
 * voter counts in majorities and may lead; a learner receives the log
 * and executes it, never votes nor stands (a new replica catching up);
 * a removed node is no replica any more: its section stays so that node
 * ids are never given twice. */
enum member_role { MEMBER_VOTER = 0, MEMBER_LEARNER, MEMBER_REMOVED };

struct node_conf {
	int id;
	int member;		/* enum member_role */
	/* A learner brought in by apus replace: once it votes, the leader
	 * removes this node (-1: none).  Kept afterwards, as history. */
	int replaces;
	int line;		/* where its section starts, for error messages */
	char address[64];
	int app_port;
	int peer_port;
	int guard_port;		/* its guard serves snapshots to peers being rebuilt (0: none) */
	int metrics_port;	/* the node serves GET /metrics there (0: none) */
	char data_dir[PATH_MAX];
	char secret_file[PATH_MAX];	/* absolute; the global one unless set */
	char netns[64];			/* empty: the caller's namespace */
	/* Where its pid files and owner lock live (guard/owner.h): absolute
	 * after loading; the global run_dir's <cluster>-n<id>, else data_dir. */
	char run_dir[PATH_MAX];
};

struct apus_config {
	char path[PATH_MAX];	/* absolute path of the file */
	char cluster[64];
	char transport[16];
	uint64_t log_size;
	uint32_t max_entry;
	int fsync;
	int fsync_interval_ms;
	int commit_wait;
	int checker;		/* hash and compare output (default on) */
	int checker_greeting;	/* enum checker_greeting (compare) */
	int read_ahead;		/* leader: batch a pass's reads (default on) */
	int replay_in_place;	/* backup: replay without the socket where epoll allows (on) */
	int thread_order;	/* enum thread_order (reads) */
	int divergence;		/* enum divergence_policy */
	int repair_interval_s;	/* divergence = repair: at most one try per node this often */
	int randomness;		/* enum randomness (log) */
	char seed_function[128];	/* the server's seeding function (empty: none) */
	int seed_every;		/* ... called once per this many entries (1) */
	int heartbeat_ms;
	int suspect_ms;		/* a backup suspects a leader silent this long */
	int suspect_line;	/* where it was set, for the error message */
	int start_timeout_ms;
	/* Checkpoints of backups by the guard (guard/checkpoint.h). */
	int checkpoint_keep;		/* how many each node keeps */
	int checkpoint_interval_s;	/* the guard takes one this often (0: never) */
	uint64_t checkpoint_entries;	/* or after this many entries (0: never) */
	/* A node whose newest recovery point (snapshot or checkpoint) is
	 * older than this while its server executed past it is unhealthy in
	 * apus status (0: never). */
	int recovery_point_max_age_s;
	int guard;			/* apus start runs a guard per replica */
	char app_cmd[4096];
	/* For a server that keeps state of its own on disk (MariaDB): run
	 * (sh -c, expanded like app_cmd) in every fresh start of the server,
	 * before anything of the log or of a recovery point reaches it (apus
	 * start, the guard's restarts, a deposed leader's re-execution; not a
	 * CRIU restore).  It puts back the state the log starts from (the
	 * datadir every replica was initialised with). */
	char app_reset_cmd[4096];
	char leader_hook[4096];
	/* Rebuilding a replica from a peer (guard/rebuild.c): run on a held
	 * backup (sh -c, expanded like app_cmd), it makes the server write
	 * its state to <data_dir>/<snapshot_file>, which the server loads
	 * when it starts there. */
	char snapshot_cmd[4096];
	char snapshot_file[256];
	/* Off: snapshot_cmd reads the server rather than making it fork
	 * (memcached), which holds only on a paused backup, so the leader,
	 * never paused, takes none; its log is reclaimed by its peers'
	 * snapshots alone. */
	int snapshot_leader;
	/* For a server that loads nothing at start (memcached): run (sh -c,
	 * expanded like app_cmd) once the server listens, before the node
	 * executes any entry after its recovery point; it puts
	 * <data_dir>/<snapshot_file> into the server.  Empty: the server
	 * loads snapshot_file by itself (Redis). */
	char snapshot_load_cmd[4096];
	/* SNAPSHOT_CONNECTIONS_NONE: a backup's recovery point only at an
	 * entry where no client connection is open on it.  For servers whose
	 * connections hold state a snapshot does not (MariaDB's sessions:
	 * the handshake, transactions, prepared statements), which a server
	 * started from the snapshot could not continue.
	 * SNAPSHOT_CONNECTIONS_STATELESS: a point may fall inside a client's
	 * request too (never refused for it, snapshot.c): for servers whose
	 * requests change no state (clamd's scans), so that a node started
	 * from the point loses nothing but that request's reply, which the
	 * leader gave. */
	int snapshot_connections;
	/* Each node snapshots itself (coordinator/node/snapshot.c) once its log
	 * went this far past its last snapshot, and/or this often. */
	uint64_t snapshot_log_bytes;	/* 0 after loading: log_size / 4 */
	int snapshot_interval_s;	/* 0: only by log use */
	char secret_file[PATH_MAX];	/* absolute after loading */
	/* apus verify's sweep when it is given none: a file (expanded like
	 * the command templates; relative to the config's folder unless it
	 * starts with '{'). */
	char verify_cmd[PATH_MAX];
	char region_dir[PATH_MAX];	/* "none": the region stays in data_dir */
	char run_dir[PATH_MAX];		/* empty: each node's run_dir is its data_dir */
	int nnodes;
	struct node_conf nodes[APUS_MAX_NODES];	/* nodes[i].id == i */
};

/* Parses and validates PATH into CFG.  Returns 0, or -1 with one line
 * "PATH:LINE: problem" (or "PATH: problem") in ERR. */
int config_load(const char *path, struct apus_config *cfg, char *err, size_t errlen);

/* Whether node I votes; whether it is a replica at all (voter or learner). */
static inline int config_is_voter(const struct apus_config *cfg, int i)
{
	return i >= 0 && i < cfg->nnodes && cfg->nodes[i].member == MEMBER_VOTER;
}

static inline int config_is_member(const struct apus_config *cfg, int i)
{
	return i >= 0 && i < cfg->nnodes && cfg->nodes[i].member != MEMBER_REMOVED;
}

/* How many nodes vote. */
static inline int config_voters(const struct apus_config *cfg)
{
	int v = 0;

	for (int i = 0; i < cfg->nnodes; i++)
		v += cfg->nodes[i].member == MEMBER_VOTER;
	return v;
}

/* Majority of the voting nodes. */
static inline int config_quorum(const struct apus_config *cfg)
{
	return config_voters(cfg) / 2 + 1;
}

const char *member_role_name(int member);

/* The membership (every [node N] section, each with its member line and
 * absolute paths) as config text, into OUT.  Returns its length, or -1 if
 * it does not fit. */
int config_format_members(const struct apus_config *cfg, char *out, size_t outlen);

/* Replaces CFG's nodes with those of TEXT (LEN bytes of [node N] sections,
 * as config_format_members writes them), checked as config_load checks
 * them.  CFG is left alone on error.  Returns 0, or -1 with ERR set. */
int config_parse_members(struct apus_config *cfg, const char *text, size_t len, char *err,
			 size_t errlen);

/* Expands {port} {address} {data_dir} {node} in the app command for NODE.
 * Returns 0, or -1 if the result does not fit. */
int config_app_cmd(const struct apus_config *cfg, int node, char *out, size_t outlen);
/* The same for any command template TMPL. */
int config_expand(const struct apus_config *cfg, int node, const char *tmpl, char *out,
		  size_t outlen);

/* Path of a file inside NODE's data directory. */
int config_node_path(const struct apus_config *cfg, int node, const char *name,
		     char *out, size_t outlen);
/* Path of a file inside NODE's run directory (pid files, the owner lock). */
int config_run_path(const struct apus_config *cfg, int node, const char *name,
		    char *out, size_t outlen);

const char *fsync_policy_name(int policy);

#endif
