/* The finished output checks in a node's control page (coordinator/
 * checks.h), as apus verify reads them from another process: every check
 * recorded reads back whole while the ring holds it, an overwritten or
 * half-written entry is refused (never mistaken for another check), a
 * reader racing a writer only ever copies entries that are whole, and the
 * check verify asked about is kept as the answer however many others end
 * after it. */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "coordinator/storage/checks.h"
#include "coordinator/storage/region_mail.h"
#include "coordinator/storage/region_status.h"
#include "coordinator/storage/region_wire.h"
#include "tests/unit/unit.h"

/* A whole control page: the status page and the mailboxes lie past its
 * wire part. */
static union {
	struct region_ctl ctl;
	char bytes[REGION_CTL_SIZE];
} page;
static struct region_ctl *const ctl = &page.ctl;
static struct node_status *const st = region_status(&page.ctl);

/* A check whose every field is derived from K, so a torn copy shows. */
static void fake_check(struct out_check *c, uint64_t k)
{
	out_check_init(c, NULL, NULL);
	c->out.off = 1000 + k;
	c->out.crc = k * 7;
	out_check_leader_final(c, 1000 + k, k * 7, k);
}

static int whole(const struct check_result *e)
{
	uint64_t k = e->conn_idx;

	return e->conn_view == k * 3 && e->leader_off == 1000 + k && e->leader_crc == k * 7 &&
	       e->at == 1000 + k && e->replica_crc == k * 7 && e->verdict == OUT_EQUAL;
}

static void record(uint64_t k)
{
	struct out_check c;

	fake_check(&c, k);
	checks_record(ctl, k * 3, k, &c, 1);
}

#define WRITES 200000
static int done;

static void *writer(void *arg)
{
	(void)arg;
	for (uint64_t k = 1; k <= WRITES; k++)
		record(k);
	__atomic_store_n(&done, 1, __ATOMIC_RELEASE);
	return NULL;
}

int main(void)
{
	struct check_result e;
	struct out_check c;

	/* Nothing yet. */
	CHECK(checks_count(st) == 0, "fresh ring counts %llu", (unsigned long long)checks_count(st));
	CHECK(checks_read(st, 1, &e) == -ENOENT, "read of an empty ring");
	CHECK(checks_read(st, 0, &e) == -ENOENT, "check 0 does not exist");

	/* No final mark from the leader: nothing is recorded. */
	out_check_init(&c, NULL, NULL);
	checks_record(ctl, 1, 1, &c, 1);
	CHECK(checks_count(st) == 0, "a check without the leader's final mark was recorded");

	/* 20 checks: the last CHECKS_KEEP read back, the others are gone. */
	for (uint64_t k = 1; k <= 20; k++)
		record(k);
	CHECK(checks_count(st) == 20, "count %llu after 20", (unsigned long long)checks_count(st));
	for (uint64_t seq = 1; seq <= 20; seq++) {
		int rc = checks_read(st, seq, &e);
		if (seq <= 20 - CHECKS_KEEP) {
			CHECK(rc == -ENOENT, "overwritten check %llu read as %d", (unsigned long long)seq, rc);
			continue;
		}
		CHECK(rc == 0, "check %llu: %d", (unsigned long long)seq, rc);
		CHECK(e.seq == seq && e.conn_idx == seq && whole(&e), "check %llu came back wrong",
		      (unsigned long long)seq);
	}
	CHECK(checks_read(st, 21, &e) == -ENOENT, "a check not written yet was read");

	/* A writer caught between clearing seq and publishing it. */
	st->check[(20 - 1) % CHECKS_KEEP].seq = 0;
	CHECK(checks_read(st, 20, &e) == -EAGAIN, "a half-written entry was read");
	record(21);	/* the next one goes to the next slot: 20 stays torn */
	CHECK(checks_read(st, 21, &e) == 0 && whole(&e), "check 21");

	/* verify's question: the check of the connection whose leader's
	 * final mark it names is kept, however many end after it; another
	 * question, or another mark, finds no answer. */
	CHECK(checks_answer(ctl, 77, 1000 + 30, 30 * 7, &e) == -ENOENT, "an answer before the question");
	checks_ask(ctl, 77, 1000 + 30, 30 * 7);
	for (uint64_t k = 22; k <= 100; k++)
		record(k);
	CHECK(checks_read(st, 30, &e) == -ENOENT, "check 30 is still in the ring");
	CHECK(checks_answer(ctl, 77, 1000 + 30, 30 * 7, &e) == 0 && e.conn_idx == 30 && whole(&e),
	      "the answer to the question is not check 30");
	CHECK(checks_answer(ctl, 78, 1000 + 30, 30 * 7, &e) == -ENOENT, "answered another question");
	CHECK(checks_answer(ctl, 77, 1000 + 31, 31 * 7, &e) == -ENOENT, "answered another mark");
	region_mail(ctl)->verify.answer.seq = 0;
	CHECK(checks_answer(ctl, 77, 1000 + 30, 30 * 7, &e) != 0, "a half-written answer was read");
	checks_unask(ctl, 76);
	CHECK(region_mail(ctl)->verify.want_seq == 77, "withdrew another asker's question");
	checks_unask(ctl, 77);
	CHECK(region_mail(ctl)->verify.want_seq == 0, "the question stays asked");
	record(101);
	CHECK(region_mail(ctl)->verify.answer.seq == 0, "answered a question no longer asked");

	/* A reader racing the writer: every copy it accepts is whole and is
	 * the check it asked for. */
	memset(&page, 0, sizeof(page));
	pthread_t w;
	uint64_t good = 0, torn = 0;
	pthread_create(&w, NULL, writer, NULL);
	while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
		uint64_t n = checks_count(st);
		for (uint64_t seq = n > CHECKS_KEEP ? n - CHECKS_KEEP + 1 : 1; seq <= n; seq++) {
			int rc = checks_read(st, seq, &e);
			if (rc == -EAGAIN) {
				torn++;
				continue;
			}
			if (rc)
				continue;
			CHECK(e.seq == seq && e.conn_idx == seq && whole(&e),
			      "racing reader accepted a torn or wrong entry: seq %llu idx %llu",
			      (unsigned long long)seq, (unsigned long long)e.conn_idx);
			good++;
		}
	}
	pthread_join(w, NULL);
	CHECK(checks_count(st) == WRITES, "count %llu after the race",
	      (unsigned long long)checks_count(st));
	CHECK(good > 0, "the racing reader never read a whole entry");
	printf("racing reader: %llu whole copies, %llu refused as torn\n", (unsigned long long)good,
	       (unsigned long long)torn);
	return 0;
}
