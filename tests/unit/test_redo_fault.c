/*
 * test_redo_fault - an I/O error on a log write (EIO, then ENOSPC, injected
 * with io_fault_set("cqe:N:E")) on every backend: waiters get LOTUS_EDURABLE,
 * later appends LOTUS_EREADONLY, nothing that was not durable is reported
 * durable, and every record whose callback said 0 is in the replay.  The log
 * reopened after replay takes appends again.
 */
#include <pthread.h>
#include "store/redo.h"
#include "test_redo_util.h"

#define NTHREADS 3
#define PER_THREAD 400
#define MAXLEN 300

static redo_t *g_log;
struct rec { uint64_t lsn; int status; int calls; };
static struct rec recs[NTHREADS][PER_THREAD];
static unsigned appended[NTHREADS];

static void on_durable(void *arg, int status)
{
	struct rec *r = arg;
	r->status = status;
	__atomic_add_fetch(&r->calls, 1, __ATOMIC_ACQ_REL);
}

static void *appender(void *p)
{
	int t = (int)(intptr_t)p;
	unsigned char buf[MAXLEN];
	for (int i = 0; i < PER_THREAD; i++) {
		uint64_t id = (uint64_t)t << 32 | (uint64_t)i;
		uint32_t len = tdur_payload(id, buf, MAXLEN);
		int rc = redo_append(g_log, REDO_USER, id, buf, len, &recs[t][i].lsn);
		if (rc == LOTUS_EREADONLY)
			break;
		CHECK_RC(rc);
		appended[t]++;
		if (i % 3 == 0) {
			rc = redo_wait(g_log, recs[t][i].lsn);
			CHECK(rc == 0 || rc == LOTUS_EDURABLE);
			on_durable(&recs[t][i], rc);
		} else {
			CHECK_RC(redo_notify(g_log, recs[t][i].lsn, on_durable, &recs[t][i]));
		}
		if (i % 5 == 0)
			usleep(200);  /* spread the appends over many writes */
	}
	return NULL;
}

struct rs { unsigned n, bad; uint64_t last; };

static int collect(void *arg, uint64_t lsn, uint8_t type, uint64_t id, const void *p, uint32_t len)
{
	struct rs *s = arg;
	unsigned t = (unsigned)(id >> 32), i = (unsigned)id;
	unsigned char buf[MAXLEN];
	uint32_t want = tdur_payload(id, buf, MAXLEN);
	if (lsn <= s->last || len != want || memcmp(buf, p, len))
		s->bad++;
	if (t < NTHREADS && i < PER_THREAD) {
		if (recs[t][i].lsn != lsn)
			s->bad++;
		recs[t][i].calls += 100;  /* mark: found in the replay */
	} else if (t != 99) {
		s->bad++;
	}
	s->last = lsn;
	s->n++;
	return 0;
}

static void run(const char *dir, enum io_backend b, const char *fault)
{
	memset(recs, 0, sizeof(recs));
	memset(appended, 0, sizeof(appended));
	io_fault_set(fault);
	struct redo_opts o = { .dir = dir, .backend = b, .segment_bytes = 256 << 10 };
	CHECK_RC(redo_open(&o, 0, &g_log));
	io_fault_set("");
	pthread_t th[NTHREADS];
	for (int t = 0; t < NTHREADS; t++)
		pthread_create(&th[t], NULL, appender, (void *)(intptr_t)t);
	for (int t = 0; t < NTHREADS; t++)
		pthread_join(th[t], NULL);
	/* the injected failure must have happened */
	CHECK_EQ(redo_status(g_log), LOTUS_EREADONLY);
	uint64_t lsn;
	CHECK_EQ(redo_append(g_log, REDO_USER, 1, "x", 1, &lsn), LOTUS_EREADONLY);
	uint64_t durable = redo_durable_lsn(g_log);
	CHECK_EQ(redo_wait(g_log, durable + 1), LOTUS_EDURABLE);
	struct rec late = { .lsn = durable + 8 };
	CHECK_RC(redo_notify(g_log, late.lsn, on_durable, &late));
	CHECK_EQ(late.calls, 1);
	CHECK_EQ(late.status, LOTUS_EDURABLE);
	unsigned ok = 0, failed = 0;
	for (int t = 0; t < NTHREADS; t++)
		for (unsigned i = 0; i < appended[t]; i++) {
			struct rec *r = &recs[t][i];
			/* The writer runs the failed callbacks just after it publishes
			 * the error that redo_wait reports: wait for them (bounded). */
			for (int k = 0; k < 5000 && !__atomic_load_n(&r->calls, __ATOMIC_ACQUIRE); k++)
				usleep(1000);
			CHECK_EQ(__atomic_load_n(&r->calls, __ATOMIC_ACQUIRE), 1);
			CHECK(r->status == 0 || r->status == LOTUS_EDURABLE);
			CHECK_EQ(r->status == 0, r->lsn <= durable);
			r->status == 0 ? ok++ : failed++;
		}
	CHECK(failed > 0 && ok > 0);
	redo_close(g_log);

	struct rs s = { 0 };
	uint64_t next;
	CHECK_RC(redo_replay(dir, 0, collect, &s, NULL, &next));
	CHECK_EQ(s.bad, 0);
	for (int t = 0; t < NTHREADS; t++)
		for (unsigned i = 0; i < appended[t]; i++)
			if (recs[t][i].status == 0)
				CHECK(recs[t][i].calls >= 100);  /* acknowledged => replayed */
	printf("%s %s: %u acknowledged, %u failed, %u replayed\n", tdur_backend_name(b), fault,
	       ok, failed, s.n);

	/* the log works again after replay + reopen */
	CHECK_RC(redo_open(&o, next, &g_log));
	CHECK_RC(redo_append(g_log, REDO_USER, (uint64_t)99 << 32, "after", 5, &lsn));
	CHECK_EQ(redo_wait(g_log, lsn), 0);
	redo_close(g_log);
	struct rs s2 = { 0 };
	CHECK_RC(redo_replay(dir, 0, collect, &s2, NULL, &next));
	CHECK_EQ(s2.n, s.n + 1);
	CHECK_EQ(next, lsn);
}

int main(void)
{
	static const enum io_backend backends[] = { IO_BACKEND_URING, IO_BACKEND_AIO,
						    IO_BACKEND_SYNC };
	static const char *faults[] = { "cqe:40:EIO", "cqe:25:ENOSPC" };
	char sub[1200];
	const char *dir = tdur_setup();
	int n = 0;
	for (unsigned b = 0; b < 3; b++)
		for (unsigned f = 0; f < 2; f++) {
			snprintf(sub, sizeof(sub), "%s/log%d", dir, n++);
			struct io_opts probe = { .backend = backends[b] };
			io_ctx_t *ctx;
			if (io_ctx_create(&probe, &ctx) < 0) {
				printf("%s unavailable here, skipped\n", tdur_backend_name(backends[b]));
				continue;
			}
			io_ctx_destroy(ctx);
			run(sub, backends[b], faults[f]);
		}
	tdur_cleanup();
	printf("ok\n");
	return 0;
}
