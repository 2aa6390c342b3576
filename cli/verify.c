/* apus verify: do the replicas agree?  Sends a read-only sweep (a file of
 * request bytes) to the leader as an ordinary client, hashes the whole
 * reply with the output checker's hash, and waits until every live backup
 * has compared its own server's reply to that connection with the
 * leader's (the checks each backup keeps in its status, coordinator/
 * checks.h).  Works for any server: the sweep is whatever reads the state
 * that matters (Redis: DEBUG DIGEST). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checker/outhash.h"
#include "common/atomic64.h"
#include "coordinator/storage/checks.h"
#include "coordinator/storage/region.h"
#include "coordinator/storage/region_status.h"
#include "guard/host.h"
#include "cli.h"

static const char usage[] =
	"usage: apus verify --config FILE [--cmd SWEEP] [--timeout MS] [--json]\n"
	"\n"
	"Checks that every replica answers byte for byte as the leader does.\n"
	"Sends the bytes of SWEEP (read-only requests, e.g. DEBUG DIGEST for\n"
	"Redis) to the leader as a client, ends its side of the connection\n"
	"once the reply has been quiet for 250 ms, reads the reply to its end\n"
	"and hashes it (length and CRC-64, as the output checker does).  Each\n"
	"backup replays that connection and compares its own server's reply\n"
	"with the leader's; verify waits for every live backup's verdict and\n"
	"prints one line per node: equal, DIFFERS at byte X (the output mark\n"
	"where the difference showed: it lies in the 1,536 bytes before), or no\n"
	"result (down, behind, ...).  It reads the verdicts from the regions of\n"
	"this host's nodes, as apus status does.\n"
	"\n"
	"  -c, --config FILE   cluster configuration (default: $APUS_CONFIG)\n"
	"  -f, --cmd SWEEP     the file of request bytes to send (default: the\n"
	"                      config's verify_cmd)\n"
	"  -t, --timeout MS    how long to wait for the reply and the verdicts in\n"
	"                      all (default 30000)\n"
	"  -j, --json          one JSON object: {equal, bytes, crc, leader, nodes:\n"
	"                      [{id, result (served, equal, differs, incomplete,\n"
	"                      down, none), conn, at, applied, commit, reason}]}\n"
	"  -h, --help          this text\n"
	"\n"
	"Exit status: 0 when the leader and every live backup answered the same\n"
	"and they are a majority of the nodes (a down node is reported, and\n"
	"allowed while a majority agrees); 1 when a replica differs, a live one\n"
	"gave no verdict in time, or no leader serves; 2 for bad input.\n";

#define SWEEP_MAX (16 << 20)
#define QUIET_MS 250		/* a reply this quiet is done: end our side */
#define POLL_MS 1		/* how often we look for the verdicts */
#define ALIVE_MS 100		/* ... and whether their nodes still run */
#define ATTEMPTS 3		/* sweeps, when a verdict went by unseen */
#define DEFAULT_TIMEOUT_MS 30000

enum result { R_NONE = 0, R_SERVED, R_EQUAL, R_DIFFERS, R_INCOMPLETE, R_DOWN };

static const char *const result_names[] = { "none", "served", "equal", "differs",
					    "incomplete", "down" };

struct node_view {
	int up;			/* runs: its pid file's process is the one its region names */
	struct node_status s;	/* a copy (its ring is read from the live mapping) */
};

/* Reads NODE's status into *V (its ring not to be trusted: see checks.h). */
static void look(const struct apus_config *cfg, int node, struct node_view *v)
{
	const struct region_ctl *ctl = region_map_ctl(cfg, node);
	pid_t pid = host_node_pid(cfg, node);

	memset(v, 0, sizeof(*v));
	if (!ctl)
		return;
	memcpy(&v->s, region_status(ctl), sizeof(v->s));
	region_unmap_ctl(ctl);
	v->up = pid && v->s.pid == (uint64_t)pid && v->s.role != ROLE_FAILED;
}

/* One backup's watch for the verdict on our connection: the checks it
 * finished since we ended our side of the connection (none before can be
 * about it), collected as they come, since it keeps only CHECKS_KEEP. */
struct watch {
	enum result res;
	struct region_ctl *ctl;	/* its region, mapped while we watch */
	int writable;		/* ... so that we may ask it (checks_ask) */
	uint64_t asked;		/* the question we asked it (0: none) */
	uint64_t pid;		/* the process whose checks we count */
	uint64_t scanned;	/* checks looked at up to here */
	int missed;		/* some went by before we could look */
	struct check_result *seen;	/* what we collected, SEEN_MAX at most */
	size_t nseen;
	struct check_result got;	/* the verdict on our connection */
	uint64_t applied;
	int role;
	int remote;		/* its region cannot be read on this host */
};

#define SEEN_MAX 65536

static void watch_end(struct watch *w)
{
	if (w->asked)
		checks_unask(w->ctl, w->asked);
	if (w->ctl)
		region_unmap_ctl(w->ctl);
	free(w->seen);
	memset(w, 0, sizeof(*w));
}

/* Starts watching NODE's checks from those it has now: R_DOWN unless it
 * runs here. */
static void watch_start(const struct apus_config *cfg, int node, struct watch *w)
{
	pid_t pid = host_node_pid(cfg, node);

	watch_end(w);
	/* Writable to ask our question; read-only will do to look. */
	w->ctl = region_map_ctl_rw(cfg, node);
	w->writable = w->ctl != NULL;
	if (!w->ctl)
		w->ctl = (struct region_ctl *)region_map_ctl(cfg, node);
	if (!w->ctl) {
		w->res = R_DOWN;
		w->remote = !host_node_is_local(cfg, node);
		return;
	}
	const struct node_status *s = region_status(w->ctl);
	if (!pid || load64(&s->pid) != (uint64_t)pid || s->role == ROLE_FAILED) {
		w->res = R_DOWN;
		return;
	}
	w->pid = (uint64_t)pid;
	w->scanned = checks_count(s);
}

/* Whether NODE still runs the process W watches; a restarted one is
 * watched afresh (its region is a new file, its checks count from 0). */
static void watch_alive(const struct apus_config *cfg, int node, struct watch *w)
{
	pid_t pid = host_node_pid(cfg, node);
	int missed = w->missed;

	if (pid && (uint64_t)pid == w->pid)
		return;
	watch_start(cfg, node, w);
	if (w->res == R_NONE)
		w->scanned = 0;
	w->missed = missed;
}

/* Collects W's checks finished since the last look. */
static void collect(struct watch *w)
{
	const struct node_status *s = region_status(w->ctl);
	uint64_t n = checks_count(s);

	w->applied = load64(&s->applied);
	w->role = s->role;
	if (n > CHECKS_KEEP && w->scanned < n - CHECKS_KEEP) {
		w->missed = 1;	/* checks scanned+1 .. n-KEEP were overwritten unseen */
		w->scanned = n - CHECKS_KEEP;
	}
	if (!w->seen && !(w->seen = malloc(SEEN_MAX * sizeof(*w->seen))))
		return;
	for (uint64_t seq = w->scanned + 1; seq <= n; seq++) {
		struct check_result e;
		int rc = checks_read(s, seq, &e);

		if (rc == -EAGAIN)
			return;	/* being written: look again next time */
		w->scanned = seq;
		if (rc)
			continue;
		if (w->nseen == SEEN_MAX) {
			w->missed = 1;	/* so many that we forget the oldest */
			w->nseen = 0;
		}
		w->seen[w->nseen++] = e;
	}
}

static void found(struct watch *w, const struct check_result *e)
{
	w->got = *e;
	w->res = e->verdict == OUT_EQUAL ? R_EQUAL : e->verdict == OUT_DIFFERS ? R_DIFFERS
									   : R_INCOMPLETE;
}

/* Whether W answered our question about the mark (BYTES, CRC), or
 * collected a check with that leader's final mark: then W->got and W->res
 * say what it found. */
static int match(struct watch *w, uint64_t bytes, uint64_t crc)
{
	struct check_result e;

	if (w->asked && !checks_answer(w->ctl, w->asked, bytes, crc, &e)) {
		found(w, &e);
		return 1;
	}
	for (size_t i = w->nseen; i-- > 0;) {
		if (w->seen[i].leader_off == bytes && w->seen[i].leader_crc == crc) {
			found(w, &w->seen[i]);
			return 1;
		}
	}
	w->nseen = 0;	/* none of these is ours: the next look brings new ones */
	return 0;
}

/* The watches of one sweep: every node but the leader's. */
struct watches {
	const struct apus_config *cfg;
	int leader;
	struct watch w[APUS_MAX_NODES];
};

/* Asks every watched node to keep the check of the connection whose
 * leader's final mark is (BYTES, CRC) (checks_ask): its verdict then
 * waits for us however many other connections end meanwhile. */
static void ask_all(struct watches *ws, uint64_t bytes, uint64_t crc)
{
	static uint64_t asked;
	/* Unique enough among the askers of one node: our pid and a count. */
	uint64_t q = (uint64_t)getpid() << 32 | (++asked & 0xffffffff);

	for (int i = 0; i < ws->cfg->nnodes; i++) {
		struct watch *w = &ws->w[i];

		if (i == ws->leader || w->res != R_NONE || !w->writable)
			continue;
		checks_ask(w->ctl, q, bytes, crc);
		w->asked = q;
	}
}

/* Looks at every watch still waiting: whether its node runs (every
 * ALIVE_MS), and what it finished.  START: our connection may finish from
 * now on; the checks before are about others. */
static void look_all(struct watches *ws, int start)
{
	static uint64_t alive_ms;
	uint64_t now = host_mono_ms();

	for (int i = 0; i < ws->cfg->nnodes; i++) {
		struct watch *w = &ws->w[i];

		if (i == ws->leader || w->res != R_NONE)
			continue;
		if (start) {
			watch_start(ws->cfg, i, w);
			continue;
		}
		if (now - alive_ms >= ALIVE_MS)
			watch_alive(ws->cfg, i, w);
		if (w->res == R_NONE)
			collect(w);
	}
	if (now - alive_ms >= ALIVE_MS)
		alive_ms = now;
}

/* The sweep: --cmd, else the config's verify_cmd.  0, or 2 (said why). */
static int read_sweep(const struct cli *c, const char *arg, int leader, char **buf, size_t *len)
{
	char path[PATH_MAX];
	struct stat st;
	ssize_t k;
	size_t got = 0;
	int fd;

	if (arg) {
		snprintf(path, sizeof(path), "%s", arg);
	} else if (!c->cfg.verify_cmd[0]) {
		cli_error("verify: no sweep: give --cmd FILE, or set verify_cmd in %s", c->cfg.path);
		return 2;
	} else if (config_expand(&c->cfg, leader, c->cfg.verify_cmd, path, sizeof(path))) {
		cli_error("verify: verify_cmd of %s is too long once expanded", c->cfg.path);
		return 2;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		cli_error("verify: cannot read the sweep %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 2;
	}
	if (!S_ISREG(st.st_mode) || st.st_size == 0 || st.st_size > SWEEP_MAX) {
		cli_error("verify: the sweep %s %s", path,
			  !S_ISREG(st.st_mode) ? "is not a file" :
			  st.st_size ? "is larger than 16 MiB" : "is empty");
		close(fd);
		return 2;
	}
	*buf = malloc((size_t)st.st_size);
	while (*buf && got < (size_t)st.st_size &&
	       (k = read(fd, *buf + got, (size_t)st.st_size - got)) > 0)
		got += (size_t)k;
	close(fd);
	if (!*buf || got != (size_t)st.st_size) {
		cli_error("verify: cannot read the sweep %s: %s", path,
			  *buf ? "it changed while read" : "out of memory");
		free(*buf);
		return 2;
	}
	*len = got;
	return 0;
}

/* A connection to NODE's application port, by DEADLINE (ms): the fd, or
 * -1 (ERR says why). */
static int connect_app(const struct apus_config *cfg, int node, uint64_t deadline, char *err,
		       size_t len)
{
	const struct node_conf *nc = &cfg->nodes[node];
	struct sockaddr_storage ss;
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	socklen_t alen;
	int fd, e = 0;
	socklen_t elen = sizeof(e);

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, nc->address, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)nc->app_port);
		alen = sizeof(*a4);
	} else if (inet_pton(AF_INET6, nc->address, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)nc->app_port);
		alen = sizeof(*a6);
	} else {
		snprintf(err, len, "node %d's address '%s' is not a numeric IP address", node,
			 nc->address);
		return -1;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, len, "socket: %s", strerror(errno));
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&ss, alen) < 0) {
		struct pollfd p = { fd, POLLOUT, 0 };
		uint64_t now = host_mono_ms();

		if (errno != EINPROGRESS ||
		    poll(&p, 1, now < deadline ? (int)(deadline - now) : 0) != 1 ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &elen) < 0 || e) {
			snprintf(err, len, "cannot connect to the leader, node %d at %s:%d: %s", node,
				 nc->address, nc->app_port, e ? strerror(e) : "timed out");
			close(fd);
			return -1;
		}
	}
	return fd;
}

struct reply {
	struct out_hash h;	/* length and CRC-64 of all of it */
	struct out_hash asked;	/* what we asked the backups about (ask_all) */
	int did_ask;
	char head[48];		/* its first bytes */
	size_t head_len;
	int eof;
};

/* Sends SWEEP on FD, ends our side once the reply has been quiet for
 * QUIET_MS, and reads the reply to its end or DEADLINE, looking at WS
 * from the end of our side on.  0, or -1 (ERR). */
static int exchange(int fd, const char *sweep, size_t len, uint64_t deadline, struct reply *r,
		    struct watches *ws, char *err, size_t errlen)
{
	static char buf[1 << 16];
	uint64_t quiet_since = host_mono_ms();
	size_t sent = 0;
	int shut = 0;

	while (!r->eof) {
		uint64_t now = host_mono_ms();
		struct pollfd p = { fd, POLLIN | (sent < len ? POLLOUT : 0), 0 };
		int wait;

		if (now >= deadline) {
			snprintf(err, errlen, "the leader's reply did not end in time (%llu bytes so "
					      "far%s)", (unsigned long long)r->h.off,
				 sent < len ? ", the sweep not all sent" : "");
			return -1;
		}
		if (sent == len && !shut && now - quiet_since >= QUIET_MS) {
			/* The server reads our end of stream and closes: the leader
			 * logs the connection's CLOSE with its final mark. */
			look_all(ws, 1);
			ask_all(ws, r->h.off, r->h.crc);
			r->asked = r->h;
			r->did_ask = 1;
			shutdown(fd, SHUT_WR);
			shut = 1;
		}
		if (shut)
			look_all(ws, 0);
		wait = (int)(deadline - now);
		if (sent == len && wait > (shut ? POLL_MS : QUIET_MS))
			wait = shut ? POLL_MS : QUIET_MS;
		if (poll(&p, 1, wait) < 0 && errno != EINTR) {
			snprintf(err, errlen, "poll: %s", strerror(errno));
			return -1;
		}
		if (p.revents & POLLOUT) {
			ssize_t k = send(fd, sweep + sent, len - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (k < 0 && errno != EAGAIN && errno != EINTR) {
				snprintf(err, errlen, "the leader closed the connection while the sweep "
						      "was sent (%zu of %zu bytes): %s", sent, len,
					 strerror(errno));
				return -1;
			}
			if (k > 0) {
				sent += (size_t)k;
				quiet_since = host_mono_ms();
			}
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t k = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (k < 0 && errno != EAGAIN && errno != EINTR) {
				snprintf(err, errlen, "the leader reset the connection after %llu bytes "
						      "of reply: %s", (unsigned long long)r->h.off,
					 strerror(errno));
				return -1;
			}
			if (k == 0)
				r->eof = 1;
			if (k > 0) {
				size_t n = sizeof(r->head) - r->head_len;
				if (n > (size_t)k)
					n = (size_t)k;
				memcpy(r->head + r->head_len, buf, n);
				r->head_len += n;
				/* The very hash the leader's shim keeps of what its
				 * server wrote to this client. */
				out_hash_feed(&r->h, buf, (size_t)k, NULL, NULL);
				quiet_since = host_mono_ms();
				/* More after a quiet spell (a loaded leader): ask again
				 * now, while the connection still runs, not after its
				 * end, when a backup may have checked it already and
				 * let many others push it out of its ring. */
				if (shut) {
					ask_all(ws, r->h.off, r->h.crc);
					r->asked = r->h;
				}
			}
		}
	}
	if (sent < len) {
		snprintf(err, errlen, "the leader closed the connection after %zu of the sweep's %zu "
				      "bytes", sent, len);
		return -1;
	}
	return 0;
}

/* The first bytes of the reply into OUT, printable (JSON: as a string's
 * contents): \r and \n as such, other bytes outside ASCII's printable
 * ones as \xHH (JSON: \u00HH). */
static void show_head(const struct reply *r, int json, char *out, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < r->head_len && o + 7 < len; i++) {
		unsigned char ch = (unsigned char)r->head[i];
		if (ch == '\r' || ch == '\n')
			o += (size_t)snprintf(out + o, len - o, "\\%c", ch == '\r' ? 'r' : 'n');
		else if (ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\')
			o += (size_t)snprintf(out + o, len - o, json ? "\\u%04x" : "\\x%02x", ch);
		else
			out[o++] = (char)ch;
	}
	out[o] = '\0';
}

/* Why live node W gave no verdict, in a word (JSON) or a phrase. */
static const char *no_result_reason(const struct watch *w, uint64_t commit)
{
	/* Behind first: a node that has not applied our connection's end yet
	 * may still answer, whatever else went by unseen meanwhile. */
	return w->applied < commit ? "behind" : w->missed ? "missed" : "no check";
}

static void print_json(const struct apus_config *cfg, int leader, uint64_t view, uint64_t commit,
		       const struct reply *rep, const struct watch *w, int equal, int agree)
{
	char head[sizeof(rep->head) * 6 + 1];

	show_head(rep, 1, head, sizeof(head));
	printf("{\"equal\":%s,\"bytes\":%llu,\"crc\":\"%016llx\",\"leader\":%d,\"view\":%llu,"
	       "\"agree\":%d,\"quorum\":%d,\"reply_head\":\"%s\",\"nodes\":[",
	       equal ? "true" : "false", (unsigned long long)rep->h.off,
	       (unsigned long long)rep->h.crc, leader, (unsigned long long)view, agree,
	       config_quorum(cfg), head);
	for (int i = 0; i < cfg->nnodes; i++) {
		const struct watch *x = &w[i];

		printf("%s{\"id\":%d,\"result\":\"%s\"", i ? "," : "", i,
		       result_names[i == leader ? R_SERVED : x->res]);
		if (i == leader) {
			printf("}");
			continue;
		}
		if (x->res == R_EQUAL || x->res == R_DIFFERS || x->res == R_INCOMPLETE)
			printf(",\"conn\":\"%llu.%llu\",\"at\":%llu,\"replica_crc\":\"%016llx\"",
			       (unsigned long long)x->got.conn_view, (unsigned long long)x->got.conn_idx,
			       (unsigned long long)x->got.at, (unsigned long long)x->got.replica_crc);
		if (x->res == R_NONE)
			printf(",\"applied\":%llu,\"commit\":%llu,\"reason\":\"%s\"",
			       (unsigned long long)x->applied, (unsigned long long)commit,
			       no_result_reason(x, commit));
		if (x->res == R_DOWN)
			printf(",\"reason\":\"%s\"", x->remote ? "not on this host" : "down");
		printf("}");
	}
	printf("]}\n");
}

static void print_text(const struct apus_config *cfg, int leader, uint64_t commit,
		       const struct reply *rep, const struct watch *w, int timeout_ms)
{
	char head[sizeof(rep->head) * 4 + 1];

	show_head(rep, 0, head, sizeof(head));
	for (int i = 0; i < cfg->nnodes; i++) {
		const struct watch *x = &w[i];
		unsigned long long cv = x->got.conn_view, ci = x->got.conn_idx;

		printf("node %d: ", i);
		if (i == leader) {
			printf("leader, served the sweep: %llu bytes of reply, crc64 %016llx, \"%s%s\"\n",
			       (unsigned long long)rep->h.off, (unsigned long long)rep->h.crc, head,
			       rep->h.off > rep->head_len ? "..." : "");
			continue;
		}
		switch (x->res) {
		case R_EQUAL:
			printf("equal\n");
			break;
		case R_DIFFERS:
			printf("DIFFERS at byte %llu (connection %llu.%llu: apus divergence shows its "
			       "output there)\n", (unsigned long long)x->got.at, cv, ci);
			break;
		case R_INCOMPLETE:
			printf("no result (its check of connection %llu.%llu could not compare the whole "
			       "reply: its server wrote %llu bytes, the leader's %llu)\n", cv, ci,
			       (unsigned long long)x->got.at, (unsigned long long)rep->h.off);
			break;
		case R_DOWN:
			printf("no result (%s)\n",
			       x->remote ? "not on this host: its region cannot be read here" : "down");
			break;
		default:
			if (x->applied < commit)
				printf("no result (behind: applied %llu of %llu)\n",
				       (unsigned long long)x->applied, (unsigned long long)commit);
			else if (x->missed)
				printf("no result (more than %d connections ended on it between two "
				       "looks, %d times: ours went by unseen; run verify again)\n",
				       CHECKS_KEEP, ATTEMPTS);
			else
				printf("no result (%s, applied %llu of %llu, but its check of this "
				       "connection did not finish within %d ms)\n", role_label(x->role),
				       (unsigned long long)x->applied, (unsigned long long)commit,
				       timeout_ms);
		}
	}
}

/* One sweep through WS's leader (of VIEW): the reply into *REP, the
 * leader's commit index once it ended into *COMMIT, and each backup's
 * verdict on that connection into WS, by DEADLINE.  0, or 1 (said why):
 * no reply. */
static int sweep_once(struct watches *ws, uint64_t view, const char *sweep, size_t len,
		      uint64_t deadline, struct reply *rep, uint64_t *commit)
{
	const struct apus_config *cfg = ws->cfg;
	struct node_view lv;
	char err[512];
	int fd, leader = ws->leader;

	/* Until we end our side, the leader's server can end the connection
	 * by itself only: what the backups finish before is not about it. */
	for (int i = 0; i < cfg->nnodes; i++)
		if (i != leader)
			watch_start(cfg, i, &ws->w[i]);
	memset(rep, 0, sizeof(*rep));
	fd = connect_app(cfg, leader, deadline, err, sizeof(err));
	if (fd < 0 || exchange(fd, sweep, len, deadline, rep, ws, err, sizeof(err))) {
		cli_error("verify: %s", err);
		if (fd >= 0)
			close(fd);
		return 1;
	}
	close(fd);
	look(cfg, leader, &lv);
	if (!lv.up || lv.s.role != ROLE_LEADER || lv.s.view != view) {
		cli_error("verify: node %d stopped leading view %llu while it served the sweep; run "
			  "verify again", leader, (unsigned long long)view);
		return 1;
	}
	*commit = lv.s.commit;
	/* Bytes after the reply was quiet, or a server that ended the
	 * connection first: ask about the whole reply. */
	if (!rep->did_ask || rep->asked.off != rep->h.off || rep->asked.crc != rep->h.crc)
		ask_all(ws, rep->h.off, rep->h.crc);

	/* Each live backup's verdict on the connection we now know. */
	for (;;) {
		int pending = 0;

		look_all(ws, 0);
		for (int i = 0; i < cfg->nnodes; i++)
			if (i != leader && ws->w[i].res == R_NONE &&
			    !match(&ws->w[i], rep->h.off, rep->h.crc))
				pending++;
		if (!pending || host_mono_ms() >= deadline)
			return 0;
		host_sleep_ms(POLL_MS);
	}
}

/* Whether a node gave no verdict because ours may have gone by unseen. */
static int missed_any(const struct watches *ws)
{
	for (int i = 0; i < ws->cfg->nnodes; i++)
		if (i != ws->leader && ws->w[i].res == R_NONE && ws->w[i].missed)
			return 1;
	return 0;
}

/* Prints what each node said; the exit status: 0 when the leader and every
 * live backup answered the same and they are a majority, else 1. */
static int report(const struct cli *c, const struct watches *ws, uint64_t view, uint64_t commit,
		  const struct reply *rep, int timeout_ms)
{
	int agree = 1, equal = 1;

	for (int i = 0; i < c->cfg.nnodes; i++) {
		if (i == ws->leader)
			continue;
		if (ws->w[i].res == R_EQUAL)
			agree++;
		else if (ws->w[i].res != R_DOWN)
			equal = 0;	/* differs, or live without a verdict */
	}
	if (agree < config_quorum(&c->cfg))
		equal = 0;
	if (c->json)
		print_json(&c->cfg, ws->leader, view, commit, rep, ws->w, equal, agree);
	else
		print_text(&c->cfg, ws->leader, commit, rep, ws->w, timeout_ms);
	return equal ? 0 : 1;
}

int cmd_verify(int argc, char **argv)
{
	char *rest1[64], *rest[64], *sweep = NULL, *end;
	struct node_view views[APUS_MAX_NODES];
	struct watches ws;
	struct reply rep;
	struct cli c;
	uint64_t view = 0, deadline, commit = 0;
	int n1, n, rc, leader = -1, attempt = 0, timeout_ms = DEFAULT_TIMEOUT_MS;
	size_t len = 0;

	/* --cmd and --timeout (whose default differs) are this command's own. */
	const char *cmd = cli_take_option(argc, argv, "cmd", 'f', rest1, &n1);
	const char *t = cli_take_option(n1, rest1, "timeout", 't', rest, &n);
	rc = cli_parse(&c, "verify", usage, n, rest);
	if (rc)
		return rc > 0 ? 0 : 2;
	if (t) {
		long v = strtol(t, &end, 10);
		if (*end || v <= 0 || v > 3600000) {
			cli_error("verify: --timeout wants milliseconds, not '%s'", t);
			return 2;
		}
		timeout_ms = (int)v;
	}
	if (c.node >= 0) {
		cli_error("verify: --node is not an option of verify (it checks every node)");
		return 2;
	}
	if (!c.cfg.checker) {
		cli_error("verify: %s has checker = off: replicas compare no output", c.cfg.path);
		return 2;
	}
	deadline = host_mono_ms() + (uint64_t)timeout_ms;

	/* The leader, as apus status finds it: the node leading the newest view. */
	for (int i = 0; i < c.cfg.nnodes; i++) {
		look(&c.cfg, i, &views[i]);
		if (views[i].up && views[i].s.view > view)
			view = views[i].s.view;
	}
	for (int i = 0; i < c.cfg.nnodes; i++)
		if (views[i].up && views[i].s.role == ROLE_LEADER && views[i].s.view == view)
			leader = i;
	if ((rc = read_sweep(&c, cmd, leader >= 0 ? leader : 0, &sweep, &len)))
		return rc;
	if (leader < 0) {
		cli_error("verify: no node of this host leads (apus status --config %s says why)",
			  c.cfg.path);
		free(sweep);
		return 1;
	}
	memset(&ws, 0, sizeof(ws));
	ws.cfg = &c.cfg;
	ws.leader = leader;
	/* A verdict that went by unseen (a node busy with many short
	 * connections, and ours not asked) is looked for with a new sweep. */
	do
		rc = sweep_once(&ws, view, sweep, len, deadline, &rep, &commit);
	while (!rc && ++attempt < ATTEMPTS && missed_any(&ws) && host_mono_ms() < deadline);
	if (!rc)
		rc = report(&c, &ws, view, commit, &rep, timeout_ms);
	for (int i = 0; i < c.cfg.nnodes; i++)
		watch_end(&ws.w[i]);
	free(sweep);
	return rc;
}
