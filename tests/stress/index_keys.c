/*
 * index_keys.c - what the B+tree costs per key, with borrowed keys (the key
 * callback reads a record slot, as the store's does) and with owned keys
 * (index_create_owned): memory per key and point-lookup time, side by side.
 *
 *   index_keys [KEYS [SLOT_BYTES [ROUNDS [MODE]]]]   (1000000, 256, 7, both)
 *
 * MODE borrowed or owned times that mode only (for callgrind:
 * --toggle-collect=index_get gives the instructions per get).
 *
 * Key sets: "ycsb24" = "user" + 20 decimal digits of a 64-bit hash of the id
 * (YCSB's key shape, 24 bytes, inserted in id order = random key order),
 * "u64seq" = 8-byte big-endian ids inserted in order (lotus ycsb's keys and
 * load), "u64rand" = the same keys inserted in random order.  The borrowed
 * mode's records are SLOT_BYTES apart, the key at offset 16 like a record
 * header, so a tie costs a record cache line as in the store.
 *
 * Lookups: ROUNDS rounds; each round times KEYS gets of random present keys in
 * each mode in turn (same key sequence), then the same with one load of the
 * record after the get ("get+rec", what store_get's caller does next); the
 * medians of the rounds are printed as ns of thread CPU time per get (the
 * machine may be shared).  The load (one pass, in the order above) is timed
 * too.  One JSON line per key set and mode on stdout.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common/common.h"
#include "store/index.h"

struct set {
	const char *name;
	unsigned klen;
	int shuffle;
};

static unsigned nkeys, slot_bytes, rounds;
static int only = -1;              /* -1 both, 0 borrowed, 1 owned */
static unsigned char *keys;       /* nkeys * 24 */
static unsigned char *recs;       /* nkeys * slot_bytes */
static unsigned klen_cur;
static volatile uint64_t sink;

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);   /* CPU time: the machine is shared */
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static unsigned rec_key_fn(void *ctx, uint64_t val, unsigned char *buf)
{
	(void)ctx;
	memcpy(buf, recs + (size_t)(val % nkeys) * slot_bytes + 16, klen_cur);
	return klen_cur;
}

static void make_keys(const struct set *s)
{
	klen_cur = s->klen;
	for (unsigned i = 0; i < nkeys; i++) {
		unsigned char *k = keys + (size_t)i * 24;
		if (s->klen == 24) {
			char tmp[32];
			snprintf(tmp, sizeof(tmp), "user%020llu", (unsigned long long)mix64(i));
			memcpy(k, tmp, 24);
		} else {
			key_from_u64(i, k);
		}
		memcpy(recs + (size_t)i * slot_bytes + 16, k, s->klen);
	}
}

static int dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), dcmp);
	return v[n / 2];
}

static double time_gets(index_t *ix, const unsigned *probe, int touch)
{
	double t0 = now_ns();
	uint64_t acc = 0;
	for (unsigned i = 0; i < nkeys; i++) {
		uint64_t v;
		unsigned id = probe[i];
		if (index_get(ix, keys + (size_t)id * 24, klen_cur, &v) != 0) {
			fprintf(stderr, "index_keys: key %u missing\n", id);
			exit(1);
		}
		acc += v;
		if (touch)
			acc += recs[(size_t)v * slot_bytes + 16];
	}
	sink = acc;
	return (now_ns() - t0) / nkeys;
}

static void run_set(const struct set *s, const unsigned *perm, const unsigned *probe)
{
	index_t *ix[2];
	double t[2][2][64];

	make_keys(s);
	if (index_create(rec_key_fn, NULL, &ix[0]) || index_create_owned(&ix[1])) {
		fprintf(stderr, "index_keys: out of memory\n");
		exit(1);
	}
	double ins[2];
	for (int m = 0; m < 2; m++) {
		double t0 = now_ns();
		for (unsigned i = 0; i < nkeys; i++) {
			unsigned id = s->shuffle ? perm[i] : i;
			if (index_insert(ix[m], keys + (size_t)id * 24, s->klen, id, NULL)) {
				fprintf(stderr, "index_keys: insert failed\n");
				exit(1);
			}
		}
		ins[m] = (now_ns() - t0) / nkeys;
	}
	for (unsigned r = 0; r < rounds; r++)
		for (int touch = 0; touch < 2; touch++)
			for (int m = 0; m < 2; m++)
				t[m][touch][r] = only < 0 || only == m ? time_gets(ix[m], probe, touch) : 0;
	for (int m = 0; m < 2; m++) {
		size_t b = index_bytes(ix[m]), kb = index_key_bytes(ix[m]);
		printf("{\"keys\":\"%s\",\"key_bytes\":%u,\"mode\":\"%s\",\"n\":%u,"
		       "\"index_bytes\":%zu,\"key_copy_bytes\":%zu,\"bytes_per_key\":%.1f,"
		       "\"insert_ns\":%.1f,\"get_ns\":%.1f,\"get_rec_ns\":%.1f,\"rounds\":%u}\n",
		       s->name, s->klen, m ? "owned" : "borrowed", nkeys, b, kb,
		       (double)b / nkeys, ins[m], median(t[m][0], rounds), median(t[m][1], rounds), rounds);
		fflush(stdout);
		index_destroy(ix[m]);
	}
}

int main(int argc, char **argv)
{
	static const struct set sets[] = {
		{ "ycsb24", 24, 0 }, { "u64seq", 8, 0 }, { "u64rand", 8, 1 },
	};
	nkeys = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : 1000000;
	slot_bytes = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 256;
	rounds = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 0) : 7;
	if (argc > 4)
		only = !strcmp(argv[4], "borrowed") ? 0 : !strcmp(argv[4], "owned") ? 1 :
		       !strcmp(argv[4], "both") ? -1 : -2;
	if (nkeys < 1 || slot_bytes < 48 || rounds < 1 || rounds > 64 || only == -2) {
		fprintf(stderr, "usage: index_keys [KEYS [SLOT_BYTES>=48 [ROUNDS<=64 "
			"[borrowed|owned|both]]]]\n");
		return 2;
	}
	keys = malloc((size_t)nkeys * 24);
	recs = calloc(nkeys, slot_bytes);
	unsigned *perm = malloc(sizeof(unsigned) * nkeys), *probe = malloc(sizeof(unsigned) * nkeys);
	if (!keys || !recs || !perm || !probe) {
		fprintf(stderr, "index_keys: out of memory\n");
		return 1;
	}
	for (unsigned i = 0; i < nkeys; i++)
		perm[i] = i;
	for (unsigned i = nkeys - 1; i > 0; i--) {
		unsigned j = (unsigned)(mix64(i + 12345) % (i + 1)), x = perm[i];
		perm[i] = perm[j];
		perm[j] = x;
	}
	for (unsigned i = 0; i < nkeys; i++)
		probe[i] = (unsigned)(mix64(i ^ 0xabcdefull) % nkeys);
	for (unsigned s = 0; s < sizeof(sets) / sizeof(sets[0]); s++)
		run_set(&sets[s], perm, probe);
	return 0;
}
