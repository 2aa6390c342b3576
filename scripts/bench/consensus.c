/* Consensus latency microbenchmark: a 3-node cluster over shm (or tcp on
 * loopback with -T tcp), each node in its own process; the leader proposes
 * N entries of SIZE bytes one after another (or from T threads at once) and
 * times each proposal until a majority holds it.  Next to it, the floors: a
 * ping-pong of one 64-bit word between two processes over shared memory,
 * spinning, and with futex sleeps (what our waits do once their spin runs
 * out), and a 64 B ping-pong over a loopback TCP connection.
 *
 *   consensus [-n N] [-s SIZE] [-t THREADS] [-T shm|tcp] [-P]   prints one line each:
 *   pingpong   mode=spin  p50_us=.. p99_us=..
 *   pingpong   mode=futex p50_us=.. p99_us=..
 *   pingpong   mode=tcp   p50_us=.. p99_us=..
 *   consensus  transport=shm size=64 threads=1 n=20000 p50_us=.. p99_us=.. p999_us=.. ops_per_s=.. */
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "coordinator/transport/admission.h"
#include "common/futex.h"
#include "common/logger.h"
#include "coordinator/node/node_internal.h"
#include "coordinator/storage/region_status.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double pct(uint64_t *v, size_t n, double p)
{
	size_t i = (size_t)(p * (double)(n - 1));
	return (double)v[i] / 1000.0;
}

struct prop_arg {
	struct node *n;
	size_t size, count;
	uint64_t *lat;
};

static void *proposer(void *p)
{
	struct prop_arg *a = p;
	char *buf = calloc(1, a->size);
	struct iovec iov = { buf, a->size };

	for (size_t i = 0; i < a->count; i++) {
		uint64_t t0 = now_ns();
		if (node_propose(a->n, ENTRY_RECV, 0, (struct viewstamp){ 0, 1u << 30 }, &iov, 1, a->size, NULL))
			abort();
		a->lat[i] = now_ns() - t0;
	}
	free(buf);
	return NULL;
}

static void bench_consensus(const char *dir, const char *transport, size_t size, int threads,
			    size_t count)
{
	char conf[512], err[512];
	int base = 23000 + (int)(getpid() % 2000) * 3;
	pid_t kids[2];
	FILE *f;

	snprintf(conf, sizeof(conf), "%s/apus.key", dir);
	if (admit_key_generate(conf) < 0)
		exit(1);
	snprintf(conf, sizeof(conf), "%s/bench.conf", dir);
	f = fopen(conf, "w");
	fprintf(f, "cluster = bench\ntransport = %s\nlog_size = 64M\nfsync = none\napp_cmd = true\n",
		transport);
	for (int i = 0; i < 3; i++) {
		char d[600];
		snprintf(d, sizeof(d), "%s/n%d", dir, i);
		mkdir(d, 0700);
		fprintf(f, "[node %d]\napp_port = %d\npeer_port = %d\ndata_dir = %s\n", i, 1 + i,
			base + i, d);
	}
	fclose(f);
	for (int k = 1; k <= 2; k++) {
		kids[k - 1] = fork();
		if (kids[k - 1] == 0) {
			struct node *b = node_start(conf, k, err, sizeof(err));
			if (!b) {
				fprintf(stderr, "backup %d: %s\n", k, err);
				_exit(1);
			}
			/* No server: execute anyway, so that the log is reclaimed. */
			__atomic_store_n(&b->status->app_listening, 1, __ATOMIC_RELEASE);
			pause();
			_exit(0);
		}
	}
	struct node *n = node_start(conf, 0, err, sizeof(err));
	if (!n) {
		fprintf(stderr, "leader: %s\n", err);
		exit(1);
	}
	while ((__atomic_load_n(&n->connected, __ATOMIC_ACQUIRE) & 6) != 6)
		usleep(1000);

	pthread_t th[16];
	struct prop_arg args[16];
	uint64_t *lat = calloc(count, sizeof(uint64_t));
	size_t per = count / (size_t)threads;
	uint64_t t0 = now_ns();
	for (int t = 0; t < threads; t++) {
		args[t] = (struct prop_arg){ n, size, per, lat + (size_t)t * per };
		pthread_create(&th[t], NULL, proposer, &args[t]);
	}
	for (int t = 0; t < threads; t++)
		pthread_join(th[t], NULL);
	double secs = (double)(now_ns() - t0) / 1e9;
	size_t done = per * (size_t)threads;
	qsort(lat, done, sizeof(uint64_t), cmp_u64);
	printf("consensus transport=%s size=%zu threads=%d n=%zu p50_us=%.2f p99_us=%.2f p999_us=%.2f ops_per_s=%.0f\n",
	       transport, size, threads, done, pct(lat, done, 0.5), pct(lat, done, 0.99), pct(lat, done, 0.999),
	       (double)done / secs);
	for (int k = 0; k < 2; k++) {
		kill(kids[k], SIGKILL);
		waitpid(kids[k], NULL, 0);
	}
	free(lat);
	/* The regions live in region_dir (/dev/shm), behind the links in the
	 * data dirs: removing the dirs would leave them, 64 MB each. */
	for (int i = 0; i < 3; i++) {
		char link[600], target[PATH_MAX];
		ssize_t k;

		snprintf(link, sizeof(link), "%s/n%d/apus.region", dir, i);
		k = readlink(link, target, sizeof(target) - 1);
		if (k > 0) {
			target[k] = 0;
			unlink(target);
		}
	}
}

/* Two processes bounce a counter through one shared cache line. */
static void bench_pingpong(int use_futex, size_t count)
{
	struct shared { uint32_t ping, pong, sleepers_a, sleepers_b; } *s;
	uint64_t *lat = calloc(count, sizeof(uint64_t));

	s = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	memset(s, 0, sizeof(*s));
	pid_t kid = fork();
	if (kid == 0) {
		for (uint32_t i = 1; i <= count; i++) {
			while (__atomic_load_n(&s->ping, __ATOMIC_ACQUIRE) != i) {
				if (use_futex)
					bell_wait(&s->ping, &s->sleepers_b, i - 1, 100000);
				else
					cpu_relax();
			}
			if (use_futex)
				bell_ring(&s->pong, &s->sleepers_a);
			else
				__atomic_store_n(&s->pong, i, __ATOMIC_RELEASE);
		}
		_exit(0);
	}
	for (uint32_t i = 1; i <= count; i++) {
		uint64_t t0 = now_ns();
		if (use_futex)
			bell_ring(&s->ping, &s->sleepers_b);
		else
			__atomic_store_n(&s->ping, i, __ATOMIC_RELEASE);
		while (__atomic_load_n(&s->pong, __ATOMIC_ACQUIRE) != i) {
			if (use_futex)
				bell_wait(&s->pong, &s->sleepers_a, i - 1, 100000);
			else
				cpu_relax();
		}
		lat[i - 1] = now_ns() - t0;
	}
	waitpid(kid, NULL, 0);
	qsort(lat, count, sizeof(uint64_t), cmp_u64);
	printf("pingpong mode=%s n=%zu p50_us=%.2f p99_us=%.2f\n", use_futex ? "futex" : "spin", count,
	       pct(lat, count, 0.5), pct(lat, count, 0.99));
	munmap(s, 4096);
	free(lat);
}

/* 64 bytes back and forth over a loopback TCP connection (blocking). */
static void bench_pingpong_tcp(size_t count)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	uint64_t *lat = calloc(count, sizeof(uint64_t));
	char buf[64] = { 0 };
	int one = 1, l = socket(AF_INET, SOCK_STREAM, 0), c;

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &alen))
		exit(1);
	pid_t kid = fork();
	if (kid == 0) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(s, (struct sockaddr *)&a, sizeof(a)))
			_exit(1);
		setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		for (size_t i = 0; i < count; i++)
			if (recv(s, buf, sizeof(buf), MSG_WAITALL) != sizeof(buf) ||
			    send(s, buf, sizeof(buf), 0) != sizeof(buf))
				_exit(1);
		_exit(0);
	}
	c = accept(l, NULL, NULL);
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (size_t i = 0; i < count; i++) {
		uint64_t t0 = now_ns();
		if (send(c, buf, sizeof(buf), 0) != sizeof(buf) ||
		    recv(c, buf, sizeof(buf), MSG_WAITALL) != sizeof(buf))
			exit(1);
		lat[i] = now_ns() - t0;
	}
	waitpid(kid, NULL, 0);
	close(c);
	close(l);
	qsort(lat, count, sizeof(uint64_t), cmp_u64);
	printf("pingpong mode=tcp n=%zu p50_us=%.2f p99_us=%.2f\n", count, pct(lat, count, 0.5),
	       pct(lat, count, 0.99));
	free(lat);
}

int main(int argc, char **argv)
{
	size_t n = 20000, size = 64;
	int threads = 1, o, pingpong = 1;
	const char *transport = "shm";
	char dir[] = "/tmp/apus-bench-XXXXXX";

	while ((o = getopt(argc, argv, "n:s:t:T:P")) != -1) {
		switch (o) {
		case 'T': transport = optarg; break;
		case 'n': n = strtoul(optarg, NULL, 10); break;
		case 's': size = strtoul(optarg, NULL, 10); break;
		case 't': threads = atoi(optarg); break;
		case 'P': pingpong = 0; break;
		default:
			fprintf(stderr, "usage: consensus [-n N] [-s SIZE] [-t THREADS 1..16] [-T shm|tcp] [-P: no ping-pong]\n");
			return 2;
		}
	}
	if (threads < 1 || threads > 16)
		return 2;
	logger_level = LOG_ERROR;	/* the backups are killed at the end */
	if (!mkdtemp(dir))
		return 1;
	if (pingpong) {
		bench_pingpong(0, n);
		bench_pingpong(1, n);
		bench_pingpong_tcp(n);
	}
	bench_consensus(dir, transport, size, threads, n);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : 1;
}
