/*
 * tpcc_txn.c - the five TPC-C transactions (clauses 2.4-2.8) on the public
 * API, each as a few steps (lotus_txn_execute) and a commit.  Inputs are
 * drawn once per transaction (clause 2.x.1) and kept over the retries of a
 * conflict (the retry keeps the first attempt's priority).
 *
 *   New-Order     1: W, D (for update), C, the items, their stock (for update)
 *                 2: D_NEXT_O_ID + 1, insert ORDER, NEW-ORDER, the customer-
 *                    order index row, the lines; update the stock; commit.
 *                 1% name an unused item as their last: rolled back after
 *                 step 1 (counted as done, as clause 2.4.2.3 asks).
 *   Payment       1: W, D (for update), C by id, or by last name: a scan of
 *                    the name index, then the ceil(n/2)-th row in C_FIRST
 *                    order (2: C for update); 3: W_YTD, D_YTD, the customer
 *                    (C_DATA for bad credit), insert HISTORY; commit.
 *   Order-Status  1: C (by id or name, as Payment), and the customer-order
 *                    index's first row: max(O_ID), as O_ID is bit-inverted
 *                 2: the ORDER (its O_OL_CNT) and its lines; commit.
 *   Delivery      1: for all ten districts: D (shared) and the first
 *                    NEW-ORDER row, min(NO_O_ID)
 *                 2: delete each, read its ORDER (for update) and its lines
 *                 3: the customers (for update); 4: O_CARRIER_ID,
 *                    OL_DELIVERY_D, C_BALANCE, C_DELIVERY_CNT; commit.
 *   Stock-Level   1: D_NEXT_O_ID; 2: the lines of the last 20 orders;
 *                 3: the stock of their distinct items; commit.
 * A line count that differs from O_OL_CNT (Order-Status, Delivery) is an
 * inconsistency: LOTUS_EPROTO, with the transaction aborted.
 */
#include <errno.h>
#include <stdio.h>
#include "bench/tpcc_int.h"

const char *const tpcc_type_names[TX_TYPES] = {
	"new_order", "payment", "order_status", "delivery", "stock_level",
};

#define NAME_SCAN 32          /* name-index rows per scan step */
#define NAME_MAX_ROWS 512

static unsigned other_warehouse(struct tpcc_term *tm)
{
	unsigned o = (unsigned)urand(&tm->rng, 1, tm->warehouses - 1);
	return o >= tm->w ? o + 1 : o;
}

static bool has_prefix(const void *key, size_t klen, const unsigned char *p, size_t plen)
{
	return klen >= plen && memcmp(key, p, plen) == 0;
}

/* ---- customer selection (Payment, Order-Status) ---- */

struct cust_sel {
	unsigned w, d, c;         /* c: by id, or the one chosen by name */
	bool by_name;
	char last[17];
};

static void cust_draw(struct tpcc_term *tm, struct cust_sel *cs, unsigned w, unsigned d)
{
	cs->w = w;
	cs->d = d;
	cs->by_name = urand(&tm->rng, 1, 100) <= 60;
	if (cs->by_name)
		tpcc_last_name((unsigned)nurand(&tm->rng, 255, 0, 999, C_LAST_RUN), cs->last);
	else
		cs->c = (unsigned)nurand(&tm->rng, 1023, 1, TPCC_CUSTOMERS, C_ID_C);
}

/* By name: scan the index over every row of the last name (in steps of
 * NAME_SCAN), and take the ceil(n/2)-th, in C_FIRST order (clause 2.5.2.2). */
static int cust_by_name(struct tpcc_term *tm, lotus_txn_t *t, struct cust_sel *cs)
{
	unsigned char pre[KEY_MAX], k[KEY_MAX + 1];
	uint16_t ids[NAME_MAX_ROWS];
	unsigned n = 0;
	size_t plen = k_cust_name(pre, cs->w, cs->d, cs->last, NULL, 0), klen = plen;
	memcpy(k, pre, plen);
	for (;;) {
		int op = lotus_txn_scan(t, tm->tb->id[TB_CUST_NAME], k, klen, NAME_SCAN);
		int rc = op < 0 ? op : lotus_txn_execute(t);
		int rows = rc ? rc : lotus_txn_scan_rows(t, op);
		if (rows < 0)
			return rows;
		bool more = rows == NAME_SCAN;
		for (int i = 0; i < rows; i++) {
			const void *key, *v;
			size_t kl, vl;
			rc = lotus_txn_scan_row(t, op, (unsigned)i, &key, &kl, &v, &vl);
			if (rc)
				return rc;
			if (!has_prefix(key, kl, pre, plen) || kl != 37) {
				more = false;
				break;
			}
			if (n == NAME_MAX_ROWS)
				return LOTUS_ETOOBIG;
			ids[n++] = (uint16_t)get16((const unsigned char *)key + 35);
			if (i == rows - 1) {      /* the next scan starts just after it */
				memcpy(k, key, kl);
				k[kl] = 0;
				klen = kl + 1;
			}
		}
		if (!more)
			break;
	}
	if (n == 0)
		return LOTUS_ENOTFOUND;
	cs->c = ids[(n + 1) / 2 - 1];
	return 0;
}

/* ---- New-Order ---- */

struct no_in {
	unsigned d, c, ol_cnt;
	bool rollback;
	uint32_t i_id[15];
	unsigned supply_w[15], qty[15];
};

static void no_draw(struct tpcc_term *tm, struct no_in *in)
{
	in->d = (unsigned)urand(&tm->rng, 1, TPCC_DISTRICTS);
	in->c = (unsigned)nurand(&tm->rng, 1023, 1, TPCC_CUSTOMERS, C_ID_C);
	in->ol_cnt = (unsigned)urand(&tm->rng, 5, 15);
	in->rollback = urand(&tm->rng, 1, 100) == 1;
	for (unsigned n = 0; n < in->ol_cnt; n++) {
		bool dup;
		do {   /* distinct items: one stock row is updated once */
			in->i_id[n] = (uint32_t)nurand(&tm->rng, 8191, 1, TPCC_ITEMS, OL_I_ID_C);
			dup = false;
			for (unsigned j = 0; j < n; j++)
				dup |= in->i_id[j] == in->i_id[n];
		} while (dup);
		bool remote = tm->warehouses > 1 && urand(&tm->rng, 1, 100) == 1;
		in->supply_w[n] = remote ? other_warehouse(tm) : tm->w;
		in->qty[n] = (unsigned)urand(&tm->rng, 1, 10);
	}
	if (in->rollback)
		in->i_id[in->ol_cnt - 1] = TPCC_ITEMS + 1;
}

static int new_order(struct tpcc_term *tm, lotus_txn_t *t, const struct no_in *in)
{
	const struct tpcc_tables *tb = tm->tb;
	unsigned char k[KEY_MAX];
	int op_i[15], op_s[15];
	unsigned w = tm->w, d = in->d;
	int op_w = lotus_txn_read(t, tb->id[TB_WAREHOUSE], k, k_wh(k, w));
	int op_d = lotus_txn_read_for_update(t, tb->id[TB_DISTRICT], k, k_dist(k, w, d));
	int op_c = lotus_txn_read(t, tb->id[TB_CUSTOMER], k, k_cust(k, w, d, in->c));
	for (unsigned n = 0; n < in->ol_cnt; n++) {
		op_i[n] = lotus_txn_read(t, tb->id[TB_ITEM], k, k_item(k, tb, w, in->i_id[n]));
		op_s[n] = lotus_txn_read_for_update(t, tb->id[TB_STOCK], k,
						    k_stock(k, in->supply_w[n], in->i_id[n]));
	}
	int rc = lotus_txn_execute(t);
	if (rc)
		return rc;
	struct wh_row wh;
	struct dist_row di;
	struct cust_row cu;
	struct item_row it[15];
	struct stock_row st[15];
	if ((rc = tpcc_get(t, op_w, &wh, sizeof(wh))) || (rc = tpcc_get(t, op_d, &di, sizeof(di))) ||
	    (rc = tpcc_get(t, op_c, &cu, sizeof(cu))))
		return rc;
	for (unsigned n = 0; n < in->ol_cnt; n++) {
		rc = tpcc_get(t, op_i[n], &it[n], sizeof(it[n]));
		if (rc == LOTUS_ENOTFOUND && in->rollback && n == in->ol_cnt - 1)
			return 1;   /* "Item number is not valid": roll back */
		if (rc || (rc = tpcc_get(t, op_s[n], &st[n], sizeof(st[n]))))
			return rc;
	}
	uint32_t o = di.next_o_id++;
	bool all_local = true;
	for (unsigned n = 0; n < in->ol_cnt; n++)
		all_local &= in->supply_w[n] == w;
	int64_t now = tpcc_now(), total = 0;
	struct order_row od = { .entry_d = now, .c_id = (uint16_t)in->c, .ol_cnt = (uint8_t)in->ol_cnt,
				.all_local = all_local };
	lotus_txn_write(t, tb->id[TB_DISTRICT], k, k_dist(k, w, d), &di, sizeof(di));
	lotus_txn_insert(t, tb->id[TB_ORDER], k, k_order(k, w, d, o), &od, sizeof(od));
	lotus_txn_insert(t, tb->id[TB_NEW_ORDER], k, k_order(k, w, d, o), "", 1);
	lotus_txn_insert(t, tb->id[TB_ORDER_CUST], k, k_order_cust(k, w, d, in->c, o), "", 1);
	for (unsigned n = 0; n < in->ol_cnt; n++) {
		struct stock_row *s = &st[n];
		unsigned q = in->qty[n];
		s->quantity = s->quantity >= (int32_t)q + 10 ? s->quantity - (int32_t)q
							     : s->quantity - (int32_t)q + 91;
		s->ytd += q;
		s->order_cnt++;
		s->remote_cnt += in->supply_w[n] != w;
		lotus_txn_write(t, tb->id[TB_STOCK], k, k_stock(k, in->supply_w[n], in->i_id[n]),
				s, sizeof(*s));
		struct ol_row ol = { .amount = (int64_t)q * it[n].price, .i_id = in->i_id[n],
				     .supply_w = (uint16_t)in->supply_w[n], .quantity = (uint8_t)q };
		memcpy(ol.dist_info, s->dist[d - 1], 24);
		total += ol.amount;
		lotus_txn_insert(t, tb->id[TB_ORDER_LINE], k, k_ol(k, w, d, o, n + 1), &ol, sizeof(ol));
	}
	/* the total the terminal would show (clause 2.4.2.2), not stored */
	total = total * (10000 - cu.discount) / 10000 * (10000 + wh.tax + di.tax) / 10000;
	(void)total;
	return lotus_txn_commit(t);
}

/* ---- Payment ---- */

struct pay_in {
	unsigned d;
	struct cust_sel cs;
	int64_t amount;
};

static void pay_draw(struct tpcc_term *tm, struct pay_in *in)
{
	in->d = (unsigned)urand(&tm->rng, 1, TPCC_DISTRICTS);
	bool remote = tm->warehouses > 1 && urand(&tm->rng, 1, 100) > 85;
	cust_draw(tm, &in->cs, remote ? other_warehouse(tm) : tm->w,
		  remote ? (unsigned)urand(&tm->rng, 1, TPCC_DISTRICTS) : in->d);
	in->amount = (int64_t)urand(&tm->rng, 100, 500000);
}

static int payment(struct tpcc_term *tm, lotus_txn_t *t, struct pay_in *in)
{
	const struct tpcc_tables *tb = tm->tb;
	unsigned char k[KEY_MAX];
	unsigned w = tm->w, d = in->d;
	struct cust_sel *cs = &in->cs;
	int op_w = lotus_txn_read_for_update(t, tb->id[TB_WAREHOUSE], k, k_wh(k, w));
	int op_d = lotus_txn_read_for_update(t, tb->id[TB_DISTRICT], k, k_dist(k, w, d));
	int rc = cs->by_name ? cust_by_name(tm, t, cs) : 0;
	if (rc)
		return rc;
	int op_c = lotus_txn_read_for_update(t, tb->id[TB_CUSTOMER], k, k_cust(k, cs->w, cs->d, cs->c));
	if ((rc = lotus_txn_execute(t)))
		return rc;
	struct wh_row wh;
	struct dist_row di;
	struct cust_row cu;
	if ((rc = tpcc_get(t, op_w, &wh, sizeof(wh))) || (rc = tpcc_get(t, op_d, &di, sizeof(di))) ||
	    (rc = tpcc_get(t, op_c, &cu, sizeof(cu))))
		return rc;
	wh.ytd += in->amount;
	di.ytd += in->amount;
	cu.balance -= in->amount;
	cu.ytd_payment += in->amount;
	cu.payment_cnt++;
	if (!memcmp(cu.credit, "BC", 2)) {
		char buf[sizeof(cu.data) + 64];
		int n = snprintf(buf, sizeof(buf), "%u %u %u %u %u %lld|", cs->c, cs->d, cs->w, d, w,
				 (long long)in->amount);
		memcpy(buf + n, cu.data, sizeof(cu.data));
		memcpy(cu.data, buf, sizeof(cu.data));
	}
	struct hist_row h = { .c_id = (uint16_t)cs->c, .c_w = (uint16_t)cs->w, .w = (uint16_t)w,
			      .c_d = (uint8_t)cs->d, .d = (uint8_t)d, .date = tpcc_now(),
			      .amount = in->amount };
	memcpy(h.data, wh.name, 10);
	memcpy(h.data + 10, "    ", 4);
	memcpy(h.data + 14, di.name, 10);
	lotus_txn_write(t, tb->id[TB_WAREHOUSE], k, k_wh(k, w), &wh, sizeof(wh));
	lotus_txn_write(t, tb->id[TB_DISTRICT], k, k_dist(k, w, d), &di, sizeof(di));
	lotus_txn_write(t, tb->id[TB_CUSTOMER], k, k_cust(k, cs->w, cs->d, cs->c), &cu, sizeof(cu));
	lotus_txn_insert(t, tb->id[TB_HISTORY], k, k_hist(k, cs->w, cs->d, cs->c, tm->run_id, tm->idx,
							  ++tm->hist_seq), &h, sizeof(h));
	return lotus_txn_commit(t);
}

/* ---- Order-Status ---- */

/* Scan the lines of order o (at most 15) and check there are ol_cnt. */
static int lines_check(lotus_txn_t *t, int op, const unsigned char *pre, unsigned ol_cnt,
		       unsigned *found)
{
	int rows = lotus_txn_scan_rows(t, op);
	if (rows < 0)
		return rows;
	unsigned n = 0;
	for (int i = 0; i < rows; i++) {
		const void *key, *v;
		size_t kl, vl;
		int rc = lotus_txn_scan_row(t, op, (unsigned)i, &key, &kl, &v, &vl);
		if (rc)
			return rc;
		if (!has_prefix(key, kl, pre, 7))
			break;
		n++;
	}
	*found = n;
	return n == ol_cnt ? 0 : LOTUS_EPROTO;
}

static int order_status(struct tpcc_term *tm, lotus_txn_t *t, struct cust_sel *cs)
{
	const struct tpcc_tables *tb = tm->tb;
	unsigned char k[KEY_MAX], pre[KEY_MAX];
	int rc = cs->by_name ? cust_by_name(tm, t, cs) : 0;
	if (rc)
		return rc;
	int op_c = lotus_txn_read(t, tb->id[TB_CUSTOMER], k, k_cust(k, cs->w, cs->d, cs->c));
	int op_x = lotus_txn_scan(t, tb->id[TB_ORDER_CUST], k,
				  k_order_cust(k, cs->w, cs->d, cs->c, UINT32_MAX), 1);
	if ((rc = lotus_txn_execute(t)))
		return rc;
	struct cust_row cu;
	if ((rc = tpcc_get(t, op_c, &cu, sizeof(cu))))
		return rc;
	const void *key, *v;
	size_t kl, vl;
	size_t plen = k_cust(pre, cs->w, cs->d, cs->c);
	if (lotus_txn_scan_rows(t, op_x) != 1 ||
	    (rc = lotus_txn_scan_row(t, op_x, 0, &key, &kl, &v, &vl)) ||
	    !has_prefix(key, kl, pre, plen) || kl != 9)
		return rc ? rc : lotus_txn_commit(t);   /* no order yet: nothing more to show */
	uint32_t o = ~get32((const unsigned char *)key + 5);
	int op_o = lotus_txn_read(t, tb->id[TB_ORDER], k, k_order(k, cs->w, cs->d, o));
	int op_l = lotus_txn_scan(t, tb->id[TB_ORDER_LINE], k, k_ol(k, cs->w, cs->d, o, 0), 15);
	if ((rc = lotus_txn_execute(t)))
		return rc;
	struct order_row od;
	unsigned found;
	if ((rc = tpcc_get(t, op_o, &od, sizeof(od))))
		return rc;
	k_order(pre, cs->w, cs->d, o);
	if ((rc = lines_check(t, op_l, pre, od.ol_cnt, &found)))
		return rc;
	return lotus_txn_commit(t);
}

/* ---- Delivery ---- */

static int delivery(struct tpcc_term *tm, lotus_txn_t *t, unsigned carrier)
{
	const struct tpcc_tables *tb = tm->tb;
	unsigned char k[KEY_MAX], pre[KEY_MAX];
	unsigned w = tm->w;
	int op_n[TPCC_DISTRICTS], op_o[TPCC_DISTRICTS], op_l[TPCC_DISTRICTS], op_c[TPCC_DISTRICTS];
	uint32_t o[TPCC_DISTRICTS] = { 0 };
	struct order_row od[TPCC_DISTRICTS];
	int rc;
	for (unsigned d = 1; d <= TPCC_DISTRICTS; d++) {
		/* D shared: it orders this Delivery with the district's New-Orders
		 * (docs/tpcc.md, "Phantoms") */
		lotus_txn_read(t, tb->id[TB_DISTRICT], k, k_dist(k, w, d));
		op_n[d - 1] = lotus_txn_scan(t, tb->id[TB_NEW_ORDER], k, k_order(k, w, d, 0), 1);
	}
	if ((rc = lotus_txn_execute(t)))
		return rc;
	unsigned found = 0;
	for (unsigned d = 1; d <= TPCC_DISTRICTS; d++) {
		const void *key, *v;
		size_t kl, vl;
		size_t plen = k_dist(pre, w, d);
		if (lotus_txn_scan_rows(t, op_n[d - 1]) != 1)
			continue;
		if ((rc = lotus_txn_scan_row(t, op_n[d - 1], 0, &key, &kl, &v, &vl)))
			return rc;
		if (!has_prefix(key, kl, pre, plen) || kl != 7)
			continue;   /* no undelivered order in the district: skipped */
		o[d - 1] = get32((const unsigned char *)key + 3);
		found++;
		lotus_txn_delete(t, tb->id[TB_NEW_ORDER], k, k_order(k, w, d, o[d - 1]));
		op_o[d - 1] = lotus_txn_read_for_update(t, tb->id[TB_ORDER], k, k_order(k, w, d, o[d - 1]));
		op_l[d - 1] = lotus_txn_scan(t, tb->id[TB_ORDER_LINE], k, k_ol(k, w, d, o[d - 1], 0), 15);
	}
	if (!found)
		return lotus_txn_commit(t);
	if ((rc = lotus_txn_execute(t)))
		return rc;
	for (unsigned d = 1; d <= TPCC_DISTRICTS; d++) {
		if (!o[d - 1])
			continue;
		if ((rc = tpcc_get(t, op_o[d - 1], &od[d - 1], sizeof(od[0]))))
			return rc;
		op_c[d - 1] = lotus_txn_read_for_update(t, tb->id[TB_CUSTOMER], k,
							k_cust(k, w, d, od[d - 1].c_id));
	}
	if ((rc = lotus_txn_execute(t)))
		return rc;
	int64_t now = tpcc_now();
	for (unsigned d = 1; d <= TPCC_DISTRICTS; d++) {
		if (!o[d - 1])
			continue;
		struct order_row *r = &od[d - 1];
		unsigned lines;
		k_order(pre, w, d, o[d - 1]);
		if ((rc = lines_check(t, op_l[d - 1], pre, r->ol_cnt, &lines)))
			return rc;
		int64_t sum = 0;
		for (unsigned i = 0; i < lines; i++) {
			const void *key, *v;
			size_t kl, vl;
			struct ol_row ol;
			if ((rc = lotus_txn_scan_row(t, op_l[d - 1], i, &key, &kl, &v, &vl)))
				return rc;
			if (vl != sizeof(ol))
				return LOTUS_EPROTO;
			memcpy(&ol, v, sizeof(ol));
			ol.delivery_d = now;
			sum += ol.amount;
			lotus_txn_write(t, tb->id[TB_ORDER_LINE], key, kl, &ol, sizeof(ol));
		}
		r->carrier_id = (uint8_t)carrier;
		lotus_txn_write(t, tb->id[TB_ORDER], k, k_order(k, w, d, o[d - 1]), r, sizeof(*r));
		struct cust_row cu;
		if ((rc = tpcc_get(t, op_c[d - 1], &cu, sizeof(cu))))
			return rc;
		cu.balance += sum;
		cu.delivery_cnt++;
		lotus_txn_write(t, tb->id[TB_CUSTOMER], k, k_cust(k, w, d, r->c_id), &cu, sizeof(cu));
	}
	return lotus_txn_commit(t);
}

/* ---- Stock-Level ---- */

static int stock_level(struct tpcc_term *tm, lotus_txn_t *t, unsigned d, int32_t threshold)
{
	const struct tpcc_tables *tb = tm->tb;
	unsigned char k[KEY_MAX], pre[KEY_MAX];
	unsigned w = tm->w;
	int op_d = lotus_txn_read(t, tb->id[TB_DISTRICT], k, k_dist(k, w, d));
	int rc = lotus_txn_execute(t);
	struct dist_row di;
	if (rc || (rc = tpcc_get(t, op_d, &di, sizeof(di))))
		return rc;
	uint32_t lo = di.next_o_id > 20 ? di.next_o_id - 20 : 1;
	int op_l = lotus_txn_scan(t, tb->id[TB_ORDER_LINE], k, k_ol(k, w, d, lo, 0), 20 * 15);
	if ((rc = lotus_txn_execute(t)))
		return rc;
	int rows = lotus_txn_scan_rows(t, op_l);
	if (rows < 0)
		return rows;
	uint32_t items[20 * 15];
	int ops[20 * 15];
	unsigned n = 0;
	size_t plen = k_dist(pre, w, d);
	for (int i = 0; i < rows; i++) {
		const void *key, *v;
		size_t kl, vl;
		struct ol_row ol;
		if ((rc = lotus_txn_scan_row(t, op_l, (unsigned)i, &key, &kl, &v, &vl)))
			return rc;
		if (!has_prefix(key, kl, pre, plen) || kl != 8 ||
		    get32((const unsigned char *)key + 3) >= di.next_o_id)
			break;
		if (vl != sizeof(ol))
			return LOTUS_EPROTO;
		memcpy(&ol, v, sizeof(ol));
		bool seen = false;
		for (unsigned j = 0; j < n && !seen; j++)
			seen = items[j] == ol.i_id;
		if (!seen)
			items[n++] = ol.i_id;
	}
	for (unsigned j = 0; j < n; j++)
		ops[j] = lotus_txn_read(t, tb->id[TB_STOCK], k, k_stock(k, w, items[j]));
	if (n && (rc = lotus_txn_execute(t)))
		return rc;
	unsigned low = 0;
	for (unsigned j = 0; j < n; j++) {
		struct stock_row st;
		if ((rc = tpcc_get(t, ops[j], &st, sizeof(st))))
			return rc;
		low += st.quantity < threshold;
	}
	(void)low;   /* what the terminal would show */
	return lotus_txn_commit(t);
}

/* ---- one transaction, with its retries ---- */

int tpcc_txn_run(struct tpcc_term *tm, lotus_txn_t *t, enum tpcc_type type, uint64_t *aborts)
{
	struct no_in no;
	struct pay_in pay;
	struct cust_sel os;
	unsigned carrier = 0, sl_d = 0;
	int32_t threshold = 0;
	switch (type) {
	case TX_NEW_ORDER: no_draw(tm, &no); break;
	case TX_PAYMENT: pay_draw(tm, &pay); break;
	case TX_ORDER_STATUS:
		cust_draw(tm, &os, tm->w, (unsigned)urand(&tm->rng, 1, TPCC_DISTRICTS));
		break;
	case TX_DELIVERY: carrier = (unsigned)urand(&tm->rng, 1, 10); break;
	default:
		sl_d = (unsigned)urand(&tm->rng, 1, TPCC_DISTRICTS);
		threshold = (int32_t)urand(&tm->rng, 10, 20);
		break;
	}
	int rc = lotus_txn_recycle(t);
	for (; rc == 0;) {
		switch (type) {
		case TX_NEW_ORDER: rc = new_order(tm, t, &no); break;
		case TX_PAYMENT: rc = payment(tm, t, &pay); break;
		case TX_ORDER_STATUS: rc = order_status(tm, t, &os); break;
		case TX_DELIVERY: rc = delivery(tm, t, carrier); break;
		default: rc = stock_level(tm, t, sl_d, threshold); break;
		}
		if (rc == 0)
			return 0;
		lotus_txn_abort(t);
		if (!lotus_err_retryable(rc) || atomic_load(&tpcc_stopping))
			return rc;
		(*aborts)++;
		rc = lotus_txn_restart(t);
	}
	return rc;
}
