/*
 * test_store_own_keys.c - with owned keys (the default, or
 * store_index_own_keys), index operations never read a record slot.
 *
 * A table of 24-byte YCSB-shaped keys ("user" + 20 digits: the first 8 bytes
 * tie inside a leaf) is loaded, then the whole buffer pool is made
 * inaccessible (PROT_NONE), as a tiered store's non-resident pages are.
 * store_get of every key (present and absent) and a full store_scan must still
 * give the right answers, for a default store and after store_index_own_keys.
 * The same steps with borrowed keys (store_index_borrow_keys: the index reads
 * the key from the slot when prefixes tie, as before) run in a child process,
 * which must fault: that shows the probe catches an index that reads record
 * pages.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common/common.h"
#include "store/store.h"
#include "check.h"

#define NKEYS 20000


static store_loc_t locs[NKEYS];

static void make_key(unsigned i, unsigned char *k)
{
	char tmp[32];
	uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull;
	snprintf(tmp, sizeof(tmp), "user%020llu", (unsigned long long)(x ^ x >> 29));
	memcpy(k, tmp, 24);
}

struct scan_state {
	unsigned char last[24];
	unsigned n;
	int bad;
};

static int scan_cb(void *arg, const unsigned char *key, uint16_t klen, store_loc_t loc)
{
	struct scan_state *s = arg;
	if (klen != 24 || (s->n && memcmp(s->last, key, 24) >= 0) || loc == 0)
		s->bad = 1;
	memcpy(s->last, key, 24);
	s->n++;
	return 0;
}

/* Load, hide the pool, look everything up through the index.  Exits 1 on a
 * wrong answer; a read of a record slot faults. */
/* mode: 0 borrow, 1 default, 2 store_index_own_keys */
static void run(int mode)
{
	store_t *st;
	uint16_t tb;
	unsigned char k[24];
	size_t pool_bytes;

	CHECK(store_create(32u << 20, 0, &st) == 0);
	store_index_hash(st, 0);   /* the B+tree's property: the hash index reads slots */
	if (mode == 0)
		store_index_borrow_keys(st);
	else if (mode == 2)
		store_index_own_keys(st);
	CHECK(store_table_create(st, "t", 64, &tb) == 0);
	for (unsigned i = 0; i < NKEYS; i++) {
		make_key(i, k);
		CHECK(store_insert(st, tb, k, 24, "v", 1, &locs[i]) == 0);
	}
	void *pool = store_pool(st, &pool_bytes);
	CHECK(mprotect(pool, pool_bytes, PROT_NONE) == 0);
	for (unsigned i = 0; i < NKEYS; i++) {
		store_loc_t l;
		make_key(i, k);
		CHECK(store_get(st, tb, k, 24, &l) == 0 && l == locs[i]);
		k[23] ^= 0x40;   /* a digit becomes a letter: absent, same prefix */
		CHECK(store_get(st, tb, k, 24, &l) == LOTUS_ENOTFOUND);
	}
	struct scan_state s = { .n = 0 };
	CHECK(store_scan(st, tb, NULL, 0, NKEYS + 1, scan_cb, &s) == NKEYS);
	CHECK(!s.bad && s.n == NKEYS);
	make_key(7, k);
	s.n = 0;
	CHECK(store_scan(st, tb, k, 24, 10, scan_cb, &s) == 10 && !s.bad);
	CHECK(mprotect(pool, pool_bytes, PROT_READ | PROT_WRITE) == 0);
	store_destroy(st);
}

int main(void)
{
	run(1);
	run(2);
	printf("owned keys: %u gets and 2 scans with the pool PROT_NONE\n", NKEYS);

	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		setrlimit(RLIMIT_CORE, &(struct rlimit){ 0, 0 });   /* no core file */
		run(0);
		_exit(0);
	}
	int status;
	CHECK(waitpid(pid, &status, 0) == pid);
	/* killed by SIGSEGV, or a sanitizer's report and exit code */
	CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0));
	printf("borrowed keys (control): the child faulted as expected (status 0x%x)\n", status);
	printf("ok\n");
	return 0;
}
