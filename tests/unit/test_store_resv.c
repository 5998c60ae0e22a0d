/*
 * test_store_resv.c - slot reservations of the record store:
 *  - on a small pool, reserving slot by slot stops at exactly the number of
 *    records that fit (LOTUS_ENOSPACE, nothing half taken), and inserts
 *    without a reservation then fail; inserts through the reservation all
 *    succeed; releasing the rest makes them insertable again;
 *  - a failed multi-slot reserve takes nothing;
 *  - a delete through a reservation gives the slot to it, and a following
 *    insert of another key uses that slot with the pool otherwise full;
 *  - 4 threads reserving 1-4 slots, inserting, deleting and releasing at
 *    once on a pool with 8 free slots never hold more slots than exist, and
 *    afterwards every slot without a record is free again.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "store/store.h"
#include "check.h"


static void key(unsigned char *k, uint64_t i)
{
	memcpy(k, &i, 8);
}

/* How many records of table t fit into an empty store st. */
static unsigned capacity(store_t *st, uint16_t t)
{
	store_resv_t *r = NULL;
	unsigned n = 0;
	while (store_reserve(st, &r, t, 1) == 0)
		n++;
	CHECK(store_reserved(r, t) == n);
	store_resv_release(st, r);
	return n;
}

static void single(void)
{
	store_t *st;
	uint16_t t;
	unsigned char k[8], v[100] = { 0 };
	CHECK(store_create(256 << 10, 0, &st) == 0);
	CHECK(store_table_create(st, "t", 100, &t) == 0);
	unsigned cap = capacity(st, t);
	CHECK(cap > 10 && capacity(st, t) == cap);   /* released slots come back */
	fprintf(stderr, "capacity of a 256 KiB pool: %u records of 100 B\n", cap);

	store_resv_t *r = NULL;
	CHECK(store_reserve(st, &r, t, cap + 1) == LOTUS_ENOSPACE);
	CHECK(store_reserved(r, t) == 0);             /* nothing half taken */
	CHECK(store_reserve(st, &r, t, cap) == 0);
	key(k, 999999);
	CHECK(store_insert(st, t, k, 8, v, 100, NULL) == LOTUS_ENOSPACE);
	for (uint64_t i = 0; i < cap / 2; i++) {
		key(k, i);
		CHECK(store_insert_resv(st, &r, t, k, 8, v, 100, NULL) == 0);
	}
	CHECK(store_reserved(r, t) == cap - cap / 2);
	store_resv_release(st, r);
	for (uint64_t i = cap / 2; i < cap; i++) {
		key(k, i);
		CHECK(store_insert(st, t, k, 8, v, 100, NULL) == 0);
	}
	key(k, cap);
	CHECK(store_insert(st, t, k, 8, v, 100, NULL) == LOTUS_ENOSPACE);

	/* full: a delete through a reservation keeps its slot for the next insert */
	r = NULL;
	key(k, 0);
	CHECK(store_delete_resv(st, &r, t, k, 8) == 0);
	CHECK(store_reserved(r, t) == 1);
	key(k, cap + 1);
	CHECK(store_insert(st, t, k, 8, v, 100, NULL) == LOTUS_ENOSPACE);
	CHECK(store_insert_resv(st, &r, t, k, 8, v, 100, NULL) == 0);
	CHECK(store_reserved(r, t) == 0);
	store_resv_release(st, r);
	store_destroy(st);
}

/* ---- concurrent ---- */

#define THREADS 4
static store_t *cst;
static uint16_t ct;
static unsigned ccap;
static _Atomic unsigned held_total;

static _Atomic unsigned refused;

static void *worker(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg, seed = id + 1;
	unsigned char k[8], v[100] = { 0 };
	for (unsigned round = 0; round < 20000; round++) {
		store_resv_t *r = NULL;
		unsigned n = 1 + (unsigned)rand_r(&seed) % 4;
		int rc = store_reserve(cst, &r, ct, n);
		CHECK(rc == 0 || rc == LOTUS_ENOSPACE);
		if (rc)
			atomic_fetch_add(&refused, 1);
		if (rc == 0) {
			atomic_fetch_add(&held_total, n);
			CHECK(atomic_load(&held_total) <= ccap);
			for (unsigned i = 0; i < n; i++) {
				key(k, (uint64_t)id << 32 | (round * 4 + i));
				CHECK(store_insert_resv(cst, &r, ct, k, 8, v, 100, NULL) == 0);
			}
		}
		store_resv_release(cst, r);
		/* delete them again, now and then through a reservation (held_total
		 * stays a lower bound of the slots in use: down before they free) */
		if (rc == 0)
			atomic_fetch_sub(&held_total, n);
		store_resv_t *d = NULL;
		for (unsigned i = 0; rc == 0 && i < n; i++) {
			key(k, (uint64_t)id << 32 | (round * 4 + i));
			CHECK(store_delete_resv(cst, (round & 1) ? &d : NULL, ct, k, 8) == 0);
		}
		store_resv_release(cst, d);
	}
	return NULL;
}

static void concurrent(void)
{
	pthread_t th[THREADS];
	struct store_stats ss;
	CHECK(store_create(256 << 10, 0, &cst) == 0);
	CHECK(store_table_create(cst, "t", 100, &ct) == 0);
	ccap = capacity(cst, ct);
	unsigned char k[8], v[100] = { 0 };
	for (uint64_t i = 0; i < ccap - 8; i++) {   /* 8 free slots to fight over */
		key(k, 1ull << 62 | i);
		CHECK(store_insert(cst, ct, k, 8, v, 100, NULL) == 0);
	}
	atomic_store(&held_total, ccap - 8);
	for (unsigned i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i);
	for (unsigned i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	store_stats(cst, &ss);
	CHECK(ss.records == ccap - 8);
	/* every slot not holding a record is free again */
	store_resv_t *r = NULL;
	CHECK(store_reserve(cst, &r, ct, (unsigned)(ccap - ss.records)) == 0);
	CHECK(store_reserve(cst, &r, ct, 1) == LOTUS_ENOSPACE);
	store_resv_release(cst, r);
	fprintf(stderr, "concurrent: %u reservations refused for space; %llu records, %u slots: "
		"all accounted for\n", atomic_load(&refused), (unsigned long long)ss.records, ccap);
	store_destroy(cst);
}

int main(void)
{
	single();
	concurrent();
	printf("ok\n");
	return 0;
}
