/*
 * test_redo_lazy - lazy records (redo_append_lazy): they do not cost a
 * write of their own, and they are never left behind.
 *   a lazy record alone becomes durable by the writer's clock (about 2 ms),
 *   with no other append and nobody waiting;
 *   redo_wait and redo_notify on a lazy record's LSN make it durable at once;
 *   with the clock set far out (LOTUS_REDO_LAZY_MS), a lazy record is not
 *   written for 5 ms while nobody asks for it (a notify on an LSN far past
 *   the log's end, like the checkpointer's, does not count), and the
 *   ordinary record appended next takes it along in one write;
 *   replay returns every record, lazy or not, in order;
 *   closing the log writes lazy records that nobody asked for.
 * Runs on LOTUS_IO (or auto).
 */
#include "common/clock.h"
#include "store/redo.h"
#include "test_redo_util.h"

#define PAIRS 20

static int notified;

static void on_durable(void *arg, int status)
{
	(void)arg;
	CHECK_EQ(status, 0);
	__atomic_store_n(&notified, 1, __ATOMIC_RELEASE);
}

static void on_far(void *arg, int status)
{
	(void)arg;
	/* never reached: only the close gives it up */
	CHECK(status != 0, "a notify far past the log's end was called as durable");
}

static int count_record(void *arg, uint64_t lsn, uint8_t type, uint64_t txn_id,
			const void *payload, uint32_t len)
{
	uint64_t *n = arg;
	(void)lsn;
	(void)payload;
	(void)len;
	CHECK(type == REDO_USER || type == REDO_USER + 1);
	CHECK_EQ(txn_id, *n);   /* in append order */
	(*n)++;
	return 0;
}

/* Wait up to limit_ms for lsn to be durable, without asking for it. */
static int durable_within(redo_t *r, uint64_t lsn, unsigned limit_ms)
{
	uint64_t end = clock_now_ns() + (uint64_t)limit_ms * 1000000;
	while (redo_durable_lsn(r) < lsn && clock_now_ns() < end)
		usleep(200);
	return redo_durable_lsn(r) >= lsn;
}

int main(void)
{
	const char *dir = tdur_setup();
	struct redo_opts o = { .dir = dir };
	redo_t *r;
	CHECK_RC(redo_open(&o, 0, &r));
	unsigned char buf[64] = { 1 };
	uint64_t id = 0, lsn, lsn2;

	/* alone: the writer's clock writes it */
	CHECK_RC(redo_append_lazy(r, REDO_USER + 1, id++, buf, sizeof(buf), &lsn));
	CHECK(durable_within(r, lsn, 5000), "a lazy record alone was not written in 5 s");

	/* asked for: at once (well before the 2 ms clock matters, under load too) */
	CHECK_RC(redo_append_lazy(r, REDO_USER + 1, id++, buf, sizeof(buf), &lsn));
	CHECK_EQ(redo_wait(r, lsn), 0);
	CHECK_RC(redo_append_lazy(r, REDO_USER + 1, id++, buf, sizeof(buf), &lsn));
	CHECK_RC(redo_notify(r, lsn, on_durable, NULL));
	for (int i = 0; i < 5000 && !__atomic_load_n(&notified, __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	CHECK(__atomic_load_n(&notified, __ATOMIC_ACQUIRE), "a notify on a lazy record never came");

	/* pairs, with the lazy clock set far out (LOTUS_REDO_LAZY_MS): a lazy
	 * record stays in memory while nobody asks, and the next ordinary
	 * record takes it along in its one write */
	redo_close(r);
	uint64_t next = 0;
	CHECK_EQ(setenv("LOTUS_REDO_LAZY_MS", "600000", 1), 0);
	uint64_t n0 = 0;
	CHECK_RC(redo_replay(dir, 0, count_record, &n0, NULL, &next));
	CHECK_EQ(n0, id);
	CHECK_RC(redo_open(&o, next, &r));
	/* a wait far ahead, as a durable server's checkpointer keeps one (its
	 * log-size trigger): it must not make every lazy record urgent */
	CHECK_RC(redo_notify(r, redo_next_lsn(r) + (1ull << 30), on_far, NULL));
	for (int i = 0; i < PAIRS; i++) {
		struct redo_stats s0, s1;
		redo_stats(r, &s0);
		CHECK_RC(redo_append_lazy(r, REDO_USER + 1, id++, buf, sizeof(buf), &lsn));
		usleep(5000);
		CHECK(redo_durable_lsn(r) < lsn, "pair %d: a lazy record was written alone", i);
		CHECK_RC(redo_append(r, REDO_USER, id++, buf, sizeof(buf), &lsn2));
		CHECK_EQ(redo_wait(r, lsn2), 0);
		redo_stats(r, &s1);
		CHECK_EQ(s1.writes - s0.writes, 1);
	}
	printf("%d lazy + ordinary pairs: one write each\n", PAIRS);

	/* closing writes what nobody asked for */
	CHECK_RC(redo_append_lazy(r, REDO_USER + 1, id++, buf, sizeof(buf), &lsn));
	uint64_t end = redo_next_lsn(r);
	redo_close(r);

	uint64_t n = 0;
	CHECK_RC(redo_replay(dir, 0, count_record, &n, NULL, &next));
	CHECK_EQ(n, id);
	CHECK_EQ(next, end);
	tdur_cleanup();
	printf("ok\n");
	return 0;
}
