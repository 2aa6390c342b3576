/* A recovery point's client sessions (coordinator/storage/sessions.h): what
 * snapshot_cmd names by descriptor is kept by connection, beside the
 * point; lines that are not "<fd> <hex>" and descriptors no connection
 * had at the fork are dropped; the preludes load back byte for byte;
 * other points' files are pruned; a point without a file carries none. */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "coordinator/storage/sessions.h"
#include "tests/unit/testdir.h"
#include "tests/unit/unit.h"

static char dir[] = "/tmp/apus-sessions-XXXXXX";
static struct apus_config cfg;

static void put(const char *name, const char *text)
{
	CHECK(!testdir_put(dir, name, text), "cannot write %s in %s", name, dir);
}

static int exists(const char *name)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

/* The shim's answer at the fork: fds 7 and 9 served connections 2.40 and
 * 3.41; fd 8 none. */
static int fd_conn(int fd, struct viewstamp *vs)
{
	if (fd == 7)
		*vs = (struct viewstamp){ 2, 40 };
	else if (fd == 9)
		*vs = (struct viewstamp){ 3, 41 };
	else
		return 0;
	return 1;
}

int main(void)
{
	char conf[PATH_MAX], err[256];
	struct viewstamp a = { 2, 40 }, b = { 3, 41 }, c = { 3, 42 };
	struct sessions *s;
	const char *p;
	size_t len;
	FILE *f;

	CHECK(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	snprintf(conf, sizeof(conf), "%s/c.conf", dir);
	f = fopen(conf, "w");
	CHECK(f, "cannot write %s", conf);
	fprintf(f, "app_cmd = x\n[node 0]\napp_port = 7001\ndata_dir = %s\n", dir);
	fclose(f);
	CHECK(!config_load(conf, &cfg, err, sizeof(err)), "%s", err);

	/* No file from the command: no sessions, an empty set back. */
	CHECK(sessions_keep(&cfg, 0, 10, fd_conn) == 0, "sessions out of nothing");
	s = sessions_load(&cfg, 0, 10);
	CHECK(s && !sessions_prelude(s, a, &len), "a prelude out of nothing");
	sessions_free(s);

	/* "SELECT 7" for fd 7, "AB" for fd 9; fd 8 had no connection; two
	 * lines that are not "<fd> <hex>". */
	put(SESSIONS_NEW, "7 2a320d0a24360d0a53454c4543540d0a24310d0a370d0a\n"
			  "8 4142\n9 4142\nx 4142\n9 41z2\n");
	CHECK(sessions_keep(&cfg, 0, 20, fd_conn) == 2, "two sessions kept");
	CHECK(!exists(SESSIONS_NEW), "the command's file was left behind");
	CHECK(exists("apus.sessions.20"), "no file beside the point");

	s = sessions_load(&cfg, 0, 20);
	CHECK(s, "load");
	p = sessions_prelude(s, a, &len);
	CHECK(p && len == 23 && !memcmp(p, "*2\r\n$6\r\nSELECT\r\n$1\r\n7\r\n", 23),
	      "connection 2.40's prelude");
	p = sessions_prelude(s, b, &len);
	CHECK(p && len == 2 && !memcmp(p, "AB", 2), "connection 3.41's prelude");
	CHECK(!sessions_prelude(s, c, &len), "a prelude for a connection never named");
	sessions_free(s);

	/* The next point's file replaces the others (and their leftovers). */
	put("apus.sessions.5.tmp", "x");
	put("apus.sessions.notanumber", "x");
	put(SESSIONS_NEW, "9 4142\n");
	CHECK(sessions_keep(&cfg, 0, 30, fd_conn) == 1, "one session kept");
	sessions_prune(&cfg, 0, 30);
	CHECK(exists("apus.sessions.30") && !exists("apus.sessions.20") &&
	      !exists("apus.sessions.5.tmp"), "other points' files not pruned");
	CHECK(exists("apus.sessions.notanumber"), "a file not of ours was removed");
	s = sessions_load(&cfg, 0, 20);
	CHECK(s && !sessions_prelude(s, a, &len), "a pruned point's sessions");
	sessions_free(s);

	testdir_remove(dir);
	printf("ok\n");
	return 0;
}
