/*
 * row_rewrite.c - a lotus client that is not `lotus serve`, written against
 * lotus.h only, for tests/integration/serve_watch_version.sh.
 *
 *   row-rewrite CONFIG TABLE KEY
 *       In one transaction: read KEY of TABLE for update and write the very
 *       bytes it read back (the row does not change, its record version
 *       does).  Prints "rewrote N bytes, version A -> B" (B read by a second
 *       transaction).  Exit 0, 1 on a lotus error (printed), 2 on bad
 *       arguments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lotus.h"

static int die(const char *what, int rc)
{
	fprintf(stderr, "row-rewrite: %s: %s\n", what, lotus_strerror(rc));
	exit(1);
}

static uint64_t version_of(lotus_session_t *s, lotus_table_t tb, const char *key)
{
	lotus_txn_t *t;
	uint64_t v = 0;
	int rc, op;
	if ((rc = lotus_txn_begin(s, &t)) || (op = rc = lotus_txn_read(t, tb, key, strlen(key))) < 0 ||
	    (rc = lotus_txn_execute(t)) || (rc = lotus_txn_result_version(t, op, &v)) ||
	    (rc = lotus_txn_commit(t)))
		die("reading the version", rc);
	lotus_txn_free(t);
	return v;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: row-rewrite CONFIG TABLE KEY\n");
		return 2;
	}
	struct lotus_options o;
	lotus_cluster_t *cl;
	lotus_session_t *s;
	lotus_table_t tb;
	lotus_txn_t *t;
	const char *key = argv[3];
	int rc, op;
	lotus_options_init(&o);
	o.config_path = argv[1];
	if ((rc = lotus_connect(&o, &cl)))
		die("connect", rc);
	if ((rc = lotus_session_open(cl, &s)))
		die("session", rc);
	if ((rc = lotus_table_open(s, argv[2], &tb)))
		die("table", rc);
	if ((rc = lotus_txn_begin(s, &t)))
		die("begin", rc);
	if ((op = rc = lotus_txn_read_for_update(t, tb, key, strlen(key))) < 0 ||
	    (rc = lotus_txn_execute(t)))
		die("read", rc);
	const void *v;
	size_t n;
	uint64_t before = 0;
	if ((rc = lotus_txn_result(t, op, &v, &n)) || (rc = lotus_txn_result_version(t, op, &before)))
		die("read", rc);
	char *copy = malloc(n ? n : 1);
	if (!copy)
		die("malloc", -12);
	memcpy(copy, v, n);
	if ((rc = lotus_txn_write(t, tb, key, strlen(key), copy, n)) < 0 || (rc = lotus_txn_commit(t)))
		die("write", rc);
	lotus_txn_free(t);
	free(copy);
	uint64_t after = version_of(s, tb, key);
	printf("rewrote %zu bytes, version %llx -> %llx\n", n, (unsigned long long)before,
	       (unsigned long long)after);
	lotus_session_close(s);
	lotus_disconnect(cl);
	return after == before;
}
