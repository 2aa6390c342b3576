/* shm fencing: fence() swaps the region file, so a fenced peer's writes
 * through its old mapping no longer land; it cannot reconnect, while an
 * unfenced peer follows the new file silently and a restarted (new
 * incarnation) fenced peer is admitted again.  The log written before the
 * swap survives it, and the copy stays sparse.  Three nodes in this one
 * process: every peer looks alive, so the swap really happens. */
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/logger.h"
#include "coordinator/storage/region.h"
#include "coordinator/storage/region_status.h"
#include "coordinator/storage/region_wire.h"
#include "coordinator/transport/transport.h"
#include "tests/unit/testdir.h"
#include "tests/unit/unit.h"

#define LOG_MB 64
#define DATA_MB 4	/* log written before the fence */

static char dir[64], logpath[128];
static struct apus_config cfg;
static void *base[3];
static int fds[3];
static struct transport *t[3];

static int log_count(const char *needle)
{
	static char buf[1 << 16];
	int fd = open(logpath, O_RDONLY), n = 0;
	ssize_t len = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (len <= 0)
		return 0;
	buf[len] = '\0';
	for (char *p = buf; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void node_open(int k)
{
	struct region_origin origin;

	CHECK(region_create(&cfg, k, &base[k], &fds[k], &origin) == 0, "region %d", k);
	CHECK(transport_shm_ops.open(&cfg, k, base[k], region_size_for(cfg.log_size), &t[k]) == 0,
	      "open %d", k);
}

static struct region_ctl *ctl(int k)
{
	return base[k];
}

/* The word at OFF of node 0's region, read through node 0's own mapping. */
static uint64_t word0(uint64_t off)
{
	return __atomic_load_n((uint64_t *)(void *)((char *)base[0] + off), __ATOMIC_ACQUIRE);
}

static void put(int from, uint64_t off, uint64_t v)
{
	CHECK(t[from]->ops->write(t[from], 0, off, &v, sizeof(v)) == 0, "node %d write", from);
	t[from]->ops->ring(t[from], 0);
}

static ino_t ino_of(int k)
{
	char path[PATH_MAX];
	struct stat st;

	CHECK(config_node_path(&cfg, k, REGION_FILE, path, sizeof(path)) == 0 && stat(path, &st) == 0,
	      "stat region %d", k);
	return st.st_ino;
}

static long long allocated(int k)
{
	char path[PATH_MAX];
	struct stat st;

	CHECK(config_node_path(&cfg, k, REGION_FILE, path, sizeof(path)) == 0 && stat(path, &st) == 0,
	      "stat region %d", k);
	return (long long)st.st_blocks * 512;
}

/* A thread of node 0 asleep on its doorbell across the swap. */
static uint64_t woke_after_ns;

static void *sleeper(void *arg)
{
	uint64_t start = now_ns();

	(void)arg;
	t[0]->ops->wait(t[0], t[0]->ops->bell(t[0]), 5 * 1000 * 1000);
	__atomic_store_n(&woke_after_ns, now_ns() - start, __ATOMIC_RELEASE);
	return NULL;
}

int main(void)
{
	const uint64_t A = REGION_CTL_SIZE + (DATA_MB << 20) + 64, B = A + 4096, C = B + 4096;
	char path[128], conf[1024], *log0;
	uint64_t inc0, inc1, start;
	pthread_t th;
	ino_t before;
	FILE *f;
	int rc;

	strcpy(dir, "/tmp/apus-fence-XXXXXX");
	CHECK(mkdtemp(dir), "mkdtemp");
	snprintf(logpath, sizeof(logpath), "%s/log", dir);
	setenv("APUS_LOG_FILE", logpath, 1);
	logger_init("test");
	for (int k = 0; k < 3; k++) {
		snprintf(path, sizeof(path), "%s/n%d", dir, k);
		CHECK(mkdir(path, 0700) == 0, "%s", path);
	}
	snprintf(conf, sizeof(conf),
		 "cluster = unit\nlog_size = %dM\nmax_entry = 64K\ntransport = shm\napp_cmd = true\n"
		 "[node 0]\napp_port = 1\npeer_port = 2\ndata_dir = n0\n"
		 "[node 1]\napp_port = 3\npeer_port = 4\ndata_dir = n1\n"
		 "[node 2]\napp_port = 5\npeer_port = 6\ndata_dir = n2\n", LOG_MB);
	snprintf(path, sizeof(path), "%s/c.conf", dir);
	f = fopen(path, "w");
	CHECK(f && fputs(conf, f) >= 0 && fclose(f) == 0, "%s", path);
	CHECK(config_load(path, &cfg, conf, sizeof(conf)) == 0, "%s", conf);
	for (int k = 0; k < 3; k++)
		node_open(k);
	inc0 = ctl(0)->incarnation;
	inc1 = ctl(1)->incarnation;
	/* The peers fenced below are leaders being left. */
	region_status(ctl(1))->role = ROLE_LEADER;
	region_status(ctl(2))->role = ROLE_LEADER;

	/* A few MB of log in node 0's region, then writes of both peers. */
	log0 = (char *)base[0] + REGION_CTL_SIZE;
	for (size_t i = 0; i < (size_t)DATA_MB << 20; i++)
		log0[i] = (char)(i * 7 + 1);
	CHECK(t[1]->ops->connect(t[1], 0) == 0, "node 1 connects");
	CHECK(t[2]->ops->connect(t[2], 0) == 0, "node 2 connects");
	CHECK(t[0]->ops->connect(t[0], 1) == 0, "node 0 reaches node 1");
	put(1, A, 0x1111);
	put(2, B, 0x2222);
	CHECK(word0(A) == 0x1111 && word0(B) == 0x2222, "writes before the fence did not land");

	/* A fence of a peer that leads no more does nothing: a deposed leader
	 * re-executed as a backup (a new incarnation) before the fence. */
	before = ino_of(0);
	region_status(ctl(2))->role = ROLE_BACKUP;
	CHECK(t[0]->ops->fence(t[0], 2) == 0, "fence of a backup");
	CHECK(ino_of(0) == before && !ctl(0)->fenced_inc[2], "a backup was fenced");
	region_status(ctl(2))->role = ROLE_LEADER;

	/* A fence of a peer that is not running does nothing. */
	pid_t dead = fork();
	if (!dead)
		_exit(0);
	waitpid(dead, NULL, 0);
	region_status(ctl(2))->pid = (uint64_t)dead;
	before = ino_of(0);
	CHECK(t[0]->ops->fence(t[0], 2) == 0, "fence of a dead peer");
	CHECK(ino_of(0) == before && !ctl(0)->fenced_inc[2], "a dead peer was fenced");
	region_status(ctl(2))->pid = (uint64_t)getpid();

	/* A thread of node 0 asleep on its doorbell. */
	pthread_create(&th, NULL, sleeper, NULL);
	for (int i = 0; i < 2000 && !__atomic_load_n(&ctl(0)->sleepers, __ATOMIC_SEQ_CST); i++)
		usleep(1000);
	usleep(50000);

	long long blocks_before = allocated(0);
	start = now_ns();
	CHECK((rc = t[0]->ops->fence(t[0], 1)) == 0, "fence: %d", rc);
	double ms = (double)(now_ns() - start) / 1e6;
	printf("fence of a %d MB region holding %d MB of log: %.2f ms\n", LOG_MB, DATA_MB, ms);

	pthread_join(th, NULL);
	CHECK(woke_after_ns < 2000000000ULL, "the sleeper was not woken by the swap (%.0f ms)",
	      (double)woke_after_ns / 1e6);
	CHECK(ino_of(0) != before, "the region file was not swapped");
	CHECK(ctl(0)->incarnation == inc0, "the incarnation changed");
	CHECK(ctl(0)->fenced_inc[1] == inc1, "fenced_inc[1] %llu, want %llu",
	      (unsigned long long)ctl(0)->fenced_inc[1], (unsigned long long)inc1);
	CHECK(log_count("fenced node 1") == 1, "the swap was not logged");
	for (size_t i = 0; i < (size_t)DATA_MB << 20; i++)
		CHECK(log0[i] == (char)(i * 7 + 1), "log byte %zu lost in the swap", i);
	CHECK(word0(A) == 0x1111 && word0(B) == 0x2222, "peer writes lost in the swap");
	CHECK(allocated(0) < blocks_before + (4 << 20), "the copy is not sparse: %lld bytes (was %lld)",
	      allocated(0), blocks_before);
	struct stat st;
	CHECK(fstat(fds[0], &st) == 0 && st.st_ino == ino_of(0),
	      "node 0's region descriptor still names the old file");
	CHECK(t[0]->ops->fence(t[0], 1) == 0 && log_count("fenced node 1") == 1,
	      "a second fence of the same incarnation swapped again");

	/* The fenced node: its writes through the old mapping do not land,
	 * check() says it lost the peer and connect() is refused. */
	put(1, A, 0xbad1);
	CHECK(word0(A) == 0x1111, "a fenced peer's write landed");
	CHECK(t[1]->ops->check(t[1], 0) == -ECONNRESET, "check of the fenced node");
	CHECK(!t[1]->ops->connected(t[1], 0), "the fenced node is still connected");
	CHECK((rc = t[1]->ops->connect(t[1], 0)) == -EACCES, "connect of the fenced node: %d", rc);
	CHECK(t[1]->ops->connect(t[1], 0) == -EACCES, "second connect of the fenced node");
	CHECK(t[1]->ops->write(t[1], 0, A, &(uint64_t){ 0xbad2 }, 8) == -ENOTCONN, "write");
	CHECK(word0(A) == 0x1111, "a fenced peer's write landed");
	CHECK(log_count("node 0 fenced this incarnation of node 1") == 1,
	      "the refusal was not logged exactly once");

	/* Node 2 follows the new file without noticing a restart. */
	CHECK(t[2]->ops->check(t[2], 0) == 0, "check of node 2 after the swap");
	CHECK(t[2]->ops->connected(t[2], 0), "node 2 lost node 0");
	uint32_t bell = region_bell(ctl(0));
	put(2, C, 0x2223);
	CHECK(word0(C) == 0x2223, "node 2's write after the swap did not land");
	CHECK(region_bell(ctl(0)) != bell, "node 2's ring did not reach node 0");

	/* Node 1 restarts: a new incarnation is admitted. */
	t[1]->ops->close(t[1]);
	munmap(base[1], region_size_for(cfg.log_size));
	close(fds[1]);
	node_open(1);
	CHECK(ctl(1)->incarnation != inc1, "no new incarnation");
	CHECK((rc = t[1]->ops->connect(t[1], 0)) == 0, "connect of the restarted node: %d", rc);
	put(1, A, 0x1112);
	CHECK(word0(A) == 0x1112, "the restarted node's write did not land");
	CHECK(t[1]->ops->check(t[1], 0) == 0, "check of the restarted node");

	/* Node 0 fences node 2 now: node 1 follows, node 2 is out. */
	CHECK(t[0]->ops->fence(t[0], 2) == 0, "fence 2");
	CHECK(t[1]->ops->check(t[1], 0) == 0 && t[2]->ops->check(t[2], 0) == -ECONNRESET,
	      "checks after the second swap");
	put(1, B, 0x1113);
	CHECK(word0(B) == 0x1113 && word0(A) == 0x1112, "node 1's writes after the second swap");
	CHECK(ctl(0)->fenced_inc[1] == inc1, "the first fence was not carried over");

	for (int k = 0; k < 3; k++)
		t[k]->ops->close(t[k]);
	return testdir_remove(dir) ? 1 : 0;
}
