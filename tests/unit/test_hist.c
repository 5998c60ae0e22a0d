/*
 * test_hist - percentiles agree with the exact order statistics of random
 * data to within 1%, over several magnitudes; merge equals recording all
 * samples in one histogram; edge cases (empty, p = 0 / 100, huge values).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/hist.h"
#include "check.h"


static uint64_t rs = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void)                  /* splitmix64: deterministic */
{
	uint64_t z = (rs += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t exact_pct(const uint64_t *sorted, size_t n, double p)
{
	if (p <= 0)
		return sorted[0];
	double r = p / 100.0 * (double)n;
	size_t k = (size_t)r;
	if ((double)k < r)
		k++;
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return sorted[k - 1];
}

/* A latency-like sample: log-uniform from 1 ns to ~2^span ns. */
static uint64_t sample(unsigned span)
{
	unsigned e = (unsigned)(rnd() % span);
	return (1ULL << e) + rnd() % (1ULL << e);
}

static void check_against_exact(const struct hist *h, uint64_t *v, size_t n,
				const char *what)
{
	static const double ps[] = { 0, 1, 10, 25, 50, 75, 90, 95, 99, 99.9,
				     99.99, 100 };
	qsort(v, n, sizeof(*v), cmp_u64);
	double worst = 0;
	for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
		uint64_t want = exact_pct(v, n, ps[i]);
		uint64_t got = hist_percentile(h, ps[i]);
		double err = want ? (double)(got > want ? got - want : want - got) / (double)want
				  : (double)got;
		if (err > worst)
			worst = err;
		CHECK(err <= 0.01, "%s p%g: got %llu want %llu (err %.4f)", what, ps[i],
		      (unsigned long long)got, (unsigned long long)want, err);
	}
	printf("%s: n=%zu worst relative error %.5f\n", what, n, worst);
}

int main(void)
{
	enum { N = 1000000 };
	uint64_t *all = malloc(N * sizeof(*all));
	uint64_t *part = malloc(N * sizeof(*part));
	static struct hist h, a, b, merged, empty;
	if (!all || !part)
		return 77;

	/* 1. Random latency-like data over 1 ns .. ~1 s. */
	hist_init(&h);
	long double sum = 0;
	for (size_t i = 0; i < N; i++) {
		all[i] = sample(30);
		sum += all[i];
		hist_record(&h, all[i]);
	}
	CHECK(h.count == N, "count");
	double mean = (double)(sum / N);
	CHECK(hist_mean(&h) > mean * 0.999999 && hist_mean(&h) < mean * 1.000001,
	      "mean %f vs %f", hist_mean(&h), mean);
	check_against_exact(&h, all, N, "log-uniform");

	/* 2. Narrow data (mostly in the exact region and just above). */
	hist_init(&h);
	for (size_t i = 0; i < N; i++) {
		all[i] = 50 + rnd() % 2000;
		hist_record(&h, all[i]);
	}
	check_against_exact(&h, all, N, "uniform 50..2049");

	/* 3. Merge: two halves merged == one histogram of everything. */
	hist_init(&a);
	hist_init(&b);
	hist_init(&h);
	for (size_t i = 0; i < N; i++) {
		all[i] = sample(40);
		hist_record(i & 1 ? &a : &b, all[i]);
		hist_record(&h, all[i]);
		part[i] = all[i];
	}
	hist_init(&merged);
	hist_merge(&merged, &a);
	hist_merge(&merged, &b);
	CHECK(memcmp(&merged, &h, sizeof(h)) == 0, "merge differs from direct recording");
	CHECK(merged.count == N && merged.min == h.min && merged.max == h.max, "merge stats");
	check_against_exact(&merged, part, N, "merged");

	/* 4. Edges. */
	hist_init(&empty);
	CHECK(hist_percentile(&empty, 50) == 0 && hist_mean(&empty) == 0, "empty");
	hist_merge(&h, &empty);
	CHECK(h.count == N, "merging empty changes nothing");
	hist_init(&h);
	hist_record(&h, 0);
	hist_record(&h, UINT64_MAX);
	hist_record(&h, 1ULL << 63);
	CHECK(hist_percentile(&h, 0) == 0, "p0 of {0,..}");
	CHECK(hist_percentile(&h, 100) == UINT64_MAX, "p100 = max");
	uint64_t p50 = hist_percentile(&h, 50);
	CHECK(p50 >= (1ULL << 63) && p50 - (1ULL << 63) <= (1ULL << 63) / 100,
	      "p50 of huge value %llu", (unsigned long long)p50);
	hist_init(&h);
	for (uint64_t v = 0; v < 128; v++)
		hist_record(&h, v);
	CHECK(hist_percentile(&h, 50) == 63, "small values are exact");

	free(all);
	free(part);
	printf("test_hist: ok\n");
	return 0;
}
