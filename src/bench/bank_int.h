/*
 * bank_int.h - what the parts of `lotus bank` share: bank.c (the workload:
 * setup and the transfer threads), bank_ledger.c (the ledger, written and
 * read) and bank_verify.c (reading the tables, the verifier and the
 * reports).  The design is told atop bank.c.
 *
 * Threads: the ledger's appends take its lock (any transfer thread); the
 * rest runs on bank_main()'s thread.
 */
#ifndef LOTUS_BANK_INT_H
#define LOTUS_BANK_INT_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "bench/bank.h"
#include "common/common.h"

#define TB_ACCOUNTS     "bank_accounts"
#define TB_TRANSFERS    "bank_transfers"
#define BAL_LEN         8
#define REC_LEN         24
#define SETUP_BATCH     256
#define SCAN_CHUNK      500
#define MAX_AMOUNT      100
#define LEDGER_BUF      16384
#define LEDGER_FLUSH_NS 100000000ULL         /* thread buffer -> FILE */
#define DRAIN_NS        10000000000ULL       /* wait for in-flight transfers (> lease) */

/*
 * Retrying a setup or scan step that aborted on a conflict
 * (lotus_err_retryable): the locks in its way may be another client's, held
 * for as long as that client's lease when it was stopped or killed mid-run,
 * so a step is retried for up to RETRY_S seconds (from its first conflict),
 * backing off from quick retries to RETRY_SLEEP_MAX_NS between tries.
 * retry_again() sleeps before the next try and says whether there is one.
 */
#define RETRY_S             60
#define RETRY_SLEEP_MAX_NS  20000000ULL
struct retry {
	uint64_t deadline_ns;     /* 0: no conflict yet */
	unsigned tries;
};
bool retry_again(struct retry *r);
static inline void retry_reset(struct retry *r)
{
	r->deadline_ns = 0;
	r->tries = 0;
}

/* bank_stop() was called (bank.c). */
extern _Atomic int bank_stopping;

static inline void put_be64(unsigned char *p, uint64_t v)
{
	key_from_u64(v, p);
}

static inline uint64_t get_be64(const unsigned char *p)
{
	return key_to_u64(p);
}

/* ---- the ledger (bank_ledger.c) ----------------------------------------------- */

struct ledger {
	FILE *f;
	pthread_mutex_t mu;       /* guards f and error */
	int error;                /* first write or sync error, -errno */
};

int ledger_open(struct ledger *l, const char *path);
/* Append (any thread); a failure is kept in l->error. */
void ledger_append(struct ledger *l, const char *buf, size_t len);
void ledger_printf(struct ledger *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* fflush + fdatasync: 0 or the first error, -errno. */
int ledger_sync(struct ledger *l);
int ledger_close(struct ledger *l);
/* Lock the ledger (flock, exclusive) and cut a torn last line: the fd to
 * close at the end, -1 when there is no ledger to lock (!create), -2 when
 * another process holds it (msg says so). */
int ledger_lock(const char *path, bool create, char *msg, size_t len);

struct ledger_data {
	uint64_t *acks, *maybes;
	size_t nacks, nmaybes, cap_acks, cap_maybes;
	uint32_t *runs;
	size_t nruns, cap_runs;
	bool have_header;
	uint64_t accounts;        /* of the first run header */
	int64_t opening;
	char error[200];          /* a malformed line, or runs that disagree */
};

/* Read a ledger; a missing file is an empty ledger when may_be_absent. */
int ledger_read(const char *path, struct ledger_data *d, bool may_be_absent);
void ledger_data_free(struct ledger_data *d);
int cmp_u64(const void *a, const void *b);

/* ---- the tables (bank_verify.c) ----------------------------------------------- */

typedef int (*row_fn)(void *arg, uint64_t key, const unsigned char *v, size_t vlen);
/* Every row of tb from start in key order, at most limit (bank_verify.c). */
int scan_table(lotus_session_t *s, lotus_table_t tb, uint64_t start, unsigned limit,
	       row_fn fn, void *arg);

struct accounts_view {
	uint64_t *ids;            /* ascending */
	int64_t *balance;
	size_t n, cap;
	int64_t total;
	uint64_t bad_len_id;      /* an account whose value is not 8 bytes */
	bool bad_len;
};

int account_row(void *arg, uint64_t id, const unsigned char *v, size_t vlen);
void accounts_free(struct accounts_view *a);
/* Index of account id, or -1. */
ssize_t account_find(const struct accounts_view *a, uint64_t id);

struct transfer_rec {
	uint64_t id, from, to;
	int64_t amount;
};

struct transfers_view {
	struct transfer_rec *r;   /* ascending id */
	size_t n, cap;
	uint64_t rows;            /* every row, well-formed or not */
	uint64_t bad_len_id;
	bool bad_len;
};

int transfer_row(void *arg, uint64_t id, const unsigned char *v, size_t vlen);
/* A row_fn keeping the id of the (one) row it is given. */
int first_row(void *arg, uint64_t id, const unsigned char *v, size_t vlen);

/* ---- a run (bank.c) -------------------------------------------------------------- */

struct bank_shared {
	const struct bank_opts *o;
	lotus_cluster_t *cl;
	lotus_table_t accounts, transfers;
	uint64_t naccounts;
	int64_t opening;
	uint32_t run_id;
	struct ledger ledger;
	uint64_t t_start, t_end;
	_Atomic uint32_t next_seq;    /* low half of transfer ids */
	_Atomic int halt;             /* a failure or a lost server: stop issuing */
	_Atomic unsigned running;     /* transfer threads still running */
};

/* Format msg and return rc. */
int fail_msg(char *msg, size_t len, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The protocol's name, as --cc spells it. */
const char *cc_name(enum lotus_cc cc);

/* The verifier (bank_verify.c): the checks V1..V3 into v (0, or an error
 * that stopped it). */
int bank_verify(struct bank_shared *sh, lotus_session_t *s, struct bank_verify_result *v);

#endif
