/* The cluster's membership, changed while it serves (issue 20).
 *
 * Membership is replicated state: a change is an ENTRY_MEMBERS entry of
 * the log holding the whole new membership as config text (every
 * [node N] section with its `member = voter|learner|removed` line).  A
 * change moves one node one step: a new node in as a learner (it gets the
 * log and executes it, counts in no majority), a learner to voter, a
 * voter or learner out.  Every node, the leader included, puts a
 * membership in force when the entry is committed and it executes it
 * (etcd's rule), and the leader proposes no change while its last one is
 * not in force, nor before an entry of its own view committed.  So at any
 * moment at most two memberships are in force across the cluster, and
 * they differ by one voter at most: every majority of one meets every
 * majority of the other, and no two majorities can ever decide apart
 * (Raft's single-server argument; doc/operator-guide.md, "Membership
 * changes").
 *
 * In force means: the leader replicates to voters and learners and counts
 * the voters' acks with a majority of the voters; only voters stand for
 * election and only their votes count; a node that is no member any more
 * stops (ROLE_REMOVED) and the leader forgets it.
 *
 * The membership in force is kept in <data_dir>/apus.members, so that a
 * node restarted after its log wrapped past the change still knows it,
 * and it wins over the config file's sections (a file on another host may
 * be older: the node says so once).  The CLI asks the leader for a change
 * through the leader's control page (struct member_words). */
#ifndef APUS_MEMBERS_H
#define APUS_MEMBERS_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"

#define MEMBERS_FILE "apus.members"
#define MEMBERS_WANT_FILE "apus.members.want"
/* Room for the membership text of APUS_MAX_NODES nodes with long paths. */
#define MEMBERS_TEXT_MAX (APUS_MAX_NODES * 3 * 4096 + 4096)

struct node;
struct apus_config;

/* Start-up, after the config is loaded: takes the membership of
 * apus.members over the config file's when there is one.  0, or -1 with
 * ERR set (the file is unreadable or names this node no more). */
int members_load(struct node *n, char *err, size_t errlen);

/* Puts the membership of entry IDX (TEXT, LEN bytes) in force: executed
 * by a backup, committed on the leader.  Role thread only. */
void members_adopt(struct node *n, const char *text, size_t len, uint64_t idx);

/* Leader's role loop: answers the CLI's request, and puts its own change
 * in force once it is committed. */
void members_poll(struct node *n);

/* Whether node K votes / receives the log, in the membership in force
 * here.  Any thread. */
int node_votes(const struct node *n, int k);
int node_is_member(const struct node *n, int k);
/* The number of voters. */
int node_voters(const struct node *n);

/* The single step from membership A to B (both checked configs): 0 when
 * B differs from A in one node's role, by one step, and the rest is the
 * same; else -1 with WHY set.  The CLI and the leader both check it. */
int members_step_check(const struct apus_config *a, const struct apus_config *b, char *why,
		       size_t whylen);

/* members_file.c (no node state: the CLI uses it too).  Reads
 * MEMBERS_FILE of node NODE (per CFG) into OUT; 0 with *LEN, *IDX, or -1. */
int members_file_read(const struct apus_config *cfg, int node, char *out, size_t outlen,
		      size_t *len, uint64_t *idx);
/* Writes it (TEXT of entry IDX) atomically and durably; 0 or -errno. */
int members_file_write(const struct apus_config *cfg, int node, const char *text, size_t len,
		       uint64_t idx);
/* Whether membership C has steps the cluster takes by itself (a learner
 * to promote, a replaced node to remove): a change in progress.  WHY
 * (if given) says which. */
int members_steps_left(const struct apus_config *c, char *why, size_t whylen);
/* A node's config: PATH, and when it does not name node SELF (written
 * before SELF was added), the newest membership a node of this host
 * keeps (NOTE then says whose).  0, or -1 with ERR set. */
int members_config_load(const char *path, int self, struct apus_config *cfg, char *note,
			size_t notelen, char *err, size_t errlen);
/* A node rebuilt from a peer's snapshot gets the peer's membership with
 * it: the one in force where the peer is held (a snapshot carries its
 * membership, as Raft's does), so that it never starts from an older one.
 * members_seed makes TEXT (entry IDX; NULL: the config file's) node TO's;
 * when it does not name TO (a new node, and the peer was held before it
 * executed TO's entry), the newest membership of this host's nodes, which
 * does.  members_copy does it with node FROM's file.  0 or -errno. */
int members_seed(const struct apus_config *cfg, int to, const char *text, size_t len,
		 uint64_t idx);
int members_copy(const struct apus_config *cfg, int from, int to);
/* Whether WANT removes a learner of NOW: the way out of a change in
 * progress (a learner that cannot catch up), allowed while it lasts. */
int members_aborts(const struct apus_config *now, const struct apus_config *want);
/* The CLI: CFG's nodes become the newest membership a node of this host
 * has in force (its MEMBERS_FILE), which may be newer than the config
 * file.  Returns that entry's index (0: none; the file's stands), NOTE
 * says whose file it was. */
int members_follow(struct apus_config *cfg, char *note, size_t notelen);

#endif
