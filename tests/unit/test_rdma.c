/* The rdma transport.  Without an RDMA device, open() fails cleanly with
 * -ENODEV after one log line, node_start says why, and the test skips
 * (exit 77).  With one (hardware, rxe or siw):
 *   1. raw writes of 1 B..64 KiB between two endpoints of this process land
 *      whole, the last word last, from the region, the heap and the stack;
 *      rings move the peer's doorbell; after fence() nothing lands;
 *   2. a peer holding another cluster key is refused both ways;
 *   3. a leader/backup pair over rdma keeps byte-identical logs through many
 *      laps of a 64 KiB log.
 * APUS_RDMA_ADDR: the address both endpoints use (default: the first IPv4
 * address of the first RDMA device's netdev, else 127.0.0.1). */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/mman.h>

#include <infiniband/verbs.h>

#include "common/logger.h"
#include "coordinator/storage/region_wire.h"
#include "coordinator/transport/transport.h"
#include "tests/unit/twonode.h"

static const struct transport_ops *ops = &transport_rdma_ops;
static char dir[64];
static int base_port;

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	CHECK(f, "cannot write %s", path);
	fputs(text, f);
	fclose(f);
}

/* Writes NAME in the test directory: two rdma nodes on ADDR at ports
 * PORT and PORT+1; node 1 reads its key from NODE1_KEY if given. */
static void write_config(const char *name, const char *addr, int port, const char *node1_key)
{
	char path[128], text[1024], key[160] = "";

	if (node1_key)
		snprintf(key, sizeof(key), "secret_file = %s\n", node1_key);
	snprintf(text, sizeof(text),
		 "cluster = unit\nlog_size = 64K\nmax_entry = 4K\nfsync = none\ntransport = rdma\n"
		 "app_cmd = true\n[node 0]\naddress = %s\napp_port = 1\npeer_port = %d\n"
		 "data_dir = n0\n[node 1]\naddress = %s\napp_port = 2\npeer_port = %d\n"
		 "data_dir = n1\n%s",
		 addr, port, addr, port + 1, key);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	write_file(path, text);
}

static int device_count(void)
{
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);

	if (!l)
		return 0;
	ibv_free_device_list(l);
	return n;
}

/* The first IPv4 address of the netdev under the first RDMA device's
 * port 1 (RoCE, rxe), into ADDR; 0 if there is none. */
static int device_address(char *addr, size_t len)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	char path[256], ndev[64] = "";
	struct ifaddrs *ifa, *i;
	int found = 0;

	if (!l || !l[0]) {
		if (l)
			ibv_free_device_list(l);
		return 0;
	}
	for (int g = 0; g < 4 && !ndev[0]; g++) {
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/%d",
			 ibv_get_device_name(l[0]), g);
		FILE *f = fopen(path, "r");
		if (f) {
			if (!fgets(ndev, sizeof(ndev), f))
				ndev[0] = '\0';
			ndev[strcspn(ndev, "\n")] = '\0';
			fclose(f);
		}
	}
	ibv_free_device_list(l);
	if (!ndev[0] || getifaddrs(&ifa))
		return 0;
	for (i = ifa; i && !found; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !strcmp(i->ifa_name, ndev)) {
			inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, addr,
				  (socklen_t)len);
			found = 1;
		}
	freeifaddrs(ifa);
	return found;
}

/* ---- one endpoint with a receiving thread ------------------------------ */

struct ep {
	struct apus_config cfg;
	char *region;
	size_t size;
	struct transport *t;
	pthread_t thread;
	int stop;
};

#define EP_LOG (256 << 10)	/* small: pinned memory fits a default `ulimit -l` */

/* The protocol's own loop, reduced: wait (which polls) until stopped. */
static void *receiver(void *arg)
{
	struct ep *e = arg;

	while (!__atomic_load_n(&e->stop, __ATOMIC_ACQUIRE))
		ops->wait(e->t, ops->bell(e->t), 2000);
	return NULL;
}

static void ep_open(struct ep *e, const char *config, int self)
{
	char path[128], err[512];
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, config);
	CHECK(config_load(path, &e->cfg, err, sizeof(err)) == 0, "%s", err);
	e->size = REGION_CTL_SIZE + EP_LOG;
	e->region = mmap(NULL, e->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(e->region != MAP_FAILED, "mmap");
	rc = ops->open(&e->cfg, self, e->region, e->size, &e->t);
	CHECK(rc == 0, "open node %d of %s on %s: %s (set APUS_RDMA_ADDR to the address of the "
		       "RDMA device's interface)", self, config, e->cfg.nodes[self].address, strerror(-rc));
	e->stop = 0;
	CHECK(pthread_create(&e->thread, NULL, receiver, e) == 0, "thread");
}

static void ep_close(struct ep *e)
{
	__atomic_store_n(&e->stop, 1, __ATOMIC_RELEASE);
	ops->wake(e->t);
	pthread_join(e->thread, NULL);
	ops->close(e->t);
	munmap(e->region, e->size);
}

/* connect() until it succeeds or MS pass; its last result. */
static int connect_within(struct ep *e, int peer, int ms)
{
	uint64_t end = now_ns() + (uint64_t)ms * 1000000ULL;
	int rc;

	while ((rc = ops->connect(e->t, peer)) != 0 && now_ns() < end)
		usleep(5000);
	return rc;
}

static uint64_t rnd_state = 88172645463325252ULL;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static void fill(char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (char)rnd();
}

/* Waits until DST holds SRC's LEN bytes, looking at the last word first
 * when there is one: once it shows, everything before it must be there. */
static void expect_landed(const char *dst, const char *src, size_t len, const char *what)
{
	uint64_t end = now_ns() + 3000 * 1000000ULL;
	size_t tail = len >= 8 ? 8 : len;

	while (memcmp((const void *)(dst + len - tail), src + len - tail, tail) && now_ns() < end)
		usleep(100);
	CHECK(!memcmp(dst + len - tail, src + len - tail, tail), "%s: %zu bytes never landed", what,
	      len);
	for (size_t i = 0; i < len; i++)
		CHECK(dst[i] == src[i], "%s: byte %zu of %zu differs although the last word landed",
		      what, i, len);
}

static void raw_writes(void)
{
	static struct ep a, b;
	static char heap[65536 + 8];
	char *src_in_region;
	uint32_t bell0;

	ep_open(&a, "raw.conf", 0);
	ep_open(&b, "raw.conf", 1);
	CHECK(connect_within(&a, 1, 5000) == 0, "node 0 never reached node 1");
	CHECK(connect_within(&b, 0, 5000) == 0, "node 1 never reached node 0");
	CHECK(ops->connected(a.t, 1) && ops->check(a.t, 1) == 0, "check after connect");
	bell0 = ops->bell(b.t);

	/* Sources in A's own region live in its second half; targets in B's
	 * log area anywhere (never the control page: B's doorbell is there). */
	src_in_region = a.region + REGION_CTL_SIZE + EP_LOG / 2;
	for (int i = 0; i < 600; i++) {
		int kind = i % 3;
		size_t len = kind == 2 ? 1 + rnd() % 64 : 1 + rnd() % 65536;
		uint64_t off = REGION_CTL_SIZE + rnd() % (EP_LOG - len);
		char stack[64];
		char *src = kind == 0 ? heap : kind == 1 ? src_in_region : stack;
		uint64_t stamp = ((uint64_t)i + 1) * 0x9e3779b97f4a7c15ULL | 1;

		fill(src, len);
		if (len >= 8)
			memcpy(src + len - 8, &stamp, 8);	/* unlike anything there before */
		CHECK(ops->write(a.t, 1, off, src, len) == 0, "write %d (%zu bytes at %llu)", i, len,
		      (unsigned long long)off);
		ops->ring(a.t, 1);
		expect_landed(b.region + off, src, len, kind == 0 ? "heap" : kind == 1 ? "region" : "stack");
	}
	/* Half the log in one write, from the region and from the heap: more
	 * than a message or a staging buffer holds. */
	fill(src_in_region, EP_LOG / 2);
	CHECK(ops->write(a.t, 1, REGION_CTL_SIZE, src_in_region, EP_LOG / 2) == 0, "big write");
	ops->ring(a.t, 1);
	expect_landed(b.region + REGION_CTL_SIZE, src_in_region, EP_LOG / 2, "big");
	char *big = malloc(EP_LOG / 2);
	CHECK(big, "malloc");
	fill(big, EP_LOG / 2);
	CHECK(ops->write(a.t, 1, REGION_CTL_SIZE + EP_LOG / 2 - 3, big, EP_LOG / 2) == 0,
	      "big heap write");
	ops->ring(a.t, 1);
	expect_landed(b.region + REGION_CTL_SIZE + EP_LOG / 2 - 3, big, EP_LOG / 2, "big heap");
	free(big);
	CHECK(ops->write(a.t, 1, b.size - 4, heap, 8) == -EINVAL, "a write past the end was taken");
	for (int i = 0; i < 2000 && ops->bell(b.t) == bell0; i++)
		usleep(1000);
	CHECK(ops->bell(b.t) != bell0, "rings never moved the peer's doorbell");

	/* Fence: from now on nothing of A's lands in B, and A is refused. */
	char before[4096], after[4096];
	uint64_t off = REGION_CTL_SIZE + 12345;
	memcpy(before, b.region + off, sizeof(before));
	CHECK(ops->fence(b.t, 0) == 0, "fence");
	fill(heap, sizeof(after));
	ops->write(a.t, 1, off, heap, sizeof(after));	/* may fail or vanish: either is right */
	ops->ring(a.t, 1);
	usleep(300 * 1000);
	memcpy(after, b.region + off, sizeof(after));
	CHECK(!memcmp(before, after, sizeof(before)), "a write landed after the fence");
	int rc = 0;
	for (int i = 0; i < 3000 && (rc = ops->check(a.t, 1)) == 0; i++)
		usleep(1000);
	CHECK(rc == -ECONNRESET, "node 0 never noticed the fence: check says %d", rc);
	CHECK(connect_within(&a, 1, 1500) != 0, "a fenced node reconnected");
	ep_close(&a);
	ep_close(&b);
}

static void wrong_key(void)
{
	static struct ep c, d;
	static char snap_c[EP_LOG], snap_d[EP_LOG];

	ep_open(&c, "key.conf", 0);
	ep_open(&d, "otherkey.conf", 1);
	fill(c.region + REGION_CTL_SIZE, EP_LOG);
	fill(d.region + REGION_CTL_SIZE, EP_LOG);
	memcpy(snap_c, c.region + REGION_CTL_SIZE, EP_LOG);
	memcpy(snap_d, d.region + REGION_CTL_SIZE, EP_LOG);
	CHECK(connect_within(&c, 1, 2000) != 0, "a peer with another key accepted us");
	CHECK(connect_within(&d, 0, 2000) != 0, "we accepted a peer with another key");
	CHECK(!ops->connected(c.t, 1) && !ops->connected(d.t, 0), "connected anyway");
	CHECK(!memcmp(snap_c, c.region + REGION_CTL_SIZE, EP_LOG), "node 0's region changed");
	CHECK(!memcmp(snap_d, d.region + REGION_CTL_SIZE, EP_LOG), "node 1's region changed");
	ep_close(&c);
	ep_close(&d);
}

/* ---- the protocol over rdma -------------------------------------------- */

static void wrapping_log(void)
{
	struct twonode c;
	char path[128];

	snprintf(c.dir, sizeof(c.dir), "%s", dir);
	snprintf(path, sizeof(path), "%s/pair.conf", dir);
	twonode_start_conf(&c, path);
	srand(3);
	twonode_wrap(&c, 3000);
	twonode_stop(&c);
}

/* ---- no device ---------------------------------------------------------- */

static void no_device(void)
{
	static struct apus_config cfg;
	char path[128], err[512], log[4096];
	struct transport *t = NULL;
	size_t size = REGION_CTL_SIZE + 65536;
	char *region = calloc(1, size);
	FILE *f;
	int rc;

	CHECK(region, "calloc");
	CHECK(transport_find("rdma") == ops, "the rdma backend is not in the table");
	snprintf(path, sizeof(path), "%s/raw.conf", dir);
	CHECK(config_load(path, &cfg, err, sizeof(err)) == 0, "%s", err);
	rc = ops->open(&cfg, 0, region, size, &t);
	CHECK(rc == -ENODEV, "open without a device returned %d (%s)", rc, strerror(-rc));
	/* The whole node fails the same way, saying why. */
	snprintf(path, sizeof(path), "%s/pair.conf", dir);
	CHECK(!node_start(path, 0, err, sizeof(err)), "a node started without an RDMA device");
	CHECK(strstr(err, "rdma") && strstr(err, strerror(ENODEV)), "node_start said '%s'", err);
	/* One log line each, and nothing else. */
	snprintf(path, sizeof(path), "%s/log", dir);
	f = fopen(path, "r");
	CHECK(f, "no log file");
	size_t n = fread(log, 1, sizeof(log) - 1, f);
	fclose(f);
	log[n] = '\0';
	const char *want = "rdma: no RDMA device (ibv_devices lists none); use transport tcp\n";
	const char *first = strstr(log, want);
	CHECK(first && strstr(first + 1, want) && !strstr(strstr(first + 1, want) + 1, want),
	      "expected the line twice:\n%s", log);
	int lines = 0;
	for (char *p = log; *p; p++)
		lines += *p == '\n';
	CHECK(lines == 2, "expected 2 log lines, got %d:\n%s", lines, log);
	free(region);
}

int main(void)
{
	char path[128], addr[64] = "127.0.0.1";
	const char *env = getenv("APUS_RDMA_ADDR");
	int have = device_count();

	strcpy(dir, "/tmp/apus-rdma-XXXXXX");
	CHECK(mkdtemp(dir), "mkdtemp");
	snprintf(path, sizeof(path), "%s/n0", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/n1", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/apus.key", dir);
	CHECK(admit_key_generate(path) == 1, "key file");
	snprintf(path, sizeof(path), "%s/other.key", dir);
	CHECK(admit_key_generate(path) == 1, "second key file");
	if (env && *env)
		snprintf(addr, sizeof(addr), "%s", env);
	else if (have)
		device_address(addr, sizeof(addr));
	/* Below the ephemeral range (siw's ports are real TCP ports). */
	base_port = 20000 + (int)(getpid() % 1500) * 8;
	write_config("raw.conf", addr, base_port, NULL);
	write_config("key.conf", addr, base_port + 2, NULL);
	write_config("otherkey.conf", addr, base_port + 2, "other.key");
	write_config("pair.conf", addr, base_port + 4, NULL);

	if (!have) {
		snprintf(path, sizeof(path), "%s/log", dir);
		setenv("APUS_LOG_FILE", path, 1);
		logger_init("test_rdma");
		no_device();
		testdir_remove(dir);
		printf("skipped: no RDMA device\n");
		fflush(stdout);
		return UNIT_SKIP;
	}
	printf("rdma tests on %s\n", addr);
	raw_writes();
	wrong_key();
	wrapping_log();
	testdir_remove(dir);
	return 0;
}
