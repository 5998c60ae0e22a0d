/*
 * tpcc_check.c - consistency conditions 1-4 of clause 3.3.2, on a quiesced
 * database:
 *   1  W_YTD = sum(D_YTD) over the warehouse's districts
 *   2  D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) in each district
 *      (max(NO_O_ID) only where NEW-ORDER rows are left)
 *   3  max(NO_O_ID) - min(NO_O_ID) + 1 = the NEW-ORDER rows of the district
 *   4  sum(O_OL_CNT) = the ORDER-LINE rows of the district
 * It reads WAREHOUSE, DISTRICT, NEW-ORDER, ORDER and ORDER-LINE whole, one
 * warehouse after another in key order, CHUNK rows per read-only
 * transaction, tallying per district.
 * A chunk that meets locks (a run still finishing, or prepared transactions
 * of a restarted server not yet settled) is retried for up to RETRY_S
 * seconds; under NO_WAIT that is what lets --check follow a crash.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "bench/bench_scan.h"
#include "bench/tpcc_int.h"
#include "common/clock.h"

#define CHUNK 1000

typedef int (*row_fn)(void *arg, const unsigned char *key, size_t klen, const void *v, size_t vlen);

static bool scan_again(void *r)
{
	return tpcc_retry_again(r);
}

/* Every row of tb of warehouse w (its keys start with W(2)) in key order:
 * a scan from W that stops at the first row of another warehouse, so it
 * reads the same under either placement (a warehouse-placed scan asks
 * only w's server, whose next rows may be of any later warehouse). */
static int scan_all(lotus_session_t *s, lotus_table_t tb, unsigned w, row_fn fn, void *arg,
		    uint64_t *rows)
{
	lotus_txn_t *t;
	unsigned char k[KEY_MAX + 1] = { 0 };
	size_t klen = k_wh(k, w);
	bool past = false;
	struct retry r = { 0 };
	int rc = lotus_txn_begin(s, &t);
	while (rc == 0) {
		int op;
		int n = bench_scan_chunk(t, tb, k, klen, CHUNK, scan_again, &r, &op);
		r = (struct retry){ 0 };
		if (n <= 0) {
			rc = n;
			break;
		}
		for (int i = 0; i < n && rc == 0; i++) {
			const void *key, *v;
			size_t kl, vl;
			rc = lotus_txn_scan_row(t, op, (unsigned)i, &key, &kl, &v, &vl);
			if (rc == 0 && kl > KEY_MAX)
				rc = LOTUS_EPROTO;
			if (rc == 0 && (kl < 2 || get16(key) != w)) {
				past = true;
				break;
			}
			if (rc == 0)
				rc = fn(arg, key, kl, v, vl);
			if (rc == 0 && i == n - 1) {   /* the next chunk starts just after */
				memcpy(k, key, kl);
				k[kl] = 0;
				klen = kl + 1;
			}
		}
		*rows += (uint64_t)n;
		if (n < CHUNK || past)
			break;
	}
	lotus_txn_free(t);
	return rc;
}

struct dstat {                   /* one district's tallies */
	bool have_dist;
	int64_t d_ytd;
	uint32_t next_o_id;
	uint32_t max_o, no_min, no_max;
	uint64_t no_rows, ol_cnt_sum, ol_rows;
};

struct tally {
	unsigned warehouses;
	int64_t *w_ytd;              /* [w], -1: no row */
	bool *have_wh;
	struct dstat *ds;            /* [(w - 1) * 10 + d - 1] */
	int bad;                     /* a row out of range (LOTUS_EPROTO) */
};

static struct dstat *dist_of(struct tally *ta, const unsigned char *key, size_t klen)
{
	if (klen < 3)
		return NULL;
	unsigned w = get16(key), d = key[2];
	if (w < 1 || w > ta->warehouses || d < 1 || d > TPCC_DISTRICTS)
		return NULL;
	return &ta->ds[(w - 1) * TPCC_DISTRICTS + d - 1];
}

static int on_wh(void *arg, const unsigned char *key, size_t klen, const void *v, size_t vlen)
{
	struct tally *ta = arg;
	unsigned w = klen == 2 ? get16(key) : 0;
	struct wh_row wh;
	if (w < 1 || w > ta->warehouses || vlen != sizeof(wh))
		return LOTUS_EPROTO;
	memcpy(&wh, v, sizeof(wh));
	ta->have_wh[w] = true;
	ta->w_ytd[w] = wh.ytd;
	return 0;
}

static int on_dist(void *arg, const unsigned char *key, size_t klen, const void *v, size_t vlen)
{
	struct dstat *ds = klen == 3 ? dist_of(arg, key, klen) : NULL;
	struct dist_row di;
	if (!ds || vlen != sizeof(di))
		return LOTUS_EPROTO;
	memcpy(&di, v, sizeof(di));
	ds->have_dist = true;
	ds->d_ytd = di.ytd;
	ds->next_o_id = di.next_o_id;
	return 0;
}

static int on_new_order(void *arg, const unsigned char *key, size_t klen, const void *v, size_t vlen)
{
	struct dstat *ds = klen == 7 ? dist_of(arg, key, klen) : NULL;
	(void)v;
	(void)vlen;
	if (!ds)
		return LOTUS_EPROTO;
	uint32_t o = get32(key + 3);
	if (!ds->no_rows || o < ds->no_min)
		ds->no_min = o;
	ds->no_max = MAX(ds->no_max, o);
	ds->no_rows++;
	return 0;
}

static int on_order(void *arg, const unsigned char *key, size_t klen, const void *v, size_t vlen)
{
	struct dstat *ds = klen == 7 ? dist_of(arg, key, klen) : NULL;
	struct order_row od;
	if (!ds || vlen != sizeof(od))
		return LOTUS_EPROTO;
	memcpy(&od, v, sizeof(od));
	ds->max_o = MAX(ds->max_o, get32(key + 3));
	ds->ol_cnt_sum += od.ol_cnt;
	return 0;
}

static int on_ol(void *arg, const unsigned char *key, size_t klen, const void *v, size_t vlen)
{
	struct dstat *ds = klen == 8 ? dist_of(arg, key, klen) : NULL;
	(void)v;
	(void)vlen;
	if (!ds)
		return LOTUS_EPROTO;
	ds->ol_rows++;
	return 0;
}

static void violate(struct tpcc_check_result *r, int i, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void violate(struct tpcc_check_result *r, int i, const char *fmt, ...)
{
	if (!r->ok[i])
		return;   /* the first violation is the one reported */
	va_list ap;
	r->ok[i] = false;
	va_start(ap, fmt);
	vsnprintf(r->why[i], sizeof(r->why[i]), fmt, ap);
	va_end(ap);
}

static void judge(struct tally *ta, struct tpcc_check_result *r)
{
	for (unsigned w = 1; w <= ta->warehouses; w++) {
		int64_t sum = 0;
		for (unsigned d = 1; d <= TPCC_DISTRICTS; d++) {
			struct dstat *ds = &ta->ds[(w - 1) * TPCC_DISTRICTS + d - 1];
			if (!ds->have_dist) {
				violate(r, 0, "warehouse %u district %u: no DISTRICT row", w, d);
				violate(r, 1, "warehouse %u district %u: no DISTRICT row", w, d);
				continue;
			}
			sum += ds->d_ytd;
			uint32_t last = ds->next_o_id - 1;
			if (ds->max_o != last)
				violate(r, 1, "warehouse %u district %u: D_NEXT_O_ID - 1 = %" PRIu32
					" but max(O_ID) = %" PRIu32, w, d, last, ds->max_o);
			else if (ds->no_rows && ds->no_max != last)
				violate(r, 1, "warehouse %u district %u: D_NEXT_O_ID - 1 = %" PRIu32
					" but max(NO_O_ID) = %" PRIu32, w, d, last, ds->no_max);
			if (ds->no_rows && ds->no_max - ds->no_min + 1 != ds->no_rows)
				violate(r, 2, "warehouse %u district %u: max(NO_O_ID) - min(NO_O_ID) + 1 "
					"= %" PRIu32 " but %" PRIu64 " NEW-ORDER rows", w, d,
					ds->no_max - ds->no_min + 1, ds->no_rows);
			if (ds->ol_cnt_sum != ds->ol_rows)
				violate(r, 3, "warehouse %u district %u: sum(O_OL_CNT) = %" PRIu64
					" but %" PRIu64 " ORDER-LINE rows", w, d, ds->ol_cnt_sum,
					ds->ol_rows);
		}
		if (!ta->have_wh[w])
			violate(r, 0, "warehouse %u: no WAREHOUSE row", w);
		else if (ta->w_ytd[w] != sum)
			violate(r, 0, "warehouse %u: W_YTD = %lld but sum(D_YTD) = %lld", w,
				(long long)ta->w_ytd[w], (long long)sum);
	}
}

int tpcc_check(lotus_session_t *s, const struct tpcc_tables *tb, unsigned warehouses,
	       struct tpcc_check_result *r)
{
	static const struct { int tb; row_fn fn; } passes[] = {
		{ TB_WAREHOUSE, on_wh }, { TB_DISTRICT, on_dist }, { TB_NEW_ORDER, on_new_order },
		{ TB_ORDER, on_order }, { TB_ORDER_LINE, on_ol },
	};
	struct tally ta = { .warehouses = warehouses };
	uint64_t t0 = clock_now_ns();
	int rc = 0;
	memset(r, 0, sizeof(*r));
	for (int i = 0; i < TPCC_CHECKS; i++)
		r->ok[i] = true;
	ta.w_ytd = calloc(warehouses + 1, sizeof(*ta.w_ytd));
	ta.have_wh = calloc(warehouses + 1, sizeof(*ta.have_wh));
	ta.ds = calloc((size_t)warehouses * TPCC_DISTRICTS, sizeof(*ta.ds));
	if (!ta.w_ytd || !ta.have_wh || !ta.ds) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < ARRAY_SIZE(passes) && rc == 0; i++)
		for (unsigned w = 1; w <= warehouses && rc == 0; w++)
			rc = scan_all(s, tb->id[passes[i].tb], w, passes[i].fn, &ta, &r->rows_read);
	if (rc)
		goto out;
	judge(&ta, r);
	r->ran = true;
	r->seconds = (double)(clock_now_ns() - t0) / 1e9;
out:
	free(ta.w_ytd);
	free(ta.have_wh);
	free(ta.ds);
	return rc;
}

bool tpcc_checks_ok(const struct tpcc_check_result *c)
{
	if (!c->ran)
		return false;
	for (int i = 0; i < TPCC_CHECKS; i++)
		if (!c->ok[i])
			return false;
	return true;
}
