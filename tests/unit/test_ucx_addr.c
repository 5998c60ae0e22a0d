/*
 * test_ucx_addr.c - the worker address walk (src/net/ucx_addr.c) against this
 * UCX's own addresses and mutations of them.
 *
 *   1. A worker's own address teaches a shape; a second worker's address of
 *      the same context passes the check; the first's own is refused (its
 *      worker id is the server's).
 *   2. Every truncation and every extension by a byte is refused; so are other
 *      version nibbles and random blobs of any length.
 *   3. Random byte changes never crash the walk (each input in a malloc'd
 *      block of exactly its length, so ASan sees an over-read); the accepted
 *      ones are counted, not judged (their content may be fine).
 *
 * Tried on tcp and on shared memory (UCX_TLS as lotus sets it for sm).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>
#include "common/common.h"
#include "net/ucx_addr.h"
#include "check.h"


static uint64_t rs = 88172645463325252ULL;

static uint64_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

/* check a copy of len bytes of a in a block of exactly that size */
static int check_copy(const struct ucx_addr_shape *s, const void *a, size_t len)
{
	char why[160];
	void *b = malloc(len ? len : 1);
	CHECK(b);
	memcpy(b, a, len);
	int rc = ucx_addr_check(s, b, len, why, sizeof(why));
	free(b);
	return rc;
}

static void run(const char *tls)
{
	ucp_config_t *cfg;
	ucp_context_h ctx;
	ucp_worker_h w1, w2;
	ucp_address_t *a1, *a2;
	size_t l1, l2;
	char why[160];
	CHECK(ucp_config_read(NULL, NULL, &cfg) == UCS_OK);
	CHECK(ucp_config_modify(cfg, "TLS", tls) == UCS_OK);
	ucp_params_t p = { .field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM };
	CHECK(ucp_init(&p, cfg, &ctx) == UCS_OK);
	ucp_config_release(cfg);
	ucp_worker_params_t wp = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
				   .thread_mode = UCS_THREAD_MODE_SINGLE };
	CHECK(ucp_worker_create(ctx, &wp, &w1) == UCS_OK);
	CHECK(ucp_worker_create(ctx, &wp, &w2) == UCS_OK);
	CHECK(ucp_worker_get_address(w1, &a1, &l1) == UCS_OK);
	CHECK(ucp_worker_get_address(w2, &a2, &l2) == UCS_OK);

	struct ucx_addr_shape s;
	memset(&s, 0, sizeof(s));
	CHECK(ucx_addr_learn(&s, a1, l1, why, sizeof(why)) == 0);
	CHECK(check_copy(&s, a2, l2) == 0);
	CHECK(check_copy(&s, a1, l1) != 0);   /* the server's own worker id */

	const uint8_t *b = (const uint8_t *)a2;
	for (size_t n = 0; n < l2; n++)
		CHECK(check_copy(&s, b, n) != 0);
	uint8_t *ext = malloc(l2 + 1);
	CHECK(ext);
	memcpy(ext, b, l2);
	ext[l2] = 0;
	CHECK(check_copy(&s, ext, l2 + 1) != 0);
	for (unsigned v = 0; v < 16; v++) {
		memcpy(ext, b, l2);
		ext[0] = (uint8_t)((b[0] & 0xf0) | v);
		if (ext[0] != b[0])
			CHECK(check_copy(&s, ext, l2) != 0);
	}
	unsigned ok = 0, tries = 20000;
	uint8_t *m = malloc(l2 + 400);
	CHECK(m);
	for (unsigned i = 0; i < tries; i++) {
		size_t len;
		if (i % 4 == 0) {
			len = 1 + rnd() % 400;
			for (size_t k = 0; k < len; k++)
				m[k] = (uint8_t)rnd();
			/* a random blob may get past the header by chance, never
			 * through the whole walk and the comparisons: not asserted */
		} else {
			len = l2;
			memcpy(m, b, l2);
			for (unsigned k = 1 + rnd() % 3; k > 0; k--)
				m[rnd() % l2] = (uint8_t)rnd();
			if (i % 4 == 3)
				len = 1 + rnd() % l2;
		}
		ok += check_copy(&s, m, len) == 0;
	}
	printf("%s: own address %zu bytes; %u of %u random or mutated addresses fit the shape\n",
	       tls, l2, ok, tries);
	free(m);
	free(ext);
	ucp_worker_release_address(w1, a1);
	ucp_worker_release_address(w2, a2);
	ucp_worker_destroy(w1);
	ucp_worker_destroy(w2);
	ucp_cleanup(ctx);
}

int main(void)
{
	run("tcp");
	run("shm,self,tcp");
	printf("ok\n");
	return 0;
}
