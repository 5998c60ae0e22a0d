/*
 * test_limits.c - a memory server bounds what one client can make it hold
 * (docs/net.md, "Limits"), with the default limits, while another client
 * keeps being served.  One server runs as a process of the test
 * (test_procs.h); a hostile client (flood.h) talks the wire protocol to it,
 * and a well-behaved one uses the public API in a thread all along.
 *
 *   oversize  30 messages of 20 MiB (over WIRE_MAX_MSG): the connection is
 *             closed at the first, before its data is fetched
 *   big       30 messages of 15 MiB at once: fetched a few at a time
 *             (backpressure), not all into memory
 *   amplify   4 messages of 65535 READs of a 64 KiB record (16 GiB of
 *             replies asked for): refused with LOTUS_ELIMIT once the
 *             connection's queued replies pass the limit
 *   park      3000 WAIT_DIE reads parked behind one X lock: past 1024 they
 *             are refused with LOTUS_ELIMIT
 *
 * Each: the server's peak RSS (VmHWM, reset before) grows by less than a
 * bound the old code overshot by far (it reached 2 GB); the counter of the
 * limit in the server's stats moved; the well-behaved client committed
 * transactions during the flood; and at the end every value it was told
 * committed reads back.
 *
 * `test_limits flood HOST PORT MODE [COUNT [SIZE [SECONDS]]]` only runs one
 * flood (as tests/stress/flood.c does), for tests/integration/limits_bank.sh.
 */
#include <pthread.h>
#include <stdatomic.h>
#include "test_procs.h"
#include "flood.h"

#define GOOD_KEYS 64

static lotus_cluster_t *cl;
static _Atomic int good_stop;
static _Atomic uint64_t good_commits;
static uint64_t good_value[GOOD_KEYS];   /* last value acknowledged, per key */
static int good_unsure[GOOD_KEYS];       /* a commit's outcome is unknown */
static uint64_t good_errors;

static void *good_client(void *arg)
{
	lotus_session_t *s;
	lotus_table_t tb;
	lotus_txn_t *t;
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "good", 8, &tb));
	CHECK_RC(lotus_txn_begin(s, &t));
	for (uint64_t i = 1; !atomic_load(&good_stop); i++) {
		unsigned k = (unsigned)(i % GOOD_KEYS);
		char key[16];
		snprintf(key, sizeof(key), "g%u", k);
		int rc = lotus_txn_write(t, tb, key, strlen(key), &i, sizeof(i));
		if (rc == 0 && (rc = lotus_txn_commit(t)) == 0) {
			good_value[k] = i;
			good_unsure[k] = 0;
			atomic_fetch_add(&good_commits, 1);
		} else {
			good_errors++;
			if (rc != LOTUS_EABORTED && rc != LOTUS_EPREEMPTED && rc != LOTUS_ELIMIT)
				good_unsure[k] = 1;
			lotus_txn_abort(t);
		}
		CHECK_RC(lotus_txn_recycle(t));
	}
	lotus_txn_free(t);
	lotus_session_close(s);
	return NULL;
}

static void good_verify(void)
{
	lotus_session_t *s;
	lotus_table_t tb;
	lotus_txn_t *t;
	unsigned checked = 0;
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_open(s, "good", &tb));
	CHECK_RC(lotus_txn_begin(s, &t));
	for (unsigned k = 0; k < GOOD_KEYS; k++) {
		char key[16];
		const void *v;
		size_t vlen;
		if (!good_value[k] || good_unsure[k])
			continue;
		snprintf(key, sizeof(key), "g%u", k);
		int op = lotus_txn_read(t, tb, key, strlen(key));
		CHECK_RC(lotus_txn_execute(t));
		CHECK_RC(lotus_txn_result(t, op, &v, &vlen));
		CHECK(vlen == 8 && !memcmp(v, &good_value[k], 8));
		checked++;
	}
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	lotus_session_close(s);
	fprintf(stderr, "good client: %llu commits, %llu failed attempts, %u keys read back\n",
		(unsigned long long)atomic_load(&good_commits), (unsigned long long)good_errors,
		checked);
	CHECK(checked > GOOD_KEYS / 2);
}

static uint64_t peak_kb(pid_t pid)
{
	char path[64], line[256];
	uint64_t kb = 0;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	CHECK(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmHWM:", 6))
			kb = strtoull(line + 6, NULL, 10);
	fclose(f);
	return kb;
}

static void peak_reset(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/clear_refs", (int)pid);
	FILE *f = fopen(path, "w");
	if (f) {
		fputs("5", f);   /* resets the peak RSS to the current RSS */
		fclose(f);
	}
}

static uint64_t stat_u64(const char *key)
{
	lotus_session_t *s;
	char pat[64];
	CHECK_RC(lotus_session_open(cl, &s));
	const char *js = lotus_server_stats(s, 0);
	CHECK(js);
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = strstr(js, pat);
	uint64_t v = p ? strtoull(p + strlen(pat), NULL, 10) : 0;
	if (!p)
		fprintf(stderr, "server stats have no %s: %s\n", key, js);
	lotus_session_close(s);
	return v;   /* a server without the counter fails the check that it moved */
}

struct scenario {
	const char *name, *mode;
	uint64_t count, size;
	double seconds;
	int oversize;
	uint64_t max_growth_kb;
	const char *counter;
};

/* TEST_LIMITS_STALL_MS=N: the server is stopped (SIGSTOP) for N ms as each
 * flood starts, as a loaded machine may stall it; every check must still
 * hold. */
static void *stall_server(void *arg)
{
	unsigned ms = (unsigned)(uintptr_t)arg;
	kill(procs_pid[0], SIGSTOP);
	usleep(ms * 1000u);
	kill(procs_pid[0], SIGCONT);
	return NULL;
}

static void run(const struct scenario *sc, uint16_t port)
{
	const char *stall = getenv("TEST_LIMITS_STALL_MS");
	pthread_t stall_th;
	int stalled = 0;
	pid_t pid = procs_pid[0];
	struct flood_args a = { .host = "127.0.0.1", .port = port, .mode = sc->mode,
				.count = sc->count, .size = sc->size, .seconds = sc->seconds };
	struct flood_result r;
	uint64_t before = stat_u64(sc->counter);
	uint64_t commits = atomic_load(&good_commits);
	peak_reset(pid);
	uint64_t base = peak_kb(pid);
	if (sc->oversize)
		setenv("LOTUS_NET_FAULT", "oversize:1", 1);
	if (stall && atoi(stall) > 0)
		stalled = pthread_create(&stall_th, NULL, stall_server,
					 (void *)(uintptr_t)atoi(stall)) == 0;
	CHECK_RC(flood_run(&a, &r));
	if (stalled)
		pthread_join(stall_th, NULL);
	unsetenv("LOTUS_NET_FAULT");
	uint64_t peak = peak_kb(pid);
	/* the good client must move on while (or right after) the flood ran */
	for (int i = 0; i < 500 && atomic_load(&good_commits) < commits + 10u; i++)
		usleep(10000);
	uint64_t after = stat_u64(sc->counter);
	fprintf(stderr, "%-8s peak RSS %llu -> %llu KiB (bound +%llu), %s %llu -> %llu, "
		"good commits +%llu; flood: ",
		sc->name, (unsigned long long)base, (unsigned long long)peak,
		(unsigned long long)sc->max_growth_kb, sc->counter, (unsigned long long)before,
		(unsigned long long)after,
		(unsigned long long)(atomic_load(&good_commits) - commits));
	flood_print(&r, stderr);
	CHECK(peak < base + sc->max_growth_kb);
	CHECK(atomic_load(&good_commits) >= commits + 10u);
	if (!strcmp(sc->mode, "park") || !strcmp(sc->mode, "amplify"))
		CHECK(flood_status_count(&r, LOTUS_ELIMIT) > 0);
	if (sc->oversize)
		CHECK(r.closed);
	CHECK(after > before);
}

static void on_alarm(int sig)
{
	procs_stop();
	_exit(1);
}

int main(int argc, char **argv)
{
	if (argc >= 5 && !strcmp(argv[1], "flood")) {
		struct flood_args fa = {
			.host = argv[2], .port = (uint16_t)atoi(argv[3]), .mode = argv[4],
			.count = argc > 5 ? strtoull(argv[5], NULL, 0) : 30,
			.size = argc > 6 ? strtoull(argv[6], NULL, 0) : 1u << 20,
			.seconds = argc > 7 ? atof(argv[7]) : 5,
		};
		struct flood_result fr;
		int frc = flood_run(&fa, &fr);
		if (frc == 0)
			flood_print(&fr, stdout);
		return frc ? 1 : 0;
	}
	static const struct scenario scs[] = {
		{ "oversize", "big", 30, 20u << 20, 10, 1, 100 << 10, "too_big_closed" },
		{ "big", "big", 30, 15u << 20, 20, 0, 200 << 10, "rndv_deferred" },
		{ "amplify", "amplify", 4, 0, 20, 0, 400 << 10, "bytes_refused" },
		{ "park", "park", 3000, 0, 3, 0, 100 << 10, "parked_refused" },
	};
	struct lotus_options o;
	pthread_t th;
#if defined(__SANITIZE_ADDRESS__)
	/* An ASan server keeps freed memory in its quarantine (256 MiB by
	 * default), which the RSS bounds below would count as growth: keep it
	 * small, so that they still measure what the server holds. */
	{
		char env[512];
		const char *cur = getenv("ASAN_OPTIONS");
		snprintf(env, sizeof(env), "%s%squarantine_size_mb=8", cur ? cur : "",
			 cur && *cur ? ":" : "");
		setenv("ASAN_OPTIONS", env, 1);
	}
#endif
	const char *config = procs_start(1, NULL);
	signal(SIGALRM, on_alarm);
	alarm(120);
	char line[256];
	unsigned port = 0;
	FILE *f = fopen(config, "r");
	CHECK(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "listen = 127.0.0.1:%u", &port) == 1)
			break;
	fclose(f);
	CHECK(port);
	lotus_options_init(&o);
	o.config_path = config;
	o.timeout_ms = 5000;
	CHECK_RC(lotus_connect(&o, &cl));
	CHECK(pthread_create(&th, NULL, good_client, NULL) == 0);
	const char *only = getenv("TEST_LIMITS_ONLY");   /* one scenario, by name */
	for (size_t i = 0; i < ARRAY_SIZE(scs); i++)
		if (!only || !strcmp(only, scs[i].name))
			run(&scs[i], (uint16_t)port);
	atomic_store(&good_stop, 1);
	pthread_join(th, NULL);
	good_verify();
	lotus_disconnect(cl);
	procs_stop();
	printf("ok\n");
	return 0;
}
