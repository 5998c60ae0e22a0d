/*
 * ycsb_gen.c - random numbers and YCSB's key choosers, following YCSB's Java
 * generators (site.ycsb.generator) so that "workload A, zipfian" here skews
 * the same way it does in YCSB.
 *
 * rng        xoshiro256** (Blackman & Vigna), state filled by splitmix64.
 *            rng_below() is Lemire's multiply-shift with rejection: unbiased,
 *            unlike YCSB's UniformLongGenerator (abs(nextLong()) % n), whose
 *            bias is below 2^-40 for our key counts anyway.
 *
 * zipfian    Gray et al., SIGMOD '94, exactly as ZipfianGenerator.nextLong():
 *              uz = u * zetan;  uz < 1 -> 0;  uz < 1 + 0.5^theta -> 1;
 *              else floor(items * (eta*u - eta + 1)^alpha)
 *            with alpha = 1/(1-theta), zeta2 = zeta(2, theta) and
 *            eta = (1 - (2/items)^(1-theta)) / (1 - zeta2/zetan).
 *            Rank 0 is the most popular.  Any theta > 0 except 1.  The result
 *            is clamped to items-1 (YCSB can return `items` when u rounds
 *            to 1; we never do).
 *
 * zeta       zetan = sum_{i=1..n} i^-theta.  YCSB sums all n terms (over a
 *            minute for 10^8 items); zipf_zeta() sums the first 2^20 terms
 *            the same way and adds the rest by Euler-Maclaurin (integral,
 *            end-point and two derivative corrections), which agrees with the
 *            full sum to ~1e-13 relative.  Cost: ~2^20 pow() calls, about
 *            20 ms, whatever n is.
 *
 * scrambled  ScrambledZipfianGenerator: a zipfian draw over ITEM_COUNT+1 =
 *            10^10+1 items, then fnvhash64(draw) % records.  For theta 0.99
 *            YCSB uses the precomputed zetan 26.46902820178302 (= zeta of
 *            10^10 items); so do we.  For any other theta YCSB recomputes
 *            zeta over those items (hours); we compute the same number with
 *            zipf_zeta().  (Newer YCSB revisions set ITEM_COUNT to 10^16 but
 *            kept the 10^10 zetan; we keep the consistent 10^10 pair.)
 *            fnvhash64 is YCSB's Utils.fnvhash64: FNV-1a 64 over the 8 bytes
 *            of the value, low byte first, then the absolute value as a Java
 *            long.  That differs from common.h's fnv1a64() by the abs.
 *
 * latest     SkewedLatestGenerator: max = the latest inserted id
 *            (insert_count - 1); next = max - zipfian(max items), so the
 *            result is in [1, max] (key 0 is drawn only while it is the
 *            only key, as in YCSB).  When inserts raise max, zetan grows by
 *            the new terms (YCSB's incremental zeta) and eta is recomputed
 *            for the new count (YCSB keeps the first count in eta's
 *            (2/items) term, an error of a few ppm we do not copy).
 *
 * Threads: a struct keygen and a struct rng belong to one thread; only
 * *insert_count is shared (read with acquire).
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include "common/common.h"
#include "common/ycsb_gen.h"

/* ScrambledZipfianGenerator's constants. */
#define SCRAMBLED_ITEM_COUNT 10000000000ULL
#define SCRAMBLED_THETA      0.99
#define SCRAMBLED_ZETAN      26.46902820178302

/* zipf_zeta(): terms summed one by one before Euler-Maclaurin takes over. */
#define ZETA_EXACT_TERMS     (1ULL << 20)

/* ---- rng -------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

void rng_seed(struct rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

uint64_t rng_next(struct rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

/* Lemire, "Fast random integer generation in an interval" (2019). */
uint64_t rng_below(struct rng *r, uint64_t n)
{
	if (unlikely(n == 0))
		return 0;
	unsigned __int128 m = (unsigned __int128)rng_next(r) * n;
	uint64_t low = (uint64_t)m;
	if (unlikely(low < n)) {
		uint64_t threshold = -n % n;    /* 2^64 mod n */
		while (low < threshold) {
			m = (unsigned __int128)rng_next(r) * n;
			low = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

double rng_double(struct rng *r)
{
	return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* ---- zipfian ---------------------------------------------------------- */

/* sum_{i=st+1..n} i^-theta added to sum, term by term as YCSB does. */
static double zeta_terms(uint64_t st, uint64_t n, double theta, double sum)
{
	for (uint64_t i = st; i < n; i++)
		sum += 1.0 / pow((double)(i + 1), theta);
	return sum;
}

/* sum_{i=a..b} i^-theta by Euler-Maclaurin; a should be >= 2^20. */
static double zeta_tail(double a, double b, double theta)
{
	double one = 1.0 - theta;
	double integral = one == 0 ? log(b / a)
				   : pow(a, one) * expm1(one * log(b / a)) / one;
	double fa = pow(a, -theta), fb = pow(b, -theta);
	double d1a = -theta * fa / a, d1b = -theta * fb / b;          /* f'   */
	double k3 = -theta * (theta + 1) * (theta + 2);
	double d3a = k3 * fa / (a * a * a), d3b = k3 * fb / (b * b * b); /* f''' */
	return integral + (fa + fb) / 2 + (d1b - d1a) / 12 - (d3b - d3a) / 720;
}

double zipf_zeta(uint64_t n, double theta)
{
	if (n <= ZETA_EXACT_TERMS)
		return zeta_terms(0, n, theta, 0);
	double head = zeta_terms(0, ZETA_EXACT_TERMS, theta, 0);
	return head + zeta_tail((double)ZETA_EXACT_TERMS + 1, (double)n, theta);
}

/* eta for the current item count (the only n-dependent term besides zetan). */
static void zipf_set_eta(struct zipf *z)
{
	if (z->items < 2) {
		z->eta = 0;
		return;
	}
	z->eta = (1 - pow(2.0 / (double)z->items, 1 - z->theta)) / (1 - z->zeta2 / z->zetan);
}

void zipf_init_zetan(struct zipf *z, uint64_t items, double theta, double zetan)
{
	assert(theta > 0 && theta != 1.0);
	z->items = items;
	z->theta = theta;
	z->alpha = 1.0 / (1.0 - theta);
	z->zeta2 = zeta_terms(0, 2, theta, 0);     /* 1 + 0.5^theta */
	z->zetan = zetan;
	zipf_set_eta(z);
}

void zipf_init(struct zipf *z, uint64_t items, double theta)
{
	zipf_init_zetan(z, items, theta, zipf_zeta(items, theta));
}

uint64_t zipf_next(const struct zipf *z, struct rng *r)
{
	if (unlikely(z->items < 2))
		return 0;
	double u = rng_double(r);
	double uz = u * z->zetan;
	if (uz < 1.0)
		return 0;
	if (uz < z->zeta2)
		return 1;
	uint64_t ret = (uint64_t)((double)z->items * pow(z->eta * u - z->eta + 1, z->alpha));
	return ret < z->items ? ret : z->items - 1;
}

/* Grow (or, rarely, reset) z to cover items, the way YCSB's nextLong(itemcount) does. */
static void zipf_resize(struct zipf *z, uint64_t items)
{
	if (items > z->items && items - z->items <= ZETA_EXACT_TERMS)
		z->zetan = zeta_terms(z->items, items, z->theta, z->zetan);
	else
		z->zetan = zipf_zeta(items, z->theta);
	z->items = items;
	zipf_set_eta(z);
}

/* ---- YCSB's hash ------------------------------------------------------ */

/* site.ycsb.Utils.fnvhash64: FNV-1a over the 8 bytes low first, then abs(). */
uint64_t ycsb_fnvhash64(uint64_t v)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (int i = 0; i < 8; i++) {
		h ^= v & 0xff;
		h *= 1099511628211ULL;
		v >>= 8;
	}
	/* Math.abs(long); Long.MIN_VALUE stays 2^63 (Java would keep it negative). */
	return (int64_t)h < 0 ? -h : h;
}

/* ---- key generators --------------------------------------------------- */

static const char *const dist_names[] = {
	[DIST_UNIFORM] = "uniform", [DIST_ZIPFIAN] = "zipfian",
	[DIST_SCRAMBLED] = "scrambled", [DIST_LATEST] = "latest",
};

int keygen_parse_dist(const char *name, enum key_dist *out)
{
	for (size_t i = 0; i < ARRAY_SIZE(dist_names); i++) {
		if (strcmp(name, dist_names[i]) == 0) {
			*out = (enum key_dist)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *keygen_dist_name(enum key_dist d)
{
	return (size_t)d < ARRAY_SIZE(dist_names) ? dist_names[d] : "?";
}

/* The latest inserted key id as this thread sees it. */
static uint64_t latest_id(const struct keygen *g)
{
	uint64_t n = g->insert_count
		? atomic_load_explicit(g->insert_count, memory_order_acquire) : g->records;
	return n ? n - 1 : 0;
}

void keygen_init(struct keygen *g, enum key_dist d, uint64_t records, double theta,
		 _Atomic uint64_t *insert_count)
{
	memset(g, 0, sizeof(*g));
	g->dist = d;
	g->records = records;
	g->insert_count = insert_count;
	switch (d) {
	case DIST_ZIPFIAN:
		zipf_init(&g->z, records, theta);
		break;
	case DIST_SCRAMBLED:
		if (theta == SCRAMBLED_THETA)
			zipf_init_zetan(&g->z, SCRAMBLED_ITEM_COUNT + 1, theta, SCRAMBLED_ZETAN);
		else
			zipf_init(&g->z, SCRAMBLED_ITEM_COUNT + 1, theta);
		break;
	case DIST_LATEST:
		zipf_init(&g->z, latest_id(g), theta);
		break;
	case DIST_UNIFORM:
		break;
	}
}

uint64_t keygen_next(struct keygen *g, struct rng *r)
{
	switch (g->dist) {
	case DIST_UNIFORM:
		return rng_below(r, g->records);
	case DIST_ZIPFIAN:
		return zipf_next(&g->z, r);
	case DIST_SCRAMBLED:
		return g->records ? ycsb_fnvhash64(zipf_next(&g->z, r)) % g->records : 0;
	case DIST_LATEST: {
		uint64_t max = latest_id(g);
		if (max != g->z.items)
			zipf_resize(&g->z, max);
		return max - (max ? zipf_next(&g->z, r) : 0);
	}
	}
	return 0;
}
