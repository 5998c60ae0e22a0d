/*
 * flood.c - a hostile client for one memory server: it speaks the wire
 * protocol through the internal net layer and tries to make the server pin
 * memory or starve its other clients.  Used by tests/unit/test_limits.c (as
 * code) and by hand next to `lotus ycsb` to measure what a flood costs a
 * well-behaved client (docs/net.md, "Limits").
 *
 *   flood HOST PORT MODE [COUNT [SIZE [SECONDS]]]
 *
 * MODE:
 *   big      COUNT messages of SIZE bytes (one WRITEBACK each) sent at once
 *   small    messages of 64 NO_WAIT READs, as fast as it can, for SECONDS
 *   park     one txn X-locks a key, then COUNT older WAIT_DIE txns read it
 *            (each parks in the lock's wait queue), held for SECONDS
 *   amplify  COUNT messages of 65535 READs of one 64 KiB record, replies
 *            read as they come
 *
 * Prints one JSON line: messages sent, replies by status, WIRE_ERRORs, and
 * whether the server closed the connection.  Exit 0 unless it could not
 * connect.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/clock.h"
#include "common/common.h"
#include "../unit/flood.h"

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: flood HOST PORT big|small|park|amplify [COUNT [SIZE [SECONDS]]]\n");
		return 2;
	}
	struct flood_args a = {
		.host = argv[1], .port = (uint16_t)atoi(argv[2]), .mode = argv[3],
		.count = argc > 4 ? strtoull(argv[4], NULL, 0) : 30,
		.size = argc > 5 ? strtoull(argv[5], NULL, 0) : 1u << 20,
		.seconds = argc > 6 ? atof(argv[6]) : 5,
	};
	struct flood_result r;
	int rc = flood_run(&a, &r);
	if (rc) {
		fprintf(stderr, "flood: %s\n", lotus_strerror(rc));
		return 1;
	}
	flood_print(&r, stdout);
	return 0;
}
