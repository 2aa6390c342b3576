/* The backup's thread: agree (read, check, persist and ack each entry as
 * it lands), learn the commit index, execute committed entries through
 * replay, and report acked/applied positions back to the leader. */
#define LOG_PREFIX "backup: "
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "futex.h"
#include "logger.h"
#include "node.h"
#include "replay.h"

#define AGREE_BATCH 256

struct backup {
	struct node *n;
	int leader;
	uint64_t pos, expect;		/* next entry to agree on */
	uint64_t exec_pos, exec_idx;	/* next entry to execute */
	uint64_t commit;
	uint64_t last_hb_ns;	/* when we last reported liveness to the leader */
	uint64_t seen_hb;	/* the leader's heartbeat word as last seen */
	uint64_t hb_at_ns;	/* when it last moved */
	int suspected;		/* silent for suspect_ms */
};

/* Skips the unused tail of a lap (no room for a marker there). */
static uint64_t skip_dead_tail(struct node *n, uint64_t pos)
{
	return log_pos_marker_fits(n->log_size, pos) ? pos : log_pos_next_lap(n->log_size, pos);
}

/* The entry at *POS with index IDX if it is whole, following a WRAP
 * marker to the next lap; NULL if it has not (fully) landed yet. */
static const struct entry_hdr *entry_at(struct node *n, uint64_t *pos, uint64_t idx)
{
	for (int hop = 0; hop < 2; hop++) {
		uint64_t p = skip_dead_tail(n, *pos);
		uint64_t off = p % n->log_size;
		const struct entry_hdr *e = (const void *)(n->log + off);

		if (!entry_check(e, idx, n->log_size - off))
			return NULL;
		if (e->type != ENTRY_WRAP) {
			*pos = p;
			return e;
		}
		*pos = log_pos_next_lap(n->log_size, p);
	}
	return NULL;
}

static void write_leader(struct backup *b, size_t off, uint64_t val)
{
	b->n->ops->write(b->n->tp, b->leader, off, &val, 8);
}

static int agree(struct backup *b)
{
	struct node *n = b->n;
	int got = 0;

	for (; got < AGREE_BATCH; got++) {
		uint64_t pos = b->pos;
		const struct entry_hdr *e = entry_at(n, &pos, b->expect);

		if (!e)
			break;
		size_t sz = entry_size(e->data_sz);
		node_persist(n, pos, sz);
		/* The ack: our index into the entry's reply slot in the leader's log. */
		write_leader(b, node_log_off(n, pos) + offsetof(struct entry_hdr, reply[n->self]),
			     e->idx);
		if (e->committed > b->commit)
			b->commit = e->committed;
		b->pos = pos + sz;
		b->expect++;
	}
	if (got) {
		write_leader(b, offsetof(struct region_ctl, peer[n->self].acked), b->expect - 1);
		n->ops->ring(n->tp, b->leader);
	}
	return got;
}

/* Executes committed entries; returns 1 if it made progress. */
static int execute(struct backup *b)
{
	struct node *n = b->n;
	int progress = 0;

	/* Replay connects to the server: not before it listens (a restarted
	 * backup gets the whole log copied before its server is up). */
	if (!__atomic_load_n(&n->ctl->status.app_listening, __ATOMIC_ACQUIRE))
		return 0;
	while (b->exec_idx < b->expect && b->exec_idx <= b->commit) {
		uint64_t pos = b->exec_pos;
		const struct entry_hdr *e = entry_at(n, &pos, b->exec_idx);

		if (!e) {
			pr_err("entry %llu vanished from the log before execution",
			       (unsigned long long)b->exec_idx);
			break;
		}
		if (!replay_exec(n->replay, e))
			break;
		b->exec_pos = pos + entry_size(e->data_sz);
		b->exec_idx++;
		progress = 1;
	}
	if (progress) {
		uint64_t applied = b->exec_idx - 1;

		__atomic_store_n(&n->applied, applied, __ATOMIC_RELAXED);
		/* applied_end first: the leader reads applied as "up to here". */
		write_leader(b, offsetof(struct region_ctl, peer[n->self].applied_end), b->exec_pos);
		write_leader(b, offsetof(struct region_ctl, peer[n->self].applied), applied);
		n->ops->ring(n->tp, b->leader);
	}
	return progress;
}

static int connect_leader(struct backup *b)
{
	struct node *n = b->n;
	int rc;

	if (n->ops->connected(n->tp, b->leader))
		return 1;
	rc = n->ops->connect(n->tp, b->leader);
	if (rc == 0) {
		pr_info("reached leader node %d", b->leader);
		__atomic_or_fetch(&n->connected, 1u << b->leader, __ATOMIC_RELEASE);
		return 1;
	}
	if (rc != -EAGAIN)
		pr_warn("cannot reach leader node %d: %s", b->leader, strerror(-rc));
	return 0;
}

/* Failure detection: the leader's heartbeat word must keep moving; a
 * leader silent for suspect_ms is suspected (logged, shown in status).
 * Only reported for now: the election (issue 4) will act on it. */
static void watch_leader(struct backup *b, uint64_t now)
{
	struct node *n = b->n;
	uint64_t hb = load64(&n->ctl->lead_hb), age;

	if (hb != b->seen_hb || !b->hb_at_ns) {
		if (b->suspected)
			pr_info("leader node %d is alive again (silent for %llu ms)", b->leader,
				(unsigned long long)((now - b->hb_at_ns) / 1000000));
		b->seen_hb = hb;
		b->hb_at_ns = now;
		b->suspected = 0;
	}
	age = (now - b->hb_at_ns) / 1000000;
	if (!b->suspected && age >= (uint64_t)n->cfg.suspect_ms) {
		b->suspected = 1;
		pr_warn("leader node %d suspected: no heartbeat for %llu ms", b->leader,
			(unsigned long long)age);
	}
	n->ctl->status.leader_hb_age_ms = age;
	n->ctl->status.suspects_leader = (uint32_t)b->suspected;
}

/* Work is waiting: a new entry landed or commit moved. */
static int work_pending(struct backup *b)
{
	uint64_t pos = b->pos;

	if (load64(&b->n->ctl->lead_commit) > b->commit && b->exec_idx < b->expect)
		return 1;
	return entry_at(b->n, &pos, b->expect) != NULL;
}

void *backup_main(void *arg)
{
	struct node *n = arg;
	struct backup b = { .n = n, .leader = n->leader, .expect = 1, .exec_idx = 1 };
	int hb_us = n->cfg.heartbeat_ms * 1000;
	uint64_t idle_since = now_ns();

	/* A backup serves no clients: it is ready as soon as it runs, and
	 * reaches the leader whenever the leader comes up. */
	n->ctl->status.ready = 1;

	while (!__atomic_load_n(&n->stopping, __ATOMIC_RELAXED)) {
		int progress = 0, waiting_server;

		watch_leader(&b, now_ns());
		if (!connect_leader(&b)) {
			node_update_status(n);
			n->ops->wait(n->tp, n->ops->bell(n->tp), hb_us);
			continue;
		}
		n->ops->poll(n->tp);
		progress |= agree(&b) > 0;
		uint64_t lc = load64(&n->ctl->lead_commit);
		if (lc > b.commit)
			b.commit = lc;
		__atomic_store_n(&n->commit, b.commit, __ATOMIC_RELAXED);
		progress |= execute(&b);
		/* Turns the server has yet to take, or entries it has no room for. */
		waiting_server = replay_maintain(n->replay) ||
				 (b.exec_idx < b.expect && b.exec_idx <= b.commit);

		uint64_t now = now_ns();
		if (now - b.last_hb_ns > (uint64_t)hb_us * 1000) {
			b.last_hb_ns = now;
			int rc = n->ops->check(n->tp, b.leader);
			if (rc == -ENOTCONN) {
				/* Lost, not restarted (as far as we know): reach it again. */
				__atomic_and_fetch(&n->connected, ~(1u << b.leader), __ATOMIC_RELEASE);
				continue;
			}
			if (rc != 0) {
				/* A new leader log starts at entry 1; our server already
				 * ran the old one.  Rejoining needs log repair (election). */
				pr_err("leader node %d restarted or died; restart this node to rejoin",
				       b.leader);
				__atomic_and_fetch(&n->connected, ~(1u << b.leader), __ATOMIC_RELEASE);
				break;
			}
			write_leader(&b, offsetof(struct region_ctl, peer[n->self].hb), now);
			n->ctl->status.log_pos = b.pos;
			node_update_status(n);
		}
		if (progress) {
			idle_since = now;
			continue;
		}
		if (now - idle_since < n->spin_ns) {
			cpu_relax();
			continue;
		}
		uint32_t seen = n->ops->bell(n->tp);
		if (work_pending(&b))
			continue;
		/* Waiting on the server: look again soon (its reads ring our
		 * doorbell when we wait for room). */
		n->ops->wait(n->tp, seen, waiting_server ? 1000 : hb_us);
	}
	return NULL;
}
