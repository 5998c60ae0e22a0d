/*
 * tpcc_load.c - the TPC-C schema and its initial population (clause 4.3.3):
 * the tables, the spec's random strings and names, and the loader.
 *
 * The load is cut into units that loader threads (one session each) take
 * from a shared counter: ten chunks of ITEM, and per warehouse its row and
 * its districts, ten chunks of STOCK, and per district its customers (with
 * their name-index rows and one HISTORY row each) and its orders (with their
 * ORDER-LINE rows, the customer-order index rows and the NEW-ORDER rows of
 * the last 900).  A unit inserts its rows in transactions of at most
 * LOAD_ROWS rows or LOAD_BYTES bytes; any failure (a conflict is not
 * expected: units are disjoint) ends the load.  The meta row is written last,
 * with loaded = 1, so a load killed midway is recognised and refused.
 */
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "bench/tpcc_int.h"
#include "common/clock.h"

#define LOAD_ROWS  200
#define LOAD_BYTES (48 << 10)
#define ITEM_CHUNKS  10
#define STOCK_CHUNKS 10

static const char *const table_names[TB_COUNT] = {
	"tpcc_warehouse", "tpcc_district", "tpcc_customer", "tpcc_cust_name", "tpcc_history",
	"tpcc_new_order", "tpcc_order", "tpcc_order_cust", "tpcc_order_line", "tpcc_item",
	"tpcc_stock", "tpcc_meta",
};
static const uint32_t table_max[TB_COUNT] = {
	sizeof(struct wh_row), sizeof(struct dist_row), sizeof(struct cust_row), 1,
	sizeof(struct hist_row), 1, sizeof(struct order_row), 1, sizeof(struct ol_row),
	sizeof(struct item_row), sizeof(struct stock_row), sizeof(struct meta_row),
};

_Atomic int tpcc_stopping;

int tpcc_open_tables(lotus_session_t *s, struct tpcc_tables *tb, bool create)
{
	for (int i = 0; i < TB_COUNT; i++) {
		int rc = create ? lotus_table_create(s, table_names[i], table_max[i], &tb->id[i])
				: lotus_table_open(s, table_names[i], &tb->id[i]);
		if (rc)
			return rc;
	}
	return 0;
}

int tpcc_get(lotus_txn_t *t, int op, void *row, size_t len)
{
	const void *v;
	size_t vlen;
	int rc = lotus_txn_result(t, op, &v, &vlen);
	if (rc)
		return rc;
	if (vlen != len)
		return LOTUS_EPROTO;
	memcpy(row, v, len);
	return 0;
}

bool tpcc_retry_again(struct retry *r)
{
	uint64_t now = clock_now_ns();
	if (!r->deadline_ns)
		r->deadline_ns = now + RETRY_S * 1000000000ULL;
	if (now > r->deadline_ns || atomic_load(&tpcc_stopping))
		return false;
	if (++r->tries > 16) {
		unsigned shift = MIN(r->tries - 16, 20u);
		struct timespec ts = { 0, (long)MIN(50000ULL << shift, 20000000ULL) };
		nanosleep(&ts, NULL);
	}
	return true;
}

int tpcc_read_meta(lotus_session_t *s, const struct tpcc_tables *tb, struct meta_row *m)
{
	lotus_txn_t *t;
	struct retry r = { 0 };
	int rc = lotus_txn_begin(s, &t);
	while (rc == 0) {
		int op = lotus_txn_read(t, tb->id[TB_META], "tpcc", 4);
		const void *v;
		size_t vlen;
		rc = op < 0 ? op : lotus_txn_execute(t);
		if (rc == 0)
			rc = lotus_txn_result(t, op, &v, &vlen);
		/* a row of an older load has no placement: it was hashed */
		if (rc == 0 && vlen != sizeof(*m) && vlen != offsetof(struct meta_row, placement))
			rc = LOTUS_EPROTO;
		if (rc == 0) {
			memset(m, 0, sizeof(*m));
			memcpy(m, v, vlen);
		}
		int end = rc == 0 ? lotus_txn_commit(t) : lotus_txn_abort(t);
		rc = rc ? rc : end;
		if (!lotus_err_retryable(rc) || !tpcc_retry_again(&r))
			break;
		rc = lotus_txn_restart(t);
	}
	lotus_txn_free(t);
	return rc;
}

/* ---- the spec's random values ---- */

void tpcc_last_name(unsigned n, char out[17])
{
	static const char *const syl[10] = { "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE",
					     "ANTI", "CALLY", "ATION", "EING" };
	snprintf(out, 17, "%s%s%s", syl[n / 100 % 10], syl[n / 10 % 10], syl[n % 10]);
}

void tpcc_astring(struct rng *r, char *out, size_t len, unsigned lo, unsigned hi)
{
	unsigned n = (unsigned)urand(r, lo, MIN(hi, len));
	memset(out, 0, len);
	for (unsigned i = 0; i < n; i++)
		out[i] = (char)('a' + rng_below(r, 26));
}

static void nstring(struct rng *r, char *out, size_t len)
{
	for (size_t i = 0; i < len; i++)
		out[i] = (char)('0' + rng_below(r, 10));
}

/* 10% of ITEM and STOCK data hold "ORIGINAL" somewhere */
static void data_string(struct rng *r, char *out, size_t len)
{
	tpcc_astring(r, out, len, 26, 50);
	if (rng_below(r, 10) == 0) {
		size_t n = strnlen(out, len);
		memcpy(out + rng_below(r, n - 8 + 1), "ORIGINAL", 8);
	}
}

int64_t tpcc_now(void)
{
	return (int64_t)clock_wall_ns();
}

static void address(struct rng *r, char *s1, char *s2, char *city, char *state, char *zip)
{
	tpcc_astring(r, s1, 20, 10, 20);
	tpcc_astring(r, s2, 20, 10, 20);
	tpcc_astring(r, city, 20, 10, 20);
	tpcc_astring(r, state, 2, 2, 2);
	nstring(r, zip, 4);
	memcpy(zip + 4, "11111", 5);
}

/* ---- batched inserts ---- */

struct batch {
	lotus_txn_t *t;
	unsigned rows;
	size_t bytes;
	uint64_t *counter;        /* rows committed, for the progress line */
	int rc;                   /* sticky */
};

static int batch_flush(struct batch *b)
{
	if (b->rc || !b->rows)
		return b->rc;
	/* units are disjoint, so a conflict is not expected; the staged rows
	 * would be gone with the abort, so any failure ends the load */
	b->rc = lotus_txn_commit(b->t);
	if (b->rc)
		return b->rc;
	atomic_fetch_add_explicit((_Atomic uint64_t *)b->counter, b->rows, memory_order_relaxed);
	b->rows = 0;
	b->bytes = 0;
	b->rc = lotus_txn_recycle(b->t);
	return b->rc;
}

static int batch_put(struct batch *b, lotus_table_t tb, const void *k, size_t klen,
		     const void *v, size_t vlen)
{
	if (b->rc)
		return b->rc;
	int op = lotus_txn_insert(b->t, tb, k, klen, v, vlen);
	if (op < 0)
		return b->rc = op;
	b->rows++;
	b->bytes += klen + vlen;
	if (b->rows >= LOAD_ROWS || b->bytes >= LOAD_BYTES)
		return batch_flush(b);
	return 0;
}

/* ---- the units ---- */

struct loader {
	lotus_cluster_t *c;
	const struct tpcc_tables *tb;
	unsigned warehouses, units;
	_Atomic unsigned next;
	_Atomic uint64_t rows;
	_Atomic int error;
	pthread_mutex_t mu;
	char *msg;
	size_t msglen;
};

static void load_items(struct batch *b, const struct tpcc_tables *tb, struct rng *r, unsigned chunk)
{
	unsigned char k[KEY_MAX];
	uint32_t per = TPCC_ITEMS / ITEM_CHUNKS;
	for (uint32_t i = chunk * per + 1; i <= (chunk + 1) * per && !b->rc; i++) {
		struct item_row it = { .price = (int64_t)urand(r, 100, 10000),
				       .im_id = (uint32_t)urand(r, 1, 10000) };
		tpcc_astring(r, it.name, 24, 14, 24);
		data_string(r, it.data, 50);
		for (unsigned c = 0; c < MAX(tb->item_copies, 1u) && !b->rc; c++)
			batch_put(b, tb->id[TB_ITEM], k, k_item(k, tb, c, i), &it, sizeof(it));
	}
}

static void load_stock(struct batch *b, const struct tpcc_tables *tb, struct rng *r, unsigned w,
		       unsigned chunk)
{
	unsigned char k[KEY_MAX];
	uint32_t per = TPCC_STOCK / STOCK_CHUNKS;
	for (uint32_t i = chunk * per + 1; i <= (chunk + 1) * per && !b->rc; i++) {
		struct stock_row st = { .quantity = (int32_t)urand(r, 10, 100) };
		for (int d = 0; d < TPCC_DISTRICTS; d++)
			tpcc_astring(r, st.dist[d], 24, 24, 24);
		data_string(r, st.data, 50);
		batch_put(b, tb->id[TB_STOCK], k, k_stock(k, w, i), &st, sizeof(st));
	}
}

static void load_warehouse(struct batch *b, const struct tpcc_tables *tb, struct rng *r, unsigned w)
{
	unsigned char k[KEY_MAX];
	struct wh_row wh = { .ytd = 30000000, .tax = (int32_t)urand(r, 0, 2000) };
	tpcc_astring(r, wh.name, 10, 6, 10);
	address(r, wh.street1, wh.street2, wh.city, wh.state, wh.zip);
	batch_put(b, tb->id[TB_WAREHOUSE], k, k_wh(k, w), &wh, sizeof(wh));
	for (unsigned d = 1; d <= TPCC_DISTRICTS; d++) {
		struct dist_row di = { .ytd = 3000000, .tax = (int32_t)urand(r, 0, 2000),
				       .next_o_id = TPCC_ORDERS + 1 };
		tpcc_astring(r, di.name, 10, 6, 10);
		address(r, di.street1, di.street2, di.city, di.state, di.zip);
		batch_put(b, tb->id[TB_DISTRICT], k, k_dist(k, w, d), &di, sizeof(di));
	}
}

static void load_customers(struct batch *b, const struct tpcc_tables *tb, struct rng *r,
			   unsigned w, unsigned d)
{
	unsigned char k[KEY_MAX];
	int64_t now = tpcc_now();
	for (unsigned c = 1; c <= TPCC_CUSTOMERS && !b->rc; c++) {
		struct cust_row cu = { .credit_lim = 5000000, .balance = -1000, .ytd_payment = 1000,
				       .since = now, .discount = (int32_t)urand(r, 0, 5000),
				       .payment_cnt = 1 };
		char last[17];
		tpcc_last_name(c <= 1000 ? c - 1 : (unsigned)nurand(r, 255, 0, 999, C_LAST_LOAD), last);
		memcpy(cu.last, last, strlen(last));
		tpcc_astring(r, cu.first, 16, 8, 16);
		memcpy(cu.middle, "OE", 2);
		address(r, cu.street1, cu.street2, cu.city, cu.state, cu.zip);
		nstring(r, cu.phone, 16);
		memcpy(cu.credit, rng_below(r, 10) ? "GC" : "BC", 2);
		tpcc_astring(r, cu.data, 500, 300, 500);
		batch_put(b, tb->id[TB_CUSTOMER], k, k_cust(k, w, d, c), &cu, sizeof(cu));
		char first[17] = { 0 };
		memcpy(first, cu.first, 16);
		batch_put(b, tb->id[TB_CUST_NAME], k, k_cust_name(k, w, d, last, first, c), "", 1);
		struct hist_row h = { .c_id = (uint16_t)c, .c_w = (uint16_t)w, .w = (uint16_t)w,
				      .c_d = (uint8_t)d, .d = (uint8_t)d, .date = now, .amount = 1000 };
		tpcc_astring(r, h.data, 24, 12, 24);
		batch_put(b, tb->id[TB_HISTORY], k, k_hist(k, w, d, c, 0, 0, 0), &h, sizeof(h));
	}
}

static void load_orders(struct batch *b, const struct tpcc_tables *tb, struct rng *r, unsigned w,
			unsigned d)
{
	unsigned char k[KEY_MAX];
	uint16_t perm[TPCC_CUSTOMERS];
	int64_t now = tpcc_now();
	for (unsigned i = 0; i < TPCC_CUSTOMERS; i++)
		perm[i] = (uint16_t)(i + 1);
	for (unsigned i = TPCC_CUSTOMERS - 1; i > 0; i--) {
		unsigned j = (unsigned)rng_below(r, i + 1);
		uint16_t x = perm[i];
		perm[i] = perm[j];
		perm[j] = x;
	}
	for (uint32_t o = 1; o <= TPCC_ORDERS && !b->rc; o++) {
		bool delivered = o <= TPCC_ORDERS - TPCC_NEW_ORDERS;
		struct order_row od = { .entry_d = now, .c_id = perm[o - 1],
					.carrier_id = delivered ? (uint8_t)urand(r, 1, 10) : 0,
					.ol_cnt = (uint8_t)urand(r, 5, 15), .all_local = 1 };
		batch_put(b, tb->id[TB_ORDER], k, k_order(k, w, d, o), &od, sizeof(od));
		batch_put(b, tb->id[TB_ORDER_CUST], k, k_order_cust(k, w, d, od.c_id, o), "", 1);
		for (unsigned n = 1; n <= od.ol_cnt; n++) {
			struct ol_row ol = { .delivery_d = delivered ? now : 0,
					     .amount = delivered ? 0 : (int64_t)urand(r, 1, 999999),
					     .i_id = (uint32_t)urand(r, 1, TPCC_ITEMS),
					     .supply_w = (uint16_t)w, .quantity = 5 };
			tpcc_astring(r, ol.dist_info, 24, 24, 24);
			batch_put(b, tb->id[TB_ORDER_LINE], k, k_ol(k, w, d, o, n), &ol, sizeof(ol));
		}
		if (!delivered)
			batch_put(b, tb->id[TB_NEW_ORDER], k, k_order(k, w, d, o), "", 1);
	}
}

/* Unit u: 0..ITEM_CHUNKS-1 items, then per warehouse 1 + STOCK_CHUNKS + 2 x 10. */
#define UNITS_PER_W (1 + STOCK_CHUNKS + 2 * TPCC_DISTRICTS)

static void load_unit(struct batch *b, struct loader *l, struct rng *r, unsigned u)
{
	if (u < ITEM_CHUNKS) {
		load_items(b, l->tb, r, u);
		return;
	}
	u -= ITEM_CHUNKS;
	unsigned w = u / UNITS_PER_W + 1, k = u % UNITS_PER_W;
	if (k == 0)
		load_warehouse(b, l->tb, r, w);
	else if (k <= STOCK_CHUNKS)
		load_stock(b, l->tb, r, w, k - 1);
	else if (k <= STOCK_CHUNKS + TPCC_DISTRICTS)
		load_customers(b, l->tb, r, w, k - STOCK_CHUNKS);
	else
		load_orders(b, l->tb, r, w, k - STOCK_CHUNKS - TPCC_DISTRICTS);
}

static void *loader_main(void *arg)
{
	struct loader *l = arg;
	lotus_session_t *s = NULL;
	struct batch b = { .counter = (uint64_t *)&l->rows };
	struct rng r;
	rng_seed(&r, (uint64_t)tpcc_now() ^ (uint64_t)(uintptr_t)&b);
	int rc = lotus_session_open(l->c, &s);
	if (rc == 0)
		rc = lotus_txn_begin(s, &b.t);
	while (rc == 0 && !atomic_load(&l->error) && !atomic_load(&tpcc_stopping)) {
		unsigned u = atomic_fetch_add(&l->next, 1);
		if (u >= l->units)
			break;
		load_unit(&b, l, &r, u);
		rc = batch_flush(&b);
	}
	if (rc == 0 && atomic_load(&tpcc_stopping))
		rc = -EINTR;
	if (rc) {
		int zero = 0;
		if (atomic_compare_exchange_strong(&l->error, &zero, rc)) {
			pthread_mutex_lock(&l->mu);
			snprintf(l->msg, l->msglen, "load: %s", lotus_strerror(rc));
			pthread_mutex_unlock(&l->mu);
		}
	}
	if (b.t) {
		lotus_txn_abort(b.t);
		lotus_txn_free(b.t);
	}
	if (s)
		lotus_session_close(s);
	return NULL;
}

static int write_meta(lotus_session_t *s, const struct tpcc_tables *tb, unsigned w,
		      enum tpcc_placement placement, unsigned servers, bool insert)
{
	lotus_txn_t *t;
	struct meta_row m = { .warehouses = w, .loaded = !insert, .placement = placement,
			      .servers = servers };
	int rc = lotus_txn_begin(s, &t);
	if (rc)
		return rc;
	int op = insert ? lotus_txn_insert(t, tb->id[TB_META], "tpcc", 4, &m, sizeof(m))
			: lotus_txn_write(t, tb->id[TB_META], "tpcc", 4, &m, sizeof(m));
	rc = op < 0 ? op : lotus_txn_execute(t);
	if (rc == 0 && lotus_txn_result(t, op, NULL, NULL) == LOTUS_EEXISTS)
		rc = LOTUS_EEXISTS;
	rc = rc ? rc : lotus_txn_commit(t);
	if (rc)
		lotus_txn_abort(t);
	lotus_txn_free(t);
	return rc;
}

int tpcc_load(lotus_cluster_t *c, const struct tpcc_tables *tb, unsigned warehouses,
	      enum tpcc_placement placement, unsigned threads, bool quiet, char *msg,
	      size_t msglen)
{
	struct loader l = { .c = c, .tb = tb, .warehouses = warehouses, .msg = msg,
			    .msglen = msglen, .units = ITEM_CHUNKS + warehouses * UNITS_PER_W };
	lotus_session_t *s;
	pthread_t tid[64];
	unsigned n = MIN(MAX(threads, 2u), 64u), started = 0;
	uint64_t expect = (uint64_t)TPCC_ITEMS * MAX(tb->item_copies, 1u) + (uint64_t)warehouses *
		(1 + TPCC_DISTRICTS + TPCC_STOCK + (uint64_t)TPCC_DISTRICTS *
		 (3 * TPCC_CUSTOMERS + 2 * TPCC_ORDERS + TPCC_ORDERS * 10 + TPCC_NEW_ORDERS));
	int rc = lotus_session_open(c, &s);
	if (rc)
		return rc;
	/* the meta row first, loaded = 0: a second load is refused at once */
	rc = write_meta(s, tb, warehouses, placement, lotus_cluster_servers(c), true);
	if (rc == LOTUS_EEXISTS)
		snprintf(msg, msglen, "the cluster holds a TPC-C database already (or a load "
			 "that did not finish); use --no-load, or a new cluster");
	pthread_mutex_init(&l.mu, NULL);
	for (; rc == 0 && started < n; started++)
		if (pthread_create(&tid[started], NULL, loader_main, &l))
			break;
	uint64_t t0 = clock_now_ns(), last = t0;
	while (rc == 0 && atomic_load(&l.next) < l.units + started && !atomic_load(&l.error)) {
		/* the threads end once the counter passes the units: poll, report */
		usleep(100000);
		uint64_t now = clock_now_ns();
		if (!quiet && now - last >= 1000000000ULL) {
			uint64_t rows = atomic_load(&l.rows);
			fprintf(stderr, "lotus tpcc: loading: %llu of ~%llu rows (%.0f%%), %.0f rows/s\n",
				(unsigned long long)rows, (unsigned long long)expect,
				100.0 * (double)rows / (double)expect,
				(double)rows / ((double)(now - t0) / 1e9));
			last = now;
		}
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	if (rc == 0)
		rc = atomic_load(&l.error);
	if (rc == 0)
		rc = write_meta(s, tb, warehouses, placement, lotus_cluster_servers(c), false);
	if (rc == 0 && !quiet)
		fprintf(stderr, "lotus tpcc: loaded %llu rows of %u warehouse%s in %.1f s\n",
			(unsigned long long)atomic_load(&l.rows), warehouses, warehouses == 1 ? "" : "s",
			(double)(clock_now_ns() - t0) / 1e9);
	pthread_mutex_destroy(&l.mu);
	lotus_session_close(s);
	return rc;
}
