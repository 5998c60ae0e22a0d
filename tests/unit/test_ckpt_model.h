/*
 * test_ckpt_model.h - a store + redo log + checkpointer under a model, for
 * the test_ckpt_*.c programs (header-only).
 *
 * Changes are REDO_COMMIT records whose payload this test defines:
 *   op u8 (1 upsert, 2 delete) | table u8 | key u64 | version u32
 * The value of (table, key, version) is derived from them, so the model is
 * just version[table][key] (0 = absent).  A change is logged, then applied,
 * inside ckpt_change_begin/end, as the memory server does.  Worker threads
 * own disjoint key ranges, so per-key order in the log is apply order.
 */
#ifndef TEST_CKPT_MODEL_H
#define TEST_CKPT_MODEL_H
#include <pthread.h>
#include "common/common.h"
#include "store/ckpt.h"
#include "store/redo.h"
#include "store/store.h"
#include "test_redo_util.h"

#define TM_TABLES 2
#define TM_KEYS 12000
static const uint32_t tm_maxv[TM_TABLES] = { 200, 3000 };
static const char *const tm_names[TM_TABLES] = { "small", "big values" };

struct tmodel {
	const char *dir;
	enum io_backend backend;
	store_t *st;
	redo_t *log;
	ckpt_t *ck;
	uint16_t tid[TM_TABLES];
	uint32_t version[TM_TABLES][TM_KEYS];
};

struct tm_change {
	uint8_t op, table;
	uint8_t pad[2];
	uint32_t version;
	uint64_t key;
};

static inline uint32_t tm_value(unsigned table, uint64_t key, uint32_t version, unsigned char *buf)
{
	uint64_t id = (uint64_t)table << 60 | key << 24 | version;
	uint32_t n = tdur_payload(id, buf, tm_maxv[table] - 1);
	buf[n] = (unsigned char)(id ^ 0x5a);
	return n + 1;
}

/* Apply one change to a store (idempotent: replay may see it twice). */
static inline int tm_apply(store_t *st, const uint16_t *tid, const struct tm_change *ch)
{
	unsigned char k[8], v[4096];
	key_from_u64(ch->key, k);
	if (ch->op == 2) {
		int rc = store_delete(st, tid[ch->table], k, 8);
		return rc == LOTUS_ENOTFOUND ? 0 : rc;
	}
	uint32_t vlen = tm_value(ch->table, ch->key, ch->version, v);
	store_loc_t loc;
	int rc = store_get(st, tid[ch->table], k, 8, &loc);
	if (rc == 0)
		return store_update(st, loc, v, vlen);
	return store_insert(st, tid[ch->table], k, 8, v, vlen, &loc);
}

static inline void tm_open(struct tmodel *m, uint64_t next_lsn, int fresh_store)
{
	struct redo_opts ro = { .dir = m->dir, .backend = m->backend, .segment_bytes = 1 << 20 };
	if (fresh_store) {
		CHECK_RC(store_create(256ull << 20, 0, &m->st));
		for (unsigned t = 0; t < TM_TABLES; t++)
			CHECK_RC(store_table_create(m->st, tm_names[t], tm_maxv[t], &m->tid[t]));
	}
	CHECK_RC(redo_open(&ro, next_lsn, &m->log));
	struct ckpt_opts co = { .dir = m->dir, .backend = m->backend, .max_inflight = 512 };
	CHECK_RC(ckpt_open(m->st, m->log, &co, &m->ck));
}

/* One change through the log and into the store. */
static inline uint64_t tm_change(struct tmodel *m, unsigned table, uint64_t key, int del)
{
	struct tm_change ch = { .op = del ? 2 : 1, .table = (uint8_t)table, .key = key,
				.version = del ? 0 : m->version[table][key] + 1 };
	if (ch.version == 0 && !del)
		ch.version = 1;
	uint64_t lsn;
	unsigned g = ckpt_change_begin(m->ck);
	CHECK_RC(redo_append(m->log, REDO_COMMIT, key, &ch, sizeof(ch), &lsn));
	CHECK_RC(tm_apply(m->st, m->tid, &ch));
	ckpt_change_end(m->ck, g);
	m->version[table][key] = ch.version;
	return lsn;
}

struct tm_worker {
	struct tmodel *m;
	uint64_t lo, hi;     /* key range */
	unsigned rounds, seed;
	uint64_t last_lsn;
};

static inline void *tm_worker_main(void *p)
{
	struct tm_worker *w = p;
	uint64_t x = w->seed * 0x9e3779b97f4a7c15ULL + 1;
	for (unsigned i = 0; i < w->rounds; i++) {
		x = tdur_mix(x + i);
		unsigned table = (unsigned)(x & 1);
		uint64_t key = w->lo + (x >> 8) % (w->hi - w->lo);
		int del = (x >> 4) % 8 == 0 && w->m->version[table][key];
		w->last_lsn = tm_change(w->m, table, key, del);
	}
	return NULL;
}

/* Run nthreads workers over disjoint key ranges; wait for durability. */
static inline void tm_workload(struct tmodel *m, unsigned nthreads, unsigned rounds, unsigned seed)
{
	struct tm_worker w[8];
	pthread_t th[8];
	for (unsigned i = 0; i < nthreads; i++) {
		w[i] = (struct tm_worker){ m, TM_KEYS * i / nthreads, TM_KEYS * (i + 1) / nthreads,
					   rounds, seed * 31 + i, 0 };
		pthread_create(&th[i], NULL, tm_worker_main, &w[i]);
	}
	uint64_t hi = 0;
	for (unsigned i = 0; i < nthreads; i++) {
		pthread_join(th[i], NULL);
		hi = MAX(hi, w[i].last_lsn);
	}
	CHECK_EQ(redo_wait(m->log, hi), 0);
}

/* Crash: drop everything without a final checkpoint (the log is durable up
 * to what tm_workload waited for). */
static inline void tm_crash(struct tmodel *m)
{
	ckpt_close(m->ck);
	redo_close(m->log);
	store_destroy(m->st);
	m->ck = NULL;
	m->log = NULL;
	m->st = NULL;
}

struct tm_replay { store_t *st; uint16_t tid[TM_TABLES]; uint64_t n; int err; };

static inline int tm_replay_cb(void *arg, uint64_t lsn, uint8_t type, uint64_t txn, const void *p,
			uint32_t len)
{
	struct tm_replay *r = arg;
	struct tm_change ch;
	if (type != REDO_COMMIT || len != sizeof(ch))
		return -EINVAL;
	memcpy(&ch, p, sizeof(ch));
	r->n++;
	return tm_apply(r->st, r->tid, &ch);
}

/* Recover into a fresh store: checkpoint, then log replay.  0 or the error. */
static inline int tm_recover(struct tmodel *m, struct ckpt_recover_stats *rs, uint64_t *next_lsn,
		      uint64_t *replayed)
{
	CHECK_RC(store_create(256ull << 20, 0, &m->st));
	uint64_t from;
	*replayed = 0;
	int rc = ckpt_recover(m->st, m->dir, m->backend, &from, rs);
	if (rc)
		return rc;
	for (unsigned t = 0; t < TM_TABLES; t++) {
		uint32_t maxv;
		CHECK_RC(store_table_find(m->st, tm_names[t], &m->tid[t], &maxv));
		CHECK_EQ(maxv, tm_maxv[t]);
	}
	struct tm_replay r = { .st = m->st };
	memcpy(r.tid, m->tid, sizeof(r.tid));
	struct redo_replay_stats st;
	rc = redo_replay(m->dir, from, tm_replay_cb, &r, &st, next_lsn);
	*replayed = r.n;
	return rc;
}

/* The store equals the model, byte-exact, and holds nothing else. */
static inline void tm_compare(struct tmodel *m)
{
	uint64_t expect = 0;
	unsigned char k[8], v[4096];
	for (unsigned t = 0; t < TM_TABLES; t++)
		for (uint64_t key = 0; key < TM_KEYS; key++) {
			store_loc_t loc;
			key_from_u64(key, k);
			int rc = store_get(m->st, m->tid[t], k, 8, &loc);
			if (!m->version[t][key]) {
				CHECK_EQ(rc, LOTUS_ENOTFOUND);
				continue;
			}
			expect++;
			CHECK_EQ(rc, 0);
			struct store_rec *r = store_rec_at(m->st, loc, m->tid[t], k, 8);
			CHECK(r);
			uint32_t vlen = tm_value(t, key, m->version[t][key], v);
			if (r->value_len != vlen || memcmp(store_rec_value(r), v, vlen)) {
				int found = -1;
				for (uint32_t ver = 1; ver < m->version[t][key] + 50; ver++) {
					uint32_t l2 = tm_value(t, key, ver, v);
					if (l2 == r->value_len && !memcmp(store_rec_value(r), v, l2))
						found = (int)ver;
				}
				fprintf(stderr, "table %u key %llu: version %u expected, store has %d "
					"(loc page %llu)\n", t, (unsigned long long)key,
					m->version[t][key], found, (unsigned long long)(loc >> 24));
			}
			CHECK_EQ(r->value_len, vlen);
			CHECK(memcmp(store_rec_value(r), v, vlen) == 0);
		}
	struct store_stats ss;
	store_stats(m->st, &ss);
	CHECK_EQ(ss.records, expect);
}
#endif
