/*
 * tpcc.c - `lotus tpcc`: the driver.  It connects, loads (tpcc_load.c) unless
 * told not to, runs terminal threads for --seconds (tpcc_txn.c), checks
 * conditions 1-4 (tpcc_check.c) and reports.
 *
 * A terminal thread has its own session and a home warehouse (thread i:
 * warehouse i % W + 1) and runs one transaction at a time, no keying or
 * think time, the type drawn at the spec's minimum mix: New-Order 45%,
 * Payment 43%, Order-Status, Delivery and Stock-Level 4% each.  Delivery is
 * run in the terminal, not queued (clause 2.7.2 allows deferring it; lotus
 * runs it at once).  Per type it keeps the completed count, the aborted
 * attempts, a latency histogram (first attempt to the end) and the engine's
 * work (lotus_session_txn_counters before and after).
 *
 * A memory server lost mid-run (EUNAVAIL, ETIMEOUT, ELEASE, EINDOUBT) stops
 * every thread; the run reports LOTUS_EUNAVAIL and skips the check (exit 3).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>
#include "bench/tpcc_int.h"
#include "common/clock.h"
#include "common/json.h"
#include "common/log.h"

void tpcc_stop(void)
{
	atomic_store(&tpcc_stopping, 1);
}

const char *const tpcc_placement_names[] = { "hash", "warehouse", NULL };

/* --placement warehouse: the tables whose keys start with W(2) (tpcc_int.h) */
static const struct lotus_placement by_warehouse[] = {
#define BY_W(name) { name, 0, 2, LOTUS_PLACE_SCAN_LOCAL }
	BY_W("tpcc_warehouse"), BY_W("tpcc_district"), BY_W("tpcc_customer"),
	BY_W("tpcc_cust_name"), BY_W("tpcc_history"), BY_W("tpcc_new_order"),
	BY_W("tpcc_order"), BY_W("tpcc_order_cust"), BY_W("tpcc_order_line"),
	BY_W("tpcc_stock"), BY_W("tpcc_item"),   /* an ITEM copy per server: C(2) */
#undef BY_W
};

void tpcc_opts_init(struct tpcc_opts *o)
{
	memset(o, 0, sizeof(*o));
	lotus_options_init(&o->lo);
	o->threads = 2;
	o->seconds = 10;
	o->load = o->run = o->check = true;
}

struct term_thread {
	struct tpcc_term tm;
	lotus_cluster_t *c;
	pthread_t tid;
	struct tpcc_type_result res[TX_TYPES];
	int error;
	char msg[200];
};

static bool server_lost(int rc)
{
	return rc == LOTUS_EUNAVAIL || rc == LOTUS_ETIMEOUT || rc == LOTUS_ELEASE ||
	       rc == LOTUS_EINDOUBT;
}

static enum tpcc_type draw_type(struct rng *r)
{
	unsigned x = (unsigned)urand(r, 1, 100);
	return x <= 45 ? TX_NEW_ORDER : x <= 88 ? TX_PAYMENT : x <= 92 ? TX_ORDER_STATUS
	     : x <= 96 ? TX_DELIVERY : TX_STOCK_LEVEL;
}

static void eng_add(struct lotus_attempt_counters *dst, const struct lotus_txn_counters *after,
		    const struct lotus_txn_counters *before)
{
	const struct lotus_attempt_counters *ac[2] = { &after->committed, &after->aborted };
	const struct lotus_attempt_counters *bc[2] = { &before->committed, &before->aborted };
	for (int i = 0; i < 2; i++) {
		dst->attempts += ac[i]->attempts - bc[i]->attempts;
		dst->round_trips += ac[i]->round_trips - bc[i]->round_trips;
		dst->ops += ac[i]->ops - bc[i]->ops;
		dst->bytes_sent += ac[i]->bytes_sent - bc[i]->bytes_sent;
		dst->bytes_recv += ac[i]->bytes_recv - bc[i]->bytes_recv;
		dst->servers += ac[i]->servers - bc[i]->servers;
		for (unsigned k = 0; k < LOTUS_OP_TYPES; k++) {
			dst->type[k].ops += ac[i]->type[k].ops - bc[i]->type[k].ops;
			dst->type[k].bytes_sent += ac[i]->type[k].bytes_sent - bc[i]->type[k].bytes_sent;
			dst->type[k].bytes_recv += ac[i]->type[k].bytes_recv - bc[i]->type[k].bytes_recv;
		}
	}
}

static _Atomic uint64_t run_deadline_ns;
static struct lotus_txn_counters eng_names;   /* type names, from any thread */
static pthread_once_t eng_once = PTHREAD_ONCE_INIT;
static lotus_session_t *eng_session;
static void eng_name_init(void)
{
	lotus_session_txn_counters(eng_session, &eng_names);
}

static void *term_main(void *arg)
{
	struct term_thread *th = arg;
	lotus_txn_t *t = NULL;
	enum tpcc_type type = TX_NEW_ORDER;
	int rc = lotus_session_open(th->c, &th->tm.s);
	if (rc == 0)
		rc = lotus_txn_begin(th->tm.s, &t);
	while (rc == 0 && !atomic_load(&tpcc_stopping) && clock_now_ns() < atomic_load(&run_deadline_ns)) {
		type = draw_type(&th->tm.rng);
		struct tpcc_type_result *r = &th->res[type];
		struct lotus_txn_counters before, after;
		lotus_session_txn_counters(th->tm.s, &before);
		uint64_t t0 = clock_now_ns();
		rc = tpcc_txn_run(&th->tm, t, type, &r->aborts);
		if (rc == 1) {
			r->rolled_back++;
			rc = 0;
		}
		if (rc == 0 || lotus_err_retryable(rc)) {
			lotus_session_txn_counters(th->tm.s, &after);
			eng_add(&r->eng, &after, &before);
		}
		if (rc == 0) {
			hist_record(&r->lat, clock_now_ns() - t0);
			r->done++;
		} else if (lotus_err_retryable(rc)) {
			rc = 0;      /* stopping: the last one did not finish */
		}
	}
	if (rc && !th->error) {
		th->error = server_lost(rc) ? LOTUS_EUNAVAIL : rc;
		if (server_lost(rc))
			snprintf(th->msg, sizeof(th->msg), "memory server lost (%s in %s)",
				 lotus_strerror(rc), tpcc_type_names[type]);
		else   /* EPROTO: a row that contradicts another (see tpcc_txn.c) */
			snprintf(th->msg, sizeof(th->msg), "%s failed: %s", tpcc_type_names[type],
				 lotus_strerror(rc));
		tpcc_stop();
	}
	if (th->tm.s) {
		eng_session = th->tm.s;
		pthread_once(&eng_once, eng_name_init);
	}
	if (t) {
		lotus_txn_abort(t);
		lotus_txn_free(t);
	}
	if (th->tm.s)
		lotus_session_close(th->tm.s);
	return NULL;
}

static uint32_t random_u32(void)
{
	uint32_t r = 0;
	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (uint32_t)(clock_wall_ns() ^ (uint64_t)getpid() << 16);
	return r | 1;   /* the load's history rows use run 0 */
}

static int run_terminals(lotus_cluster_t *c, const struct tpcc_opts *o, const struct tpcc_tables *tb,
			 unsigned warehouses, struct tpcc_result *r)
{
	struct term_thread *th = calloc(o->threads, sizeof(*th));
	unsigned started = 0;
	uint32_t run_id = random_u32();
	if (!th)
		return -ENOMEM;
	atomic_store(&run_deadline_ns, clock_now_ns() + (uint64_t)(o->seconds * 1e9));
	uint64_t t0 = clock_now_ns();
	for (unsigned i = 0; i < o->threads; i++) {
		th[i].c = c;
		th[i].tm = (struct tpcc_term){ .tb = tb, .warehouses = warehouses,
					       .w = i % warehouses + 1, .idx = i, .run_id = run_id };
		rng_seed(&th[i].tm.rng, (uint64_t)run_id << 20 ^ i ^ clock_wall_ns());
		for (int k = 0; k < TX_TYPES; k++)
			hist_init(&th[i].res[k].lat);
		if (pthread_create(&th[i].tid, NULL, term_main, &th[i]))
			break;
		started++;
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i].tid, NULL);
	r->seconds = (double)(clock_now_ns() - t0) / 1e9;
	for (int k = 0; k < TX_TYPES; k++)
		hist_init(&r->type[k].lat);
	for (unsigned i = 0; i < started; i++) {
		for (int k = 0; k < TX_TYPES; k++) {
			struct tpcc_type_result *a = &r->type[k], *b = &th[i].res[k];
			a->done += b->done;
			a->rolled_back += b->rolled_back;
			a->aborts += b->aborts;
			hist_merge(&a->lat, &b->lat);
			struct lotus_txn_counters zero = { 0 }, add = { .committed = b->eng };
			eng_add(&a->eng, &add, &zero);
		}
		if (th[i].error && !r->error) {
			r->error = th[i].error;
			snprintf(r->message, sizeof(r->message), "%s", th[i].msg);
		}
	}
	r->threads = started;
	free(th);
	return started ? 0 : -EAGAIN;
}

int tpcc_main(const struct tpcc_opts *o, struct tpcc_result *r)
{
	lotus_cluster_t *c = NULL;
	lotus_session_t *s = NULL;
	struct tpcc_tables tb;
	struct meta_row meta;
	struct lotus_options lo = o->lo;
	memset(r, 0, sizeof(*r));
	if (o->placement == TPCC_PLACE_WAREHOUSE) {
		lo.placement = by_warehouse;
		lo.nplacement = ARRAY_SIZE(by_warehouse);
	}
	int rc = lotus_connect(&lo, &c);
	if (rc)
		return rc;   /* the library logged why; the CLI adds a line only if not */
	r->servers = lotus_cluster_servers(c);
	if ((rc = lotus_session_open(c, &s)))
		goto out;
	if ((rc = tpcc_open_tables(s, &tb, o->load))) {
		if (rc == LOTUS_ENOTABLE)
			snprintf(r->message, sizeof(r->message), "no TPC-C database on this cluster "
				 "(load one: drop --no-load / --check)");
		goto out;
	}
	tb.item_copies = o->placement == TPCC_PLACE_WAREHOUSE ? r->servers : 1;
	r->warehouses = o->warehouses;
	if (o->load) {
		uint64_t t0 = clock_now_ns();
		rc = tpcc_load(c, &tb, o->warehouses, o->placement, o->threads, o->quiet,
			       r->message, sizeof(r->message));
		r->load_seconds = (double)(clock_now_ns() - t0) / 1e9;
		r->loaded = rc == 0;
		if (rc)
			goto out;
	} else {
		rc = tpcc_read_meta(s, &tb, &meta);
		if (rc == 0 && !meta.loaded)
			rc = LOTUS_ESTATE;
		if (rc == 0 && o->warehouses && o->warehouses != meta.warehouses)
			rc = LOTUS_ECONFIG;
		if (rc == 0 && meta.placement == TPCC_PLACE_WAREHOUSE && o->placement == meta.placement &&
		    meta.servers != r->servers) {
			snprintf(r->message, sizeof(r->message), "the database was loaded with "
				 "--placement warehouse on %u memory servers, not %u", meta.servers,
				 r->servers);
			rc = LOTUS_ECONFIG;
			goto out;
		}
		if (rc == 0 && meta.placement != o->placement) {
			/* the rows are where the load put them: read them the same way */
			snprintf(r->message, sizeof(r->message), "the database was loaded with "
				 "--placement %s, not %s: run with --placement %s",
				 meta.placement == TPCC_PLACE_WAREHOUSE ? "warehouse" : "hash",
				 tpcc_placement_names[o->placement],
				 meta.placement == TPCC_PLACE_WAREHOUSE ? "warehouse" : "hash");
			rc = LOTUS_ECONFIG;
			goto out;
		}
		if (rc) {
			snprintf(r->message, sizeof(r->message), "%s",
				 rc == LOTUS_ENOTFOUND ? "no TPC-C database on this cluster" :
				 rc == LOTUS_ESTATE ? "the TPC-C load on this cluster did not finish" :
				 rc == LOTUS_ECONFIG ? "the database holds another number of warehouses "
						       "(omit --warehouses)" : lotus_strerror(rc));
			goto out;
		}
		r->warehouses = meta.warehouses;
	}
	if (o->run) {
		if ((rc = run_terminals(c, o, &tb, r->warehouses, r)))
			goto out;
		if (r->error)
			goto out;   /* a lost server: no check (exit 3) */
	}
	if (o->check) {
		rc = tpcc_check(s, lotus_cluster_servers(c), &tb, r->warehouses, &r->check);
		if (rc)
			snprintf(r->message, sizeof(r->message), "check: %s", lotus_strerror(rc));
	}
out:
	if (s)
		lotus_session_close(s);
	lotus_disconnect(c);
	return rc;
}

/* ---- the report ---- */

static double per(uint64_t x, uint64_t n)
{
	return n ? (double)x / (double)n : 0;
}

static uint64_t total_done(const struct tpcc_result *r)
{
	uint64_t n = 0;
	for (int k = 0; k < TX_TYPES; k++)
		n += r->type[k].done;
	return n;
}

static void print_checks(FILE *f, const struct tpcc_check_result *c, bool json)
{
	if (json) {
		fprintf(f, "\"checks\":{");
		for (int i = 0; i < TPCC_CHECKS; i++)
			fprintf(f, "%s\"%d\":%s", i ? "," : "", i + 1, TPCC_UNCHECKED >> i & 1 ? "null"
				: c->ran && c->ok[i] ? "true" : "false");
		fprintf(f, "},\"check_errors\":{");
		for (int i = 0, k = 0; i < TPCC_CHECKS; i++)
			if (c->why[i][0]) {
				fprintf(f, "%s\"%d\":", k++ ? "," : "", i + 1);
				json_write_str(f, c->why[i]);
			}
		fprintf(f, "},\"check_rows\":%" PRIu64 ",\"check_seconds\":%.2f", c->rows_read, c->seconds);
		return;
	}
	fprintf(f, "  %-14s", "checks");
	for (int i = 0; i < TPCC_CHECKS; i++)
		if (!(TPCC_UNCHECKED >> i & 1))
			fprintf(f, " %d:%s", i + 1, c->ok[i] ? "ok" : "FAILED");
	fprintf(f, "   (%" PRIu64 " rows in %.1f s)\n", c->rows_read, c->seconds);
	for (int i = 0; i < TPCC_CHECKS; i++)
		if (c->why[i][0])
			fprintf(f, "  condition %d: %s\n", i + 1, c->why[i]);
}

static void print_type_json(FILE *f, const struct tpcc_type_result *t, double secs)
{
	const struct lotus_attempt_counters *e = &t->eng;
	uint64_t attempts = t->done + t->aborts;
	const double us = 1e-3;
	fprintf(f, "{\"done\":%" PRIu64 ",\"per_s\":%.1f,\"rolled_back\":%" PRIu64 ",\"aborts\":%" PRIu64
		",\"abort_rate\":%.4f,\"lat_us\":{\"p50\":%.1f,\"p99\":%.1f,\"p999\":%.1f},"
		"\"round_trips_per_txn\":%.2f,\"servers_per_attempt\":%.2f,\"ops_per_txn\":%.2f,"
		"\"bytes_sent_per_txn\":%.1f,\"bytes_recv_per_txn\":%.1f,\"by_type\":{",
		t->done, per(t->done, 1) / secs, t->rolled_back, t->aborts, per(t->aborts, attempts),
		(double)hist_percentile(&t->lat, 50) * us, (double)hist_percentile(&t->lat, 99) * us,
		(double)hist_percentile(&t->lat, 99.9) * us, per(e->round_trips, t->done),
		per(e->servers, e->attempts), per(e->ops, t->done), per(e->bytes_sent, t->done), per(e->bytes_recv, t->done));
	for (unsigned i = 0, k = 0; i < eng_names.ntypes && i < LOTUS_OP_TYPES; i++) {
		if (!e->type[i].ops)
			continue;
		fprintf(f, "%s\"%s\":{\"ops_per_txn\":%.2f,\"bytes_sent_per_txn\":%.1f,"
			"\"bytes_recv_per_txn\":%.1f}", k++ ? "," : "", eng_names.type_names[i],
			per(e->type[i].ops, t->done), per(e->type[i].bytes_sent, t->done),
			per(e->type[i].bytes_recv, t->done));
	}
	fprintf(f, "}}");
}

void tpcc_print(FILE *f, const struct tpcc_opts *o, const struct tpcc_result *r, bool json)
{
	double secs = r->seconds > 0 ? r->seconds : 1;
	uint64_t all = total_done(r);
	double no_s = (double)r->type[TX_NEW_ORDER].done / secs;
	if (json) {
		fprintf(f, "{\"warehouses\":%u,\"servers\":%u,\"threads\":%u,\"placement\":\"%s\","
			"\"cc\":\"%s\",", r->warehouses, r->servers, r->threads,
			tpcc_placement_names[o->placement],
			o->lo.cc == LOTUS_WAIT_DIE ? "wait_die" : o->lo.cc == LOTUS_WOUND_WAIT
			? "wound_wait" : "no_wait");
		if (r->loaded)
			fprintf(f, "\"load_seconds\":%.1f,", r->load_seconds);
		if (o->run) {
			fprintf(f, "\"seconds\":%.2f,\"new_order_per_s\":%.1f,\"tpmC\":%.0f,"
				"\"txn_per_s\":%.1f,\"mix\":{", secs, no_s, no_s * 60, (double)all / secs);
			for (int k = 0; k < TX_TYPES; k++)
				fprintf(f, "%s\"%s\":%.4f", k ? "," : "", tpcc_type_names[k],
					per(r->type[k].done, all));
			fprintf(f, "},\"types\":{");
			for (int k = 0; k < TX_TYPES; k++) {
				fprintf(f, "%s\"%s\":", k ? "," : "", tpcc_type_names[k]);
				print_type_json(f, &r->type[k], secs);
			}
			fprintf(f, "},");
		}
		if (o->check)
			print_checks(f, &r->check, true);
		else
			fprintf(f, "\"checks\":null");
		fprintf(f, "}\n");
		return;
	}
	fprintf(f, "tpcc: %u warehouse%s on %u memory server%s, placement %s", r->warehouses,
		r->warehouses == 1 ? "" : "s", r->servers, r->servers == 1 ? "" : "s",
		tpcc_placement_names[o->placement]);
	if (r->loaded)
		fprintf(f, ", loaded in %.1f s", r->load_seconds);
	fprintf(f, "\n");
	if (o->run) {
		fprintf(f, "  %-14s %.1f/s   tpmC %.0f   (%u threads, %.1f s, no think time)\n",
			"new-order", no_s, no_s * 60, r->threads, secs);
		for (int k = 0; k < TX_TYPES; k++) {
			const struct tpcc_type_result *t = &r->type[k];
			fprintf(f, "  %-14s %5.1f%%  %8" PRIu64 " done  aborts %.2f%%  p50 %.0f  p99 %.0f  "
				"p99.9 %.0f us  %.1f round trips  %.0f/%.0f B per txn  %.2f servers",
				tpcc_type_names[k], 100 * per(t->done, all), t->done,
				100 * per(t->aborts, t->done + t->aborts),
				(double)hist_percentile(&t->lat, 50) / 1e3,
				(double)hist_percentile(&t->lat, 99) / 1e3,
				(double)hist_percentile(&t->lat, 99.9) / 1e3,
				per(t->eng.round_trips, t->done), per(t->eng.bytes_sent, t->done),
				per(t->eng.bytes_recv, t->done), per(t->eng.servers, t->eng.attempts));
			if (t->rolled_back)
				fprintf(f, "  (%" PRIu64 " rolled back)", t->rolled_back);
			fprintf(f, "\n");
		}
	}
	if (o->check)
		print_checks(f, &r->check, false);
}
