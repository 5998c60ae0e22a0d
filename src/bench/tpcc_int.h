/*
 * tpcc_int.h - what the parts of `lotus tpcc` share: the tables, their key
 * encodings and row layouts (tpcc_load.c also loads them), the random
 * inputs of the spec (NURand, last names), the five transactions
 * (tpcc_txn.c), the consistency checks (tpcc_check.c) and the driver
 * (tpcc.c).  docs/tpcc.md tells the design; the key encoding is summed up
 * here next to the code that builds the keys.
 *
 * Keys are big-endian so that the ordered index orders them numerically:
 *   tpcc_warehouse  W(2)                         W_ID 1..W
 *   tpcc_district   W(2) D(1)                    D_ID 1..10
 *   tpcc_customer   W(2) D(1) C(2)               C_ID 1..3000
 *   tpcc_cust_name  W(2) D(1) LAST(16) FIRST(16) C(2)   (secondary index;
 *                   names zero-padded, so memcmp order is C_LAST, C_FIRST)
 *   tpcc_history    W(2) D(1) C(2) RUN(4) TH(2) SEQ(4)  (no primary key in
 *                   the spec; run id, thread and count make one)
 *   tpcc_new_order  W(2) D(1) O(4)               ascending: the first row of
 *                   a district is min(NO_O_ID), what Delivery takes
 *   tpcc_order      W(2) D(1) O(4)
 *   tpcc_order_cust W(2) D(1) C(2) ~O(4)         O_ID bit-inverted: the first
 *                   row of a customer is its max(O_ID) (Order-Status); there
 *                   is no reverse scan
 *   tpcc_order_line W(2) D(1) O(4) OL(1)
 *   tpcc_item       I(4)                         I_ID 1..100000 (warehouse
 *                   placement: C(2) I(4), a copy C per server, see k_item)
 *   tpcc_stock      W(2) I(4)
 *   tpcc_meta       "tpcc"                       { warehouses, loaded, placement }
 * Rows are the structs below, in the client's byte order (every client of
 * one database runs on the same kind of host); D_YTD is the first field of
 * a district row (the corruption test relies on it).
 */
#ifndef LOTUS_TPCC_INT_H
#define LOTUS_TPCC_INT_H
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include "bench/tpcc.h"
#include "common/common.h"
#include "common/ycsb_gen.h"

/* ---- the spec's cardinalities (clause 1.2) ---- */
#define TPCC_ITEMS        100000
#define TPCC_DISTRICTS    10
#define TPCC_CUSTOMERS    3000     /* per district */
#define TPCC_ORDERS       3000     /* per district, at load */
#define TPCC_NEW_ORDERS   900      /* the last 900 orders of a district */
#define TPCC_STOCK        100000   /* per warehouse */

/* NURand's run-time constants C (clause 2.1.6); C_LAST's load and run
 * values differ by 66, inside the spec's 65..119 (not 96 or 112). */
#define C_LAST_LOAD 157
#define C_LAST_RUN  223
#define C_ID_C      259
#define OL_I_ID_C   7911

enum tpcc_table {
	TB_WAREHOUSE, TB_DISTRICT, TB_CUSTOMER, TB_CUST_NAME, TB_HISTORY, TB_NEW_ORDER,
	TB_ORDER, TB_ORDER_CUST, TB_ORDER_LINE, TB_ITEM, TB_STOCK, TB_META, TB_COUNT
};

struct tpcc_tables {
	lotus_table_t id[TB_COUNT];
	unsigned item_copies;     /* ITEM copies: 1 (hash placement), or one per
				     server (warehouse placement, see k_item) */
};

/* ---- rows (values) ---- */
struct wh_row {
	int64_t ytd;              /* cents */
	int32_t tax;              /* 1/10000 */
	char name[10], street1[20], street2[20], city[20], state[2], zip[9];
};
struct dist_row {
	int64_t ytd;              /* cents; the first field (see above) */
	int32_t tax;
	uint32_t next_o_id;
	char name[10], street1[20], street2[20], city[20], state[2], zip[9];
};
struct cust_row {
	int64_t credit_lim, balance, ytd_payment, since;   /* cents; since: ns */
	int32_t discount;         /* 1/10000 */
	uint32_t payment_cnt, delivery_cnt;
	char first[16], middle[2], last[16], street1[20], street2[20], city[20], state[2];
	char zip[9], phone[16], credit[2], data[500];
};
struct hist_row {
	uint16_t c_id, c_w, w;
	uint8_t c_d, d;
	int64_t date, amount;
	char data[24];
};
struct order_row {
	int64_t entry_d;
	uint16_t c_id;
	uint8_t carrier_id;       /* 0: null */
	uint8_t ol_cnt, all_local;
};
struct ol_row {
	int64_t delivery_d;       /* 0: null */
	int64_t amount;           /* cents */
	uint32_t i_id;
	uint16_t supply_w;
	uint8_t quantity;
	char dist_info[24];
};
struct item_row {
	int64_t price;            /* cents */
	uint32_t im_id;
	char name[24], data[50];
};
struct stock_row {
	int32_t quantity;
	uint32_t ytd;
	uint16_t order_cnt, remote_cnt;
	char dist[TPCC_DISTRICTS][24];
	char data[50];
};
struct meta_row {
	uint32_t warehouses;
	uint32_t loaded;          /* 1 once every row of the load committed */
	uint32_t placement;       /* enum tpcc_placement (absent in rows of
				     older loads: hash) */
	uint32_t servers;         /* the servers it was loaded on (placement
				     warehouse routes by them) */
};

/* ---- keys ---- */
#define KEY_MAX 48
static inline void be16(unsigned char *p, unsigned v) { p[0] = (unsigned char)(v >> 8); p[1] = (unsigned char)v; }
static inline void be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}
static inline unsigned get16(const unsigned char *p) { return (unsigned)p[0] << 8 | p[1]; }
static inline uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline size_t k_wh(unsigned char *k, unsigned w) { be16(k, w); return 2; }
static inline size_t k_dist(unsigned char *k, unsigned w, unsigned d)
{
	be16(k, w); k[2] = (unsigned char)d; return 3;
}
static inline size_t k_cust(unsigned char *k, unsigned w, unsigned d, unsigned c)
{
	k_dist(k, w, d); be16(k + 3, c); return 5;
}
/* The name index: last and first zero-padded to 16 (first may be NULL: a
 * prefix for the scan of one last name, 19 bytes). */
static inline size_t k_cust_name(unsigned char *k, unsigned w, unsigned d, const char *last,
				 const char *first, unsigned c)
{
	k_dist(k, w, d);
	memset(k + 3, 0, 32);
	memcpy(k + 3, last, strnlen(last, 16));
	if (!first)
		return 19;
	memcpy(k + 19, first, strnlen(first, 16));
	be16(k + 35, c);
	return 37;
}
static inline size_t k_hist(unsigned char *k, unsigned w, unsigned d, unsigned c, uint32_t run,
			    unsigned th, uint32_t seq)
{
	k_cust(k, w, d, c); be32(k + 5, run); be16(k + 9, th); be32(k + 11, seq); return 15;
}
static inline size_t k_order(unsigned char *k, unsigned w, unsigned d, uint32_t o)
{
	k_dist(k, w, d); be32(k + 3, o); return 7;
}
static inline size_t k_order_cust(unsigned char *k, unsigned w, unsigned d, unsigned c, uint32_t o)
{
	k_cust(k, w, d, c); be32(k + 5, ~o); return 9;
}
static inline size_t k_ol(unsigned char *k, unsigned w, unsigned d, uint32_t o, unsigned n)
{
	k_order(k, w, d, o); k[7] = (unsigned char)n; return 8;
}
/* ITEM is read-only: under warehouse placement every server holds a copy,
 * copy C(2) I(4) on server C, and a terminal reads the copy of its home
 * warehouse's server (w % servers); under hash placement one copy, I(4). */
static inline size_t k_item(unsigned char *k, const struct tpcc_tables *tb, unsigned copy,
			    uint32_t i)
{
	if (tb->item_copies <= 1) {
		be32(k, i);
		return 4;
	}
	be16(k, copy % tb->item_copies);
	be32(k + 2, i);
	return 6;
}
static inline size_t k_stock(unsigned char *k, unsigned w, uint32_t i)
{
	be16(k, w); be32(k + 2, i); return 6;
}

/* ---- random inputs (tpcc_load.c) ---- */
/* uniform in [lo, hi] */
static inline uint64_t urand(struct rng *r, uint64_t lo, uint64_t hi)
{
	return lo + rng_below(r, hi - lo + 1);
}
/* NURand(A, x, y) of clause 2.1.6 with the constant C */
static inline uint64_t nurand(struct rng *r, uint64_t a, uint64_t x, uint64_t y, uint64_t c)
{
	return (((urand(r, 0, a) | urand(r, x, y)) + c) % (y - x + 1)) + x;
}
/* C_LAST of number n (0..999): three syllables, NUL-terminated in out[17] */
void tpcc_last_name(unsigned n, char out[17]);
/* a random string of lo..hi letters, zero-padded to len */
void tpcc_astring(struct rng *r, char *out, size_t len, unsigned lo, unsigned hi);
int64_t tpcc_now(void);   /* wall clock, ns */

/* ---- shared by the parts ---- */
extern _Atomic int tpcc_stopping;
int tpcc_open_tables(lotus_session_t *s, struct tpcc_tables *tb, bool create);
/* The meta row: 0 and *m, LOTUS_ENOTFOUND (nothing loaded), or an error. */
int tpcc_read_meta(lotus_session_t *s, const struct tpcc_tables *tb, struct meta_row *m);
/* Load `warehouses` warehouses with `threads` sessions; progress on stderr
 * unless quiet.  0 or the first error (msg says what). */
int tpcc_load(lotus_cluster_t *c, const struct tpcc_tables *tb, unsigned warehouses,
	      enum tpcc_placement placement, unsigned threads, bool quiet, char *msg,
	      size_t msglen);

/* A step that meets locks (or a prepared transaction's locks after a
 * restart) is retried for up to RETRY_S seconds, backing off. */
#define RETRY_S 60
struct retry {
	uint64_t deadline_ns;
	unsigned tries;
};
bool tpcc_retry_again(struct retry *r);

/* Copy op's row into row (exactly len bytes, else LOTUS_EPROTO). */
int tpcc_get(lotus_txn_t *t, int op, void *row, size_t len);

/* ---- the five transactions (tpcc_txn.c) ---- */
struct tpcc_term {               /* one driver thread: its own session and inputs */
	lotus_session_t *s;
	const struct tpcc_tables *tb;
	unsigned warehouses, w;   /* the home warehouse */
	unsigned idx;             /* thread index (history keys) */
	uint32_t run_id, hist_seq;
	struct rng rng;
};
/* One transaction of the type, with inputs drawn once and kept over retries
 * of conflicts.  0 committed, 1 rolled back as the spec asks (New-Order's
 * unused item), or the error of the attempt that was not retried:
 * a non-retryable error, or a conflict after stop (*aborts counts the
 * aborted attempts, each retried). */
int tpcc_txn_run(struct tpcc_term *tm, lotus_txn_t *t, enum tpcc_type type, uint64_t *aborts);

/* ---- the consistency conditions (tpcc_check.c) ---- */
int tpcc_check(lotus_session_t *s, unsigned nservers, const struct tpcc_tables *tb,
	       unsigned warehouses, struct tpcc_check_result *r);

#endif
