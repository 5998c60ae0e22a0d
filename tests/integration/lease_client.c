/*
 * lease_client.c - a lotus client written against lotus.h only, for the
 * lease tests (tests/integration/lease_*.sh).
 *
 *   lease_client hold CONFIG CC N TAG
 *       one transaction writes TAG to keys lease-0..lease-(N-1) and executes
 *       (so it holds their X locks on every server), prints "locked", waits
 *       for a line on stdin, then commits and prints "commit RC NAME".
 *       Exit 0 if the commit succeeded, 1 if it failed.
 *   lease_client grab CONFIG CC N TAG TIMEOUT_MS
 *       writes TAG to the same keys in one transaction, retrying conflicts
 *       every 10 ms until it commits (exit 0, prints "grabbed MS": the time
 *       from its start) or TIMEOUT_MS passes (exit 1).
 *   lease_client dump CONFIG N
 *       prints "lease-I=VALUE" for every key (VALUE "-" if absent).
 *   lease_client lockbank CONFIG CC N
 *       X-locks `lotus bank`'s accounts 0..N-1 (read for update), prints
 *       "locked", waits for a line on stdin, then aborts: a live client
 *       whose locks others wait for.
 *   lease_client count CONFIG CC N SECONDS
 *       for SECONDS, transactions that add 1 to each of count-0..count-(N-1)
 *       (read for update, write, commit), each commit classified as lotus.h
 *       says: 0 acknowledged, LOTUS_EINDOUBT in doubt, anything else not
 *       applied (conflicts are retried and not counted).  A lost server's
 *       session is reopened.  Then reads the counters (retrying until the
 *       servers have settled what was left) and prints one line
 *       "acked A doubt D notapplied X final V0 V1 ..." (exit 0, 1 if the
 *       counters could not be read).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "lotus.h"

#ifndef LOTUS_EINDOUBT      /* built against an older lotus.h (the test's main run) */
#define LOTUS_EINDOUBT (-5019)
#endif

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static enum lotus_cc parse_cc(const char *s)
{
	if (!strcmp(s, "wait_die"))
		return LOTUS_WAIT_DIE;
	if (!strcmp(s, "wound_wait"))
		return LOTUS_WOUND_WAIT;
	return LOTUS_NO_WAIT;
}

static void key(unsigned i, char *buf, size_t len)
{
	snprintf(buf, len, "lease-%u", i);
}

static int stage_writes(lotus_txn_t *t, lotus_table_t tb, unsigned n, const char *tag)
{
	char k[32];
	for (unsigned i = 0; i < n; i++) {
		key(i, k, sizeof(k));
		int rc = lotus_txn_write(t, tb, k, strlen(k), tag, strlen(tag));
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int do_hold(lotus_session_t *s, lotus_table_t tb, unsigned n, const char *tag)
{
	lotus_txn_t *t;
	int rc = lotus_txn_begin(s, &t);
	if (rc == 0)
		rc = stage_writes(t, tb, n, tag);
	if (rc == 0)
		rc = lotus_txn_execute(t);
	if (rc) {
		printf("execute %d %s\n", rc, lotus_strerror(rc));
		return 2;
	}
	printf("locked\n");
	fflush(stdout);
	char line[64];
	if (!fgets(line, sizeof(line), stdin))
		return 2;
	rc = lotus_txn_commit(t);
	printf("commit %d %s\n", rc, lotus_strerror(rc));
	fflush(stdout);
	lotus_txn_free(t);
	return rc == 0 ? 0 : 1;
}

static int do_lockbank(lotus_session_t *s, unsigned n)
{
	lotus_table_t tb;
	lotus_txn_t *t;
	int rc = lotus_table_open(s, "bank_accounts", &tb);
	if (rc == 0)
		rc = lotus_txn_begin(s, &t);
	for (unsigned i = 0; rc == 0 && i < n; i++) {
		unsigned char k[8];
		for (int b = 0; b < 8; b++)
			k[b] = (unsigned char)((uint64_t)i >> (56 - 8 * b));
		rc = lotus_txn_read_for_update(t, tb, k, sizeof(k));
		rc = rc < 0 ? rc : 0;
	}
	if (rc == 0)
		rc = lotus_txn_execute(t);
	if (rc) {
		printf("lockbank: %s\n", lotus_strerror(rc));
		return 2;
	}
	printf("locked\n");
	fflush(stdout);
	char line[64];
	if (fgets(line, sizeof(line), stdin)) {
		/* released by the abort */
	}
	lotus_txn_abort(t);
	lotus_txn_free(t);
	return 0;
}

static int do_grab(lotus_session_t *s, lotus_table_t tb, unsigned n, const char *tag,
		   double timeout_ms)
{
	double t0 = now_ms();
	lotus_txn_t *t;
	int rc = lotus_txn_begin(s, &t);
	for (unsigned attempt = 0; rc == 0; attempt++) {
		if (attempt && (rc = lotus_txn_restart(t)) != 0)
			break;
		rc = stage_writes(t, tb, n, tag);
		if (rc == 0)
			rc = lotus_txn_commit(t);
		if (rc == 0) {
			printf("grabbed %.0f\n", now_ms() - t0);
			lotus_txn_free(t);
			return 0;
		}
		lotus_txn_abort(t);
		if (!lotus_err_retryable(rc) || now_ms() - t0 > timeout_ms)
			break;
		rc = 0;
		usleep(10 * 1000);
	}
	printf("not grabbed after %.0f ms: %s\n", now_ms() - t0, lotus_strerror(rc));
	return 1;
}

static int do_dump(lotus_session_t *s, lotus_table_t tb, unsigned n)
{
	lotus_txn_t *t = NULL;
	char k[32];
	int rc = lotus_txn_begin(s, &t);
	for (unsigned i = 0; rc == 0 && i < n; i++) {
		key(i, k, sizeof(k));
		rc = lotus_txn_read(t, tb, k, strlen(k));
		rc = rc < 0 ? rc : 0;
	}
	if (rc == 0)
		rc = lotus_txn_execute(t);
	for (unsigned i = 0; rc == 0 && i < n; i++) {
		const void *v;
		size_t len;
		key(i, k, sizeof(k));
		int r = lotus_txn_result(t, (int)i, &v, &len);
		printf("%s=%.*s\n", k, r ? 1 : (int)len, r ? "-" : (const char *)v);
	}
	if (rc == 0)
		rc = lotus_txn_commit(t);
	if (rc)
		printf("dump failed: %s\n", lotus_strerror(rc));
	lotus_txn_free(t);
	return rc ? 1 : 0;
}

static void count_key(unsigned i, char *buf, size_t len)
{
	snprintf(buf, len, "count-%u", i);
}

/* Read count-0..n-1 (missing: 0) in transaction t, executed. */
static int count_read(lotus_txn_t *t, lotus_table_t tb, unsigned n, int for_update, long *v)
{
	char k[32];
	for (unsigned i = 0; i < n; i++) {
		count_key(i, k, sizeof(k));
		int rc = for_update ? lotus_txn_read_for_update(t, tb, k, strlen(k))
				    : lotus_txn_read(t, tb, k, strlen(k));
		if (rc < 0)
			return rc;
	}
	int rc = lotus_txn_execute(t);
	for (unsigned i = 0; rc == 0 && i < n; i++) {
		const void *p;
		size_t len;
		char buf[32];
		int r = lotus_txn_result(t, (int)i, &p, &len);
		v[i] = 0;
		if (r == 0 && len < sizeof(buf)) {
			memcpy(buf, p, len);
			buf[len] = 0;
			v[i] = atol(buf);
		} else if (r != LOTUS_ENOTFOUND) {
			rc = r;
		}
	}
	return rc;
}

/* One increment: 0, or the commit's (or an earlier step's) error. */
static int count_once(lotus_txn_t *t, lotus_table_t tb, unsigned n, int *committing)
{
	long v[64];
	char k[32], val[32];
	*committing = 0;
	int rc = count_read(t, tb, n, 1, v);
	for (unsigned i = 0; rc == 0 && i < n; i++) {
		count_key(i, k, sizeof(k));
		snprintf(val, sizeof(val), "%ld", v[i] + 1);
		rc = lotus_txn_write(t, tb, k, strlen(k), val, strlen(val));
		rc = rc < 0 ? rc : 0;
	}
	if (rc == 0) {
		*committing = 1;
		rc = lotus_txn_commit(t);
	}
	return rc;
}

static int do_count(lotus_cluster_t *cl, lotus_session_t **sp, lotus_table_t tb, unsigned n,
		    double seconds)
{
	unsigned long acked = 0, doubt = 0, notapplied = 0;
	double end = now_ms() + seconds * 1000;
	lotus_txn_t *t = NULL;
	long v[64];
	int rc;
	if (n > 64)
		return 2;
	for (unsigned iter = 0; iter < 200000 && now_ms() < end; iter++) {
		int committing;
		if (!*sp) {   /* a server was lost: a new session, once it is back */
			if (lotus_session_open(cl, sp) != 0) {
				*sp = NULL;
				usleep(100 * 1000);
				continue;
			}
		}
		if (!t && lotus_txn_begin(*sp, &t) != 0)
			return 2;
		rc = count_once(t, tb, n, &committing);
		if (rc == 0)
			acked++;
		else if (committing && rc == LOTUS_EINDOUBT)
			doubt++;
		else if (committing && !lotus_err_retryable(rc))
			notapplied++;
		lotus_txn_abort(t);
		if (rc && !lotus_err_retryable(rc)) {   /* perhaps a lost server: start over */
			lotus_txn_free(t);
			t = NULL;
			lotus_session_close(*sp);
			*sp = NULL;
			usleep(50 * 1000);
		} else if (lotus_txn_recycle(t) != 0) {
			lotus_txn_free(t);
			t = NULL;
		}
	}
	lotus_txn_free(t);
	t = NULL;
	/* the final values, once the servers have settled the prepared leftovers */
	rc = -1;
	for (double stop = now_ms() + 40000; rc && now_ms() < stop;) {
		if (!*sp && lotus_session_open(cl, sp) != 0) {
			*sp = NULL;
			usleep(200 * 1000);
			continue;
		}
		if (lotus_txn_begin(*sp, &t) != 0)
			return 2;
		rc = count_read(t, tb, n, 0, v);
		if (rc == 0)
			rc = lotus_txn_commit(t);
		lotus_txn_abort(t);
		lotus_txn_free(t);
		t = NULL;
		if (rc) {
			lotus_session_close(*sp);
			*sp = NULL;
			usleep(200 * 1000);
		}
	}
	printf("acked %lu doubt %lu notapplied %lu final", acked, doubt, notapplied);
	for (unsigned i = 0; i < n; i++)
		printf(" %ld", rc ? -1 : v[i]);
	printf("\n");
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: lease_client hold|grab|dump|lockbank|count CONFIG ...\n");
		return 2;
	}
	const char *mode = argv[1];
	int dump = !strcmp(mode, "dump");
	struct lotus_options o;
	lotus_options_init(&o);
	o.config_path = argv[2];
	o.cc = dump ? LOTUS_NO_WAIT : parse_cc(argv[3]);
	unsigned n = (unsigned)atoi(argv[dump ? 3 : 4]);
	lotus_cluster_t *cl = NULL;
	lotus_session_t *s = NULL;
	lotus_table_t tb;
	int rc = lotus_connect(&o, &cl);
	if (rc == 0)
		rc = lotus_session_open(cl, &s);
	if (rc == 0)
		rc = lotus_table_create(s, "lease", 64, &tb);
	if (rc == LOTUS_EEXISTS)
		rc = lotus_table_open(s, "lease", &tb);
	if (rc) {
		fprintf(stderr, "lease_client: %s\n", lotus_strerror(rc));
		if (s)
			lotus_session_close(s);
		lotus_disconnect(cl);
		return 2;
	}
	int ret;
	if (dump)
		ret = do_dump(s, tb, n);
	else if (!strcmp(mode, "lockbank"))
		ret = do_lockbank(s, n);
	else if (!strcmp(mode, "hold") && argc == 6)
		ret = do_hold(s, tb, n, argv[5]);
	else if (!strcmp(mode, "grab") && argc == 7)
		ret = do_grab(s, tb, n, argv[5], atof(argv[6]));
	else if (!strcmp(mode, "count") && argc == 6)
		ret = do_count(cl, &s, tb, n, atof(argv[5]));
	else {
		fprintf(stderr, "lease_client: bad arguments for %s\n", mode);
		ret = 2;
	}
	lotus_session_close(s);
	lotus_disconnect(cl);
	return ret;
}
