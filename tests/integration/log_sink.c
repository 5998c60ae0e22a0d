/*
 * log_sink.c - a host program that decides where lotus's log lines go
 * (lotus_options.log_fn), written against lotus.h only, for
 * tests/integration/log_sink.sh.
 *
 *   log-sink CONFIG
 *       CONFIG names memory servers that do not listen.  First with a sink:
 *       connect and open a session (which fails: lotus logs why), and print
 *       every line the sink got as "sink LEVEL LINE" on stdout.  Then
 *       disconnect and do the same without a sink: those lines go to
 *       stderr, as a program without a sink sees them.  Exit 0 when the sink
 *       got an error line naming the unreachable server, 1 otherwise, 2 on
 *       bad arguments.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lotus.h"

struct sink {
	pthread_mutex_t mu;       /* the sink is called from any thread */
	char lines[64][1024];
	int level[64];
	unsigned n;
};

static void on_line(enum lotus_log_level level, const char *line, void *arg)
{
	struct sink *k = arg;
	pthread_mutex_lock(&k->mu);
	if (k->n < 64) {
		snprintf(k->lines[k->n], sizeof(k->lines[0]), "%s", line);
		k->level[k->n++] = (int)level;
	}
	pthread_mutex_unlock(&k->mu);
}

/* Connect and open a session; the status of whichever failed (or 0). */
static int try_session(const char *config, struct sink *k)
{
	struct lotus_options o;
	lotus_cluster_t *cl;
	lotus_session_t *s;
	lotus_options_init(&o);
	o.config_path = config;
	o.timeout_ms = 2000;
	if (k) {
		o.log_fn = on_line;
		o.log_arg = k;
	}
	int rc = lotus_connect(&o, &cl);
	if (rc)
		return rc;
	rc = lotus_session_open(cl, &s);
	if (rc == 0)
		lotus_session_close(s);
	lotus_disconnect(cl);
	return rc;
}

int main(int argc, char **argv)
{
	static const char *names[] = { "debug", "info", "warn", "error" };
	static struct sink k = { .mu = PTHREAD_MUTEX_INITIALIZER };
	if (argc != 2) {
		fprintf(stderr, "usage: log-sink CONFIG\n");
		return 2;
	}
	int rc = try_session(argv[1], &k);
	printf("with a sink: %s\n", rc ? lotus_strerror(rc) : "connected (unexpected)");
	int found = 0;
	for (unsigned i = 0; i < k.n; i++) {
		printf("sink %s %s\n", k.level[i] >= 0 && k.level[i] < 4 ? names[k.level[i]] : "?",
		       k.lines[i]);
		found |= k.level[i] == LOTUS_LOG_ERROR && strstr(k.lines[i], "memory server 0") != NULL;
	}
	fflush(stdout);
	unsigned before = k.n;
	rc = try_session(argv[1], NULL);
	printf("without a sink: %s\n", rc ? lotus_strerror(rc) : "connected (unexpected)");
	if (k.n != before) {
		printf("the sink got %u lines after its cluster was disconnected\n", k.n - before);
		return 1;
	}
	return found ? 0 : 1;
}
