/*
 * hist.c - log-linear latency histogram (the HdrHistogram layout, fixed size).
 *
 * Values below 2^SUB (SUB = HIST_SUB_BITS = 7, so 128) get one bucket each.
 * Above that, every power-of-two range [2^e, 2^(e+1)) is split into 2^SUB
 * equal sub-buckets, so a bucket is at most 1/128 of its lower bound wide.
 * A percentile reports the middle of its bucket (clamped to [min, max]),
 * which is within 1/256 (~0.4%) of every value the bucket holds.
 *
 *   index(v) = v                                   v < 2^SUB
 *            = (e - SUB + 1) << SUB  |  (v >> (e - SUB)) - 2^SUB
 *                                                  e = floor(log2 v) >= SUB
 *
 * The largest index (v near 2^64) is (64 - SUB) << SUB | (2^SUB - 1), below
 * HIST_BUCKETS.  Recording never allocates; count/sum/min/max are exact.
 *
 * Threads: a histogram belongs to one thread; hist_merge() combines them
 * afterwards.  Bucket counters are 32-bit; merge saturates rather than wraps.
 */
#include <assert.h>
#include <string.h>
#include "common/hist.h"

#define SUB      HIST_SUB_BITS
#define SUB_N    (1u << SUB)

static_assert(((64 - SUB) << SUB | (SUB_N - 1)) < HIST_BUCKETS,
	      "HIST_BUCKETS too small for 64-bit values");

static unsigned bucket_of(uint64_t v)
{
	if (v < SUB_N)
		return (unsigned)v;
	unsigned e = 63 - (unsigned)__builtin_clzll(v);
	return (e - SUB + 1) << SUB | (unsigned)((v >> (e - SUB)) - SUB_N);
}

/* Smallest value in bucket i, and the bucket's width. */
static uint64_t bucket_low(unsigned i, uint64_t *width)
{
	if (i < SUB_N) {
		*width = 1;
		return i;
	}
	unsigned group = i >> SUB;          /* = e - SUB + 1, >= 1 */
	uint64_t sub = i & (SUB_N - 1);
	*width = 1ULL << (group - 1);
	return (SUB_N + sub) << (group - 1);
}

void hist_init(struct hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

void hist_record(struct hist *h, uint64_t v)
{
	uint32_t *b = &h->b[bucket_of(v)];
	if (*b != UINT32_MAX)
		(*b)++;
	h->count++;
	h->sum += v;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
	if (!src->count)
		return;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		uint64_t s = (uint64_t)dst->b[i] + src->b[i];
		dst->b[i] = s > UINT32_MAX ? UINT32_MAX : (uint32_t)s;
	}
	dst->count += src->count;
	dst->sum += src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
}

/*
 * The value of rank ceil(p/100 * count) (1-based) in sorted order, to within
 * a bucket: p = 0 gives min and p = 100 gives max exactly.
 */
uint64_t hist_percentile(const struct hist *h, double p)
{
	if (!h->count)
		return 0;
	if (!(p > 0))
		return h->min;
	if (p >= 100)
		return h->max;
	double want_d = p / 100.0 * (double)h->count;
	uint64_t want = (uint64_t)want_d;
	if ((double)want < want_d)
		want++;
	if (want < 1)
		want = 1;
	uint64_t seen = 0;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		seen += h->b[i];
		if (seen >= want) {
			uint64_t width, low = bucket_low(i, &width);
			uint64_t mid = low + (width - 1) / 2;
			if (mid < h->min)
				mid = h->min;
			if (mid > h->max)
				mid = h->max;
			return mid;
		}
	}
	return h->max;   /* only if saturated buckets lost counts */
}

double hist_mean(const struct hist *h)
{
	return h->count ? (double)h->sum / (double)h->count : 0.0;
}
