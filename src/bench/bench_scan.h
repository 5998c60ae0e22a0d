/*
 * bench_scan.h - what the benchmarks' checkers share: one chunk of a
 * table read by a read-only transaction (bank --verify, tpcc --check).
 *
 * A checker reads a table in key order, a chunk of rows per transaction, so
 * that no transaction holds many locks for long; a chunk that meets locks
 * (a run still finishing, or the prepared transactions of a restarted server
 * not yet settled) is retried while the caller's retry policy says so.
 * Threads: the session's thread.
 */
#ifndef LOTUS_BENCH_SCAN_H
#define LOTUS_BENCH_SCAN_H
#include <stdbool.h>
#include <stddef.h>
#include "lotus.h"

/* The caller's retry policy: sleep as it likes, then 1 to try again. */
typedef bool (*bench_retry_fn)(void *retry);

/* Recycle t, scan count rows from start, commit (the S locks go at once).
 * A retryable failure is retried while again(retry) says so.  Returns the
 * rows (>= 0; *op is the scan's op for lotus_txn_scan_row, valid until t
 * is recycled) or the error of the last attempt. */
int bench_scan_chunk(lotus_txn_t *t, lotus_table_t tb, const void *start, size_t slen,
		     unsigned count, bench_retry_fn again, void *retry, int *op);

#endif
