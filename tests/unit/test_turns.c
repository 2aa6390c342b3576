/* The backup's turn schedule (coordinator/node/replay.h, turns.h), driven as
 * the shim drives it from the server's side: a listening socket of this process
 * is "the server", replay_exec() feeds it committed entries.
 *
 * Socket path (replay_read, as the shim calls it): a read of a connection
 * whose turn it is not gets nothing
 * (EAGAIN), a read whose turn it is takes at most that turn's bytes even
 * when the socket holds more, turns follow the log's order across
 * connections and each connection's own order, and the end of stream is
 * a turn of its own; input the leader's server got after answering waits
 * for ours to answer, unless ours began reading it.
 * In place (the server watches the connections with epoll, and so a new
 * connection's input before it watches that one too): the ready fds
 * are the held turns in log order, stopping before a second turn of one
 * fd; replay_take() serves only the head turn, at most its bytes; a
 * server about to sleep is told to when nothing is ready and is kicked
 * when a turn arrives.
 * Two epoll sets (a multi-threaded server): each thread is woken only for
 * its own set's turn at the head; with thread_order = requests the head
 * stays on a taken turn until its thread asks for input. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "coordinator/node/node_internal.h"
#include "coordinator/storage/region_status.h"
#include "coordinator/storage/region_wire.h"
#include "coordinator/node/replay.h"
#include "coordinator/node/replay_internal.h"
#include "coordinator/node/turns.h"
#include "tests/unit/testdir.h"
#include "tests/unit/unit.h"

static char dir[] = "/tmp/apus-turns-XXXXXX";
/* Static: what replay keeps stays reachable (the leak check). */
static struct node node;
static union {	/* the node's control page: replay records in its status page */
	struct region_ctl ctl;
	char bytes[REGION_CTL_SIZE];
} page;
static struct replay *r;
static int lsock;
static uint64_t next_idx = 1;

static void no_wake(struct transport *t)
{
	(void)t;
}

/* replay only wakes the backup thread through its transport. */
static const struct transport_ops wake_only = { .name = "none", .wake = no_wake };

/* Executes one committed entry of TYPE with FLAGS (ENTRY_F_*) for
 * connection CONN (its ACCEPT's index) carrying DATA; returns the entry's
 * index. */
static uint64_t exec_flagged(int type, int flags, uint64_t conn, const char *data)
{
	static _Alignas(64) char buf[4096];
	size_t len = data ? strlen(data) : 0;
	struct iovec iov = { (void *)data, len };
	struct entry_meta m = { .idx = next_idx, .view = 1, .committed = next_idx, .conn = { 1, conn },
				.type = (uint16_t)type, .flags = (uint8_t)flags };

	memset(buf, 0, sizeof(buf));
	entry_write(buf, &m, &iov, 1, 0, (uint32_t)len);
	CHECK(replay_exec(r, (const struct entry_hdr *)buf) == 1, "entry %llu not executed at once",
	      (unsigned long long)next_idx);
	return next_idx++;
}

static uint64_t exec(int type, uint64_t conn, const char *data)
{
	return exec_flagged(type, 0, conn, data);
}

struct srv_conn {
	int fd;
	struct replay_tap *tap;
};

/* ACCEPTs a new connection and lets "the server" accept and claim it. */
static struct srv_conn open_conn(uint64_t *idx)
{
	struct sockaddr_in peer;
	socklen_t len = sizeof(peer);
	struct pollfd p = { lsock, POLLIN, 0 };
	struct srv_conn c;

	*idx = exec(ENTRY_ACCEPT, 0, NULL);
	CHECK(poll(&p, 1, 2000) == 1, "no connection to accept");
	c.fd = accept4(lsock, (struct sockaddr *)&peer, &len, SOCK_NONBLOCK);
	CHECK(c.fd >= 0, "accept: %s", strerror(errno));
	c.tap = replay_tap_claim(r, c.fd, &peer, ntohs(peer.sin_port));
	CHECK(c.tap, "the replay connection was not claimed");
	return c;
}

struct srv_sock {
	struct srv_conn *c;
	char *out;
};

/* The socket read replay_read makes: CAP bytes at most, once they came. */
static ssize_t srv_sock_read(void *arg, size_t cap)
{
	struct srv_sock *a = arg;
	struct pollfd p = { a->c->fd, POLLIN, 0 };
	ssize_t k;

	CHECK(poll(&p, 1, 2000) == 1, "the turn's bytes never came");
	k = read(a->c->fd, a->out, cap);
	CHECK(k >= 0, "read: %s", strerror(errno));
	return k;
}

static int watched_never_asked(void *arg)
{
	(void)arg;
	CHECK(0, "replay_read asked whether a watched connection's read blocks");
	return 0;
}

/* The shim's read of C on the socket path (replay_read, as for a
 * connection an epoll set watches).  Returns what was read, -1 for EAGAIN
 * (not its turn), 0 for end of stream. */
static ssize_t srv_read(struct srv_conn *c, char *out, size_t want)
{
	struct srv_sock a = { c, out };
	struct replay_sock sock = { srv_sock_read, watched_never_asked, &a, 1 };
	struct iovec iov = { out, want };
	ssize_t k;

	errno = 0;
	k = replay_read(r, c->tap, &iov, 1, &sock);
	CHECK(k >= 0 || errno == EAGAIN, "replay_read: -1 with %s", strerror(errno));
	return k;
}

static void expect_read(struct srv_conn *c, size_t want, const char *bytes, int line)
{
	char buf[256];
	ssize_t k = srv_read(c, buf, want);

	CHECK(k == (ssize_t)strlen(bytes) && !memcmp(buf, bytes, strlen(bytes)),
	      "line %d: fd %d read %zd bytes '%.*s', want '%s'", line, c->fd, k,
	      (int)(k > 0 ? k : 0), buf, bytes);
}

static void expect_eagain(struct srv_conn *c, int line)
{
	CHECK(replay_gate(r, c->tap, 100) == 0, "line %d: fd %d may read out of turn", line, c->fd);
}

static void socket_path(void)
{
	uint64_t a_idx, b_idx;
	struct srv_conn a = open_conn(&a_idx), b = open_conn(&b_idx);

	CHECK(!replay_maintain(r), "turns scheduled before any input");
	exec(ENTRY_RECV, a_idx, "aaa");
	exec(ENTRY_RECV, b_idx, "bbbb");
	exec(ENTRY_RECV, a_idx, "cc");
	exec(ENTRY_CLOSE, a_idx, NULL);
	exec(ENTRY_RECV, b_idx, "d");
	CHECK(replay_maintain(r), "no turns scheduled");

	/* A first (its socket holds 5 bytes and the end: the turn is 3). */
	expect_eagain(&b, __LINE__);
	CHECK(replay_gate(r, a.tap, 100) == 3, "A's turn is %zu bytes", replay_gate(r, a.tap, 100));
	expect_read(&a, 2, "aa", __LINE__);
	expect_eagain(&b, __LINE__);
	expect_read(&a, 100, "a", __LINE__);
	/* Then B, though A has bytes left. */
	expect_eagain(&a, __LINE__);
	expect_read(&b, 100, "bbbb", __LINE__);
	expect_eagain(&b, __LINE__);
	expect_read(&a, 100, "cc", __LINE__);
	/* A's end of stream is its next turn: B's last bytes wait for it. */
	expect_eagain(&b, __LINE__);
	CHECK(srv_read(&a, (char[8]){ 0 }, 8) == 0, "A's end of stream");
	expect_eagain(&a, __LINE__);
	expect_read(&b, 100, "d", __LINE__);
	expect_eagain(&a, __LINE__);
	expect_eagain(&b, __LINE__);
	CHECK(!replay_maintain(r), "turns left after every read");
	replay_tap_close(r, a.tap);
	close(a.fd);
	replay_tap_close(r, b.tap);
	close(b.fd);
}

/* The server's write of BYTES to C (the socket path: replay_absorb says
 * so unless in place). */
static void srv_write(struct srv_conn *c, const char *bytes)
{
	struct iovec iov = { (void *)bytes, strlen(bytes) };

	if (!replay_absorb(r, c->tap, &iov, 1, 1))
		CHECK(write(c->fd, bytes, strlen(bytes)) == (ssize_t)strlen(bytes), "write: %s",
		      strerror(errno));
}

/* Input the leader's server read only after it had answered the input
 * before (ENTRY_F_ANSWERED) waits until ours has too; input it read
 * without an answer in between (the rest of a request, a pipeline) does
 * not; nor does another connection's; nor the rest of a turn ours began
 * to read. */
static void answers(void)
{
	uint64_t a_idx, b_idx;
	struct srv_conn a = open_conn(&a_idx), b = open_conn(&b_idx);

	exec_flagged(ENTRY_RECV, ENTRY_F_ANSWERED, a_idx, "q1");
	exec(ENTRY_RECV, a_idx, "-rest");
	exec_flagged(ENTRY_RECV, ENTRY_F_ANSWERED, a_idx, "q2");
	exec_flagged(ENTRY_RECV, ENTRY_F_ANSWERED, b_idx, "p1");
	exec_flagged(ENTRY_CLOSE, ENTRY_F_ANSWERED, a_idx, NULL);
	/* A connection that was never read from has nothing to answer. */
	expect_read(&a, 100, "q1", __LINE__);
	expect_read(&a, 100, "-rest", __LINE__);
	expect_eagain(&a, __LINE__);
	expect_eagain(&b, __LINE__);
	srv_write(&a, "r1");
	expect_read(&a, 100, "q2", __LINE__);
	/* Another connection's input waits for nothing of A's. */
	expect_read(&b, 100, "p1", __LINE__);
	/* A's end of stream came after the answer to q2, which has none yet. */
	expect_eagain(&a, __LINE__);
	srv_write(&a, "r2");
	CHECK(srv_read(&a, (char[8]){ 0 }, 8) == 0, "A's end of stream");
	CHECK(!replay_maintain(r), "turns left after every read");
	replay_tap_close(r, a.tap);
	close(a.fd);
	replay_tap_close(r, b.tap);
	close(b.fd);

	/* A flagged turn our server reads in two parts (its read is smaller
	 * than the leader's was): the rest does not wait for an answer to
	 * the first part. */
	a = open_conn(&a_idx);
	exec(ENTRY_RECV, a_idx, "q1");
	exec_flagged(ENTRY_RECV, ENTRY_F_ANSWERED, a_idx, "q2-long");
	expect_read(&a, 100, "q1", __LINE__);
	srv_write(&a, "r1");
	expect_read(&a, 3, "q2-", __LINE__);
	expect_read(&a, 100, "long", __LINE__);
	CHECK(!replay_maintain(r), "turns left after every read");
	replay_tap_close(r, a.tap);
	close(a.fd);
	b = open_conn(&b_idx);
	replay_tap_close(r, a.tap);
	close(a.fd);
	replay_tap_close(r, b.tap);
	close(b.fd);
}

static int ready(int *fds, int cap)
{
	return replay_ready_fds(r, 0, fds, cap);
}

static void expect_ready(const int *want, int n, int line)
{
	int fds[8], m = ready(fds, 8);

	CHECK(m == n && !memcmp(fds, want, sizeof(int) * (size_t)n),
	      "line %d: %d ready fds (first %d), want %d (first %d)", line, m, m ? fds[0] : -1, n,
	      n ? want[0] : -1);
}

#define EXPECT_READY(...)                                                      \
	do {                                                                   \
		const int w_[] = { __VA_ARGS__ };                              \
		expect_ready(w_ + 1, (int)(sizeof(w_) / sizeof(w_[0])) - 1, __LINE__); \
	} while (0)

static void expect_take(struct srv_conn *c, size_t want, const char *bytes, int line)
{
	char buf[256];
	struct iovec iov = { buf, want };
	ssize_t k = -2;

	CHECK(replay_take(r, c->tap, &iov, 1, &k) == 1, "line %d: fd %d took nothing", line, c->fd);
	CHECK(k == (ssize_t)strlen(bytes) && !memcmp(buf, bytes, strlen(bytes)),
	      "line %d: fd %d took %zd bytes '%.*s', want '%s'", line, c->fd, k,
	      (int)(k > 0 ? k : 0), buf, bytes);
}

static void expect_no_take(struct srv_conn *c, int line)
{
	char buf[16];
	struct iovec iov = { buf, sizeof(buf) };
	ssize_t k;

	CHECK(replay_take(r, c->tap, &iov, 1, &k) == 0, "line %d: fd %d took a turn not its own",
	      line, c->fd);
	CHECK(replay_gate(r, c->tap, 100) == 0, "line %d: fd %d may read its socket out of turn",
	      line, c->fd);
}

static int kicked_waker(int waker)
{
	struct pollfd p = { replay_waker_fd(r, waker), POLLIN, 0 };

	return poll(&p, 1, 0) == 1;
}

static int kicked(void)
{
	return kicked_waker(0);
}

static void in_place(void)
{
	uint64_t ci, di, ei;
	struct srv_conn c = open_conn(&ci), d = open_conn(&di), e = open_conn(&ei);

	replay_tap_watch(r, c.tap, 1, 0);
	replay_tap_watch(r, d.tap, 1, 0);
	replay_tap_watch(r, e.tap, 1, 0);
	EXPECT_READY(0);
	exec(ENTRY_RECV, ci, "c1");
	exec(ENTRY_RECV, di, "dd2");
	exec(ENTRY_RECV, ci, "c3");
	exec(ENTRY_RECV, ei, "e4");

	/* C's second turn waits for its first: the list stops there. */
	EXPECT_READY(0, c.fd, d.fd);
	CHECK(ready((int[1]){ 0 }, 1) == 1, "cap");
	CHECK(!replay_server_sleep(r, 0), "a server with a ready turn was let sleep");
	expect_no_take(&d, __LINE__);
	expect_no_take(&e, __LINE__);
	expect_take(&c, 1, "c", __LINE__);
	EXPECT_READY(0, c.fd, d.fd);
	expect_no_take(&d, __LINE__);
	expect_take(&c, 100, "1", __LINE__);	/* not C's second turn's bytes */
	EXPECT_READY(0, d.fd, c.fd, e.fd);
	expect_no_take(&c, __LINE__);
	expect_take(&d, 100, "dd2", __LINE__);
	EXPECT_READY(0, c.fd, e.fd);
	expect_no_take(&e, __LINE__);
	expect_take(&c, 100, "c3", __LINE__);
	EXPECT_READY(0, e.fd);
	expect_take(&e, 100, "e4", __LINE__);
	EXPECT_READY(0);
	expect_no_take(&c, __LINE__);
	CHECK(!replay_maintain(r), "turns left after every take");

	/* Nothing ready: the server sleeps, and a new turn kicks it. */
	CHECK(!kicked(), "kicked with nothing to do");
	CHECK(replay_server_sleep(r, 0), "the server was kept awake with nothing ready");
	exec(ENTRY_RECV, di, "d5");
	CHECK(kicked(), "a sleeping server was not kicked for its turn");
	replay_server_awake(r, 0);
	CHECK(!kicked(), "the kick was not consumed");
	EXPECT_READY(0, d.fd);
	expect_take(&d, 100, "d5", __LINE__);
	EXPECT_READY(0);
}

/* An epoll server (it watched its connections before): the input of a
 * connection it has not watched yet is held too, not put into the socket,
 * where bytes of a later turn would wake its epoll_wait for nothing until
 * their turn (a restart replays a long log: every connection's input
 * comes right after its ACCEPT).  The watch wakes the set for it. */
/* The kernel gives a replay socket its port inside connect(), and on
 * loopback the server may accept before connect() returned: its claim
 * waits while a connect is under way, and only then. */
static uint16_t arming_port;

static void *arm_later(void *arg)
{
	(void)arg;
	usleep(20000);
	__atomic_store_n(&r->taps[arming_port].state, TAP_ARMED, __ATOMIC_RELEASE);
	__atomic_sub_fetch(&r->connecting, 1, __ATOMIC_ACQ_REL);
	return NULL;
}

static void claim_waits_for_arming(void)
{
	struct sockaddr_in peer = { .sin_family = AF_INET };
	struct replay_tap *t;
	pthread_t th;
	uint64_t t0;

	peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* A port no replay connection of this test used. */
	for (arming_port = 60999; r->taps[arming_port].state != TAP_FREE; arming_port--)
		;
	peer.sin_port = htons(arming_port);
	CHECK(!replay_tap_claim(r, 99, &peer, arming_port),
	      "a connection from a port nobody armed, no connect under way, was claimed");
	__atomic_add_fetch(&r->connecting, 1, __ATOMIC_ACQ_REL);
	CHECK(pthread_create(&th, NULL, arm_later, NULL) == 0, "pthread_create");
	t0 = now_ns();
	t = replay_tap_claim(r, 99, &peer, arming_port);
	CHECK(t == &r->taps[arming_port], "the claim gave up before its connect armed the tap");
	CHECK(now_ns() - t0 >= 15000000ULL, "the claim did not wait for the arming");
	pthread_join(th, NULL);
	CHECK(t->srv_fd == 99 && t->state == TAP_CLAIMED, "claimed tap: fd %d state %u",
	      t->srv_fd, t->state);
	t->state = TAP_FREE;
}

static void held_before_watch(void)
{
	uint64_t ci;
	struct srv_conn c = open_conn(&ci);
	struct pollfd p = { c.fd, POLLIN, 0 };
	int w = replay_waker_open(r), fd;

	CHECK(replay_server_sleep(r, w), "a server with nothing ready was kept awake");
	exec(ENTRY_RECV, ci, "c1");
	CHECK(poll(&p, 1, 50) == 0, "the input of a connection not watched yet went into its socket");
	CHECK(replay_ready_fds(r, w, &fd, 1) == 0, "a connection no set watches was reported ready");
	CHECK(!kicked_waker(w), "a set was kicked for a connection it does not watch");
	replay_tap_watch(r, c.tap, 1, w);
	CHECK(kicked_waker(w), "the set that now watches C was not woken for its held turn");
	replay_server_awake(r, w);
	CHECK(replay_ready_fds(r, w, &fd, 1) == 1 && fd == c.fd, "C's held turn is not ready");
	expect_take(&c, 100, "c1", __LINE__);

	/* Its end of stream comes while input is still held (a new view
	 * closes every connection at once): the socket holds the FIN and must
	 * not be read for the held turn, or the server would take the end of
	 * stream for the input and drop it. */
	char buf[8];
	exec(ENTRY_RECV, ci, "c2");
	exec(ENTRY_CLOSE, ci, NULL);
	CHECK(poll(&p, 1, 2000) == 1, "no end of stream in the socket");
	CHECK(replay_gate(r, c.tap, 100) == 0, "the socket may be read while a held turn heads");
	CHECK(replay_gate_wait(r, c.tap, 100, 1) == REPLAY_GATE_HELD,
	      "a blocking read was not sent to its held turn");
	expect_take(&c, 100, "c2", __LINE__);
	CHECK(replay_gate(r, c.tap, 100) == 100, "the end of stream is C's turn now");
	CHECK(read(c.fd, buf, sizeof(buf)) == 0, "no end of stream");
	replay_tap_read(r, c.tap, 0);
	CHECK(!replay_maintain(r), "turns left after the take");
	replay_tap_close(r, c.tap);
	close(c.fd);
	replay_waker_close(r, w);
}

/* A multi-threaded server: two epoll sets (two threads), each with its
 * own waker.  A thread sees ready only its own set's turns from the head
 * on, and the head's move to a turn of the other set wakes that set, not
 * this one: the thread that can take the turn. */
static void two_sets(void)
{
	uint64_t ci, di;
	struct srv_conn c = open_conn(&ci), d = open_conn(&di);
	int wa = replay_waker_open(r), wb = replay_waker_open(r), fds[4];

	CHECK(wa > 0 && wb > 0 && wa != wb, "wakers %d and %d", wa, wb);
	CHECK(replay_waker_fd(r, wa) != replay_waker_fd(r, wb), "two sets share an eventfd");
	replay_tap_watch(r, c.tap, 1, wa);
	replay_tap_watch(r, d.tap, 1, wb);

	/* B's thread sleeps: the head is A's. */
	CHECK(replay_server_sleep(r, wb), "B kept awake with nothing of its own ready");
	exec(ENTRY_RECV, ci, "c1");
	exec(ENTRY_RECV, di, "d2");
	exec(ENTRY_RECV, ci, "c3");
	CHECK(!kicked_waker(wb), "B kicked for A's turn");
	CHECK(replay_ready_fds(r, wb, fds, 4) == 0, "B sees a turn behind A's as ready");
	CHECK(replay_ready_fds(r, wa, fds, 4) == 1 && fds[0] == c.fd, "A's head turn not ready");
	CHECK(!replay_server_sleep(r, wa), "A let sleep with its turn at the head");

	/* A takes its turn: the head is B's, and B (asleep) is woken. */
	expect_take(&c, 100, "c1", __LINE__);
	CHECK(kicked_waker(wb), "B asleep and not woken for its turn");
	CHECK(!kicked_waker(wa), "A kicked for B's turn");
	replay_server_awake(r, wb);
	CHECK(!kicked_waker(wb), "B's kick not consumed");
	CHECK(replay_ready_fds(r, wa, fds, 4) == 0, "A sees its second turn before B's");
	expect_no_take(&c, __LINE__);

	/* A sleeps now; B takes its turn and wakes A. */
	CHECK(replay_server_sleep(r, wa), "A kept awake");
	CHECK(replay_ready_fds(r, wb, fds, 4) == 1 && fds[0] == d.fd, "B's turn not ready");
	expect_take(&d, 100, "d2", __LINE__);
	CHECK(kicked_waker(wa), "A asleep and not woken for its turn");
	replay_server_awake(r, wa);
	expect_take(&c, 100, "c3", __LINE__);
	CHECK(!replay_maintain(r), "turns left after every take");

	/* A set given back: its waker serves the next set. */
	replay_waker_close(r, wb);
	CHECK(replay_waker_open(r) == wb, "a given-back waker was not reused");
	replay_tap_close(r, c.tap);
	close(c.fd);
	replay_tap_close(r, d.tap);
	close(d.fd);
}

/* Thread A of a two-threaded server (the test's main thread is B): runs
 * the steps it is given, one at a time, on a thread of its own, since a
 * thread's pending request is the thread's own. */
static struct {
	pthread_mutex_t m;
	pthread_cond_t cv;
	void (*step)(void);
	int quit;
} thread_a = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0 };

static void *thread_a_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&thread_a.m);
	for (;;) {
		while (!thread_a.step && !thread_a.quit)
			pthread_cond_wait(&thread_a.cv, &thread_a.m);
		if (thread_a.quit)
			break;
		pthread_mutex_unlock(&thread_a.m);
		thread_a.step();
		pthread_mutex_lock(&thread_a.m);
		thread_a.step = NULL;
		pthread_cond_broadcast(&thread_a.cv);
	}
	pthread_mutex_unlock(&thread_a.m);
	return NULL;
}

static void as_a(void (*step)(void))
{
	pthread_mutex_lock(&thread_a.m);
	thread_a.step = step;
	pthread_cond_broadcast(&thread_a.cv);
	while (thread_a.step)
		pthread_cond_wait(&thread_a.cv, &thread_a.m);
	pthread_mutex_unlock(&thread_a.m);
}

/* The connections of request_order(): C is A's, D is B's. */
static struct srv_conn rc, rd;

static void a_takes_c1(void) { expect_take(&rc, 100, "c1", __LINE__); }
static void a_takes_c5(void) { expect_take(&rc, 100, "c5", __LINE__); }
static void a_takes_c6(void) { expect_take(&rc, 100, "c6", __LINE__); }
static void a_takes_c8(void) { expect_take(&rc, 100, "c8", __LINE__); }
static void a_takes_d9(void) { expect_take(&rd, 100, "d9", __LINE__); }
static void a_takes_d2(void) { expect_take(&rd, 100, "d2", __LINE__); }
static void a_takes_c10(void) { expect_take(&rc, 100, "c10", __LINE__); }
static void a_closes_c(void) { replay_tap_close(r, rc.tap); }
static void a_takes_nothing(void) { expect_no_take(&rc, __LINE__); }

/* A third thread: takes D's turn d4, then runs (spins) 150 ms before it
 * asks for input. */
static int spinner_took;

static void *spinner_takes_d4(void *arg)
{
	uint64_t t0;

	(void)arg;
	expect_take(&rd, 100, "d4", __LINE__);
	__atomic_store_n(&spinner_took, 1, __ATOMIC_RELEASE);
	t0 = now_ns();
	while (now_ns() - t0 < 150 * 1000000ULL)
		;
	replay_request_done(r);
	return NULL;
}
static void a_asks_for_input(void) { replay_request_done(r); }

/* thread_order = requests: a turn taken whole keeps the head until the
 * thread that took it asks for input (replay_request_done) or reads
 * another connection; it reads on in its own connection's next turn; no
 * other thread takes the next turn meanwhile, and a request that runs too
 * long lets the next one go (the role thread, after 50 ms). */
static void request_order(void)
{
	uint64_t ci, di;
	int wa = replay_waker_open(r), wb = replay_waker_open(r), fds[4];
	pthread_t a;

	rc = open_conn(&ci);
	rd = open_conn(&di);
	CHECK(pthread_create(&a, NULL, thread_a_main, NULL) == 0, "pthread_create");
	node.cfg.thread_order = ORDER_REQUESTS;
	replay_tap_watch(r, rc.tap, 1, wa);
	replay_tap_watch(r, rd.tap, 1, wb);
	exec(ENTRY_RECV, ci, "c1");
	exec(ENTRY_RECV, di, "d2");
	exec(ENTRY_RECV, ci, "c3");

	as_a(a_takes_c1);
	/* C's request runs: D's turn is not ready, on no set. */
	CHECK(replay_ready_fds(r, wb, fds, 4) == 0, "B ready while A's request runs");
	CHECK(replay_ready_fds(r, wa, fds, 4) == 0, "A ready for a turn it took");
	CHECK(replay_server_sleep(r, wb), "B kept awake while A's request runs");
	expect_no_take(&rd, __LINE__);
	as_a(a_takes_nothing);	/* C again, with D's turn next: still running */
	CHECK(!kicked_waker(wb), "B kicked while A's request runs");
	/* A asks for input again: its request is done, B is woken. */
	as_a(a_asks_for_input);
	CHECK(kicked_waker(wb), "B asleep and not woken when A's request ended");
	replay_server_awake(r, wb);
	as_a(a_asks_for_input);	/* twice: nothing more */
	CHECK(replay_ready_fds(r, wb, fds, 4) == 1 && fds[0] == rd.fd, "B's turn not ready");

	/* A request that waits (its thread blocked: thread A, asleep on its
	 * condition variable, takes D's turn and stands for a lock wait):
	 * after 50 ms the role thread lets the next turn go. */
	as_a(a_takes_d2);
	CHECK(replay_maintain(r), "the turns ran out");
	expect_no_take(&rc, __LINE__);
	usleep(60 * 1000);
	replay_maintain(r);
	expect_take(&rc, 100, "c3", __LINE__);
	replay_request_done(r);
	CHECK(!replay_maintain(r), "turns left after every take");

	/* A request whose thread runs all along (slow, not waiting) keeps
	 * the order past 50 ms. */
	exec(ENTRY_RECV, di, "d4");
	exec(ENTRY_RECV, ci, "c4");
	pthread_t spin;
	CHECK(pthread_create(&spin, NULL, spinner_takes_d4, NULL) == 0, "pthread_create");
	while (!__atomic_load_n(&spinner_took, __ATOMIC_ACQUIRE))
		usleep(1000);
	usleep(80 * 1000);
	replay_maintain(r);
	expect_no_take(&rc, __LINE__);
	pthread_join(spin, NULL);
	expect_take(&rc, 100, "c4", __LINE__);
	replay_request_done(r);
	CHECK(!replay_maintain(r), "turns left after every take");

	/* A request read in two turns of its connection (a header, then a
	 * body) goes on; D's turn waits for it to end. */
	exec(ENTRY_RECV, ci, "c5");
	exec(ENTRY_RECV, ci, "c6");
	exec(ENTRY_RECV, di, "d7");
	as_a(a_takes_c5);
	as_a(a_takes_c6);
	expect_no_take(&rd, __LINE__);
	as_a(a_asks_for_input);
	expect_take(&rd, 100, "d7", __LINE__);
	replay_request_done(r);

	/* A thread that reads another connection is done with its request. */
	exec(ENTRY_RECV, ci, "c8");
	exec(ENTRY_RECV, di, "d9");
	as_a(a_takes_c8);
	as_a(a_takes_d9);
	as_a(a_asks_for_input);
	CHECK(!replay_maintain(r), "turns left after every take");

	/* A thread that closes its request's connection is done with it. */
	exec(ENTRY_RECV, ci, "c10");
	exec(ENTRY_RECV, di, "d11");
	as_a(a_takes_c10);
	expect_no_take(&rd, __LINE__);
	as_a(a_closes_c);
	expect_take(&rd, 100, "d11", __LINE__);
	replay_request_done(r);
	CHECK(!replay_maintain(r), "turns left after every take");

	node.cfg.thread_order = ORDER_READS;
	pthread_mutex_lock(&thread_a.m);
	thread_a.quit = 1;
	pthread_cond_broadcast(&thread_a.cv);
	pthread_mutex_unlock(&thread_a.m);
	pthread_join(a, NULL);
	replay_tap_close(r, rc.tap);
	close(rc.fd);
	replay_tap_close(r, rd.tap);
	close(rd.fd);
}

struct gate_waiter {
	struct srv_conn *c;
	int blocking;
	size_t cap;
	uint64_t waited_ns;
	int done;
};

static void *wait_turn(void *arg)
{
	struct gate_waiter *w = arg;
	uint64_t t0 = now_ns();

	w->cap = replay_gate_wait(r, w->c->tap, 100, w->blocking);
	w->waited_ns = now_ns() - t0;
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* A thread per connection (no epoll): a read that is not its turn waits
 * for it in replay_gate_wait: a blocking one until the turn comes, a
 * non-blocking one 10 ms at most, and none when the head's connection is
 * read by the waiting thread itself. */
static void gate_wait(void)
{
	uint64_t ci, di;
	struct srv_conn c = open_conn(&ci), d = open_conn(&di);
	struct gate_waiter w = { &d, 1, 0, 0, 0 };
	pthread_t th;

	exec(ENTRY_RECV, ci, "c1");
	exec(ENTRY_RECV, di, "d2");
	CHECK(pthread_create(&th, NULL, wait_turn, &w) == 0, "pthread_create");
	usleep(30 * 1000);
	CHECK(!__atomic_load_n(&w.done, __ATOMIC_ACQUIRE), "a blocking read went on out of turn");
	expect_read(&c, 100, "c1", __LINE__);
	pthread_join(th, NULL);
	CHECK(w.cap == 2, "the blocking read may read %zu bytes at its turn, want 2", w.cap);
	expect_read(&d, 100, "d2", __LINE__);

	/* Non-blocking: C's turn heads, and C was read by another thread. */
	exec(ENTRY_RECV, ci, "c3");
	exec(ENTRY_RECV, di, "d4");
	w = (struct gate_waiter){ &d, 0, 0, 0, 0 };
	CHECK(pthread_create(&th, NULL, wait_turn, &w) == 0, "pthread_create");
	pthread_join(th, NULL);
	CHECK(w.cap == 0 && w.waited_ns >= 9000000 && w.waited_ns < 1000000000,
	      "a non-blocking read out of turn: may read %zu after %llu us, want 0 after ~10 ms",
	      w.cap, (unsigned long long)(w.waited_ns / 1000));
	/* ... and this thread read C last: no wait, it must take C itself. */
	uint64_t t0 = now_ns();
	CHECK(replay_gate_wait(r, d.tap, 100, 0) == 0 && now_ns() - t0 < 5000000,
	      "waited for a turn only this thread can take");
	expect_read(&c, 100, "c3", __LINE__);
	CHECK(replay_gate_wait(r, d.tap, 100, 0) == 2, "D's turn heads: no wait, 2 bytes");
	expect_read(&d, 100, "d4", __LINE__);
	CHECK(!replay_maintain(r), "turns left after every read");
	replay_tap_close(r, c.tap);
	close(c.fd);
	replay_tap_close(r, d.tap);
	close(d.fd);
}

/* Also after a failed check. */
static void cleanup(void)
{
	testdir_remove(dir);
}

int main(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	char path[128], err[256];
	FILE *f;

	CHECK(mkdtemp(dir), "mkdtemp");
	atexit(cleanup);
	lsock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(lsock >= 0 && bind(lsock, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	      listen(lsock, 16) == 0 && getsockname(lsock, (struct sockaddr *)&a, &alen) == 0,
	      "listen: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/c.conf", dir);
	f = fopen(path, "w");
	CHECK(f, "config");
	fprintf(f, "cluster = unit\napp_cmd = true\n[node 0]\naddress = 127.0.0.1\napp_port = %d\n"
		   "data_dir = %s\n", ntohs(a.sin_port), dir);
	fclose(f);
	CHECK(config_load(path, &node.cfg, err, sizeof(err)) == 0, "%s", err);
	node.self = 0;
	node.ctl = &page.ctl;
	node.status = region_status(node.ctl);
	node.ops = &wake_only;
	r = replay_new(&node);
	CHECK(r, "replay_new");

	/* A server that never watched a connection with epoll first: once
	 * one did, replay holds new connections' input (held_before_watch). */
	socket_path();
	answers();
	gate_wait();
	in_place();
	held_before_watch();
	claim_waits_for_arming();
	two_sets();
	request_order();

	printf("ok\n");
	return 0;
}
