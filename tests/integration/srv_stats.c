/*
 * srv_stats.c - print the memory servers' counters, for the tiering tests and
 * scripts/bench-tier.sh; written against lotus.h only.
 *
 *   srv-stats CONFIG [SERVER]
 *       connects with the cluster config CONFIG and prints the STATS object
 *       of every memory server (or only of server SERVER), one JSON object a
 *       line, as lotus_server_stats() returns it.  Exit 0; 1 if a server did
 *       not answer; 2 on bad arguments or when it cannot connect.
 */
#include <stdio.h>
#include <stdlib.h>
#include "lotus.h"

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: srv-stats CONFIG [SERVER]\n");
		return 2;
	}
	struct lotus_options o;
	lotus_options_init(&o);
	o.config_path = argv[1];
	lotus_cluster_t *cl;
	lotus_session_t *s;
	int rc = lotus_connect(&o, &cl);
	if (rc) {
		fprintf(stderr, "srv-stats: %s\n", lotus_strerror(rc));
		return 2;
	}
	rc = lotus_session_open(cl, &s);
	if (rc) {
		fprintf(stderr, "srv-stats: %s\n", lotus_strerror(rc));
		lotus_disconnect(cl);
		return 2;
	}
	unsigned n = lotus_cluster_servers(cl), from = 0, to = n;
	if (argc == 3) {
		char *end;
		unsigned long v = strtoul(argv[2], &end, 10);
		if (*end || v >= n) {
			fprintf(stderr, "srv-stats: no memory server %s (the config has %u)\n",
				argv[2], n);
			lotus_session_close(s);
			lotus_disconnect(cl);
			return 2;
		}
		from = (unsigned)v;
		to = from + 1;
	}
	int ret = 0;
	for (unsigned sv = from; sv < to; sv++) {
		const char *txt = lotus_server_stats(s, sv);
		if (!txt) {
			fprintf(stderr, "srv-stats: memory server %u did not answer\n", sv);
			ret = 1;
			continue;
		}
		printf("%s\n", txt);
	}
	fflush(stdout);
	lotus_session_close(s);
	lotus_disconnect(cl);
	return ret;
}
