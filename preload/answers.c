/* Which clients a leader's server has answered: it read input from one
 * and has written to it since, or not (unanswered).  Two uses.
 *
 * The input's flags: bytes the server gets from a client it had answered
 * are logged ENTRY_F_ANSWERED, and a backup's server gets them only once
 * it has answered too (turns.h): a server that reads a connection's next
 * request before the previous one ran (slapd hands it to another thread)
 * reads it no earlier, on a backup, than on the leader.
 *
 * A leader's recovery point.  A fork-based snapshot (Redis's BGSAVE)
 * holds the server's data, not its read buffers: a client whose request
 * the server had read the first part of when it forked would, on a node
 * restarting from that point, have the rest replayed alone and the
 * request lost.  At the fork an unanswered client's request is whole (its
 * reply is still to be written: Redis writes replies before it waits for
 * events again) or cut; what the server does next with it tells which: it
 * answers (whole), or it reads more first (cut: the point is refused).
 * Only clients read within MID_REQUEST_WINDOW_MS before the fork are
 * watched: one read earlier is taken for a request that blocks (BLPOP),
 * not for a part.  A watched client the server has done neither with by
 * the time the snapshot is written counts as cut too (a slow client's
 * request; a blocking one waits out the window in refusals 100 ms apart).
 * The backups' side is replay_mid_requests() (coordinator/node/replay.h). */
#include "common/clock.h"
#include "coordinator/node/node.h"
#include "shim.h"

#define MID_REQUEST_WINDOW_MS 1000

void answers_heard(struct fd_slot *s, uint64_t stamp_ms)
{
	if (__atomic_load_n(&s->client.point_watch, __ATOMIC_RELAXED)) {
		__atomic_store_n(&s->client.point_cut, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&s->client.point_watch, 0, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&s->client.heard_stamp_ms, stamp_ms, __ATOMIC_RELAXED);
	__atomic_store_n(&s->client.unanswered, 1, __ATOMIC_RELAXED);
}

int answers_flags(const struct fd_slot *s)
{
	/* (Read ahead only once the bytes before were consumed.) */
	return __atomic_load_n(&s->client.unanswered, __ATOMIC_RELAXED) ? 0 : ENTRY_F_ANSWERED;
}

void answers_wrote(struct fd_slot *s)
{
	if (__atomic_load_n(&s->client.unanswered, __ATOMIC_RELAXED))
		__atomic_store_n(&s->client.unanswered, 0, __ATOMIC_RELAXED);
	if (__atomic_load_n(&s->client.point_watch, __ATOMIC_RELAXED))
		__atomic_store_n(&s->client.point_watch, 0, __ATOMIC_RELAXED);
}

void answers_reset(struct fd_slot *s)
{
	s->client.unanswered = 0;
	s->client.point_watch = 0;
	s->client.point_cut = 0;
}

/* Every client slot: F(S).  (Slots are never freed: see fdtable.h.) */
static void each_client(void (*f)(struct fd_slot *s, void *arg), void *arg)
{
	for (int d = 0; d < FD_MAX / FD_CHUNK; d++) {
		struct fd_slot *chunk = __atomic_load_n(&fd_dir[d], __ATOMIC_ACQUIRE);

		for (int i = 0; chunk && i < FD_CHUNK; i++)
			if (__atomic_load_n(&chunk[i].kind, __ATOMIC_RELAXED) == FD_CLIENT)
				f(&chunk[i], arg);
	}
}

static void watch(struct fd_slot *s, void *arg)
{
	uint64_t now_ms = *(const uint64_t *)arg;
	uint32_t w = __atomic_load_n(&s->client.unanswered, __ATOMIC_RELAXED) &&
		     now_ms <= __atomic_load_n(&s->client.heard_stamp_ms, __ATOMIC_RELAXED) +
				   MID_REQUEST_WINDOW_MS;

	__atomic_store_n(&s->client.point_cut, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->client.point_watch, w, __ATOMIC_RELAXED);
}

void answers_fork(void)
{
	uint64_t now_ms = realtime_ms();

	each_client(watch, &now_ms);
}

struct cut_count {
	int n;
	struct viewstamp first;
};

static void count_cut(struct fd_slot *s, void *arg)
{
	struct cut_count *c = arg;

	if (!__atomic_load_n(&s->client.point_cut, __ATOMIC_RELAXED) &&
	    !__atomic_load_n(&s->client.point_watch, __ATOMIC_RELAXED))
		return;
	if (!c->n++)
		c->first = s->client.conn;
}

int answers_cut(struct viewstamp *first)
{
	struct cut_count c = { 0, { 0, 0 } };

	each_client(count_cut, &c);
	if (c.n && first)
		*first = c.first;
	return c.n;
}
