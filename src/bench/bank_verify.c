/*
 * bank_verify.c - `lotus bank --verify` and the reports (bank_int.h): the
 * tables read in key order, chunk by chunk, then the checks of the ledger
 * against them (bank.c's essay tells why they hold):
 *   V1 every id the ledger acknowledges is a row of bank_transfers
 *   V2 balance(a) = opening + sum(amount into a) - sum(amount out of a),
 *      summed over the rows of bank_transfers
 *   V3 the sum of the balances is accounts x opening
 * With --no-ledger (a restored backup, a bank whose ledger is gone) V1 is
 * not checked: V2 and V3 still prove every transfer all or nothing (its
 * record and both balances), but not that an acknowledged one is there.  The
 * opening balance is then --opening, or else what account 0's balance and
 * transfers give, and V2 holds it to every other account.
 * And the run and verify results printed as text or JSON.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench/bank_int.h"
#include "bench/bench_scan.h"
#include "common/clock.h"
#include "common/common.h"
#include "common/json.h"
#include "common/log.h"
#include "common/vec.h"

/* ---- table reads ---------------------------------------------------------------- */

/*
 * Read every row of tb (8-byte keys) in key order, SCAN_CHUNK rows per
 * transaction, handing each to fn after its chunk committed; a chunk that
 * meets locks is retried (struct retry).  Consistent only on a quiesced
 * table.  0, an error of the library, or fn's error.
 */
static bool scan_again(void *r)
{
	return retry_again(r);
}

int scan_table(lotus_session_t *s, lotus_table_t tb, uint64_t start, unsigned limit,
		      row_fn fn, void *arg)
{
	lotus_txn_t *t;
	unsigned seen = 0;
	struct retry r = { 0 };
	int rc = lotus_txn_begin(s, &t);
	while (rc == 0 && seen < limit) {
		unsigned char k[8];
		int op;
		key_from_u64(start, k);
		int n = bench_scan_chunk(t, tb, k, 8, MIN(SCAN_CHUNK, limit - seen), scan_again, &r,
					 &op);
		retry_reset(&r);
		if (n <= 0) {
			rc = n;
			break;
		}
		for (int i = 0; i < n && rc == 0; i++) {
			const void *key, *v;
			size_t klen, vlen;
			rc = lotus_txn_scan_row(t, op, (unsigned)i, &key, &klen, &v, &vlen);
			if (rc == 0 && klen != 8)
				rc = LOTUS_EPROTO;
			if (rc == 0) {
				uint64_t id = get_be64(key);
				rc = fn(arg, id, v, vlen);
				start = id + 1;
				if (id == UINT64_MAX)
					limit = seen; /* the key space is exhausted */
			}
		}
		seen += (unsigned)n;
	}
	lotus_txn_free(t);
	return rc;
}

int account_row(void *arg, uint64_t id, const unsigned char *v, size_t vlen)
{
	struct accounts_view *a = arg;
	if (a->n == a->cap) {
		size_t c = a->cap ? a->cap * 2 : 1024;
		uint64_t *ids = realloc(a->ids, c * sizeof(*ids));
		if (!ids)
			return -ENOMEM;
		a->ids = ids;
		int64_t *b = realloc(a->balance, c * sizeof(*b));
		if (!b)
			return -ENOMEM;
		a->balance = b;
		a->cap = c;
	}
	if (vlen != BAL_LEN && !a->bad_len) {
		a->bad_len = true;
		a->bad_len_id = id;
	}
	int64_t bal = vlen == BAL_LEN ? (int64_t)get_be64(v) : 0;
	a->ids[a->n] = id;
	a->balance[a->n++] = bal;
	a->total += bal;
	return 0;
}

void accounts_free(struct accounts_view *a)
{
	free(a->ids);
	free(a->balance);
}

ssize_t account_find(const struct accounts_view *a, uint64_t id)
{
	size_t lo = 0, hi = a->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (a->ids[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < a->n && a->ids[lo] == id ? (ssize_t)lo : -1;
}

int transfer_row(void *arg, uint64_t id, const unsigned char *v, size_t vlen)
{
	struct transfers_view *tv = arg;
	tv->rows++;
	if (vec_reserve(tv->r, tv->cap, tv->n + 1, 4096))
		return -ENOMEM;
	if (vlen != REC_LEN) {
		if (!tv->bad_len) {
			tv->bad_len = true;
			tv->bad_len_id = id;
		}
		return 0;
	}
	tv->r[tv->n++] = (struct transfer_rec){ .id = id, .from = get_be64(v),
						.to = get_be64(v + 8),
						.amount = (int64_t)get_be64(v + 16) };
	return 0;
}

int first_row(void *arg, uint64_t id, const unsigned char *v, size_t vlen)
{
	*(uint64_t *)arg = id;
	return 0;
}

/* ---- verification ----------------------------------------------------------------- */

static bool verify_fail(struct bank_verify_result *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static bool verify_fail(struct bank_verify_result *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v->error, sizeof(v->error), fmt, ap);
	va_end(ap);
	v->ok = false;
	return false;
}

static bool rec_present(const struct transfers_view *tv, uint64_t id)
{
	size_t lo = 0, hi = tv->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (tv->r[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < tv->n && tv->r[lo].id == id;
}

/* V1: every acknowledged id has its record (acks sorted). */
static bool verify_acks(struct bank_verify_result *v, const struct ledger_data *ld,
			const struct transfers_view *tv)
{
	for (size_t i = 0; i < ld->nacks; i++) {
		if (i && ld->acks[i] == ld->acks[i - 1])
			return verify_fail(v, "transfer 0x%016" PRIx64 " acknowledged twice in the ledger",
					   ld->acks[i]);
		if (!rec_present(tv, ld->acks[i]))
			return verify_fail(v, "transfer 0x%016" PRIx64 " acknowledged in the ledger "
					   "but missing from %s", ld->acks[i], TB_TRANSFERS);
	}
	for (size_t i = 0; i < ld->nmaybes; i++)
		v->maybe_in_db += rec_present(tv, ld->maybes[i]);
	return true;
}

/* V2: each balance is the opening balance plus the account's transfers. */
static bool verify_balances(struct bank_verify_result *v, const struct accounts_view *a,
			    const struct transfers_view *tv, int64_t opening, bool infer)
{
	int64_t *expect = malloc((a->n ? a->n : 1) * sizeof(*expect));
	bool ok = true;
	if (!expect)
		return verify_fail(v, "out of memory");
	for (size_t i = 0; i < a->n; i++)
		expect[i] = opening;
	for (size_t i = 0; i < tv->n && ok; i++) {
		const struct transfer_rec *r = &tv->r[i];
		ssize_t f = account_find(a, r->from), t = account_find(a, r->to);
		if (f < 0 || t < 0)
			ok = verify_fail(v, "transfer 0x%016" PRIx64 " in %s names account %" PRIu64
					 ", which is not in %s", r->id, TB_TRANSFERS,
					 f < 0 ? r->from : r->to, TB_ACCOUNTS);
		else {
			expect[f] -= r->amount;
			expect[t] += r->amount;
		}
	}
	if (ok && infer && a->n) {   /* no ledger: account 0 tells the opening balance */
		int64_t d = a->balance[0] - expect[0];
		opening += d;
		for (size_t i = 0; i < a->n; i++)
			expect[i] += d;
		v->opening = opening;
		v->expected_total = (int64_t)a->n * opening;
	}
	for (size_t i = 0; i < a->n && ok; i++)
		if (a->balance[i] != expect[i])
			ok = verify_fail(v, "account %" PRIu64 " holds %lld, but its opening balance %lld "
					 "plus its transfers in %s give %lld", a->ids[i],
					 (long long)a->balance[i], (long long)opening, TB_TRANSFERS,
					 (long long)expect[i]);
	free(expect);
	return ok;
}

/* V3: the accounts and their total are those the runs started with. */
static bool verify_total(struct bank_verify_result *v, const struct ledger_data *ld,
			 const struct accounts_view *a)
{
	if (ld->have_header && ld->accounts != a->n)
		return verify_fail(v, "%s holds %zu accounts, but the ledger's runs used %llu",
				   TB_ACCOUNTS, a->n, (unsigned long long)ld->accounts);
	if (v->total != v->expected_total)
		return verify_fail(v, "the total is %lld, not %zu accounts x %lld = %lld",
				   (long long)v->total, a->n, (long long)v->opening,
				   (long long)v->expected_total);
	return true;
}

/* The database is checked as it is once quiet.  After a lost client or server,
 * a transaction prepared on several servers may be settled on one of them and
 * not yet on another; a scan does not wait for an insert that is not applied
 * yet.  So wait (up to VERIFY_SETTLE_S) until no server holds a prepared
 * transaction ("prepared" in its stats). */
#define VERIFY_SETTLE_S 15
static void verify_settle(struct bank_shared *sh, lotus_session_t *s)
{
	uint64_t deadline = clock_now_ns() + VERIFY_SETTLE_S * 1000000000ULL;
	unsigned n = lotus_cluster_servers(sh->cl);
	for (;;) {
		unsigned busy = 0;
		for (unsigned sv = 0; sv < n; sv++) {
			const char *st = lotus_server_stats(s, sv);
			const char *p = st ? strstr(st, "\"prepared\":") : NULL;
			busy += p && atoi(p + 11) > 0;
		}
		if (!busy)
			return;
		if (clock_now_ns() > deadline) {
			log_warn("bank: %u memory server(s) still hold prepared transactions after %d s; "
				 "verifying anyway", busy, VERIFY_SETTLE_S);
			return;
		}
		struct timespec ts = { 0, 50 * 1000000L };
		nanosleep(&ts, NULL);
	}
}

int bank_verify(struct bank_shared *sh, lotus_session_t *s, struct bank_verify_result *v)
{
	const struct bank_opts *o = sh->o;
	struct ledger_data ld;
	struct accounts_view a = { 0 };
	struct transfers_view tv = { 0 };
	int rc = 0;
	if (o->no_ledger)
		memset(&ld, 0, sizeof(ld));
	else
		rc = ledger_read(o->ledger, &ld, false);
	v->ok = true;
	if (rc) {
		verify_fail(v, "cannot read the ledger %s: %s", o->ledger, lotus_strerror(rc));
		return 0;
	}
	if (ld.nacks)   /* no ledger: no acks (qsort must not see a NULL base) */
		qsort(ld.acks, ld.nacks, sizeof(*ld.acks), cmp_u64);
	verify_settle(sh, s);
	rc = scan_table(s, sh->accounts, 0, UINT32_MAX, account_row, &a);
	if (rc == 0)
		rc = scan_table(s, sh->transfers, 0, UINT32_MAX, transfer_row, &tv);
	if (rc) {
		verify_fail(v, "cannot read the tables: %s", lotus_strerror(rc));
		goto out;
	}
	v->accounts = a.n;
	v->transfers_in_db = tv.rows;
	v->acknowledged = ld.nacks;
	v->maybe = ld.nmaybes;
	v->opening = o->opening_given || !ld.have_header ? o->opening : ld.opening;
	v->total = a.total;
	v->expected_total = (int64_t)a.n * v->opening;
	if (ld.error[0])
		verify_fail(v, "%s: %s", o->ledger, ld.error);
	else if (a.n == 0)
		verify_fail(v, "%s is empty: nothing to verify (wrong cluster?)", TB_ACCOUNTS);
	else if (a.bad_len)
		verify_fail(v, "account %" PRIu64 " has a value that is not an 8-byte balance",
			    a.bad_len_id);
	else if (tv.bad_len)
		verify_fail(v, "transfer 0x%016" PRIx64 " has a record that is not 24 bytes",
			    tv.bad_len_id);
	else if (verify_acks(v, &ld, &tv) &&
		 verify_balances(v, &a, &tv, v->opening, o->no_ledger && !o->opening_given))
		verify_total(v, &ld, &a);
out:
	accounts_free(&a);
	free(tv.r);
	ledger_data_free(&ld);
	return 0;
}

/* ---- output ------------------------------------------------------------------------ */


static const char *run_status(const struct bank_run_result *r)
{
	return !r->error ? "ok" : r->error == LOTUS_EUNAVAIL ? "unavailable" : "error";
}

void bank_print_run(FILE *f, const struct bank_opts *o, const struct bank_run_result *r, bool json)
{
	double tps = r->seconds > 0 ? (double)r->committed / r->seconds : 0;
	if (json) {
		fprintf(f, "{\"committed\":%llu,\"aborted\":%llu,\"maybe\":%llu,\"txn_per_s\":%.1f,"
			"\"seconds\":%.3f,\"run_id\":\"0x%08x\",\"accounts\":%llu,\"opening\":%lld,"
			"\"created\":%s,\"cc\":\"%s\",\"threads\":%u,\"inflight\":%u,\"servers\":%u,"
			"\"status\":\"%s\",\"error\":",
			(unsigned long long)r->committed, (unsigned long long)r->aborted,
			(unsigned long long)r->maybe, tps, r->seconds, r->run_id,
			(unsigned long long)r->accounts, (long long)r->opening,
			r->created ? "true" : "false", cc_name(o->lo.cc), o->threads, o->inflight,
			r->servers, run_status(r));
		json_write_str(f, r->message);
		fputc('}', f);
		return;
	}
	fprintf(f, "lotus bank: run 0x%08x, %llu accounts x %lld (%s), cc %s, %u servers, "
		   "%u threads x %u in flight\n", r->run_id, (unsigned long long)r->accounts,
		(long long)r->opening, r->created ? "created" : "continued", cc_name(o->lo.cc),
		r->servers, o->threads, o->inflight);
	fprintf(f, "  %-10s %llu transfers in %.1f s (%.1f txn/s)\n", "committed",
		(unsigned long long)r->committed, r->seconds, tps);
	fprintf(f, "  %-10s %llu attempts (conflicts, retried)\n", "aborted",
		(unsigned long long)r->aborted);
	fprintf(f, "  %-10s %llu transfers of unknown outcome\n", "maybe",
		(unsigned long long)r->maybe);
	fprintf(f, "  %-10s %s\n", "status", r->error ? r->message : "ok");
}

void bank_print_verify(FILE *f, const struct bank_verify_result *v, bool json)
{
	if (json) {
		fprintf(f, "{\"ok\":%s,\"accounts\":%llu,\"transfers_in_db\":%llu,\"acknowledged\":%llu,"
			"\"maybe\":%llu,\"maybe_in_db\":%llu,\"total\":%lld,\"expected_total\":%lld,"
			"\"error\":", v->ok ? "true" : "false", (unsigned long long)v->accounts,
			(unsigned long long)v->transfers_in_db, (unsigned long long)v->acknowledged,
			(unsigned long long)v->maybe, (unsigned long long)v->maybe_in_db,
			(long long)v->total, (long long)v->expected_total);
		json_write_str(f, v->error);
		fputc('}', f);
		return;
	}
	fprintf(f, "lotus bank --verify: %s\n", v->ok ? "OK" : "FAILED");
	fprintf(f, "  %-14s %llu, total %lld (expected %lld)\n", "accounts",
		(unsigned long long)v->accounts, (long long)v->total, (long long)v->expected_total);
	fprintf(f, "  %-14s %llu in %s\n", "transfers", (unsigned long long)v->transfers_in_db,
		TB_TRANSFERS);
	fprintf(f, "  %-14s %llu acknowledged, %llu maybe (%llu of them committed)\n", "ledger",
		(unsigned long long)v->acknowledged, (unsigned long long)v->maybe,
		(unsigned long long)v->maybe_in_db);
	if (!v->ok)
		fprintf(f, "  %-14s %s\n", "discrepancy", v->error);
}
