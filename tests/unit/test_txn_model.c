/*
 * test_txn_model.c - random transactions checked against a model of what a
 * transaction must see: the committed table plus its own writes, in program
 * order.  One client, so nothing conflicts; every transaction mixes writes,
 * inserts, deletes, reads, reads-for-update and scans over 40 keys on 2
 * memory servers, executes at random points, and commits or aborts at
 * random.  Each read and scan result is compared with the model when its
 * step ends; after every transaction a full scan compares the committed
 * table.  Seeds: LOTUS_MODEL_SEED (default 1), LOTUS_MODEL_TXNS (default 400),
 * LOTUS_MODEL_TRACE=1 prints every op.
 */
#include "common/ycsb_gen.h"
#include "testutil.h"

#define NK    40
#define MAXOP 40

struct model { int present[NK]; char val[NK][16]; };

/* A staged read or scan and what it must return. */
struct expect {
	int op, kind;            /* 0 read, 1 scan */
	int rc;                  /* read: 0 or LOTUS_ENOTFOUND */
	char val[16];
	unsigned start, count;   /* scan: keys from start */
	struct model view;       /* scan: the view at staging */
};

static void mkkey(char *k, unsigned i)
{
	snprintf(k, 8, "k%02u", i);
}

static void check_scan(lotus_txn_t *t, const struct expect *e, unsigned txn)
{
	int n = lotus_txn_scan_rows(t, e->op);
	unsigned want = 0;
	for (unsigned i = e->start; i < NK && want < e->count; i++)
		want += e->view.present[i];
	if (n != (int)want) {
		fprintf(stderr, "txn %u: scan from %u count %u gave %d rows, want %u\n", txn,
			e->start, e->count, n, want);
		exit(1);
	}
	unsigned i = e->start;
	for (int r = 0; r < n; r++, i++) {
		const void *k, *v;
		size_t kl, vl;
		char key[8];
		while (!e->view.present[i])
			i++;
		mkkey(key, i);
		CHECK_RC(lotus_txn_scan_row(t, e->op, (unsigned)r, &k, &kl, &v, &vl));
		if (kl != 3 || memcmp(k, key, 3) || vl != strlen(e->view.val[i]) ||
		    memcmp(v, e->view.val[i], vl)) {
			fprintf(stderr, "txn %u: scan row %d is %.*s=%.*s, want %s=%s\n", txn, r,
				(int)kl, (const char *)k, (int)vl, (const char *)v, key,
				e->view.val[i]);
			exit(1);
		}
	}
}

static void check(lotus_txn_t *t, struct expect *ex, unsigned n, unsigned txn)
{
	for (unsigned i = 0; i < n; i++) {
		const void *v;
		size_t vl;
		if (ex[i].kind == 1) {
			check_scan(t, &ex[i], txn);
			continue;
		}
		int rc = lotus_txn_result(t, ex[i].op, &v, &vl);
		if (rc != ex[i].rc ||
		    (rc == 0 && (vl != strlen(ex[i].val) || memcmp(v, ex[i].val, vl)))) {
			fprintf(stderr, "txn %u: read op %d gave %s \"%.*s\", want %s \"%s\"\n", txn,
				ex[i].op, lotus_strerror(rc), rc ? 0 : (int)vl,
				rc ? "" : (const char *)v, lotus_strerror(ex[i].rc), ex[i].val);
			exit(1);
		}
	}
}

static void verify_table(lotus_session_t *s, lotus_table_t tb, const struct model *m,
			 unsigned txn)
{
	lotus_txn_t *t;
	struct expect e = { .kind = 1, .start = 0, .count = NK + 5, .view = *m };
	CHECK_RC(lotus_txn_begin(s, &t));
	e.op = lotus_txn_scan(t, tb, "k", 1, NK + 5);
	CHECK_RC(e.op);
	CHECK_RC(lotus_txn_execute(t));
	check_scan(t, &e, txn);
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
}

static void run(lotus_session_t *s, lotus_table_t tb, uint64_t seed, unsigned ntxn)
{
	static struct expect ex[MAXOP];
	struct model committed = { { 0 } }, view;
	struct rng r;
	lotus_txn_t *t;
	rng_seed(&r, seed);
	CHECK_RC(lotus_txn_begin(s, &t));
	for (unsigned txn = 0; txn < ntxn; txn++) {
		unsigned nops = 1 + (unsigned)rng_below(&r, MAXOP), nex = 0;
		view = committed;
		CHECK_RC(lotus_txn_recycle(t));
		for (unsigned i = 0; i < nops; i++) {
			unsigned k = (unsigned)rng_below(&r, NK), what = (unsigned)rng_below(&r, 12);
			char key[8], val[16];
			mkkey(key, k);
			if (getenv("LOTUS_MODEL_TRACE"))
				fprintf(stderr, "txn %u op %u: what %u key %u\n", txn, i, what, k);
			snprintf(val, sizeof(val), "t%u.%u", txn % 100000, i % 100);
			if (what < 3) {              /* write: upsert */
				CHECK_RC(lotus_txn_write(t, tb, key, 3, val, strlen(val)));
				view.present[k] = 1;
				strcpy(view.val[k], val);
			} else if (what < 5) {       /* insert: only if absent */
				CHECK_RC(lotus_txn_insert(t, tb, key, 3, val, strlen(val)));
				if (!view.present[k]) {
					view.present[k] = 1;
					strcpy(view.val[k], val);
				}
			} else if (what < 7) {       /* delete */
				CHECK_RC(lotus_txn_delete(t, tb, key, 3));
				view.present[k] = 0;
			} else if (what < 10) {      /* read / read for update */
				int op = what == 9 ? lotus_txn_read_for_update(t, tb, key, 3)
						   : lotus_txn_read(t, tb, key, 3);
				CHECK_RC(op);
				ex[nex] = (struct expect){ .op = op, .kind = 0,
							   .rc = view.present[k] ? 0 : LOTUS_ENOTFOUND };
				strcpy(ex[nex].val, view.present[k] ? view.val[k] : "");
				nex++;
			} else if (what == 10) {     /* scan */
				unsigned count = (unsigned)rng_below(&r, 12);
				int op = lotus_txn_scan(t, tb, key, 3, count);
				CHECK_RC(op);
				ex[nex] = (struct expect){ .op = op, .kind = 1, .start = k,
							   .count = count, .view = view };
				nex++;
			} else {                     /* execute what is staged so far */
				CHECK_RC(lotus_txn_execute(t));
				check(t, ex, nex, txn);
			}
		}
		CHECK_RC(lotus_txn_execute(t));
		check(t, ex, nex, txn);
		if (rng_below(&r, 4)) {
			CHECK_RC(lotus_txn_commit(t));
			committed = view;
		} else {
			CHECK_RC(lotus_txn_abort(t));
		}
		verify_table(s, tb, &committed, txn);
	}
	lotus_txn_free(t);
}

int main(void)
{
	const char *e = getenv("LOTUS_MODEL_SEED"), *n = getenv("LOTUS_MODEL_TXNS");
	uint64_t seed = e ? strtoull(e, NULL, 0) : 1;
	/* ASan: half (400 took 72 s of the ASan stage); the normal build runs 400 */
#if defined(__SANITIZE_ADDRESS__)
	unsigned ntxn = n ? (unsigned)atoi(n) : 200;
#else
	unsigned ntxn = n ? (unsigned)atoi(n) : 400;
#endif
	static const enum lotus_batch batch[] = { LOTUS_BATCH_INTRA, LOTUS_BATCH_NONE,
						  LOTUS_BATCH_INTER };
	for (int cc = 0; cc < 3; cc++) {  /* each protocol with another batching mode */
		lotus_cluster_t *cl = test_cluster(2, "tcp", (enum lotus_cc)cc, batch[cc]);
		lotus_session_t *s;
		lotus_table_t tb;
		CHECK_RC(lotus_session_open(cl, &s));
		CHECK_RC(lotus_table_create(s, "model", 16, &tb));
		run(s, tb, seed + (uint64_t)cc, ntxn);
		lotus_session_close(s);
		lotus_disconnect(cl);
	}
	printf("ok\n");
	return 0;
}
