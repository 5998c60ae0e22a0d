/*
 * tpcc.h - `lotus tpcc`: the TPC-C benchmark on the public API (lotus.h):
 * the nine tables at the spec's cardinalities, the five transactions at the
 * spec's minimum mix, and consistency conditions 1-10 and 12 (clause 3.3.2).  See
 * docs/tpcc.md.
 *
 * Threads: tpcc_main() runs on the caller's thread and starts the loader and
 * terminal threads itself; tpcc_stop() may be called from a signal handler.
 */
#ifndef LOTUS_TPCC_H
#define LOTUS_TPCC_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "common/hist.h"
#include "lotus.h"

enum tpcc_type { TX_NEW_ORDER, TX_PAYMENT, TX_ORDER_STATUS, TX_DELIVERY, TX_STOCK_LEVEL, TX_TYPES };
extern const char *const tpcc_type_names[TX_TYPES];

/* Where the rows live: HASH, every key hashed over the servers (the
 * library's default); WAREHOUSE, every row of a warehouse on server
 * W_ID % servers (a lotus_placement rule on the W(2) key prefix of the
 * ten tables that have one, with warehouse-local scans; ITEM is hashed). */
enum tpcc_placement { TPCC_PLACE_HASH = 0, TPCC_PLACE_WAREHOUSE = 1 };
extern const char *const tpcc_placement_names[];   /* "hash", "warehouse", NULL */

struct tpcc_opts {
	struct lotus_options lo;  /* tpcc_main adds the placement rules */
	enum tpcc_placement placement;   /* the database's (kept in its meta row;
					    another is refused) */
	unsigned warehouses;      /* 0: the loaded database's (with --no-load / --check) */
	unsigned threads;         /* terminal threads (and loader threads) */
	double seconds;
	bool load;                /* load (refused if a database is there) */
	bool run;                 /* run transactions */
	bool check;               /* run conditions 1-10 and 12 (after the run, if any) */
	bool quiet;               /* no progress lines */
};

/* Conditions 1-12 of clause 3.3.2; 11 holds only until the first Delivery,
 * so it is not checked (TPCC_UNCHECKED). */
#define TPCC_CHECKS 12
#define TPCC_UNCHECKED (1u << 10)
struct tpcc_check_result {
	bool ran;
	bool ok[TPCC_CHECKS];     /* condition i+1 held (or is unchecked) */
	char why[TPCC_CHECKS][160];   /* the first violation of each, or "" */
	uint64_t rows_read;
	double seconds;
};

struct tpcc_type_result {
	uint64_t done;            /* completed (committed or rolled back as asked) */
	uint64_t rolled_back;     /* New-Order: the 1% with an unused item */
	uint64_t aborts;          /* attempts aborted by conflicts, then retried */
	struct hist lat;          /* ns, from the first attempt to the end */
	struct lotus_attempt_counters eng;   /* all attempts' work (committed + aborted) */
};

struct tpcc_result {
	unsigned warehouses, servers, threads;
	bool loaded;              /* this invocation loaded */
	uint64_t load_rows;
	double load_seconds, seconds;
	struct tpcc_type_result type[TX_TYPES];
	struct tpcc_check_result check;
	int error;                /* 0, LOTUS_EUNAVAIL (a server lost mid-run) or the failure */
	char message[320];
};

void tpcc_opts_init(struct tpcc_opts *o);
/* Connect, load (o->load), run (o->run), check (o->check), disconnect.
 * Returns 0 when the steps were carried out (a failed condition shows in
 * r->check, a lost server in r->error), or the error that stopped them
 * (r->message says which). */
int tpcc_main(const struct tpcc_opts *o, struct tpcc_result *r);
/* Async-signal-safe: stop issuing transactions and loading. */
void tpcc_stop(void);
void tpcc_print(FILE *f, const struct tpcc_opts *o, const struct tpcc_result *r, bool json);
bool tpcc_checks_ok(const struct tpcc_check_result *c);

#endif
