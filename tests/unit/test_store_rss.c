/*
 * test_store_rss.c - memory target: RSS per record with 8-byte keys and
 * 1 KiB values must be at most 1.3x the raw data (8 + 1024 bytes a record).
 *
 * Loads LOTUS_RSS_RECORDS records (default 1,000,000) in a shuffled key order
 * (so index leaves are split at random, not only appended), reads VmRSS from
 * /proc/self/status before the store is created and after the load, and prints
 * the ratio, the index's share, and the load rate.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common/common.h"
#include "store/store.h"
#include "check.h"

static long vm_rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void)
{
	const char *e = getenv("LOTUS_RSS_RECORDS");
	uint64_t n = e ? strtoull(e, NULL, 10) : 1000000;
	static unsigned char val[1024];
	uint32_t *ids = malloc(n * sizeof(*ids));
	store_t *st;
	uint16_t t;

	if (!ids || n < 1000)
		return 77;
	for (uint64_t i = 0; i < n; i++)
		ids[i] = (uint32_t)i;
	uint64_t seed = 12345;
	for (uint64_t i = n - 1; i > 0; i--) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t j = (seed >> 33) % (i + 1);
		uint32_t x = ids[i];
		ids[i] = ids[j];
		ids[j] = x;
	}
	memset(val, 'v', sizeof(val));
	long before = vm_rss_kib();
	if (before < 0)
		return 77;
	int rc = store_create((size_t)(n * 1.5 * 1032) + (64u << 20), 0, &st);
	if (rc) {
		printf("skip: store_create: %s\n", lotus_strerror(rc));
		return 77;
	}
	if (store_table_create(st, "usertable", 1024, &t) != 0)
		return 1;
	double t0 = now_s();
	for (uint64_t i = 0; i < n; i++) {
		unsigned char key[8];
		key_from_u64(ids[i], key);
		val[0] = (unsigned char)i;
		if ((rc = store_insert(st, t, key, 8, val, sizeof(val), NULL)) != 0) {
			printf("insert %llu: %s\n", (unsigned long long)i, lotus_strerror(rc));
			return 1;
		}
	}
	double secs = now_s() - t0;
	long after = vm_rss_kib();
	struct store_stats s;
	store_stats(st, &s);
	double raw = (double)n * (8 + 1024);
	double used = (double)(after - before) * 1024;
	double ratio = used / raw;
	printf("records %llu  raw %.1f MiB  rss +%.1f MiB  ratio %.3f (target <= 1.3)\n",
	       (unsigned long long)n, raw / 1048576, used / 1048576, ratio);
	printf("pages %llu (%.1f MiB)  index %.1f MiB  load %.2f M inserts/s\n",
	       (unsigned long long)s.pages_used, s.pages_used * 8192.0 / 1048576,
	       s.index_bytes / 1048576.0, n / secs / 1e6);
	int ok = s.records == n && ratio <= 1.3;
	store_destroy(st);
	free(ids);
	printf(ok ? "ok\n" : "FAILED\n");
	return ok ? 0 : 1;
}
