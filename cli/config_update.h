/* The config file follows the agreed membership (apus replace / add /
 * remove).  Only the [node N] sections' `member` and `replaces` lines are
 * ours: they are rewritten right after each section's header, sections of
 * new nodes are appended, and every other line (comments, global keys,
 * order) stays as the operator wrote it.  Written aside and renamed into
 * place, with the file's mode. */
#ifndef APUS_GUARD_CONFIG_UPDATE_H
#define APUS_GUARD_CONFIG_UPDATE_H

#include <stddef.h>

#include "common/config.h"

/* PATH gets CFG's membership.  0, or -1 with ERR set. */
int config_update_members(const struct apus_config *cfg, const char *path, char *err,
			  size_t errlen);

#endif
