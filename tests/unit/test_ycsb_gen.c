/*
 * test_ycsb_gen - the generators against theory.
 *
 *   rng        xoshiro256** reference outputs, splitmix64 seeding, and
 *              rng_below's lack of modulo bias (n = 3*2^62).
 *   fnvhash64  YCSB's Utils.fnvhash64 on known inputs: constants worked out
 *              from the definition, and a literal transcription of the Java.
 *   zeta       Euler-Maclaurin zeta == term-by-term sum; zeta(10^10, 0.99)
 *              == YCSB's precomputed 26.46902820178302.
 *   uniform    chi-square over every key.
 *   zipfian    theta 0.9 and 0.99: ranks 0 and 1 (exact in Gray's method)
 *              against 1/(i+1)^theta/zetan within 4 sigma; a chi-square of the
 *              top ranks against Gray's own law; and every rank / log-bin
 *              against the ideal zipf law within Gray's known bias.
 *   scrambled  the top keys are fnvhash64(rank) % records, with the zipfian
 *              rank frequencies (over 10^10+1 items, zetan 26.469...).
 *   latest     the most frequent key is the latest id; it follows inserts.
 *
 * Deterministic seeds; about 3 s.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "common/ycsb_gen.h"
#include "check.h"

/* Defined in ycsb_gen.c (not yet declared in ycsb_gen.h). */
uint64_t ycsb_fnvhash64(uint64_t v);


/* Chi-square acceptance: mean + 4 standard deviations (df + 4 sqrt(2 df)). */
static double chi2_limit(unsigned df)
{
	return df + 4 * sqrt(2.0 * df);
}

/* ---- rng ---- */

static void test_rng(void)
{
	struct rng r = { .s = { 1, 2, 3, 4 } };
	static const uint64_t ref[] = { 11520, 0, 1509978240, 1215971899390074240ULL };
	for (int i = 0; i < 4; i++) {
		uint64_t v = rng_next(&r);
		CHECK(v == ref[i], "xoshiro256** output %d: %llu", i, (unsigned long long)v);
	}
	rng_seed(&r, 0);
	CHECK(r.s[0] == 0xe220a8397b1dcdafULL, "splitmix64(0) seeding: %llx",
	      (unsigned long long)r.s[0]);

	/* Unbiased below n = 3*2^62: P(x < 2^63) = 2/3 (x % n would give 3/4). */
	enum { N = 1000000 };
	rng_seed(&r, 42);
	uint64_t low = 0, n = 3ULL << 62;
	double dsum = 0;
	for (int i = 0; i < N; i++) {
		uint64_t v = rng_below(&r, n);
		CHECK(v < n, "rng_below out of range");
		low += v < (1ULL << 63);
		double d = rng_double(&r);
		CHECK(d >= 0 && d < 1, "rng_double out of range");
		dsum += d;
	}
	double f = (double)low / N;
	printf("rng_below(3*2^62): P(<2^63) = %.4f (theory 0.6667, biased modulo 0.75)\n", f);
	CHECK(fabs(f - 2.0 / 3) < 5 * sqrt(2.0 / 9 / N), "rng_below biased: %f", f);
	CHECK(fabs(dsum / N - 0.5) < 5 * sqrt(1.0 / 12 / N), "rng_double mean %f", dsum / N);
	CHECK(rng_below(&r, 1) == 0 && rng_below(&r, 0) == 0, "rng_below(1), (0)");
}

/* ---- YCSB's fnvhash64 ---- */

/* Utils.fnvhash64 transcribed: Java longs, arithmetic shift, Math.abs. */
static int64_t java_fnvhash64(int64_t val)
{
	int64_t hashval = (int64_t)0xCBF29CE484222325ULL;
	for (int i = 0; i < 8; i++) {
		int64_t octet = val & 0x00ff;
		val = val >> 8;
		hashval = (int64_t)((uint64_t)(hashval ^ octet) * 1099511628211ULL);
	}
	return hashval < 0 ? (int64_t)(0 - (uint64_t)hashval) : hashval;
}

static void test_fnvhash(void)
{
	/* FNV-1a 64 over the 8 little-endian bytes, then |.| as a signed long. */
	static const struct { uint64_t in, raw, out; } known[] = {
		{ 0, 0xa8c7f832281a39c5ULL, 0x573807cdd7e5c63bULL },
		{ 1, 0x89cd31291d2aefa4ULL, 0x7632ced6e2d5105cULL },
		{ 42, 0xff3add6b3789daefULL, 0x00c52294c8762511ULL },
		{ 0x0123456789abcdefULL, 0x37eb3f3347761c55ULL, 0x37eb3f3347761c55ULL },
		{ UINT64_MAX, 0x8cf51a8bfca3883dULL, 0x730ae574035c77c3ULL },
	};
	for (size_t i = 0; i < ARRAY_SIZE(known); i++) {
		uint64_t v = known[i].in;
		unsigned char le[8];
		for (int b = 0; b < 8; b++)
			le[b] = (unsigned char)(v >> (8 * b));
		CHECK(ycsb_fnvhash64(v) == known[i].out, "fnvhash64(%llx) = %llx",
		      (unsigned long long)v, (unsigned long long)ycsb_fnvhash64(v));
		CHECK((uint64_t)java_fnvhash64((int64_t)v) == known[i].out, "java transcription");
		/* common.h's fnv1a64 is the same hash without the abs. */
		CHECK(fnv1a64(le, 8) == known[i].raw, "fnv1a64 raw %llx", (unsigned long long)v);
	}
	struct rng r;
	rng_seed(&r, 7);
	for (int i = 0; i < 100000; i++) {
		uint64_t v = rng_next(&r) >> (i % 64);
		CHECK((uint64_t)java_fnvhash64((int64_t)v) == ycsb_fnvhash64(v), "random %llx",
		      (unsigned long long)v);
	}
	printf("fnvhash64: 0 -> %#llx, 1 -> %#llx, 42 -> %#llx (Java Utils.fnvhash64)\n",
	       (unsigned long long)ycsb_fnvhash64(0), (unsigned long long)ycsb_fnvhash64(1),
	       (unsigned long long)ycsb_fnvhash64(42));
}

/* ---- zeta ---- */

static void test_zeta(void)
{
	static const double thetas[] = { 0.5, 0.9, 0.99, 1.2 };
	for (size_t t = 0; t < ARRAY_SIZE(thetas); t++) {
		double direct = 0;
		for (uint64_t i = 0; i < 5000000; i++)
			direct += 1.0 / pow((double)(i + 1), thetas[t]);
		double fast = zipf_zeta(5000000, thetas[t]);
		CHECK(fabs(fast - direct) / direct < 1e-11, "zeta(5e6, %.2f) %.15f vs %.15f",
		      thetas[t], fast, direct);
	}
	double z = zipf_zeta(10000000000ULL, 0.99);
	printf("zeta(10^10, 0.99) = %.14f (YCSB's ZETAN 26.46902820178302)\n", z);
	CHECK(fabs(z - 26.46902820178302) < 1e-9, "zeta(10^10, 0.99) = %.15f", z);
}

/* ---- uniform ---- */

static void test_uniform(void)
{
	enum { R = 1000, N = 2000000 };
	static uint64_t c[R];
	struct keygen g;
	struct rng r;
	rng_seed(&r, 1);
	keygen_init(&g, DIST_UNIFORM, R, 0.99, NULL);
	for (int i = 0; i < N; i++) {
		uint64_t k = keygen_next(&g, &r);
		if (k >= R) {
			CHECK(0, "uniform key %llu out of range", (unsigned long long)k);
			return;
		}
		c[k]++;
	}
	double e = (double)N / R, chi2 = 0;
	for (int i = 0; i < R; i++)
		chi2 += (c[i] - e) * (c[i] - e) / e;
	printf("uniform: chi2 = %.1f over %d keys (df %d, limit %.1f)\n", chi2, R, R - 1,
	       chi2_limit(R - 1));
	CHECK(chi2 < chi2_limit(R - 1), "uniform chi2 %.1f", chi2);
}

/* ---- zipfian ---- */

/* P(rank k) under Gray's method with z's parameters: the measure of u mapped to k. */
static double gray_p(const struct zipf *z, uint64_t k)
{
	if (k == 0)
		return 1 / z->zetan;
	if (k == 1)
		return (z->zeta2 - 1) / z->zetan;
	double floor_u = z->zeta2 / z->zetan, n = (double)z->items, t = z->theta;
	double lo = 1 - (1 - pow(k / n, 1 - t)) / z->eta;
	double hi = 1 - (1 - pow((k + 1) / n, 1 - t)) / z->eta;
	lo = fmax(lo, floor_u);
	hi = fmax(hi, floor_u);
	return hi > lo ? hi - lo : 0;
}

static double ideal_p(const struct zipf *z, uint64_t k)
{
	return pow((double)(k + 1), -z->theta) / z->zetan;
}

/* Draw N ranks into c[0..K-1] (plus c[K] for the rest). */
static void draw_ranks(const struct zipf *z, uint64_t seed, long n, uint64_t *c, unsigned K)
{
	struct rng r;
	rng_seed(&r, seed);
	memset(c, 0, (K + 1) * sizeof(*c));
	for (long i = 0; i < n; i++) {
		uint64_t k = zipf_next(z, &r);
		c[k < K ? k : K]++;
	}
}

/* Chi-square of counts c[0..K] (c[K] = the rest) against Gray's law. */
static double chi2_gray(const struct zipf *z, const uint64_t *c, unsigned K, long n)
{
	double chi2 = 0, rest = 1;
	for (unsigned k = 0; k < K; k++) {
		double e = gray_p(z, k) * n;
		rest -= gray_p(z, k);
		chi2 += (c[k] - e) * (c[k] - e) / e;
	}
	chi2 += (c[K] - rest * n) * (c[K] - rest * n) / (rest * n);
	return chi2;
}

static void test_zipfian(double theta)
{
	enum { R = 100000, K = 200 };
	const long N = 10000000;
	static uint64_t c[R + 1];
	struct keygen g;
	struct rng r;
	keygen_init(&g, DIST_ZIPFIAN, R, theta, NULL);
	const struct zipf *z = &g.z;
	CHECK(fabs(z->zetan - zipf_zeta(R, theta)) < 1e-12, "zetan");

	rng_seed(&r, 2);
	memset(c, 0, sizeof(c));
	for (long i = 0; i < N; i++) {
		uint64_t k = keygen_next(&g, &r);
		if (k >= R) {
			CHECK(0, "zipfian key out of range");
			return;
		}
		c[k]++;
	}
	printf("zipfian theta %.2f, %d keys, %ld draws, zetan %.6f\n", theta, R, N, z->zetan);
	printf("  rank   ideal 1/(i+1)^t/zetan   Gray's law   measured   meas/ideal\n");
	for (uint64_t k = 0; k < 10; k++) {
		double f = (double)c[k] / N, p = ideal_p(z, k), gp = gray_p(z, k);
		printf("  %4llu   %.6f                %.6f     %.6f   %+.2f%%\n",
		       (unsigned long long)k, p, gp, f, 100 * (f - p) / p);
		double sigma = sqrt(gp * (1 - gp) / N);
		CHECK(fabs(f - gp) < 5 * sigma, "rank %llu vs Gray: %f vs %f",
		      (unsigned long long)k, f, gp);
		/* Ranks 0 and 1 are exact; Gray over-weights ranks 2.. by at most 20%. */
		if (k < 2)
			CHECK(fabs(f - p) < 4 * sigma, "rank %llu vs ideal: %f vs %f",
			      (unsigned long long)k, f, p);
		else
			CHECK(f > p && (f - p) / p < 0.20, "rank %llu: %f vs ideal %f",
			      (unsigned long long)k, f, p);
	}
	/* Log bins from rank 16 on: within 3% of the ideal mass. */
	for (uint64_t b = 16; b < R; b *= 4) {
		uint64_t e = MIN(4 * b, (uint64_t)R), cnt = 0;
		double p = 0;
		for (uint64_t k = b; k < e; k++) {
			cnt += c[k];
			p += ideal_p(z, k);
		}
		double f = (double)cnt / N;
		printf("  ranks [%llu,%llu): ideal %.5f measured %.5f (%+.2f%%)\n",
		       (unsigned long long)b, (unsigned long long)e, p, f, 100 * (f - p) / p);
		CHECK(fabs(f - p) / p < 0.03, "bin [%llu,%llu)", (unsigned long long)b,
		      (unsigned long long)e);
	}
	/* Chi-square over the top K ranks + the rest, against Gray's law. */
	uint64_t top[K + 1];
	memcpy(top, c, K * sizeof(uint64_t));
	top[K] = 0;
	for (int k = K; k < R; k++)
		top[K] += c[k];
	double chi2 = chi2_gray(z, top, K, N);
	printf("  chi2 of top %d ranks vs Gray's law = %.1f (df %d, limit %.1f)\n", K, chi2, K,
	       chi2_limit(K));
	CHECK(chi2 < chi2_limit(K), "zipfian chi2 %.1f", chi2);
}

/* ---- scrambled ---- */

static void test_scrambled(double theta)
{
	enum { R = 100000, TOP = 10 };
	const long N = 10000000;
	static uint64_t c[R];
	struct keygen g;
	struct rng r;
	keygen_init(&g, DIST_SCRAMBLED, R, theta, NULL);
	const struct zipf *z = &g.z;
	CHECK(z->items == 10000000001ULL, "scrambled draws over 10^10+1 items");
	if (theta == 0.99)
		CHECK(z->zetan == 26.46902820178302, "YCSB's precomputed zetan");
	else
		CHECK(fabs(z->zetan - zipf_zeta(10000000001ULL, theta)) < 1e-9, "zetan");

	rng_seed(&r, 3);
	memset(c, 0, sizeof(c));
	for (long i = 0; i < N; i++) {
		uint64_t k = keygen_next(&g, &r);
		if (k >= R) {
			CHECK(0, "scrambled key out of range");
			return;
		}
		c[k]++;
	}

	/* Expected: key fnv(rank)%R gets Gray's P(rank); the rest spreads evenly. */
	double rest = 1, expect_key[TOP];
	uint64_t key[TOP];
	for (int i = 0; i < TOP; i++) {
		key[i] = ycsb_fnvhash64((uint64_t)i) % R;
		rest -= gray_p(z, (uint64_t)i);
	}
	for (int i = 0; i < TOP; i++) {
		expect_key[i] = rest / R;
		for (int j = 0; j < TOP; j++)
			if (key[j] == key[i])
				expect_key[i] += gray_p(z, (uint64_t)j);
	}

	/* The unscrambled generator's rank counts: the multiset to match. */
	uint64_t rank_cnt[TOP + 1];
	draw_ranks(z, 4, N, rank_cnt, TOP);

	/* The most popular key is fnv(0) % R, not 0. */
	uint64_t best = 0;
	for (uint64_t k = 1; k < R; k++)
		if (c[k] > c[best])
			best = k;
	CHECK(best == key[0] && best != 0, "most popular key %llu, expected %llu",
	      (unsigned long long)best, (unsigned long long)key[0]);

	printf("scrambled theta %.2f, %d keys, zetan %.6f: most popular key %llu\n", theta, R,
	       z->zetan, (unsigned long long)best);
	printf("  rank  key = fnv(rank)%%R   expected   measured   zipfian rank freq\n");
	int contiguous = 1;
	for (int i = 0; i < TOP; i++) {
		double f = (double)c[key[i]] / N, e = expect_key[i];
		double fz = (double)rank_cnt[i] / N;
		printf("  %4d  %8llu           %.6f   %.6f   %.6f\n", i,
		       (unsigned long long)key[i], e, f, fz);
		double sigma = sqrt(e * (1 - e) / N);
		/* Background (other ranks that hash here) varies by key: allow +-50%. */
		CHECK(fabs(f - e) < 5 * sigma + 0.5 * rest / R, "key of rank %d: %f vs %f", i, f, e);
		CHECK(fabs(f - fz) < 7 * sigma + 0.5 * rest / R, "rank %d vs zipfian %f vs %f", i,
		      f, fz);
		contiguous &= key[i] == (uint64_t)i;
	}
	CHECK(!contiguous, "popular keys not spread");
}

/* ---- latest ---- */

static void test_latest(void)
{
	const long N = 2000000;
	static uint64_t c[5000];
	_Atomic uint64_t inserted = 1000;
	struct keygen g;
	struct rng r;
	rng_seed(&r, 5);
	keygen_init(&g, DIST_LATEST, 1000, 0.99, &inserted);

	for (int round = 0; round < 2; round++) {
		uint64_t n = atomic_load(&inserted), max = n - 1;
		memset(c, 0, sizeof(c));
		for (long i = 0; i < N; i++) {
			uint64_t k = keygen_next(&g, &r);
			if (k >= n) {
				CHECK(0, "latest key %llu >= %llu", (unsigned long long)k,
				      (unsigned long long)n);
				return;
			}
			c[k]++;
		}
		uint64_t best = 0;
		for (uint64_t k = 1; k < n; k++)
			if (c[k] > c[best])
				best = k;
		CHECK(best == max, "latest: most frequent %llu, expected %llu",
		      (unsigned long long)best, (unsigned long long)max);
		CHECK(g.z.items == max, "zipfian over max items");
		CHECK(fabs(g.z.zetan - zipf_zeta(max, 0.99)) < 1e-10, "incremental zetan");
		printf("latest: %llu inserted, most frequent key %llu:", (unsigned long long)n,
		       (unsigned long long)best);
		for (uint64_t j = 0; j < 3; j++) {
			double f = (double)c[max - j] / N, p = gray_p(&g.z, j);
			printf(" key %llu %.4f (theory %.4f)", (unsigned long long)(max - j), f, p);
			CHECK(fabs(f - p) < 5 * sqrt(p * (1 - p) / N), "latest rank %llu",
			      (unsigned long long)j);
		}
		printf("\n");
		atomic_store(&inserted, 5000);        /* inserts happened */
	}
}

int main(void)
{
	enum key_dist d;
	CHECK(keygen_parse_dist("scrambled", &d) == 0 && d == DIST_SCRAMBLED, "parse");
	CHECK(keygen_parse_dist("hotspot", &d) < 0, "parse unknown");
	CHECK(strcmp(keygen_dist_name(DIST_LATEST), "latest") == 0, "name");

	test_rng();
	test_fnvhash();
	test_zeta();
	test_uniform();
	test_zipfian(0.9);
	test_zipfian(0.99);
	test_scrambled(0.99);
	test_scrambled(0.9);
	test_latest();
	printf("test_ycsb_gen: ok\n");
	return 0;
}
