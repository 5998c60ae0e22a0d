/*
 * test_ckpt_writer - the page writer thread: checkpoints start on log growth
 * (log_trigger) and on the timer (interval_ms), run concurrently with
 * changes, stop with ckpt_close (checkpoint_on_close takes a last one), and
 * recovery afterwards matches the model.
 */
#include <sys/stat.h>
#include "test_ckpt_model.h"

static uint64_t manifest_seq(const char *dir)
{
	char p[1300], line[256];
	uint64_t seq = 0;
	snprintf(p, sizeof(p), "%s/MANIFEST", dir);
	FILE *f = fopen(p, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "seq ", 4))
			seq = strtoull(line + 4, NULL, 10);
	fclose(f);
	return seq;
}

static int wait_seq(const char *dir, uint64_t at_least, int ms)
{
	for (int i = 0; i < ms / 10; i++) {
		if (manifest_seq(dir) >= at_least)
			return 1;
		usleep(10000);
	}
	return 0;
}

int main(void)
{
	static struct tmodel m;
	const char *dir = tdur_setup();
	m.dir = dir;
	CHECK_RC(store_create(256ull << 20, 0, &m.st));
	for (unsigned t = 0; t < TM_TABLES; t++)
		CHECK_RC(store_table_create(m.st, tm_names[t], tm_maxv[t], &m.tid[t]));
	struct redo_opts ro = { .dir = dir, .segment_bytes = 1 << 20 };
	CHECK_RC(redo_open(&ro, 0, &m.log));

	/* 1. log growth: a checkpoint per 512 KiB of log */
	struct ckpt_opts co = { .dir = dir, .log_trigger = 512 << 10 };
	CHECK_RC(ckpt_open(m.st, m.log, &co, &m.ck));
	CHECK_RC(ckpt_start(m.ck));
	tm_workload(&m, 2, 4000, 1);   /* about 8000 * 56 B = 450 KiB */
	tm_workload(&m, 2, 4000, 2);
	CHECK(wait_seq(dir, 1, 5000));
	uint64_t s1 = manifest_seq(dir);
	ckpt_close(m.ck);

	/* 2. the timer (the log trigger is far away) and checkpoint_on_close */
	co.log_trigger = 1ull << 40;
	co.interval_ms = 100;
	co.checkpoint_on_close = 1;
	CHECK_RC(ckpt_open(m.st, m.log, &co, &m.ck));
	CHECK_RC(ckpt_start(m.ck));
	tm_workload(&m, 2, 500, 3);
	CHECK(wait_seq(dir, s1 + 1, 5000));
	/* A checkpoint that began while the workload ran leaves its last changes
	 * to the next tick: wait until the sequence settles (a checkpoint can take
	 * most of a second under TSan). */
	uint64_t s2 = manifest_seq(dir);
	for (int i = 0; i < 10; i++) {
		usleep(750000);
		uint64_t now = manifest_seq(dir);
		if (now == s2)
			break;
		s2 = now;
	}
	usleep(350000);                 /* idle: no changes, no new checkpoints */
	CHECK_EQ(manifest_seq(dir), s2);
	tm_workload(&m, 2, 500, 4);
	ckpt_close(m.ck);               /* takes a final checkpoint */
	CHECK(manifest_seq(dir) > s2);
	m.ck = NULL;
	redo_close(m.log);
	store_destroy(m.st);

	struct ckpt_recover_stats rs;
	uint64_t next, replayed;
	CHECK_RC(tm_recover(&m, &rs, &next, &replayed));
	CHECK_EQ(replayed, 0);          /* the final checkpoint covered everything */
	tm_compare(&m);
	store_destroy(m.st);
	printf("checkpoints: %llu by log growth, then timer and close up to %llu\n",
	       (unsigned long long)s1, (unsigned long long)manifest_seq(dir));
	tdur_cleanup();
	printf("ok\n");
	return 0;
}
