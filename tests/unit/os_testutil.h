/*
 * os_testutil.h - the one-sided engine's tests: a local cluster loaded
 * through lotus's two-sided API, and an os_engine on the same servers.
 */
#ifndef LOTUS_OS_TESTUTIL_H
#define LOTUS_OS_TESTUTIL_H
#include "common/common.h"
#include "compute/cluster.h"
#include "onesided/os_engine.h"
#include "onesided/os_layout.h"
#include "testutil.h"

/* Load keys [0, n) of table name with value_of(key) (8 bytes, repeated to vlen). */
static inline void os_test_load(lotus_cluster_t *cl, const char *name, uint64_t n, uint32_t vlen)
{
	lotus_session_t *s;
	lotus_table_t tb;
	lotus_txn_t *t;
	unsigned char k[8], v[1024];
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, name, vlen, &tb));
	CHECK_RC(lotus_txn_begin(s, &t));
	for (uint64_t i = 0; i < n;) {
		CHECK_RC(lotus_txn_recycle(t));
		for (unsigned j = 0; j < 100 && i < n; j++, i++) {
			key_from_u64(i, k);
			for (uint32_t b = 0; b < vlen; b += 8)
				memcpy(v + b, &i, MIN(8u, vlen - b));
			CHECK_RC(lotus_txn_insert(t, tb, k, 8, v, vlen));
		}
		CHECK_RC(lotus_txn_commit(t));
	}
	lotus_txn_free(t);
	lotus_session_close(s);
}

static inline os_engine_t *os_test_engine(lotus_cluster_t *cl, int cc)
{
	const char *hosts[LOTUS_MAX_SERVERS];
	uint16_t ports[LOTUS_MAX_SERVERS];
	for (unsigned i = 0; i < cl->nservers; i++) {
		hosts[i] = cl->servers[i].host;
		ports[i] = cl->servers[i].port;
	}
	struct os_engine_opts o = {
		.transport = lotus_cluster_transport(cl), .nservers = cl->nservers,
		.hosts = hosts, .ports = ports, .cc = cc,
		.secret_file = cl->secret_path[0] ? cl->secret_path : NULL,
	};
	os_engine_t *e;
	CHECK_RC(os_engine_create(&o, &e));
	return e;
}
#endif
