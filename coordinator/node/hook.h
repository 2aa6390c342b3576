/* The leader-change hook: an operator's command run on the node that has
 * just become leader (to move a virtual IP, say). */
#ifndef APUS_HOOK_H
#define APUS_HOOK_H

struct node;

/* Runs cfg.leader_hook, if set, with /bin/sh -c and APUS_VIEW, APUS_LEADER
 * (this node's id) and APUS_CONFIG in its environment.  Never waits for it. */
void hook_leader_change(struct node *n);

#endif
