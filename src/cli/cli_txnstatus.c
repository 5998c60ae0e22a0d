/*
 * cli_txnstatus.c - `lotus txn-status`: ask a memory server what it knows
 * about a transaction (OP_TXN_STATUS, the question the two-phase commit
 * resolver asks): committed, aborted, prepared, or unknown (never prepared
 * there - and, from that answer on, refused there for good).
 *
 * --random N asks about N random ids instead, pipelined (256 per round trip):
 * a load test of the outcome table; every answer is "unknown".  An id that
 * holds no locks on the server is answered from memory and logs nothing.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "cli/cli.h"
#include "cli/opts.h"
#include "common/clock.h"
#include "common/common.h"
#include "common/config.h"
#include "common/log.h"
#include "compute/session.h"

static const char *answer_name(uint64_t a)
{
	switch (a) {
	case WIRE_TXN_COMMITTED: return "committed";
	case WIRE_TXN_ABORTED: return "aborted";
	case WIRE_TXN_PREPARED: return "prepared";
	case WIRE_TXN_UNKNOWN: return "unknown";
	default: return "no answer";
	}
}

/* Queue n status queries for random ids on server sv and wait for them all. */
static int ask_batch(lotus_session_t *s, unsigned sv, unsigned n, uint64_t *rnd)
{
	struct wire_req *r = calloc(n ? n : 1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		*rnd ^= *rnd << 13, *rnd ^= *rnd >> 7, *rnd ^= *rnd << 17;
		r[i] = (struct wire_req){ .op = OP_TXN_STATUS, .txn_id = *rnd };
	}
	int rc = session_admin_many(s, sv, r, n, 10000);
	free(r);
	return rc;
}

int cmd_txn_status(int argc, char **argv)
{
	const char *config = NULL, *txn = NULL, *secret = NULL;
	uint64_t server = 0, random_n = 0, compute_id = 4000;
	bool json = false;
	struct cli_opt opts[] = {
		{ "config", OPT_STR, &config, "FILE", "cluster config file (required)" },
		{ "server", OPT_U64, &server, "N", "the memory server to ask (default 0)", .min = 0, .max = 63 },
		{ "txn", OPT_STR, &txn, "ID", "the transaction id, in hex (as the servers log it)" },
		{ "random", OPT_U64, &random_n, "N", "instead, ask about N random ids (a load test of the status path)", .min = 1, .max = 100000000 },
		{ "compute-id", OPT_U64, &compute_id, "N", "this client's compute id (default 4000)", .min = 0, .max = 4095 },
		{ "json", OPT_FLAG, &json, NULL, "print one JSON object" },
		{ "secret-file", OPT_STR, &secret, "FILE", "the cluster secret file (default: the config's secret_file)" },
		{ 0 },
	};
	int rc = cli_parse("txn-status", "Ask a memory server what it knows about a transaction "
			   "(committed, aborted, prepared, unknown).", opts, argc, argv, NULL, NULL);
	if (rc)
		return rc == 1 ? 0 : rc;
	if (!config)
		return cli_fail("txn-status", "give --config FILE");
	if (!txn == !random_n)
		return cli_fail("txn-status", "give either --txn ID or --random N");
	uint64_t id = 0;
	if (txn) {
		char *end;
		id = strtoull(txn, &end, 16);
		if (!*txn || *end)
			return cli_fail("txn-status", "--txn: '%s' is not a hex id", txn);
	}
	struct lotus_options o;
	lotus_options_init(&o);
	o.config_path = config;
	o.secret_file = secret;
	o.compute_id = (unsigned)compute_id;
	lotus_cluster_t *cl = NULL;
	lotus_session_t *s = NULL;
	rc = lotus_connect(&o, &cl);
	if (rc == 0)
		rc = lotus_session_open(cl, &s);
	if (rc == 0 && server >= lotus_cluster_servers(cl))
		rc = LOTUS_ECONFIG;
	if (rc) {
		log_error("txn-status: %s", lotus_strerror(rc));
		goto out;
	}
	if (txn) {
		struct wire_req r = { .op = OP_TXN_STATUS, .txn_id = id };
		rc = session_admin(s, (unsigned)server, &r, NULL, NULL, 10000);
		const char *a = rc ? "no answer" : answer_name(session_admin_arg(s, (unsigned)server));
		if (json)
			printf("{\"server\":%" PRIu64 ",\"txn\":\"%" PRIx64 "\",\"answer\":\"%s\"}\n",
			       server, id, a);
		else
			printf("server %" PRIu64 ", txn %" PRIx64 ": %s\n", server, id, a);
	} else {
		uint64_t rnd = clock_now_ns() | 1, t0 = clock_now_ns(), done = 0;
		while (done < random_n && rc == 0) {
			unsigned n = (unsigned)MIN(random_n - done, (uint64_t)256);
			rc = ask_batch(s, (unsigned)server, n, &rnd);
			if (rc == 0)
				done += n;
		}
		double secs = (double)(clock_now_ns() - t0) / 1e9;
		if (json)
			printf("{\"server\":%" PRIu64 ",\"asked\":%" PRIu64 ",\"seconds\":%.3f}\n",
			       server, done, secs);
		else
			printf("server %" PRIu64 ": asked about %" PRIu64 " random ids in %.3f s\n",
			       server, done, secs);
	}
	if (rc)
		log_error("txn-status: %s", lotus_strerror(rc));
out:
	lotus_session_close(s);
	lotus_disconnect(cl);
	return rc ? 1 : 0;
}
