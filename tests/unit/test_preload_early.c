/* libapus.so stays sound when another library's constructor calls read()
 * and write() before our own constructor ran: the first call initialises
 * the shim (here a real 1-node replica, threads and all) without crashing
 * or deadlocking, and the calls keep their results. */
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/testdir.h"
#include "tests/unit/unit.h"

int main(void)
{
	char dir[] = "/tmp/apus-early-XXXXXX", conf[128], cmd[4096], out[8192];
	char root[1024];
	FILE *f, *p;
	size_t n;

	/* The checkout: we are <root>/build/tests/unit/test_preload_early. */
	ssize_t rl = readlink("/proc/self/exe", root, sizeof(root) - 1);
	CHECK(rl > 0, "readlink");
	root[rl] = '\0';
	for (int up = 0; up < 4; up++)
		*strrchr(root, '/') = '\0';
	CHECK(mkdtemp(dir), "mkdtemp");
	snprintf(conf, sizeof(conf), "%s/c.conf", dir);
	f = fopen(conf, "w");
	CHECK(f, "config");
	fprintf(f, "cluster = early\nfsync = none\nlog_size = 64K\napp_cmd = true\n"
		   "[node 0]\napp_port = 1\ndata_dir = %s\n", dir);
	fclose(f);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && timeout 20 env LD_PRELOAD='%s/build/lib/libapus.so %s/build/tests/unit/libfixture.so'"
		 " APUS_CONFIG=%s APUS_NODE=0 APUS_LOG_LEVEL=info sh -c 'echo main-ran' 2>&1",
		 dir, root, root, conf);
	p = popen(cmd, "r");
	CHECK(p, "popen");
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	fprintf(stderr, "%s", out);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed (status %d)", st);
	char *enter = strstr(out, "fixture: enter"), *before = strstr(out, "fixture: before");
	char *started = strstr(out, "starting as leader");
	char *after = strstr(out, "fixture: after"), *ran = strstr(out, "main-ran");
	CHECK(enter && before && after && ran, "output incomplete");
	CHECK(!strstr(out, "short read"), "read() through the shim returned short");
	/* The shim came up inside the fixture's constructor, from its first
	 * intercepted call, not from our own constructor before it. */
	CHECK(started && enter < started && started < after, "shim did not initialise lazily");
	CHECK(testdir_remove(dir) == 0, "cleanup");
	return 0;
}
