/*
 * hist.h - latency histogram: log-linear buckets (about 1% relative error) from
 * 1 ns to about 1 hour, fixed size, no allocation on record.  Per thread; merge
 * at the end.
 */
#ifndef LOTUS_HIST_H
#define LOTUS_HIST_H
#include <stdint.h>
#define HIST_SUB_BITS 7
#define HIST_BUCKETS  (64 << HIST_SUB_BITS)
struct hist {
	uint64_t count, sum, min, max;
	uint32_t b[HIST_BUCKETS];
};
void hist_init(struct hist *h);
void hist_record(struct hist *h, uint64_t v);
void hist_merge(struct hist *dst, const struct hist *src);
uint64_t hist_percentile(const struct hist *h, double p);   /* p in [0,100] */
double hist_mean(const struct hist *h);
#endif
