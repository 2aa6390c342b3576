/* apus checkpoint, apus checkpoints, apus restore: the operator's handles
 * on a backup's checkpoints (guard/checkpoint.c does the work). */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "guard/checkpoint.h"
#include "guard/host.h"
#include "guard/owner.h"
#include "guard/rebuild.h"
#include "cli.h"

static const char usage_checkpoint[] =
	"usage: apus checkpoint --config FILE --node N [--json]\n"
	"\n"
	"Takes a checkpoint of backup N now: holds its server at the entry it\n"
	"stands on, dumps it with CRIU while it keeps running, copies its data\n"
	"directory and checksums it all into <data_dir>/checkpoints/<id>.\n"
	"The leader is never checkpointed.  Older checkpoints beyond\n"
	"checkpoint_keep (config, default 3) are removed.\n"
	"\n"
	"  -c, --config FILE   cluster configuration (default: $APUS_CONFIG)\n"
	"  -n, --node N        the backup (required)\n"
	"  -j, --json          print the checkpoint as JSON\n"
	"  -h, --help          this text\n";

static const char usage_checkpoints[] =
	"usage: apus checkpoints --config FILE --node N [--json]\n"
	"\n"
	"Lists node N's checkpoints, newest first: id, log entry, view, age, size\n"
	"of the CRIU images and of the data copy, and how long the dump took.\n"
	"\n"
	"  -c, --config FILE   cluster configuration (default: $APUS_CONFIG)\n"
	"  -n, --node N        the node (required)\n"
	"  -j, --json          JSON array instead of a table\n"
	"  -h, --help          this text\n";

static const char usage_restore[] =
	"usage: apus restore --config FILE --node N [--checkpoint ID]\n"
	"\n"
	"Brings stopped node N back from a checkpoint: the newest one whose\n"
	"checksums hold (a damaged one is reported and the next older one is\n"
	"used), or ID.  Without ID it refuses when the node's snapshot is newer\n"
	"than that checkpoint (apus start loads the snapshot: a restart uses the\n"
	"newest recovery point).  CRIU restores its server process, the data\n"
	"directory is copied back, and the node joins its leader from the\n"
	"checkpoint's entry (a node restored to an entry its log no longer holds\n"
	"says so, never stands for election, and is rebuilt from a peer).\n"
	"\n"
	"  -c, --config FILE      cluster configuration (default: $APUS_CONFIG)\n"
	"  -n, --node N           the node (required; it must not be running)\n"
	"  -k, --checkpoint ID    this checkpoint (see apus checkpoints)\n"
	"  -t, --timeout MS       how long to wait for the node's guard or another\n"
	"                         command acting on it (default: start_timeout_ms)\n"
	"  -h, --help             this text\n"
	"\n"
	"Exit status: 0 restored; 1 it could not be; 2 usage; 3 nothing done: the\n"
	"node is running (its guard may have brought it back first: the message\n"
	"says so).\n";

static const char usage_rebuild[] =
	"usage: apus rebuild --config FILE --node N [--from M] [--json]\n"
	"\n"
	"Rebuilds stopped node N from a live peer: for a node whose data directory\n"
	"(and checkpoints) are gone, or that fell behind what the leader's log\n"
	"still holds (apus status says \"needs rebuild\"; its guard does this by\n"
	"itself).  Backup M (default: the most caught-up one) is held at its next\n"
	"entry, the config's snapshot_cmd has its server write snapshot_file,\n"
	"which is copied to N with apus.seed; N starts, its server loads the\n"
	"snapshot, and it joins the leader from that entry.  M executes again\n"
	"once N joined.  Starts N's guard when the config has guard = on.\n"
	"\n"
	"  -c, --config FILE   cluster configuration (default: $APUS_CONFIG)\n"
	"  -n, --node N        the node to rebuild (required; it must not be running)\n"
	"  -f, --from M        the backup to take the snapshot from\n"
	"  -j, --json          print the result as JSON\n"
	"  -t, --timeout MS    how long to wait for the node's guard or another\n"
	"                      command acting on it (default: start_timeout_ms)\n"
	"  -h, --help          this text\n"
	"\n"
	"Exit status: 0 rebuilt; 1 it could not be; 2 usage; 3 nothing done: the\n"
	"node is running (its guard may have brought it back first: the message\n"
	"says so).\n";

static int tty;
static int step;

static void progress(const char *line)
{
	if (tty) {
		/* A bar of the checkpoint's four steps, redrawn in place. */
		static const char bar[] = "####";
		step = step < 4 ? step + 1 : 4;
		printf("\r\033[K[%.*s%*s] %s", step, bar, 4 - step, "", line);
	} else {
		printf("%s\n", line);
	}
	fflush(stdout);
}

static void warn_line(const char *msg)
{
	cli_error("%s", msg);
}

/* Takes NODE's owner lock for CMD (a stopped node's restore or rebuild):
 * the lock's fd, or -1 having said why the command stops there, with
 * *STATUS its exit status: EXIT_OWNED when the node runs (the guard, or
 * whoever held the lock, brought it back), else 1. */
static int own_stopped_node(const struct cli *c, const char *cmd, int *status)
{
	char holder[300], last[300];
	int waited, adopted;
	int fd = owner_lock(&c->cfg, c->node, OWNER_LOCK_FILE, cmd, c->timeout_ms, &waited, holder,
			    sizeof(holder));

	*status = 1;
	if (fd == -1) {
		cli_error("node %d: %s still acts on it after %d ms; nothing done", c->node, holder,
			  c->timeout_ms);
		*status = EXIT_OWNED;
		return -1;
	}
	if (fd == -2) {
		cli_error("%s", holder);
		return -1;
	}
	pid_t pid = node_server(&c->cfg, c->node, &adopted);
	if (!pid)
		return fd;
	owner_unlock(fd);
	*status = EXIT_OWNED;
	guard_last_line(&c->cfg, c->node, last, sizeof(last));
	if (waited)
		cli_error("node %d is running again (pid %d): another owner brought it back while "
			  "%s waited (its guard's last word: %s); nothing done", c->node, (int)pid,
			  cmd, last[0] ? last : "none");
	else
		cli_error("node %d is running (pid %d%s): stop it before %s", c->node, (int)pid,
			  adopted ? ", not recorded in its pid file" : "",
			  !strcmp(cmd, "apus restore") ? "restoring it" : "rebuilding it");
	return -1;
}

static int need_node(const struct cli *c, const char *cmd)
{
	if (c->node >= 0)
		return 0;
	cli_error("%s: --node N is required", cmd);
	return -1;
}

static double age_s(const struct ckpt_info *k)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ((double)ts.tv_sec * 1000 + ts.tv_nsec / 1e6 - (double)k->time_ms) / 1000;
}

static void print_json(const struct ckpt_info *k)
{
	printf("{\"id\": \"%s\", \"index\": %llu, \"view\": %llu, \"time_ms\": %llu, "
	       "\"age_s\": %.1f, \"image_bytes\": %llu, \"data_bytes\": %llu, \"dump_ms\": %llu, "
	       "\"pid\": %d, \"dir\": \"%s\"}",
	       k->id, (unsigned long long)k->index, (unsigned long long)k->view,
	       (unsigned long long)k->time_ms, age_s(k), (unsigned long long)k->image_bytes,
	       (unsigned long long)k->data_bytes, (unsigned long long)k->dump_ms, (int)k->pid,
	       k->dir);
}

int cmd_checkpoint(int argc, char **argv)
{
	struct ckpt_info k;
	struct cli c;
	char err[600];
	int rc = cli_parse(&c, "checkpoint", usage_checkpoint, argc, argv);

	if (rc)
		return rc > 0 ? 0 : 2;
	if (need_node(&c, "checkpoint"))
		return 2;
	/* Not beside the guard's own checkpoint, nor a restore. */
	int fd = owner_lock(&c.cfg, c.node, OWNER_LOCK_FILE, "apus checkpoint", c.timeout_ms, NULL,
			    err, sizeof(err));
	if (fd < 0) {
		cli_error("node %d: %s%s", c.node, err, fd == -1 ? " still acts on it; no checkpoint" : "");
		return fd == -1 ? EXIT_OWNED : 1;
	}
	tty = isatty(1) && !c.json;
	rc = ckpt_take(&c.cfg, c.node, &k, c.json ? NULL : progress, err, sizeof(err));
	owner_unlock(fd);
	if (tty)
		printf("\n");
	if (rc) {
		cli_error("%s", err);
		return 1;
	}
	ckpt_prune(&c.cfg, c.node, c.cfg.checkpoint_keep);
	if (c.json) {
		print_json(&k);
		printf("\n");
	} else {
		printf("checkpoint %s of node %d: entry %llu, images %.1f MB, data %.1f MB, dump %llu ms\n",
		       k.id, c.node, (unsigned long long)k.index, k.image_bytes / 1e6,
		       k.data_bytes / 1e6, (unsigned long long)k.dump_ms);
	}
	return 0;
}

int cmd_checkpoints(int argc, char **argv)
{
	struct ckpt_info list[CKPT_MAX];
	struct cli c;
	int n, rc = cli_parse(&c, "checkpoints", usage_checkpoints, argc, argv);

	if (rc)
		return rc > 0 ? 0 : 2;
	if (need_node(&c, "checkpoints"))
		return 2;
	n = ckpt_list(&c.cfg, c.node, list, CKPT_MAX);
	if (n < 0) {
		cli_error("cannot list node %d's checkpoints: %m", c.node);
		return 1;
	}
	if (c.json) {
		printf("[");
		for (int i = 0; i < n; i++) {
			printf(i ? ",\n " : "");
			print_json(&list[i]);
		}
		printf("]\n");
		return 0;
	}
	if (!n) {
		printf("node %d has no checkpoints\n", c.node);
		return 0;
	}
	printf("%-28s %10s %6s %10s %10s %10s %8s\n", "ID", "ENTRY", "VIEW", "AGE", "IMAGES",
	       "DATA", "DUMP");
	for (int i = 0; i < n; i++)
		printf("%-28s %10llu %6llu %9.1fs %8.1fMB %8.1fMB %6llums\n", list[i].id,
		       (unsigned long long)list[i].index, (unsigned long long)list[i].view,
		       age_s(&list[i]), list[i].image_bytes / 1e6, list[i].data_bytes / 1e6,
		       (unsigned long long)list[i].dump_ms);
	return 0;
}

int cmd_restore(int argc, char **argv)
{
	const char *id = NULL;
	char *rest[64], err[600];
	struct ckpt_info used;
	struct cli c;
	int n = 0, rc;

	/* --checkpoint is this command's own; the rest are the common ones. */
	id = cli_take_option(argc, argv, "checkpoint", 'k', rest, &n);
	rc = cli_parse(&c, "restore", usage_restore, n, rest);
	if (rc)
		return rc > 0 ? 0 : 2;
	if (need_node(&c, "restore"))
		return 2;
	int fd = own_stopped_node(&c, "apus restore", &rc);
	if (fd < 0)
		return rc;
	rc = ckpt_restore(&c.cfg, c.node, id, &used, warn_line, err, sizeof(err));
	owner_unlock(fd);
	if (rc) {
		cli_error("%s", err);
		return 1;
	}
	printf("node %d restored from checkpoint %s (entry %llu, pid %d); it catches up from the leader\n",
	       c.node, used.id, (unsigned long long)used.index, (int)used.pid);
	return 0;
}

int cmd_rebuild(int argc, char **argv)
{
	char *rest[64], err[600], lib[PATH_MAX];
	struct rebuild_info r;
	struct cli c;
	int n = 0, from = -1, rc;

	/* --from is this command's own; the rest are the common ones. */
	const char *v = cli_take_option(argc, argv, "from", 'f', rest, &n);
	if (v) {
		char *end;
		long m = strtol(v, &end, 10);
		if (!*v || *end || m < 0 || m >= APUS_MAX_NODES) {
			cli_error("rebuild: --from wants a node number, not '%s'", v);
			return 2;
		}
		from = (int)m;
	}
	rc = cli_parse(&c, "rebuild", usage_rebuild, n, rest);
	if (rc)
		return rc > 0 ? 0 : 2;
	if (need_node(&c, "rebuild"))
		return 2;
	if (host_find_lib(lib, sizeof(lib)))
		return 1;
	int fd = own_stopped_node(&c, "apus rebuild", &rc);
	if (fd < 0)
		return rc;
	tty = isatty(1) && !c.json;
	rc = node_rebuild(&c.cfg, c.node, from, lib, &r, c.json ? NULL : progress, err, sizeof(err));
	owner_unlock(fd);
	if (tty)
		printf("\n");
	if (rc) {
		cli_error("%s", err);
		return 1;
	}
	if (c.cfg.guard)
		host_start_guard(&c.cfg, c.node);
	if (c.json)
		printf("{\"node\": %d, \"from\": %d, \"index\": %llu, \"view\": %llu, "
		       "\"snapshot_bytes\": %llu, \"hold_ms\": %llu, \"total_ms\": %llu, \"pid\": %d}\n",
		       c.node, r.from, (unsigned long long)r.index, (unsigned long long)r.view,
		       (unsigned long long)r.snapshot_bytes, (unsigned long long)r.hold_ms,
		       (unsigned long long)r.total_ms, (int)r.pid);
	else
		printf("node %d rebuilt from node %d's snapshot at entry %llu (%.1f MB; node %d held "
		       "%llu ms, %llu ms in all); pid %d, joined its leader\n",
		       c.node, r.from, (unsigned long long)r.index, r.snapshot_bytes / 1e6, r.from,
		       (unsigned long long)r.hold_ms, (unsigned long long)r.total_ms, (int)r.pid);
	return 0;
}
