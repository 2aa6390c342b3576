/* Membership (coordinator/node/members.h): the text an entry carries parses
 * back to the same membership; a change moves one node one step and
 * nothing else; what counts as a change in progress and the way out of it;
 * the config file follows the agreed membership with its comments kept;
 * a rebuilt node gets a membership that names it. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coordinator/node/members.h"
#include "cli/config_update.h"
#include "tests/unit/testdir.h"
#include "tests/unit/unit.h"

static char dir[] = "/tmp/apus-members-XXXXXX";
static char conf[PATH_MAX];

static const char file_text[] =
	"# the operator's own comment\n"
	"cluster = m\n"
	"app_cmd = x {port}\n"
	"\n"
	"[node 0]\n"
	"app_port = 7001\n"
	"data_dir = n0   # first\n"
	"[node 1]\n"
	"app_port = 7002\n"
	"data_dir = n1\n"
	"[node 2]\n"
	"app_port = 7003\n"
	"data_dir = n2\n";

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	CHECK(f, "cannot write %s", path);
	fputs(text, f);
	fclose(f);
}

static char *read_file(const char *path)
{
	static char buf[1 << 16];
	FILE *f = fopen(path, "r");
	size_t n;

	CHECK(f, "cannot read %s", path);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

static void load(struct apus_config *c)
{
	char err[600];

	CHECK(config_load(conf, c, err, sizeof(err)) == 0, "%s", err);
}

/* WANT := C with node I's role set to M (a new node at id nnodes: a copy
 * of node 0 elsewhere). */
static void with(const struct apus_config *c, struct apus_config *want, int i, int m)
{
	*want = *c;
	if (i == c->nnodes) {
		want->nodes[i] = c->nodes[0];
		want->nodes[i].id = i;
		want->nodes[i].app_port = 7000 + i + 1;
		snprintf(want->nodes[i].data_dir, sizeof(want->nodes[i].data_dir), "%s/n%d", dir, i);
		snprintf(want->nodes[i].run_dir, sizeof(want->nodes[i].run_dir), "%s/n%d", dir, i);
		want->nnodes = i + 1;
	}
	want->nodes[i].member = m;
}

static int step_ok(const struct apus_config *a, const struct apus_config *b)
{
	char why[256];

	return members_step_check(a, b, why, sizeof(why)) == 0;
}

int main(void)
{
	static struct apus_config c, want, back;
	static char text[MEMBERS_TEXT_MAX], again[MEMBERS_TEXT_MAX];
	char err[600], why[256];
	int len;

	CHECK(mkdtemp(dir), "mkdtemp");
	snprintf(conf, sizeof(conf), "%s/apus.conf", dir);
	write_file(conf, file_text);
	load(&c);
	CHECK(c.nnodes == 3 && config_voters(&c) == 3 && config_quorum(&c) == 2, "3 voters");
	CHECK(c.nodes[1].replaces == -1, "no replaces by default");

	/* The entry's text parses back to the same membership. */
	len = config_format_members(&c, text, sizeof(text));
	CHECK(len > 0, "format");
	back = c;
	CHECK(config_parse_members(&back, text, (size_t)len, err, sizeof(err)) == 0, "%s", err);
	CHECK(config_format_members(&back, again, sizeof(again)) == len && !memcmp(text, again, (size_t)len),
	      "round trip:\n%s\n---\n%s", text, again);
	/* A text checked as a config file is: a duplicate address refused,
	 * and the old membership kept. */
	CHECK(config_parse_members(&back, "[node 0]\nmember = voter\napp_port = 7001\ndata_dir = /a\n"
					  "[node 1]\nmember = voter\napp_port = 7001\ndata_dir = /b\n",
				   strlen("[node 0]\nmember = voter\napp_port = 7001\ndata_dir = /a\n"
					  "[node 1]\nmember = voter\napp_port = 7001\ndata_dir = /b\n"),
				   err, sizeof(err)) == -1 &&
		      strstr(err, "same address and app_port"),
	      "duplicate address accepted: %s", err);
	CHECK(back.nnodes == 3, "a refused text changed the membership");
	CHECK(config_parse_members(&back, "cluster = x\n", strlen("cluster = x\n"), err, sizeof(err)) == -1 &&
		      strstr(err, "outside a [node N] section"),
	      "a global key in a membership: %s", err);
	CHECK(config_parse_members(&back, "[node 0]\nmember = learner\napp_port = 1\ndata_dir = /a\n",
				   strlen("[node 0]\nmember = learner\napp_port = 1\ndata_dir = /a\n"), err,
				   sizeof(err)) == -1 &&
		      strstr(err, "no node is a voter"),
	      "no voter: %s", err);

	/* One node, one step. */
	with(&c, &want, 3, MEMBER_LEARNER);
	CHECK(step_ok(&c, &want), "a new learner");
	with(&c, &want, 3, MEMBER_VOTER);
	CHECK(!step_ok(&c, &want), "a new node straight in as a voter");
	with(&c, &want, 1, MEMBER_REMOVED);
	CHECK(step_ok(&c, &want), "a voter out");
	with(&c, &want, 1, MEMBER_LEARNER);
	CHECK(!step_ok(&c, &want), "a voter back to learner");
	with(&c, &want, 1, MEMBER_REMOVED);
	want.nodes[2].member = MEMBER_REMOVED;
	CHECK(!step_ok(&c, &want), "two nodes at once");
	with(&c, &want, 1, MEMBER_VOTER);
	CHECK(!step_ok(&c, &want), "no change at all");
	with(&c, &want, 1, MEMBER_REMOVED);
	want.nodes[1].app_port = 9999;
	CHECK(!step_ok(&c, &want), "a node that moved");
	with(&c, &want, 3, MEMBER_LEARNER);
	back = want;	/* three voters and a learner */
	with(&back, &want, 3, MEMBER_VOTER);
	CHECK(step_ok(&back, &want), "the learner to voter");
	with(&back, &want, 3, MEMBER_REMOVED);
	CHECK(step_ok(&back, &want), "the learner out");
	with(&c, &want, 1, MEMBER_REMOVED);
	back = want;
	with(&back, &want, 1, MEMBER_VOTER);
	CHECK(!step_ok(&back, &want), "a removed node back");
	want = back;
	want.nnodes = 2;
	CHECK(!step_ok(&back, &want), "a section dropped");

	/* A change in progress: a learner, or a voter replacing a member. */
	CHECK(!members_steps_left(&c, why, sizeof(why)), "nothing in progress: %s", why);
	with(&c, &want, 3, MEMBER_LEARNER);
	want.nodes[3].replaces = 1;
	CHECK(members_steps_left(&want, why, sizeof(why)) && strstr(why, "learner"), "a learner: %s", why);
	back = want;
	back.nodes[3].member = MEMBER_VOTER;
	CHECK(members_steps_left(&back, why, sizeof(why)) && strstr(why, "replaces node 1"),
	      "a replaced node still in: %s", why);
	back.nodes[1].member = MEMBER_REMOVED;
	CHECK(!members_steps_left(&back, why, sizeof(why)), "a done replace: %s", why);
	/* Removing the learner is the way out, nothing else is. */
	with(&want, &back, 3, MEMBER_REMOVED);
	CHECK(members_aborts(&want, &back), "removing the learner");
	with(&want, &back, 2, MEMBER_REMOVED);
	CHECK(!members_aborts(&want, &back), "removing another node");

	/* The config file follows the agreed membership, comments kept,
	 * and says the same after a second write. */
	with(&c, &want, 3, MEMBER_LEARNER);
	want.nodes[3].replaces = 1;
	CHECK(config_update_members(&want, conf, err, sizeof(err)) == 0, "%s", err);
	load(&back);
	CHECK(back.nnodes == 4 && back.nodes[3].member == MEMBER_LEARNER && back.nodes[3].replaces == 1,
	      "the learner in the file:\n%s", read_file(conf));
	CHECK(strstr(read_file(conf), "# the operator's own comment\n") &&
		      strstr(read_file(conf), "data_dir = n0   # first\n"),
	      "comments lost:\n%s", read_file(conf));
	want.nodes[3].member = MEMBER_VOTER;
	want.nodes[1].member = MEMBER_REMOVED;
	CHECK(config_update_members(&want, conf, err, sizeof(err)) == 0, "%s", err);
	snprintf(text, sizeof(text), "%s", read_file(conf));
	CHECK(config_update_members(&want, conf, err, sizeof(err)) == 0, "%s", err);
	CHECK(!strcmp(text, read_file(conf)), "a second write changed the file");
	load(&back);
	CHECK(back.nodes[1].member == MEMBER_REMOVED && back.nodes[3].member == MEMBER_VOTER &&
		      config_voters(&back) == 3,
	      "the done replace in the file:\n%s", text);
	CHECK(!strstr(text, "member = voter"), "a voter got a member line:\n%s", text);

	/* apus.members: written, read back, and what a rebuilt node gets. */
	for (int i = 0; i < 4; i++)
		CHECK(mkdir(back.nodes[i].data_dir, 0700) == 0 || errno == EEXIST, "mkdir");
	len = config_format_members(&back, text, sizeof(text));
	CHECK(members_file_write(&back, 0, text, (size_t)len, 42) == 0, "write node 0's file");
	size_t got;
	uint64_t idx;
	CHECK(members_file_read(&back, 0, again, sizeof(again), &got, &idx) == 0 && idx == 42,
	      "read back: idx %llu", (unsigned long long)idx);
	CHECK(strstr(again, text), "the text read back differs");
	/* A peer held before it executed node 3's entry: its membership does
	 * not name node 3; node 3 gets this host's newest (node 0's), which does. */
	with(&c, &want, 3, MEMBER_LEARNER);
	len = config_format_members(&c, text, sizeof(text));
	CHECK(members_seed(&back, 3, text, (size_t)len, 7) == 0, "seed node 3");
	CHECK(members_file_read(&back, 3, again, sizeof(again), &got, &idx) == 0 && idx == 42,
	      "node 3 seeded with entry %llu, want 42", (unsigned long long)idx);
	/* A membership that names it is taken as it comes. */
	len = config_format_members(&back, text, sizeof(text));
	CHECK(members_seed(&back, 2, text, (size_t)len, 40) == 0, "seed node 2");
	CHECK(members_file_read(&back, 2, again, sizeof(again), &got, &idx) == 0 && idx == 40,
	      "node 2 seeded with entry %llu, want 40", (unsigned long long)idx);
	/* The CLI follows the newest file of the host's nodes. */
	load(&want);
	CHECK(members_follow(&want, why, sizeof(why)) == 42 && strstr(why, "node 0"),
	      "followed %s", why);

	testdir_remove(dir);
	return 0;
}
