/*
 * ycsb_gen.h - random numbers and YCSB's key generators, faithful to YCSB's
 * own (site.ycsb.generator.*): uniform, zipfian (Gray et al., "Quickly
 * generating billion-record synthetic databases", any theta in (0,1) and >1),
 * scrambled zipfian (FNV-1a 64 of the zipfian draw), and latest (skewed
 * towards the most recently inserted key).
 *
 * Threads: a generator is per thread (no locks), except the insert counter
 * used by `latest`, which is shared and atomic.
 */
#ifndef LOTUS_YCSB_GEN_H
#define LOTUS_YCSB_GEN_H
#include <stdint.h>

struct rng { uint64_t s[4]; };       /* xoshiro256** */
void rng_seed(struct rng *r, uint64_t seed);
uint64_t rng_next(struct rng *r);
uint64_t rng_below(struct rng *r, uint64_t n);   /* uniform in [0, n), unbiased */
double rng_double(struct rng *r);                /* uniform in [0, 1) */

struct zipf {
	uint64_t items;       /* draws fall in [0, items) */
	double theta, alpha, zetan, eta, zeta2;
};
/* zeta costs about 2^20 terms plus a closed-form (Euler-Maclaurin) tail, for any
 * item count; zipf_init_zetan reuses a known value. */
void zipf_init(struct zipf *z, uint64_t items, double theta);
void zipf_init_zetan(struct zipf *z, uint64_t items, double theta, double zetan);
uint64_t zipf_next(const struct zipf *z, struct rng *r);  /* 0 is the most popular */
double zipf_zeta(uint64_t n, double theta);

enum key_dist { DIST_UNIFORM, DIST_ZIPFIAN, DIST_SCRAMBLED, DIST_LATEST };
struct keygen {
	enum key_dist dist;
	uint64_t records;               /* key space at load time */
	struct zipf z;
	_Atomic uint64_t *insert_count; /* shared: records inserted so far (latest, inserts) */
};
/* dist names: "uniform", "zipfian", "scrambled", "latest".  -EINVAL if unknown. */
int keygen_parse_dist(const char *name, enum key_dist *out);
const char *keygen_dist_name(enum key_dist d);
void keygen_init(struct keygen *g, enum key_dist d, uint64_t records, double theta,
		 _Atomic uint64_t *insert_count);
uint64_t keygen_next(struct keygen *g, struct rng *r);    /* a key id */
/* YCSB's FNVhash64 of a long (low byte first, absolute value as a Java long). */
uint64_t ycsb_fnvhash64(uint64_t v);

#endif
