/* Files apus trusts because only it can have written them: regions, their
 * durable copies, the cluster key, checkpoint directories.  apus creates
 * them 0600 (directories 0700); a file found later with a looser mode, or
 * owned by someone else, may hold what another user put there (a forged
 * log, a CRIU image that runs their code), so it is refused, never used. */
#ifndef APUS_FILEMODE_H
#define APUS_FILEMODE_H

#include <stddef.h>
#include <sys/types.h>

/* Mode bits that no trusted file may have: writable by group or others. */
#define FILEMODE_OTHERS_WRITE 022

/* Checks the open file FD (named PATH, a WHAT such as "region file"): it
 * must be owned by our effective uid and have none of the mode bits in
 * FORBIDDEN.  Returns 0, or -EPERM (-errno if fstat fails) with one line
 * in ERR that says what to do. */
int filemode_check(int fd, const char *path, const char *what, mode_t forbidden, char *err,
		   size_t errlen);

/* The same for PATH itself (following symbolic links). */
int filemode_check_path(const char *path, const char *what, mode_t forbidden, char *err,
			size_t errlen);

struct apus_config;

/* Checks the files NODE trusts and that exist (its region, through the
 * link in its data_dir, its durable copy, and its cluster key, which not
 * even reading by others is allowed): what `apus start` and a restore look
 * at before they run the node, so the operator gets the reason at once. */
int filemode_check_node(const struct apus_config *cfg, int node, char *err, size_t errlen);

#endif
