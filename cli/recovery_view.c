/* A node's recovery points as apus status shows them; see recovery_view.h. */
#include "recovery_view.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/atomic64.h"
#include "common/clock.h"
#include "coordinator/storage/recovery.h"
#include "coordinator/storage/region_mail.h"
#include "coordinator/storage/region_status.h"
#include "guard/checkpoint.h"

/* The newer of the two failures the control page records: the node's own
 * snapshot (cleared by its next success) and the guard's checkpoint
 * (failures counts those in a row since its last success). */
static void last_failure(const struct region_ctl *ctl, struct recovery_view *v)
{
	const struct node_status *s = region_status(ctl);
	const struct ckpt_words *ck = &region_mail(ctl)->ckpt;
	uint64_t snap_ms = load64(&s->snap_error_ms);
	uint64_t ckpt_ms = load64(&ck->error_ms);

	if (s->snap_error[0] && snap_ms >= v->made_ms) {
		snprintf(v->error, sizeof(v->error), "snapshot failed: %.*s",
			 (int)sizeof(s->snap_error), s->snap_error);
		v->error_ms = snap_ms;
	}
	if (load64(&ck->failures) && ckpt_ms >= v->made_ms && ckpt_ms > v->error_ms) {
		snprintf(v->error, sizeof(v->error), "checkpoint failed: %.*s",
			 (int)sizeof(ck->error), ck->error);
		v->error_ms = ckpt_ms;
	}
}

void recovery_view_read(const struct apus_config *cfg, int node, const struct region_ctl *ctl,
			struct recovery_view *v)
{
	struct recovery_point rp;
	struct ckpt_info list[CKPT_MAX];
	char seed[PATH_MAX];
	struct stat st;

	memset(v, 0, sizeof(*v));
	if (!recovery_peek(cfg, node, &rp) && rp.index &&
	    !config_node_path(cfg, node, SEED_FILE, seed, sizeof(seed)) && !stat(seed, &st)) {
		v->kind = "snapshot";
		v->index = rp.index;
		v->made_ms = (uint64_t)st.st_mtim.tv_sec * 1000 + (uint64_t)st.st_mtim.tv_nsec / 1000000;
	}
	/* Newest first; at an equal entry the snapshot is the one a start loads. */
	if (ckpt_list(cfg, node, list, CKPT_MAX) > 0 && list[0].index > v->index) {
		v->kind = "checkpoint";
		v->index = list[0].index;
		v->made_ms = list[0].time_ms;
	}
	if (ctl)
		last_failure(ctl, v);
}

int recovery_view_stale(const struct apus_config *cfg, const struct recovery_view *v,
			uint64_t applied)
{
	uint64_t max_ms = (uint64_t)cfg->recovery_point_max_age_s * 1000;

	if (!max_ms || applied <= v->index)
		return 0;
	/* None yet: stale once making one failed (a fresh node has none). */
	if (!v->kind)
		return v->error[0] != '\0';
	return realtime_ms() - v->made_ms > max_ms;
}
