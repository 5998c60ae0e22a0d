/*
 * test_durable_restart.c - memory servers with --durability sync keep every
 * acknowledged commit across restarts:
 *   1. a local cluster (lotus_options.durability/data_dir, 2 servers) takes
 *      a few thousand inserts, updates and deletes; kill -9 both servers;
 *   2. a new local cluster on the same directories reads everything back,
 *      byte-exact against what was acknowledged; then a clean stop (SIGTERM:
 *      final checkpoint);
 *   3. standalone servers on the same directories with a small
 *      --checkpoint-log: nothing left to replay after the clean stop; more
 *      changes, several checkpoints; kill -9; restart and compare again.
 */
#include "compute/cluster.h"
#include "test_durable_util.h"

static uint32_t model[DT_KEYS];
static uint32_t next_ver;
static unsigned seed = 7;

static void load_and_change(lotus_session_t *s, lotus_table_t tb, unsigned inserts,
			    unsigned txns)
{
	unsigned char k[8], v[DT_VMAX];
	lotus_txn_t *t;
	CHECK_RC(lotus_txn_begin(s, &t));
	for (uint64_t key = 0; key < inserts; key += 16) {
		uint32_t vers[16];
		lotus_txn_recycle(t);
		for (uint64_t i = 0; i < 16 && key + i < inserts; i++) {
			key_from_u64(key + i, k);
			vers[i] = ++next_ver;
			lotus_txn_insert(t, tb, k, 8, v, dt_value(key + i, vers[i], v));
		}
		CHECK_RC(lotus_txn_commit(t));
		for (uint64_t i = 0; i < 16 && key + i < inserts; i++)
			model[key + i] = vers[i];
	}
	lotus_txn_free(t);
	for (unsigned i = 0; i < txns; i++)
		CHECK_RC(dt_random_txn(s, tb, model, &next_ver, 1 + i % 12, &seed));
}

static void verify(lotus_cluster_t *c, const char *when)
{
	lotus_session_t *s;
	lotus_table_t tb;
	unsigned present = 0;
	CHECK_RC(lotus_session_open(c, &s));
	CHECK_RC(lotus_table_create(s, "durable", DT_VMAX, &tb));
	dt_scan_all(s, tb, dt_check_exact, model);
	for (unsigned i = 0; i < DT_KEYS; i++)
		present += model[i] != 0;
	fprintf(stderr, "%s: all %u keys as acknowledged (%u present)\n", when, DT_KEYS, present);
	lotus_session_close(s);
}

static unsigned manifest_seq(const char *dir)
{
	char path[700], line[256];
	unsigned seq = 0;
	snprintf(path, sizeof(path), "%s/MANIFEST", dir);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "seq %u", &seq) == 1)
			break;
	if (f)
		fclose(f);
	return seq;
}

int main(void)
{
	const char *base = dt_setup();
	struct lotus_options o;
	lotus_cluster_t *c;
	lotus_session_t *s;
	lotus_table_t tb;

	/* 1. local cluster, sync; kill -9 */
	lotus_options_init(&o);
	o.local_servers = 2;
	o.transport = "tcp";
	o.server_threads = 1;
	o.server_memory = 64ULL << 20;
	o.durability = "sync";
	o.data_dir = base;
	CHECK_RC(lotus_connect(&o, &c));
	CHECK_RC(lotus_session_open(c, &s));
	CHECK_RC(lotus_table_create(s, "durable", DT_VMAX, &tb));
	load_and_change(s, tb, 3000, 300);
	for (unsigned i = 0; i < 2; i++)
		kill(c->servers[i].pid, SIGKILL);
	lotus_session_close(s);
	lotus_disconnect(c);

	/* 2. the same directories, a new local cluster; then a clean stop */
	CHECK_RC(lotus_connect(&o, &c));
	verify(c, "after kill -9");
	CHECK_RC(lotus_session_open(c, &s));
	CHECK_RC(lotus_table_create(s, "durable", DT_VMAX, &tb));
	load_and_change(s, tb, 0, 100);
	lotus_session_close(s);
	lotus_disconnect(c);   /* SIGTERM: final checkpoint */

	/* 3. standalone servers, small checkpoint trigger */
	static struct dsrv sv[2];
	const char *args[] = { "--durability", "sync", "--checkpoint-log", "128K", NULL };
	for (unsigned i = 0; i < 2; i++) {
		sv[i].id = i;
		snprintf(sv[i].dir, sizeof(sv[i].dir), "%s/ms%u", base, i);
		CHECK(dsrv_start(&sv[i], args, NULL) == 0);
		fprintf(stderr, "after SIGTERM, server %u: %s", i, sv[i].ready);
		CHECK(dsrv_ready_u64(&sv[i], "txns") == 0);       /* the checkpoint had it all */
		CHECK(dsrv_ready_u64(&sv[i], "ckpt_records") > 0);
	}
	c = dt_connect(sv, 2);
	verify(c, "after SIGTERM");
	unsigned seq0[2] = { manifest_seq(sv[0].dir), manifest_seq(sv[1].dir) };
	CHECK_RC(lotus_session_open(c, &s));
	CHECK_RC(lotus_table_create(s, "durable", DT_VMAX, &tb));
	load_and_change(s, tb, 0, 500);
	lotus_session_close(s);
	for (unsigned i = 0; i < 2; i++) {
		unsigned seq = manifest_seq(sv[i].dir);
		for (int w = 0; w < 60 && seq < seq0[i] + 2; w++) {  /* the last one may run */
			usleep(50000);
			seq = manifest_seq(sv[i].dir);
		}
		fprintf(stderr, "server %u: checkpoints %u -> %u\n", i, seq0[i], seq);
		CHECK(seq >= seq0[i] + 2);
		dsrv_stop(&sv[i], SIGKILL);
	}
	lotus_disconnect(c);
	for (unsigned i = 0; i < 2; i++) {
		CHECK(dsrv_start(&sv[i], args, NULL) == 0);
		fprintf(stderr, "after checkpoints and kill -9, server %u: %s", i, sv[i].ready);
		CHECK(dsrv_ready_u64(&sv[i], "pages") > 0);
	}
	c = dt_connect(sv, 2);
	verify(c, "after checkpoints and kill -9");
	lotus_disconnect(c);
	for (unsigned i = 0; i < 2; i++)
		dsrv_stop(&sv[i], SIGTERM);
	printf("ok\n");
	return 0;
}
