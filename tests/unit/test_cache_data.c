/*
 * test_cache_data.c - record cache data entries and write-back.  A model
 * memory server (backing[]) receives write-backs; the test knows the latest
 * value written to every key, and the callback checks that a write-back
 * carries exactly that value.  Covers: hit/miss/truncated reads, dirty
 * write-back on eviction, clean entries dropped silently, fill never
 * replacing a dirty value, flush, drop, value growth within capacity, and a
 * failing callback (the entry stays, the error is counted, nothing is lost).
 */
#include <errno.h>
#include <stdio.h>
#include "common/common.h"
#include "compute/cache.h"
#include "testutil.h"

#define KEYS  400
#define VMAX  1024

struct val { uint32_t len; unsigned char b[VMAX]; };
static struct val latest[KEYS];     /* the last value written to the cache */
static struct val backing[KEYS];    /* the model memory server */
static uint64_t wb_calls[KEYS], wb_total;
static int wb_fail;                 /* the error the callback returns, or 0 */

static void make_val(struct val *v, uint64_t k, uint64_t ver, uint32_t len)
{
	v->len = len;
	for (uint32_t i = 0; i < len; i++)
		v->b[i] = (unsigned char)(k * 131 + ver * 7 + i);
}

static int writeback(void *arg, uint32_t table, const void *key, uint16_t klen,
		     const void *value, uint32_t vlen)
{
	CHECK(arg == &backing && table == 1 && klen == 8);
	uint64_t k = key_to_u64(key);
	CHECK(k < KEYS);
	if (wb_fail)
		return wb_fail;
	CHECK(vlen == latest[k].len && !memcmp(value, latest[k].b, vlen));
	backing[k].len = vlen;
	memcpy(backing[k].b, value, vlen);
	wb_calls[k]++;
	wb_total++;
	return 0;
}

static void reset_model(void)
{
	memset(latest, 0, sizeof(latest));
	memset(backing, 0, sizeof(backing));
	memset(wb_calls, 0, sizeof(wb_calls));
	wb_total = 0;
	wb_fail = 0;
}

static int cwrite(rcache_t *c, uint64_t k, uint64_t ver, uint32_t len)
{
	unsigned char key[8];
	struct val v;
	key_from_u64(k, key);
	make_val(&v, k, ver, len);
	int rc = rcache_data_write(c, 1, key, 8, v.b, v.len);
	if (rc == 0)
		latest[k] = v;
	return rc;
}

/* 1 and the value checked against latest[k], or 0 on a miss. */
static int cread(rcache_t *c, uint64_t k)
{
	unsigned char key[8], buf[VMAX];
	uint32_t vlen;
	key_from_u64(k, key);
	if (!rcache_data_read(c, 1, key, 8, buf, sizeof(buf), &vlen))
		return 0;
	CHECK(vlen == latest[k].len && !memcmp(buf, latest[k].b, vlen));
	return 1;
}

static void test_read_write(void)
{
	rcache_t *c;
	unsigned char key[8], buf[4];
	uint32_t vlen;
	struct rcache_stats st;
	reset_model();
	CHECK(rcache_create(1 << 20, 1.0, 1, writeback, &backing, &c) == 0);
	for (uint64_t k = 0; k < 10; k++)
		CHECK(cwrite(c, k, 1, 100) == 0);
	for (uint64_t k = 0; k < 10; k++)
		CHECK(cread(c, k) == 1);
	CHECK(cread(c, 10) == 0);
	key_from_u64(3, key);
	CHECK(rcache_data_read(c, 1, key, 8, buf, sizeof(buf), &vlen) == 1 && vlen == 100);
	CHECK(!memcmp(buf, latest[3].b, sizeof(buf)));           /* truncated copy */
	/* A fill never replaces a dirty value. */
	CHECK(rcache_data_fill(c, 1, key, 8, "stale", 5) == 0);
	CHECK(cread(c, 3) == 1);
	CHECK(wb_total == 0);
	CHECK(rcache_flush(c) == 10 && wb_total == 10);
	CHECK(rcache_flush(c) == 0 && wb_total == 10);           /* now clean */
	for (uint64_t k = 0; k < 10; k++)
		CHECK(backing[k].len == 100 && !memcmp(backing[k].b, latest[k].b, 100));
	/* Dropped data is forgotten, not written back. */
	CHECK(cwrite(c, 4, 2, 50) == 0);
	key_from_u64(4, key);
	rcache_data_drop(c, 1, key, 8);
	CHECK(cread(c, 4) == 0);
	CHECK(rcache_flush(c) == 0);
	rcache_stats(c, &st);
	CHECK(st.entries == 9 && st.bytes == 9 * rcache_entry_charge(8, 100));
	CHECK(st.writebacks == 10 && st.evictions == 0);
	rcache_destroy(c);
}

/* Many versions of many keys through a small cache: every eviction writes
 * back the latest value (checked in the callback), and after a flush the
 * model holds every key's latest value. */
static void test_evict_writeback(void)
{
	rcache_t *c;
	struct rcache_stats st;
	const uint64_t cap = 20 * rcache_entry_charge(8, 64);
	reset_model();
	CHECK(rcache_create(cap, 1.0, 2, writeback, &backing, &c) == 0);
	uint64_t x = 12345;
	for (uint64_t ver = 1; ver <= 20000; ver++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		uint64_t k = (x >> 33) % 60;
		CHECK(cwrite(c, k, ver, 1 + (uint32_t)(x >> 20) % 64) == 0);
		if (ver % 7 == 0)
			cread(c, (x >> 40) % 60);
		rcache_stats(c, &st);
		CHECK(st.bytes <= cap);
	}
	rcache_stats(c, &st);
	CHECK(st.evictions > 1000 && st.writebacks == wb_total);
	int n = rcache_flush(c);
	CHECK(n >= 0 && (uint64_t)n <= st.entries);
	for (uint64_t k = 0; k < 60; k++)
		CHECK(backing[k].len == latest[k].len &&
		      !memcmp(backing[k].b, latest[k].b, latest[k].len));
	rcache_destroy(c);
}

/* Clean entries are evicted without a callback. */
static void test_clean_evict(void)
{
	rcache_t *c;
	unsigned char key[8], v[32];
	struct rcache_stats st;
	reset_model();
	CHECK(rcache_create(20 * rcache_entry_charge(8, 32), 1.0, 3, writeback, &backing,
			    &c) == 0);
	for (uint64_t k = 0; k < KEYS; k++) {
		key_from_u64(k, key);
		make_val(&latest[k], k, 0, 32);
		memcpy(v, latest[k].b, 32);
		CHECK(rcache_data_fill(c, 1, key, 8, v, 32) == 0);
	}
	rcache_stats(c, &st);
	CHECK(st.entries == 20 && st.evictions == KEYS - 20 && wb_total == 0);
	CHECK(rcache_flush(c) == 0 && wb_total == 0);
	/* A write to a clean entry makes it dirty. */
	uint64_t hit = KEYS;
	for (uint64_t k = 0; k < KEYS && hit == KEYS; k++)
		if (cread(c, k))
			hit = k;
	CHECK(hit < KEYS);
	CHECK(cwrite(c, hit, 1, 32) == 0);
	CHECK(rcache_flush(c) == 1 && wb_calls[hit] == 1);
	rcache_destroy(c);
}

/* A value that grows must still fit the capacity; one larger than the whole
 * cache is refused. */
static void test_growth(void)
{
	rcache_t *c;
	struct rcache_stats st;
	const uint64_t cap = 4 * rcache_entry_charge(8, 128);
	reset_model();
	CHECK(rcache_create(cap, 1.0, 4, writeback, &backing, &c) == 0);
	CHECK(rcache_entry_charge(8, VMAX) > cap);
	for (uint64_t k = 0; k < 4; k++)
		CHECK(cwrite(c, k, 1, 16) == 0);
	for (uint64_t ver = 2; ver < 300; ver++) {
		CHECK(cwrite(c, ver % 8, ver, 16 + (uint32_t)(ver * 37) % 200) == 0);
		rcache_stats(c, &st);
		CHECK(st.bytes <= cap);
	}
	CHECK(cwrite(c, 9, 1, VMAX) == -ENOMEM);           /* larger than the cache */
	int cached = -1;
	for (uint64_t k = 0; k < 8 && cached < 0; k++)
		if (cread(c, k))
			cached = (int)k;
	CHECK(cached >= 0);
	/* Growing too far fails and leaves the key uncached, so that the caller
	 * can write the new value through without an old dirty one landing
	 * after it. */
	uint64_t wb_before = wb_total;
	CHECK(cwrite(c, (uint64_t)cached, 999, VMAX) == -ENOMEM);
	CHECK(cread(c, (uint64_t)cached) == 0 && wb_total == wb_before);
	make_val(&latest[cached], (uint64_t)cached, 999, VMAX);     /* written through */
	backing[cached] = latest[cached];
	CHECK(rcache_flush(c) >= 0);
	for (uint64_t k = 0; k < 8; k++)
		CHECK(backing[k].len == latest[k].len &&
		      !memcmp(backing[k].b, latest[k].b, latest[k].len));
	rcache_stats(c, &st);
	CHECK(st.bytes <= cap);
	rcache_destroy(c);
	CHECK(rcache_create(0, 1.0, 4, writeback, &backing, &c) == 0);
	CHECK(cwrite(c, 1, 1, 8) == -ENOMEM);
	rcache_destroy(c);
}

/* The callback fails: dirty entries stay (no data loss) and errors are
 * counted; clean entries can still make room.  Then it recovers. */
static void test_failing_callback(void)
{
	rcache_t *c;
	struct rcache_stats st;
	unsigned char key[8];
	reset_model();
	CHECK(rcache_create(10 * rcache_entry_charge(8, 32), 1.0, 5, writeback, &backing,
			    &c) == 0);
	wb_fail = -EIO;
	for (uint64_t k = 0; k < 5; k++)
		CHECK(cwrite(c, k, 1, 32) == 0);
	for (uint64_t k = 5; k < 10; k++) {              /* clean */
		key_from_u64(k, key);
		make_val(&latest[k], k, 0, 32);
		CHECK(rcache_data_fill(c, 1, key, 8, latest[k].b, 32) == 0);
	}
	for (uint64_t k = 10; k < 15; k++)               /* evicts the clean ones */
		CHECK(cwrite(c, k, 1, 32) == 0);
	rcache_stats(c, &st);
	CHECK(st.entries == 10 && st.evictions == 5);
	int rc = cwrite(c, 20, 1, 32);                   /* only dirty ones left */
	CHECK(rc == -EIO);
	rcache_stats(c, &st);
	CHECK(st.writeback_errors > 0 && st.entries == 10 && st.writebacks == 0);
	CHECK(rcache_flush(c) == -EIO);
	for (uint64_t k = 0; k < 5; k++)
		CHECK(cread(c, k) == 1);
	for (uint64_t k = 10; k < 15; k++)
		CHECK(cread(c, k) == 1);
	wb_fail = 0;                                     /* recovered */
	CHECK(cwrite(c, 20, 1, 32) == 0);
	CHECK(rcache_flush(c) == 10 && wb_total == 11);
	for (uint64_t k = 0; k < 21; k++)
		if (latest[k].len && (k < 5 || k >= 10))
			CHECK(backing[k].len == 32 && !memcmp(backing[k].b, latest[k].b, 32));
	rcache_destroy(c);
}

int main(void)
{
	test_read_write();
	test_evict_writeback();
	test_clean_evict();
	test_growth();
	test_failing_callback();
	printf("ok\n");
	return 0;
}
