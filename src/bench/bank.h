/*
 * bank.h - `lotus bank`: concurrent transfers between accounts, a ledger of
 * acknowledged transfers on local disk, and a verifier that checks the
 * database against the ledger.  A correctness tool for users and for crash
 * tests (see docs/bank.md for the data layout and the ledger format).
 *
 * Threads: bank_main() runs on the caller's thread and starts the transfer
 * threads itself; bank_stop() may be called from a signal handler.
 */
#ifndef LOTUS_BANK_H
#define LOTUS_BANK_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "lotus.h"

#define BANK_DEFAULT_ACCOUNTS 1000
#define BANK_DEFAULT_OPENING  1000

struct bank_opts {
	struct lotus_options lo;
	uint64_t accounts;        /* accounts of a new bank (must match an existing one) */
	bool accounts_given;      /* --accounts was given (else: the existing count) */
	int64_t opening;          /* opening balance of every account */
	bool opening_given;       /* --opening was given (else: inferred / from the ledger) */
	unsigned threads;         /* transfer threads */
	unsigned inflight;        /* transfers in flight per thread */
	double seconds;
	const char *ledger;       /* required unless no_ledger */
	bool no_ledger;           /* verify only, without a ledger: the bank's own
				     invariants (V2, V3; bank_verify.c) */
	bool run;                 /* run transfers */
	bool verify;              /* verify afterwards (or only) */
	bool quiet;               /* no progress lines */
};

struct bank_run_result {
	uint32_t run_id;
	uint64_t accounts;
	int64_t opening;
	bool created;             /* this run created the accounts */
	uint64_t committed;       /* acknowledged, written to the ledger */
	uint64_t aborted;         /* attempts aborted by conflicts (and retried) */
	uint64_t maybe;           /* outcome unknown, written as "maybe" */
	double seconds;
	unsigned servers;
	int error;                /* 0, LOTUS_EUNAVAIL (server lost) or the first failure */
	bool refused;             /* the ledger does not fit the cluster: nothing ran (exit 2) */
	char message[320];        /* one line describing error, or "" */
};

struct bank_verify_result {
	bool ok;
	uint64_t accounts;        /* rows in bank_accounts */
	uint64_t transfers_in_db; /* rows in bank_transfers */
	uint64_t acknowledged;    /* distinct acknowledged ids in the ledger */
	uint64_t maybe;           /* "maybe" lines in the ledger */
	uint64_t maybe_in_db;     /* of those, how many were committed after all */
	int64_t total;            /* sum of the balances */
	int64_t expected_total;   /* accounts x opening */
	int64_t opening;
	char error[256];          /* the first discrepancy, or "" */
};

void bank_opts_init(struct bank_opts *o);

/*
 * Connect, create or continue the bank, run transfers (o->run), verify
 * (o->verify), disconnect.  Returns 0 when the steps could be carried out
 * (a discrepancy is reported in ver->ok, a lost server in run->error), or an
 * error that stopped them (a message is printed on stderr).
 */
int bank_main(const struct bank_opts *o, struct bank_run_result *run,
	      struct bank_verify_result *ver);

/* Async-signal-safe: stop issuing transfers, finish those in flight. */
void bank_stop(void);

void bank_print_run(FILE *f, const struct bank_opts *o, const struct bank_run_result *r,
		    bool json);
void bank_print_verify(FILE *f, const struct bank_verify_result *v, bool json);

#endif
