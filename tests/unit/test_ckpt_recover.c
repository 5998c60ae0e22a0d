/*
 * test_ckpt_recover - checkpoint + crash + recovery against a model, on every
 * backend (io_uring, libaio, sync): fill a store through the log, checkpoint,
 * change records while fuzzy checkpoints run, change more, crash (no final
 * checkpoint), recover into a fresh store (pages + log replay) and compare
 * byte-exact; then keep going on the recovered store and do it again.
 */
#include "test_ckpt_model.h"

struct bg { struct tmodel *m; unsigned rounds; _Atomic int done; };

static void *bg_main(void *p)
{
	struct bg *b = p;
	tm_workload(b->m, 3, b->rounds, 7);
	b->done = 1;
	return NULL;
}

static void run(const char *base, enum io_backend be)
{
	static struct tmodel m;
	char dir[1200];
	snprintf(dir, sizeof(dir), "%s/%s", base, tdur_backend_name(be));
	memset(&m, 0, sizeof(m));
	m.dir = dir;
	m.backend = be;
	tm_open(&m, 0, 1);
	tm_workload(&m, 4, 6000, 1);
	struct ckpt_stats cs;
	CHECK_RC(ckpt_run(m.ck, &cs));
	CHECK(cs.pages > 0);
	printf("%s: checkpoint 1: %llu pages, %llu I/Os, %.1f ms (%s)\n", tdur_backend_name(be),
	       (unsigned long long)cs.pages, (unsigned long long)cs.ios, cs.elapsed_ns / 1e6,
	       cs.backend);

	/* fuzzy checkpoints while changes run */
	struct bg b = { &m, 5000, 0 };
	pthread_t th;
	pthread_create(&th, NULL, bg_main, &b);
	int runs = 0;
	while (!b.done || runs < 2) {
		CHECK_RC(ckpt_run(m.ck, &cs));
		runs++;
	}
	pthread_join(th, NULL);
	tm_workload(&m, 2, 3000, 3);   /* only in the log */
	tm_crash(&m);

	struct ckpt_recover_stats rs;
	uint64_t next, replayed;
	CHECK_RC(tm_recover(&m, &rs, &next, &replayed));
	printf("%s: recovered %llu pages (%llu records) in %.1f ms with %s, replayed %llu "
	       "changes; %d fuzzy checkpoints\n", tdur_backend_name(be),
	       (unsigned long long)rs.pages, (unsigned long long)rs.records,
	       rs.elapsed_ns / 1e6, rs.backend, (unsigned long long)replayed, runs);
	CHECK(replayed >= 6000);
	tm_compare(&m);

	/* life goes on after recovery: checkpoint again, crash again */
	tm_open(&m, next, 0);
	tm_workload(&m, 2, 3000, 11);
	CHECK_RC(ckpt_run(m.ck, &cs));
	tm_workload(&m, 2, 2000, 13);
	tm_crash(&m);
	CHECK_RC(tm_recover(&m, &rs, &next, &replayed));
	CHECK(replayed >= 4000);
	tm_compare(&m);
	store_destroy(m.st);
}

int main(int argc, char **argv)
{
	static const enum io_backend all[] = { IO_BACKEND_URING, IO_BACKEND_AIO, IO_BACKEND_SYNC };
	const char *base = tdur_setup();
	for (unsigned i = 0; i < 3; i++) {
		if (argc > 1 && strcmp(argv[1], tdur_backend_name(all[i])))
			continue;
		struct io_opts probe = { .backend = all[i] };
		io_ctx_t *ctx;
		if (io_ctx_create(&probe, &ctx) < 0) {
			printf("%s: not available here, skipped\n", tdur_backend_name(all[i]));
			continue;
		}
		io_ctx_destroy(ctx);
		run(base, all[i]);
	}
	tdur_cleanup();
	printf("ok\n");
	return 0;
}
