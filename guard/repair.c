/* divergence = repair: when a backup's divergence is confirmed, and from
 * which state it is rebuilt (repair.h).  guard.c does the rebuild. */
#include "repair.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/atomic64.h"
#include "coordinator/storage/recovery.h"
#include "coordinator/storage/region.h"
#include "coordinator/storage/region_status.h"
#include "host.h"

#define VERIFY_TIMEOUT_MS 20000
#define LEADER_POINT_WAIT_MS 30000

/* What apus verify says of NODE: "equal", "differs", ... or "" when it
 * gave no verdict (its whole output in OUT for the log). */
static void run_verify(const struct apus_config *cfg, int node, char *result, size_t rlen,
		       char *out, size_t olen)
{
	char exe[PATH_MAX], timeout[16], want[32];
	ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	int pfd[2];
	size_t got = 0;
	pid_t pid;

	result[0] = out[0] = '\0';
	if (k <= 0 || pipe2(pfd, O_CLOEXEC) < 0)
		return;
	exe[k] = '\0';
	snprintf(timeout, sizeof(timeout), "%d", VERIFY_TIMEOUT_MS);
	pid = fork();
	if (pid == 0) {
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		execl(exe, "apus", "verify", "--config", cfg->path, "--json", "--timeout", timeout,
		      (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	while (pid > 0 && got + 1 < olen) {
		ssize_t r = read(pfd[0], out + got, olen - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	out[got] = '\0';
	close(pfd[0]);
	if (pid > 0)
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	out[strcspn(out, "\n")] = '\0';
	snprintf(want, sizeof(want), "{\"id\":%d,\"result\":\"", node);
	const char *at = strstr(out, want);
	if (at) {
		at += strlen(want);
		snprintf(result, rlen, "%.*s", (int)strcspn(at, "\""), at);
	}
}

/* The node of this host that leads, and its commit index; -1 if none. */
static int local_leader(const struct apus_config *cfg, int self, uint64_t *commit)
{
	for (int k = 0; k < cfg->nnodes; k++) {
		const struct region_ctl *ctl;
		pid_t pid = host_node_pid(cfg, k);
		int leads;

		if (k == self || !pid || !(ctl = region_map_ctl(cfg, k)))
			continue;
		const struct node_status *s = region_status(ctl);
		leads = s->pid == (uint64_t)pid && s->role == ROLE_LEADER;
		*commit = load64(&s->commit);
		region_unmap_ctl(ctl);
		if (leads)
			return k;
	}
	return -1;
}

/* Asks LEADER for a recovery point and waits until it has one at or past
 * INDEX: 1, or 0 after LEADER_POINT_WAIT_MS. */
static int leader_point_past(const struct apus_config *cfg, int leader, uint64_t index,
			     uint64_t *got)
{
	char path[PATH_MAX];
	struct recovery_point rp;
	int fd;

	if (config_node_path(cfg, leader, SNAPSHOT_REQUEST_FILE, path, sizeof(path)))
		return 0;
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	for (int waited = 0; waited < LEADER_POINT_WAIT_MS; waited += 100) {
		if (!recovery_peek(cfg, leader, &rp) && rp.index >= index) {
			*got = rp.index;
			return 1;
		}
		host_sleep_ms(100);
	}
	return 0;
}

int repair_due(const struct apus_config *cfg, int node, pid_t pid, uint64_t divergences,
	       struct repair_state *st, int *leader, void (*say)(const char *fmt, ...))
{
	char result[32], out[2048];
	uint64_t commit = 0, point = 0;

	if (st->pid != pid) {	/* a new server: its count starts at 0 */
		st->pid = pid;
		st->seen = 0;
	}
	if (cfg->divergence != DIVERGENCE_REPAIR || divergences <= st->seen ||
	    host_mono_ms() < st->next_ms)
		return 0;
	st->next_ms = host_mono_ms() + (uint64_t)cfg->repair_interval_s * 1000;
	if (!cfg->snapshot_cmd[0] || !cfg->verify_cmd[0]) {
		say("node %d: its output differed from the leader's on %llu connection(s); "
		    "divergence = repair needs %s: reported only", node,
		    (unsigned long long)divergences,
		    !cfg->snapshot_cmd[0] ? "snapshot_cmd (to rebuild it)"
					  : "verify_cmd (to tell a state that differs from replies "
					    "that do)");
		st->seen = divergences;
		return 0;
	}
	if (!cfg->snapshot_leader) {
		say("node %d: its output differed from the leader's on %llu connection(s); "
		    "divergence = repair rebuilds from the leader's recovery point, and with "
		    "snapshot_leader = off the leader takes none: reported only (apus verify, then "
		    "apus rebuild --node %d rebuilds it from a backup's)", node,
		    (unsigned long long)divergences, node);
		st->seen = divergences;
		return 0;
	}
	run_verify(cfg, node, result, sizeof(result), out, sizeof(out));
	if (!strcmp(result, "equal")) {
		say("node %d: its output differed from the leader's on %llu connection(s), but apus "
		    "verify finds its state equal: not repaired (replies alone differed)", node,
		    (unsigned long long)divergences);
		st->seen = divergences;
		return 0;
	}
	if (strcmp(result, "differs")) {
		say("node %d: its output differed from the leader's; apus verify gave no verdict (%s): "
		    "trying again in %d s", node, out[0] ? out : "no output", cfg->repair_interval_s);
		return 0;
	}
	*leader = local_leader(cfg, node, &commit);
	if (*leader < 0) {
		say("node %d diverged from its leader, which does not run on this host: not repaired "
		    "(apus rebuild --node %d on the leader's host); trying again in %d s", node, node,
		    cfg->repair_interval_s);
		return 0;
	}
	if (!leader_point_past(cfg, *leader, commit, &point)) {
		say("node %d diverged, but leader node %d made no recovery point past entry %llu in "
		    "%d s: trying again in %d s", node, *leader, (unsigned long long)commit,
		    LEADER_POINT_WAIT_MS / 1000, cfg->repair_interval_s);
		return 0;
	}
	say("node %d diverged from its leader (apus verify: differs; %llu connection(s) whose "
	    "output differed): rebuilding it from leader node %d's recovery point at entry %llu",
	    node, (unsigned long long)divergences, *leader, (unsigned long long)point);
	st->seen = divergences;
	return 1;
}
