/* A node's recovery point on disk (coordinator/storage/recovery.h): a committed
 * snapshot and its seed load back; a seed that does not match its snapshot
 * is refused; a commit cut between its two renames is completed; the
 * server's snapshot file is the recovery point's at start, or moved aside
 * when there is none; a new server snapshot (replaced by rename) leaves the
 * recovery point alone. */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config.h"
#include "coordinator/storage/recovery.h"
#include "tests/unit/testdir.h"
#include "tests/unit/unit.h"

static char dir[] = "/tmp/apus-recovery-XXXXXX";
static struct apus_config cfg;

static void put(const char *name, const char *text)
{
	CHECK(!testdir_put(dir, name, text), "cannot write %s in %s", name, dir);
}

static const char *get(const char *name)
{
	static char buf[256];
	char path[PATH_MAX];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void path_of(const char *name, char *out)
{
	snprintf(out, PATH_MAX, "%s/%s", dir, name);
}

int main(void)
{
	struct recovery_point rp = { 120, 40960, 2, 0, 77 }, got;
	char conf[PATH_MAX], err[256], dump[PATH_MAX], a[PATH_MAX], b[PATH_MAX + 8];
	FILE *f;

	CHECK(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	path_of("c.conf", conf);
	f = fopen(conf, "w");
	CHECK(f, "cannot write %s", conf);
	fprintf(f, "app_cmd = x\nsnapshot_cmd = y\nsnapshot_file = dump.rdb\n"
		   "[node 0]\napp_port = 7001\ndata_dir = %s\n", dir);
	fclose(f);
	CHECK(!config_load(conf, &cfg, err, sizeof(err)), "%s", err);
	path_of("dump.rdb", dump);

	/* None yet; a stray snapshot file is moved aside at start. */
	CHECK(recovery_load(&cfg, 0, &got) == -ENOENT, "a recovery point out of nothing");
	put("dump.rdb", "state-1");
	CHECK(!recovery_install(&cfg, 0, 0), "install without a point");
	CHECK(!get("dump.rdb") && get("dump.rdb.unseeded"), "the stray snapshot was not moved aside");

	/* Commit and load back. */
	put("dump.rdb", "state-1");
	CHECK(!recovery_commit(&cfg, 0, dump, &rp), "commit");
	CHECK(rp.bytes == 7, "bytes %llu", (unsigned long long)rp.bytes);
	CHECK(!recovery_load(&cfg, 0, &got), "load");
	CHECK(got.index == 120 && got.log_pos == 40960 && got.view == 2 && got.bytes == 7,
	      "loaded %llu/%llu/%llu/%llu", (unsigned long long)got.index,
	      (unsigned long long)got.log_pos, (unsigned long long)got.view,
	      (unsigned long long)got.bytes);
	CHECK(got.rand_mark == 77, "rand_mark %llu", (unsigned long long)got.rand_mark);

	/* The server writes a new snapshot by rename: ours stays. */
	put("dump.rdb.new", "state-2, longer");
	path_of("dump.rdb.new", a);
	CHECK(!rename(a, dump), "rename");
	CHECK(!strcmp(get(SNAPSHOT_FILE), "state-1"), "the recovery point's snapshot changed");
	CHECK(!recovery_load(&cfg, 0, &got) && got.index == 120, "the point was lost");
	/* At start the server gets the recovery point's state back. */
	CHECK(!recovery_install(&cfg, 0, 1), "install");
	CHECK(!strcmp(get("dump.rdb"), "state-1"), "dump.rdb is '%s'", get("dump.rdb"));

	/* A snapshot that does not match its seed is no recovery point. */
	path_of(SNAPSHOT_FILE, a);
	CHECK(!unlink(a), "unlink");
	put(SNAPSHOT_FILE, "tampered");
	CHECK(recovery_load(&cfg, 0, &got) == -EINVAL, "a mismatched pair was taken");

	/* A commit cut after the snapshot's rename, before the seed's: the
	 * seed written aside is the one that matches. */
	struct recovery_point rp2 = { 300, 99999, 3, 0, UINT64_MAX };
	put("dump.rdb", "state-3");
	CHECK(!recovery_commit(&cfg, 0, dump, &rp2), "commit 2");
	path_of(SEED_FILE, a);
	snprintf(b, sizeof(b), "%s.tmp", a);
	CHECK(!rename(a, b), "rename seed aside");
	put(SEED_FILE, "index = 120\nlog_pos = 40960\nview = 2\nbytes = 7\ninode = 1\n");
	/* Another process (apus status) sees the point, and leaves the
	 * commit to the node: it may be under way. */
	CHECK(!recovery_peek(&cfg, 0, &got) && got.index == 300, "peek: %llu",
	      (unsigned long long)got.index);
	CHECK(access(b, F_OK) == 0, "a peek completed the commit");
	CHECK(!recovery_load(&cfg, 0, &got), "the interrupted commit was not completed");
	CHECK(got.index == 300 && got.log_pos == 99999, "completed to %llu",
	      (unsigned long long)got.index);
	CHECK(access(b, F_OK) < 0, "seed.tmp left behind");
	CHECK(got.rand_mark == UINT64_MAX, "rand_mark %llu", (unsigned long long)got.rand_mark);

	/* A seed written before rand_mark was kept: the generator's state is
	 * unknown. */
	struct stat st;
	path_of(SNAPSHOT_FILE, a);
	CHECK(!stat(a, &st), "stat");
	f = fopen(b, "w");
	CHECK(f, "cannot write %s", b);
	fprintf(f, "index = 300\nlog_pos = 99999\nview = 3\nbytes = %llu\ninode = %llu\n",
		(unsigned long long)st.st_size, (unsigned long long)st.st_ino);
	fclose(f);
	path_of(SEED_FILE, a);
	CHECK(!rename(b, a), "rename old seed");
	CHECK(!recovery_load(&cfg, 0, &got) && got.index == 300, "an old seed was refused");
	CHECK(got.rand_mark == UINT64_MAX, "old seed: rand_mark %llu",
	      (unsigned long long)got.rand_mark);

	/* An incomplete seed is refused. */
	put(SEED_FILE, "index = 5\n");
	CHECK(recovery_load(&cfg, 0, &got) == -EINVAL, "an incomplete seed was taken");

	testdir_remove(dir);
	printf("ok\n");
	return 0;
}
