/*
 * tpcc_check.c - consistency conditions 1-4 of clause 3.3.2, on a quiesced
 * database:
 *   1  W_YTD = sum(D_YTD) over the warehouse's districts
 *   2  D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) in each district
 *      (max(NO_O_ID) only where NEW-ORDER rows are left)
 *   3  max(NO_O_ID) - min(NO_O_ID) + 1 = the NEW-ORDER rows of the district
 *   4  sum(O_OL_CNT) = the ORDER-LINE rows of the district
 * and, per order and customer:
 *   5  O_CARRIER_ID is null iff the order has a NEW-ORDER row
 *   6  O_OL_CNT = the order's ORDER-LINE rows
 *   7  OL_DELIVERY_D is null iff its order's O_CARRIER_ID is null
 *   8  W_YTD = sum(H_AMOUNT) of the warehouse's HISTORY rows (by H_W_ID)
 *   9  D_YTD = sum(H_AMOUNT) of the district's (by H_W_ID, H_D_ID)
 *  10  C_BALANCE = sum(OL_AMOUNT) of its delivered lines - sum(H_AMOUNT) of
 *      its HISTORY rows (by H_C_W_ID, H_C_D_ID, H_C_ID: the key)
 *  12  C_BALANCE + C_YTD_PAYMENT = sum(OL_AMOUNT) of its delivered lines
 * (11, count(ORDER) - count(NEW-ORDER) = 2100, holds only until the first
 * Delivery: not checked.)
 * It reads WAREHOUSE, DISTRICT, NEW-ORDER, ORDER, ORDER-LINE, CUSTOMER and
 * HISTORY whole, one warehouse after another in key order, CHUNK rows per
 * read-only transaction, tallying per district, order and customer.
 * A chunk that meets locks (a run still finishing, or prepared transactions
 * of a restarted server not yet settled) is retried for up to RETRY_S
 * seconds; under NO_WAIT that is what lets --check follow a crash.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

struct ostat {                   /* one order's tallies */
	uint16_t c_id;
	uint8_t have, carrier_null, have_no, ol_cnt, ol_rows;
	uint8_t ol_bad;              /* a line whose delivery date disagrees (7) */
};

struct cstat {                   /* one customer's */
	bool have;
	int64_t balance, ytd_payment, ol_delivered, h_sum;
};

struct dstat {                   /* one district's tallies */
	bool have_dist;
	int64_t d_ytd, h_sum;
	uint32_t next_o_id;
	uint32_t max_o, no_min, no_max;
	uint64_t no_rows, ol_cnt_sum, ol_rows;
	uint32_t norders;            /* os[1..norders - 1]: O_ID < D_NEXT_O_ID */
	struct ostat *os;
	struct cstat cs[TPCC_CUSTOMERS + 1];
	uint32_t bad_o;              /* the first order out of os's range (0: none) */
};

struct tally {
	unsigned warehouses;
	int64_t *w_ytd;              /* [w], -1: no row */
	int64_t *w_hsum;             /* [w]: sum(H_AMOUNT) by H_W_ID */
	bool *have_wh;
	struct dstat *ds;            /* [(w - 1) * 10 + d - 1] */
	int bad;                     /* a row out of range (LOTUS_EPROTO) */
};

/* The order's tallies (NULL if O_ID is not below D_NEXT_O_ID: noted). */
static struct ostat *order_of(struct dstat *ds, uint32_t o)
{
	if (o >= 1 && o < ds->norders)
		return &ds->os[o];
	if (!ds->bad_o)
		ds->bad_o = o;
	return NULL;
}

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
	ds->norders = di.next_o_id;
	free(ds->os);
	ds->os = calloc(MAX(di.next_o_id, 1u), sizeof(*ds->os));
	return ds->os ? 0 : -ENOMEM;
}

static int on_new_order(void *arg, const unsigned char *key, size_t klen, const void *v, size_t vlen)
{
	struct dstat *ds = klen == 7 ? dist_of(arg, key, klen) : NULL;
	(void)v;
	(void)vlen;
	if (!ds)
		return LOTUS_EPROTO;
	uint32_t o = get32(key + 3);
	struct ostat *os = order_of(ds, o);
	if (os)
		os->have_no = 1;
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
	struct ostat *os = order_of(ds, get32(key + 3));
	if (os) {
		os->have = 1;
		os->c_id = od.c_id;
		os->carrier_null = od.carrier_id == 0;
		os->ol_cnt = od.ol_cnt;
	}
	return 0;
}

static int on_ol(void *arg, const unsigned char *key, size_t klen, const void *v, size_t vlen)
{
	struct dstat *ds = klen == 8 ? dist_of(arg, key, klen) : NULL;
	struct ol_row ol;
	if (!ds || vlen != sizeof(ol))
		return LOTUS_EPROTO;
	memcpy(&ol, v, sizeof(ol));
	ds->ol_rows++;
	struct ostat *os = order_of(ds, get32(key + 3));
	if (!os)
		return 0;
	os->ol_rows++;
	if (!os->have || os->carrier_null != (ol.delivery_d == 0))
		os->ol_bad = 1;
	if (ol.delivery_d && os->have && os->c_id >= 1 && os->c_id <= TPCC_CUSTOMERS)
		ds->cs[os->c_id].ol_delivered += ol.amount;
	return 0;
}

static int on_cust(void *arg, const unsigned char *key, size_t klen, const void *v, size_t vlen)
{
	struct dstat *ds = klen == 5 ? dist_of(arg, key, klen) : NULL;
	unsigned c = klen == 5 ? get16(key + 3) : 0;
	struct cust_row cu;
	if (!ds || c < 1 || c > TPCC_CUSTOMERS || vlen != sizeof(cu))
		return LOTUS_EPROTO;
	memcpy(&cu, v, sizeof(cu));
	ds->cs[c].have = true;
	ds->cs[c].balance = cu.balance;
	ds->cs[c].ytd_payment = cu.ytd_payment;
	return 0;
}

/* HISTORY: keyed by the customer (10); H_W_ID, H_D_ID in the row (8, 9) */
static int on_hist(void *arg, const unsigned char *key, size_t klen, const void *v, size_t vlen)
{
	struct tally *ta = arg;
	struct dstat *ds = klen == 15 ? dist_of(ta, key, klen) : NULL;
	unsigned c = klen == 15 ? get16(key + 3) : 0;
	struct hist_row h;
	if (!ds || c < 1 || c > TPCC_CUSTOMERS || vlen != sizeof(h))
		return LOTUS_EPROTO;
	memcpy(&h, v, sizeof(h));
	ds->cs[c].h_sum += h.amount;
	if (h.w < 1 || h.w > ta->warehouses || h.d < 1 || h.d > TPCC_DISTRICTS)
		return LOTUS_EPROTO;
	ta->w_hsum[h.w] += h.amount;
	ta->ds[(h.w - 1) * TPCC_DISTRICTS + h.d - 1].h_sum += h.amount;
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

/* 5, 6, 7 per order; 10, 12 per customer */
static void judge_rows(const struct dstat *ds, unsigned w, unsigned d, struct tpcc_check_result *r)
{
	if (ds->bad_o)
		violate(r, 4, "warehouse %u district %u: order %" PRIu32 " is not below D_NEXT_O_ID",
			w, d, ds->bad_o);
	for (uint32_t o = 1; o < ds->norders; o++) {
		const struct ostat *os = &ds->os[o];
		if (!os->have) {
			if (os->have_no || os->ol_rows)
				violate(r, 4, "warehouse %u district %u order %" PRIu32 ": no ORDER row "
					"for its NEW-ORDER or ORDER-LINE rows", w, d, o);
			continue;
		}
		if (os->carrier_null != os->have_no)
			violate(r, 4, "warehouse %u district %u order %" PRIu32 ": O_CARRIER_ID %s "
				"but %s NEW-ORDER row", w, d, o, os->carrier_null ? "null" : "set",
				os->have_no ? "a" : "no");
		if (os->ol_cnt != os->ol_rows)
			violate(r, 5, "warehouse %u district %u order %" PRIu32 ": O_OL_CNT = %u but "
				"%u ORDER-LINE rows", w, d, o, os->ol_cnt, os->ol_rows);
		if (os->ol_bad)
			violate(r, 6, "warehouse %u district %u order %" PRIu32 ": O_CARRIER_ID %s but "
				"a line's OL_DELIVERY_D %s", w, d, o, os->carrier_null ? "null" : "set",
				os->carrier_null ? "set" : "null");
	}
	for (unsigned c = 1; c <= TPCC_CUSTOMERS; c++) {
		const struct cstat *cs = &ds->cs[c];
		if (!cs->have) {
			violate(r, 9, "warehouse %u district %u: no CUSTOMER row %u", w, d, c);
			violate(r, 11, "warehouse %u district %u: no CUSTOMER row %u", w, d, c);
			continue;
		}
		if (cs->balance != cs->ol_delivered - cs->h_sum)
			violate(r, 9, "warehouse %u district %u customer %u: C_BALANCE = %lld but "
				"delivered sum(OL_AMOUNT) - sum(H_AMOUNT) = %lld", w, d, c,
				(long long)cs->balance, (long long)(cs->ol_delivered - cs->h_sum));
		if (cs->balance + cs->ytd_payment != cs->ol_delivered)
			violate(r, 11, "warehouse %u district %u customer %u: C_BALANCE + C_YTD_PAYMENT "
				"= %lld but delivered sum(OL_AMOUNT) = %lld", w, d, c,
				(long long)(cs->balance + cs->ytd_payment), (long long)cs->ol_delivered);
	}
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
			judge_rows(ds, w, d, r);
			if (ds->d_ytd != ds->h_sum)
				violate(r, 8, "warehouse %u district %u: D_YTD = %lld but sum(H_AMOUNT) "
					"= %lld", w, d, (long long)ds->d_ytd, (long long)ds->h_sum);
		}
		if (ta->have_wh[w] && ta->w_ytd[w] != ta->w_hsum[w])
			violate(r, 7, "warehouse %u: W_YTD = %lld but sum(H_AMOUNT) = %lld", w,
				(long long)ta->w_ytd[w], (long long)ta->w_hsum[w]);
		if (!ta->have_wh[w])
			violate(r, 0, "warehouse %u: no WAREHOUSE row", w);
		else if (ta->w_ytd[w] != sum)
			violate(r, 0, "warehouse %u: W_YTD = %lld but sum(D_YTD) = %lld", w,
				(long long)ta->w_ytd[w], (long long)sum);
	}
}

/* Prepared transactions left on the servers ("prepared" in each one's
 * stats), or -1 if one does not answer. */
static long prepared_left(lotus_session_t *s, unsigned nservers)
{
	long n = 0;
	for (unsigned sv = 0; sv < nservers; sv++) {
		const char *js = lotus_server_stats(s, sv);
		const char *p = js ? strstr(js, "\"prepared\":") : NULL;
		if (!p)
			return -1;
		n += strtol(p + strlen("\"prepared\":"), NULL, 10);
	}
	return n;
}

/* The database is quiesced only once no server holds a prepared
 * transaction: a restarted server settles those of its log with the others
 * first, and until then their INSERTs are not in its index, so a scan would
 * pass them without meeting a lock (docs/tpcc.md, "Phantoms") while the
 * other servers already show the same transactions' other rows.  Waits up to
 * RETRY_S seconds; a server whose stats do not answer is not waited for
 * (its scans fail on their own). */
static void wait_settled(lotus_session_t *s, unsigned nservers)
{
	uint64_t until = clock_now_ns() + RETRY_S * 1000000000ULL;
	int said = 0;
	long n;
	while ((n = prepared_left(s, nservers)) > 0 && clock_now_ns() < until) {
		if (!said++)
			fprintf(stderr, "tpcc: check: waiting for %ld prepared transaction%s to be "
				"settled first\n", n, n == 1 ? "" : "s");
		struct timespec ts = { 0, 100 * 1000000L };
		nanosleep(&ts, NULL);
	}
	if (n > 0)
		fprintf(stderr, "tpcc: check: %ld prepared transaction%s still unsettled after "
			"%d s; checking anyway\n", n, n == 1 ? "" : "s", RETRY_S);
}

int tpcc_check(lotus_session_t *s, unsigned nservers, const struct tpcc_tables *tb,
	       unsigned warehouses, struct tpcc_check_result *r)
{
	static const struct { int tb; row_fn fn; } passes[] = {
		{ TB_WAREHOUSE, on_wh }, { TB_DISTRICT, on_dist }, { TB_NEW_ORDER, on_new_order },
		{ TB_ORDER, on_order }, { TB_ORDER_LINE, on_ol }, { TB_CUSTOMER, on_cust },
		{ TB_HISTORY, on_hist },
	};
	struct tally ta = { .warehouses = warehouses };
	uint64_t t0 = clock_now_ns();
	int rc = 0;
	memset(r, 0, sizeof(*r));
	for (int i = 0; i < TPCC_CHECKS; i++)
		r->ok[i] = true;
	ta.w_ytd = calloc(warehouses + 1, sizeof(*ta.w_ytd));
	ta.w_hsum = calloc(warehouses + 1, sizeof(*ta.w_hsum));
	ta.have_wh = calloc(warehouses + 1, sizeof(*ta.have_wh));
	ta.ds = calloc((size_t)warehouses * TPCC_DISTRICTS, sizeof(*ta.ds));
	if (!ta.w_ytd || !ta.w_hsum || !ta.have_wh || !ta.ds) {
		rc = -ENOMEM;
		goto out;
	}
	wait_settled(s, nservers);
	for (size_t i = 0; i < ARRAY_SIZE(passes) && rc == 0; i++)
		for (unsigned w = 1; w <= warehouses && rc == 0; w++)
			rc = scan_all(s, tb->id[passes[i].tb], w, passes[i].fn, &ta, &r->rows_read);
	if (rc)
		goto out;
	judge(&ta, r);
	r->ran = true;
	r->seconds = (double)(clock_now_ns() - t0) / 1e9;
out:
	for (size_t i = 0; ta.ds && i < (size_t)warehouses * TPCC_DISTRICTS; i++)
		free(ta.ds[i].os);
	free(ta.w_ytd);
	free(ta.w_hsum);
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
