/* Peer admission: the key file, the HMAC proofs, and the tcp transport
 * refusing a wrong secret, a foreign address, an old hello and a fenced
 * peer, with nothing they send landing in the region; a fence holds for
 * the peer's incarnation only, and its restart is admitted again.  Node 0
 * listens on 127.0.0.1, node 1 is 127.0.0.2 (both loopback addresses on
 * Linux). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coordinator/transport/admission.h"
#include "common/logger.h"
#include "coordinator/storage/region_wire.h"
#include "coordinator/transport/transport.h"
#include "tests/unit/unit.h"

#define REGION (64 << 10)

static char dir[64], logpath[128];
static int port0;

static void write_file(const char *name, const char *text, int mode)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text), "%s", path);
	close(fd);
	chmod(path, (mode_t)mode);
}

static int log_has(const char *needle)
{
	char buf[65536];
	int fd = open(logpath, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return strstr(buf, needle) != NULL;
}

static void test_key_file(void)
{
	char path[128], err[512];
	struct admit_key k, k2;
	struct stat st;

	snprintf(path, sizeof(path), "%s/gen.key", dir);
	CHECK(admit_key_generate(path) == 1, "generate");
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "mode %o", st.st_mode & 0777);
	CHECK(st.st_size == 65, "size %lld", (long long)st.st_size);
	CHECK(admit_key_generate(path) == 0, "an existing key is kept");
	CHECK(admit_key_load(path, &k, err, sizeof(err)) == 0, "%s", err);
	chmod(path, 0644);
	CHECK(admit_key_load(path, &k2, err, sizeof(err)) == -EPERM, "world-readable key loaded");
	CHECK(strstr(err, "chmod 600"), "%s", err);
	write_file("short.key", "abcd\n", 0600);
	snprintf(path, sizeof(path), "%s/short.key", dir);
	CHECK(admit_key_load(path, &k2, err, sizeof(err)) == -EINVAL, "short key loaded");
	write_file("bad.key", "zz00000000000000000000000000000000000000000000000000000000000000\n",
		   0600);
	snprintf(path, sizeof(path), "%s/bad.key", dir);
	CHECK(admit_key_load(path, &k2, err, sizeof(err)) == -EINVAL, "non-hex key loaded");
	snprintf(path, sizeof(path), "%s/missing.key", dir);
	CHECK(admit_key_load(path, &k2, err, sizeof(err)) == -ENOENT, "missing key");
}

static void test_mac(void)
{
	struct admit_key k, other;
	uint8_t a[ADMIT_NONCE_LEN], b[ADMIT_NONCE_LEN], mac[ADMIT_MAC_LEN];

	memset(&k, 7, sizeof(k));
	memset(&other, 8, sizeof(other));
	CHECK(admit_nonce(a) == 0 && admit_nonce(b) == 0 && memcmp(a, b, sizeof(a)), "nonces");
	admit_mac(&k, "l", 1, 2, a, sizeof(a), b, sizeof(b), mac);
	CHECK(admit_verify(&k, "l", 1, 2, a, sizeof(a), b, sizeof(b), mac) == 0, "verify");
	CHECK(admit_verify(&other, "l", 1, 2, a, sizeof(a), b, sizeof(b), mac), "other key");
	CHECK(admit_verify(&k, "m", 1, 2, a, sizeof(a), b, sizeof(b), mac), "other label");
	CHECK(admit_verify(&k, "l", 2, 1, a, sizeof(a), b, sizeof(b), mac), "ids swapped");
	CHECK(admit_verify(&k, "l", 1, 2, b, sizeof(b), a, sizeof(a), mac), "nonces swapped");
	mac[31] ^= 1;
	CHECK(admit_verify(&k, "l", 1, 2, a, sizeof(a), b, sizeof(b), mac), "flipped bit");
}

static void test_address(const struct apus_config *cfg)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct sockaddr_in6 m = { .sin6_family = AF_INET6 };

	inet_pton(AF_INET, "127.0.0.2", &a.sin_addr);
	CHECK(admit_address_ok(cfg, 1, (struct sockaddr *)&a), "node 1's address");
	CHECK(!admit_address_ok(cfg, 0, (struct sockaddr *)&a), "node 0 is elsewhere");
	inet_pton(AF_INET6, "::ffff:127.0.0.2", &m.sin6_addr);
	CHECK(admit_address_ok(cfg, 1, (struct sockaddr *)&m), "v4-mapped");
}

/* Node 0's receiving side, driven as the protocol's waits would. */
static struct transport *t0;
static int stop_rx;

static void *receiver(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop_rx, __ATOMIC_ACQUIRE))
		t0->ops->wait(t0, t0->ops->bell(t0), 2000);
	return NULL;
}

static int connect_within(struct transport *t, int peer, int ms)
{
	for (int i = 0; i < ms; i++) {
		if (t->ops->connect(t, peer) == 0)
			return 1;
		usleep(1000);
	}
	return 0;
}

/* A hand-made client: a socket from FROM_ADDR that claims to be node 1,
 * with a hello of VERSION (the layout of version 2). */
static int raw_hello(const char *from_addr, uint16_t version)
{
	struct sockaddr_in me = { .sin_family = AF_INET }, to = { .sin_family = AF_INET };
	struct {
		uint32_t magic;
		uint16_t version;
		uint8_t from, to;
		uint8_t nonce[16];
		uint64_t incarnation;
	} h = { 0x41505553u, version, 1, 0, { 1 }, 0x5eed };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	inet_pton(AF_INET, from_addr, &me.sin_addr);
	inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
	to.sin_port = htons((uint16_t)port0);
	CHECK(bind(fd, (struct sockaddr *)&me, sizeof(me)) == 0, "bind %s", from_addr);
	CHECK(connect(fd, (struct sockaddr *)&to, sizeof(to)) == 0, "connect");
	CHECK(send(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h), "hello");
	return fd;
}

/* Sends FRAMES frames of 0xee bytes into the region, as if admitted. */
static void raw_frames(int fd)
{
	struct { uint64_t off; uint32_t len, pad; uint8_t body[64]; } f = { 8192, 64, 0, { 0 } };

	memset(f.body, 0xee, sizeof(f.body));
	for (int i = 0; i < 16; i++)
		if (send(fd, &f, sizeof(f), MSG_NOSIGNAL) < 0)
			break;
}

/* The peer hangs up on FD within 3 s. */
static int closed_by_peer(int fd)
{
	char c[256];
	struct timeval tv = { 3, 0 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (;;) {
		ssize_t n = recv(fd, c, sizeof(c), 0);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return 1;
		if (n < 0)
			return 0;
	}
}

/* The word the writes target, read as the protocol reads a canary. */
static uint64_t landed(char *r)
{
	return __atomic_load_n((uint64_t *)(void *)(r + 8192), __ATOMIC_ACQUIRE);
}

static int region_untouched(char *r)
{
	for (size_t i = REGION_CTL_SIZE; i < REGION; i++)
		if (__atomic_load_n(&r[i], __ATOMIC_RELAXED))
			return 0;
	return 1;
}

int main(void)
{
	char path[128], err[512], conf[1024];
	struct apus_config cfg;
	struct transport *t1, *bad;
	pthread_t rx;
	static char r0[REGION], r1[REGION], rb[REGION];
	uint64_t word = 0x1122334455667788ULL;

	strcpy(dir, "/tmp/apus-admit-XXXXXX");
	CHECK(mkdtemp(dir), "mkdtemp");
	snprintf(logpath, sizeof(logpath), "%s/log", dir);
	setenv("APUS_LOG_FILE", logpath, 1);
	logger_init("test");

	test_key_file();
	test_mac();

	port0 = 21000 + (int)(getpid() % 4000) * 3;
	snprintf(path, sizeof(path), "%s/a.key", dir);
	CHECK(admit_key_generate(path) == 1, "key a");
	snprintf(path, sizeof(path), "%s/b.key", dir);
	CHECK(admit_key_generate(path) == 1, "key b");
	/* Node 2 stands for an impostor: at node 1's address with another key. */
	snprintf(conf, sizeof(conf),
		 "transport = tcp\napp_cmd = true\nsecret_file = a.key\n"
		 "[node 0]\naddress = 127.0.0.1\napp_port = 1\npeer_port = %d\ndata_dir = n0\n"
		 "[node 1]\naddress = 127.0.0.2\napp_port = 1\npeer_port = %d\ndata_dir = n1\n"
		 "[node 2]\naddress = 127.0.0.3\napp_port = 1\npeer_port = %d\ndata_dir = n2\n"
		 "secret_file = b.key\n", port0, port0 + 1, port0 + 2);
	write_file("c.conf", conf, 0644);
	snprintf(path, sizeof(path), "%s/c.conf", dir);
	CHECK(config_load(path, &cfg, err, sizeof(err)) == 0, "%s", err);
	test_address(&cfg);

	CHECK(transport_tcp_ops.open(&cfg, 0, r0, REGION, &t0) == 0, "open 0");
	CHECK(transport_tcp_ops.open(&cfg, 1, r1, REGION, &t1) == 0, "open 1");
	CHECK(transport_tcp_ops.open(&cfg, 2, rb, REGION, &bad) == 0, "open 2");
	pthread_create(&rx, NULL, receiver, NULL);

	/* A peer with the wrong secret never connects; nothing lands. */
	CHECK(!connect_within(bad, 0, 1500), "node 2 with another key was admitted");
	CHECK(bad->ops->write(bad, 0, 8192, &word, 8) == -ENOTCONN, "write without connection");
	CHECK(log_has("refused a peer connection from 127.0.0.3"), "refusal not logged");
	CHECK(log_has("node 0 (127.0.0.1") && log_has("does not know our cluster secret"),
	      "the connecting side did not log why");

	/* A connection from an address not in the config. */
	int fd = raw_hello("127.0.0.9", 2);
	raw_frames(fd);
	CHECK(closed_by_peer(fd), "a foreign address was not dropped");
	close(fd);
	CHECK(log_has("127.0.0.9") && log_has("not node 1's address"), "foreign address not logged");

	/* A hello of another version (version 1 had no incarnation). */
	fd = raw_hello("127.0.0.2", 1);
	raw_frames(fd);
	CHECK(closed_by_peer(fd), "an old hello was not dropped");
	close(fd);
	CHECK(log_has("bad hello"), "an old hello was not logged");

	/* The right address but no key: a made-up proof, then frames. */
	fd = raw_hello("127.0.0.2", 2);
	uint8_t challenge[48], proof[32];
	CHECK(recv(fd, challenge, sizeof(challenge), MSG_WAITALL) == (ssize_t)sizeof(challenge),
	      "challenge");
	memset(proof, 0x42, sizeof(proof));
	CHECK(send(fd, proof, sizeof(proof), 0) == (ssize_t)sizeof(proof), "proof");
	raw_frames(fd);
	CHECK(closed_by_peer(fd), "a wrong proof was not dropped");
	close(fd);
	CHECK(region_untouched(r0), "a refused peer's bytes reached the region");

	/* The real node 1 is admitted and its writes land. */
	CHECK(connect_within(t1, 0, 3000), "node 1 was not admitted");
	CHECK(t1->ops->write(t1, 0, 8192, &word, 8) == 0, "write");
	t1->ops->ring(t1, 0);
	for (int i = 0; i < 2000 && landed(r0) != word; i++)
		usleep(1000);
	CHECK(landed(r0) == word, "node 1's write did not land");

	/* Fenced: its connection is closed, later writes do not land, and this
	 * incarnation (the same transport) cannot come back. */
	CHECK(t0->ops->fence(t0, 1) == 0, "fence");
	uint64_t next = word + 1;
	for (int i = 0; i < 20; i++) {
		t1->ops->write(t1, 0, 8192, &next, 8);
		t1->ops->ring(t1, 0);
	}
	usleep(200000);
	CHECK(landed(r0) == word, "a fenced peer's write landed");
	CHECK(t1->ops->check(t1, 0) != 0, "the fenced connection is still up");
	/* ... and is told why once it proved the secret: a backup that its
	 * leader fenced comes back as a new incarnation (backup.c). */
	int rc = -EAGAIN;
	for (int i = 0; i < 3000 && rc == -EAGAIN; i++) {
		rc = t1->ops->connect(t1, 0);
		if (rc == -EAGAIN)
			usleep(1000);
	}
	CHECK(rc == -EACCES, "a fenced peer's connect gave %d, want -EACCES", rc);
	/* Logged by node 0's receiver after its welcome: maybe after we return. */
	for (int i = 0; i < 2000 && !log_has("node 1 is fenced (told so)"); i++)
		usleep(1000);
	CHECK(log_has("node 1 is fenced (told so)"), "the refusal of a fenced peer was not logged");
	CHECK(landed(r0) == word, "a fenced peer's write landed after it tried to reconnect");

	/* Node 1 restarts: a new transport, a new incarnation.  It is admitted,
	 * which lifts the fence, and its writes land. */
	t1->ops->close(t1);
	CHECK(transport_tcp_ops.open(&cfg, 1, r1, REGION, &t1) == 0, "reopen 1");
	CHECK(connect_within(t1, 0, 3000), "node 1's new incarnation was not admitted");
	/* Logged by node 0's receiver after its welcome: maybe after we return. */
	for (int i = 0; i < 2000 && !log_has("node 1 restarted (new incarnation): fence lifted"); i++)
		usleep(1000);
	CHECK(log_has("node 1 restarted (new incarnation): fence lifted"), "lift not logged");
	CHECK(t1->ops->write(t1, 0, 8192, &next, 8) == 0, "write after the restart");
	t1->ops->ring(t1, 0);
	for (int i = 0; i < 2000 && landed(r0) != next; i++)
		usleep(1000);
	CHECK(landed(r0) == next, "the new incarnation's write did not land");

	/* The new incarnation is fenced the same way. */
	CHECK(t0->ops->fence(t0, 1) == 0, "fence again");
	uint64_t later = next + 1;
	for (int i = 0; i < 20; i++) {
		t1->ops->write(t1, 0, 8192, &later, 8);
		t1->ops->ring(t1, 0);
	}
	usleep(200000);
	CHECK(landed(r0) == next, "the fenced new incarnation's write landed");
	CHECK(t1->ops->check(t1, 0) != 0, "the fenced new connection is still up");
	CHECK(!connect_within(t1, 0, 500), "the fenced new incarnation reconnected");
	CHECK(landed(r0) == next, "the fenced new incarnation's write landed later");

	__atomic_store_n(&stop_rx, 1, __ATOMIC_RELEASE);
	t0->ops->wake(t0);
	pthread_join(rx, NULL);
	bad->ops->close(bad);
	t1->ops->close(t1);
	t0->ops->close(t0);
	snprintf(conf, sizeof(conf), "rm -rf %s", dir);
	if (system(conf))
		return 1;
	return 0;
}
