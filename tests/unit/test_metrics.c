/* The metrics text: every line a comment or `name{labels} value`, the
 * values those of the status block, the latency histogram cumulative and
 * consistent with its count, no peer series for the node itself. */
#include <regex.h>
#include <string.h>

#include "coordinator/node/metrics.h"
#include "coordinator/storage/region_mail.h"
#include "coordinator/storage/region_status.h"
#include "coordinator/storage/region_wire.h"
#include "tests/unit/unit.h"

static char out[64 << 10];

/* The value of the sample line that starts with PREFIX, or -1. */
static double value_of(const char *prefix)
{
	for (const char *l = out, *e; (e = strchr(l, '\n')); l = e + 1) {
		if (strncmp(l, prefix, strlen(prefix)))
			continue;
		while (e > l && e[-1] != ' ')
			e--;
		return strtod(e, NULL);
	}
	return -1;
}

int main(void)
{
	static struct apus_config cfg;
	static union {	/* a whole control page */
		struct region_ctl ctl;
		char bytes[REGION_CTL_SIZE];
	} page;
	struct region_ctl *ctl = &page.ctl;
	struct node_status *s = region_status(ctl);
	regex_t sample;
	char line[512];
	size_t len;
	int samples = 0;

	strcpy(cfg.cluster, "unit");
	cfg.nnodes = 3;
	ctl->log_size = 1 << 20;
	s->role = ROLE_LEADER;
	s->leader = 1;
	s->view = 4;
	s->commit = 120;
	s->applied = 100;
	s->log_pos = 5000;
	s->reclaim_pos = 1000;
	s->proposals = 77;
	s->sent_bytes[0] = 123;
	s->sent_bytes[2] = 456;
	s->refused_clients = 3;
	s->snap_ms = 1500;
	region_mail(ctl)->ckpt.taken = 2;
	region_mail(ctl)->ckpt.dump_ms = 42;
	metrics_commit_latency(s, 50000);	/* le 0.00005 exactly */
	metrics_commit_latency(s, 700000);	/* le 0.001 */
	metrics_commit_latency(s, 2000000000);	/* +Inf only */

	len = metrics_render(&cfg, 1, ctl, out, sizeof(out));
	CHECK(len > 0 && len == strlen(out), "rendered %zu bytes", len);
	CHECK(regcomp(&sample, "^apus_[a-z_]+\\{cluster=\"unit\",node=\"1\"(,[a-z]+=\"[^\"]*\")*\\} "
			       "-?[0-9]+(\\.[0-9]+)?$", REG_EXTENDED | REG_NOSUB) == 0, "regcomp");
	for (const char *l = out; *l;) {
		const char *e = strchr(l, '\n');

		CHECK(e, "last line without a newline");
		CHECK((size_t)(e - l) < sizeof(line), "line too long");
		memcpy(line, l, (size_t)(e - l));
		line[e - l] = '\0';
		if (strncmp(line, "# HELP apus_", 12) && strncmp(line, "# TYPE apus_", 12)) {
			CHECK(regexec(&sample, line, 0, NULL, 0) == 0, "not a sample: '%s'", line);
			samples++;
		}
		l = e + 1;
	}
	CHECK(samples > 30, "%d samples", samples);
	CHECK(strstr(out, "# TYPE apus_commit_latency_seconds histogram\n"), "histogram type");
	CHECK(value_of("apus_role{cluster=\"unit\",node=\"1\",role=\"leader\"}") == 1, "leader role");
	CHECK(value_of("apus_role{cluster=\"unit\",node=\"1\",role=\"backup\"}") == 0, "backup role");
	CHECK(value_of("apus_leader_node{") == 1, "leader node");
	CHECK(value_of("apus_view{") == 4, "view");
	CHECK(value_of("apus_lag_entries{") == 20, "lag");
	CHECK(value_of("apus_log_used_bytes{") == 4000, "log used");
	CHECK(value_of("apus_proposals_total{") == 77, "proposals");
	CHECK(value_of("apus_snapshot_duration_seconds{") == 1.5, "snapshot seconds");
	CHECK(value_of("apus_checkpoints_total{") == 2, "checkpoints");
	CHECK(value_of("apus_checkpoint_duration_seconds{") == 0.042, "checkpoint seconds");
	CHECK(value_of("apus_refused_clients_total{") == 3, "refused");
	CHECK(value_of("apus_peer_sent_bytes_total{cluster=\"unit\",node=\"1\",peer=\"0\"}") == 123,
	      "sent to 0");
	CHECK(value_of("apus_peer_sent_bytes_total{cluster=\"unit\",node=\"1\",peer=\"2\"}") == 456,
	      "sent to 2");
	CHECK(!strstr(out, "peer=\"1\""), "a series for the node itself");
	/* Cumulative buckets: each `le` counts every wait up to its bound. */
	CHECK(value_of("apus_commit_latency_seconds_bucket{cluster=\"unit\",node=\"1\",le=\"0.00005\"}")
		      == 1, "first bucket");
	CHECK(value_of("apus_commit_latency_seconds_bucket{cluster=\"unit\",node=\"1\",le=\"0.0005\"}")
		      == 1, "0.5 ms bucket");
	CHECK(value_of("apus_commit_latency_seconds_bucket{cluster=\"unit\",node=\"1\",le=\"0.001\"}")
		      == 2, "1 ms bucket");
	CHECK(value_of("apus_commit_latency_seconds_bucket{cluster=\"unit\",node=\"1\",le=\"1\"}") == 2,
	      "1 s bucket");
	CHECK(value_of("apus_commit_latency_seconds_bucket{cluster=\"unit\",node=\"1\",le=\"+Inf\"}")
		      == 3, "+Inf bucket");
	CHECK(value_of("apus_commit_latency_seconds_count{") == 3, "count");
	CHECK(value_of("apus_commit_latency_seconds_sum{") == 2.00075, "sum: %s", out);
	/* Too small a buffer: nothing half-written is served. */
	CHECK(metrics_render(&cfg, 1, ctl, out, 100) == 0, "truncated output accepted");
	regfree(&sample);
	return 0;
}
