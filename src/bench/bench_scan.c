/*
 * bench_scan.c - one chunk of a table in a read-only transaction, retried
 * while the caller's policy allows (bench_scan.h).
 */
#include "bench/bench_scan.h"

int bench_scan_chunk(lotus_txn_t *t, lotus_table_t tb, const void *start, size_t slen,
		     unsigned count, bench_retry_fn again, void *retry, int *op)
{
	for (;;) {
		int rc = lotus_txn_recycle(t);
		*op = rc ? rc : lotus_txn_scan(t, tb, start, slen, count);
		rc = *op < 0 ? *op : lotus_txn_execute(t);
		rc = rc ? rc : lotus_txn_commit(t);
		if (rc)
			lotus_txn_abort(t);
		if (lotus_err_retryable(rc) && again(retry))
			continue;
		return rc ? rc : lotus_txn_scan_rows(t, *op);
	}
}
