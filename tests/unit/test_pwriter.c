/* test_pwriter.c - the page writers against a real O_DIRECT file: the pool is
 * registered once and cloned into every writer's ring (writes are
 * WRITE_FIXED), batches coalesce pages adjacent in file and memory, writer 1's
 * ring fails mid-run (LOTUS_PW_FAULT "1=enter:N") and falls back to libaio
 * while writers 0 and 2 stay on io_uring, and an eviction write that fails
 * (writer 2, "cqe:N:ENOSPC") leaves its page dirty and is written again.
 * At the end every page of the file holds its last version: nothing lost.
 * Then a second file (pwriter_add_file) gets an asynchronous job
 * (pwriter_submit) from a second registered region, as checkpoints use it. */
#include <pthread.h>
#include "test_io_util.h"
#include "store/pwriter.h"

#define PS       8192u
#define NPAGES   510u
#define NCLIENTS 3u
#define ROUNDS   4u

static char *g_region;
static pwriter_t *g_pw;
static unsigned g_version[NPAGES];

/* page p lives in frame p below 256 (so runs coalesce), scattered above */
static char *frame_of(uint64_t p)
{
	uint64_t f = p < 256 ? p : 256 + ((p - 256) * 37) % (NPAGES - 256);
	return g_region + f * PS;
}

static void fill_page(uint64_t p, unsigned version)
{
	uint64_t *w = (uint64_t *)frame_of(p);
	for (unsigned i = 0; i < PS / 8; i++)
		w[i] = p << 32 | (uint64_t)version << 16 | i;
	g_version[p] = version;
}

static int page_ok(const char *buf, uint64_t p, unsigned version)
{
	const uint64_t *w = (const uint64_t *)buf;
	for (unsigned i = 0; i < PS / 8; i++)
		if (w[i] != (p << 32 | (uint64_t)version << 16 | i))
			return 0;
	return 1;
}

/* Phase A: client t writes pages [t*170, t*170+170) through writer t. */
static void *client(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg, per = NPAGES / NCLIENTS;
	struct pw_page pages[NPAGES / NCLIENTS];
	int status[NPAGES / NCLIENTS];
	for (unsigned r = 1; r <= ROUNDS; r++) {
		for (unsigned i = 0; i < per; i++) {
			uint64_t p = (uint64_t)t * per + i;
			fill_page(p, r);
			pages[i] = (struct pw_page){ .page = p, .frame = (uint32_t)p, .buf = frame_of(p) };
		}
		CHECK_EQ(pwriter_write(g_pw, t, pages, per, status), 0);
		for (unsigned i = 0; i < per; i++)
			CHECK_EQ(status[i], 0);
	}
	return NULL;
}

/* Phase B: a fake store whose dirty pages the writers evict. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned char g_dirty[NPAGES], g_locked[NPAGES];
static unsigned g_done_calls, g_done_errors, g_ndirty;

static size_t pick(void *arg, unsigned part, unsigned nparts, struct pw_page *v, size_t max,
		   size_t *dropped)
{
	size_t n = 0;
	(void)arg;
	(void)dropped;
	pthread_mutex_lock(&g_mu);
	for (uint64_t p = part; p < NPAGES && n < max; p += nparts) {
		if (!g_dirty[p] || g_locked[p])
			continue;
		g_locked[p] = 1;
		v[n++] = (struct pw_page){ .page = p, .frame = (uint32_t)p, .buf = frame_of(p) };
	}
	pthread_mutex_unlock(&g_mu);
	return n;
}

static void done(void *arg, const struct pw_page *v, int status)
{
	(void)arg;
	pthread_mutex_lock(&g_mu);
	CHECK(g_locked[v->page]);
	g_locked[v->page] = 0;
	g_done_calls++;
	if (status == 0) {
		g_dirty[v->page] = 0;
		g_ndirty--;
	} else {
		CHECK_EQ(status, -ENOSPC);
		g_done_errors++;
	}
	pthread_mutex_unlock(&g_mu);
}

static int g_cb_rc = 1;

static void submit_done(void *arg, int rc)
{
	(void)arg;
	__atomic_store_n(&g_cb_rc, rc, __ATOMIC_RELEASE);
}

static int need(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&g_mu);
	int n = g_ndirty > 0;
	pthread_mutex_unlock(&g_mu);
	return n;
}

int main(void)
{
	if (!tio_have_uring())
		tio_skip("SKIP: io_uring is not available here");
	int fd = tio_open_file((size_t)NPAGES * PS);
	g_region = tio_alloc((size_t)NPAGES * PS);
	char *staging = tio_alloc(16 * PS);
	int fd2 = tio_open_file(16 * PS);
	struct pwriter_opts o = {
		.nwriters = 3, .fd = fd, .page_size = PS, .region = g_region,
		.region_len = (size_t)NPAGES * PS, .region2 = staging, .region2_len = 16 * PS,
		.batch = 64, .depth = 16,
		.fault = "1=enter:3;2=cqe:2:ENOSPC",
		.ops = { .pick = pick, .done = done, .need = need },
	};
	CHECK_EQ(pwriter_start(&o, &g_pw), 0);
	CHECK_EQ(pwriter_registered(g_pw), 1);
	CHECK_EQ(pwriter_count(g_pw), 3);
	for (unsigned i = 0; i < 3; i++) {
		struct pwriter_stats s;
		pwriter_stats(g_pw, i, &s);
		CHECK_EQ(s.cloned, 1);
		CHECK(!strcmp(s.backend, "uring"));
	}

	/* Phase B: every page dirty with version 9; the writers evict them,
	 * writer 1's ring fails on its 3rd enter, writer 2's 2nd write fails */
	pthread_mutex_lock(&g_mu);
	for (uint64_t p = 0; p < NPAGES; p++) {
		fill_page(p, 9);
		g_dirty[p] = 1;
	}
	g_ndirty = NPAGES;
	pthread_mutex_unlock(&g_mu);
	pwriter_kick(g_pw);
	for (int i = 0; i < 1000 && need(NULL); i++)
		usleep(10000);
	CHECK_EQ(need(NULL), 0);


	/* Phase A (after B): jobs, three clients at once, writer 1 on libaio now */
	pthread_t t[NCLIENTS];
	for (unsigned i = 0; i < NCLIENTS; i++)
		CHECK(pthread_create(&t[i], NULL, client, (void *)(uintptr_t)i) == 0);
	for (unsigned i = 0; i < NCLIENTS; i++)
		pthread_join(t[i], NULL);

	struct pwriter_stats s[3];
	uint64_t pages = 0;
	for (unsigned i = 0; i < 3; i++) {
		pwriter_stats(g_pw, i, &s[i]);
		pages += s[i].pages;
		printf("writer %u: %s ios %llu pages %llu fixed %llu fallbacks %llu errors %llu "
		       "rounds %llu cpu %.1f ms\n", i, s[i].backend, (unsigned long long)s[i].ios,
		       (unsigned long long)s[i].pages, (unsigned long long)s[i].fixed_ios,
		       (unsigned long long)s[i].fallbacks, (unsigned long long)s[i].write_errors,
		       (unsigned long long)s[i].rounds, s[i].cpu_ns / 1e6);
	}
	/* Phase C: a second file, an asynchronous job from the second region */
	int id = pwriter_add_file(g_pw, fd2);
	CHECK_EQ(id, 1);
	struct pw_page sp[16];
	int sst[16];
	for (unsigned i = 0; i < 16; i++) {
		uint64_t *w = (uint64_t *)(staging + (size_t)i * PS);
		for (unsigned k = 0; k < PS / 8; k++)
			w[k] = (uint64_t)i << 32 | 77u << 16 | k;
		sp[i] = (struct pw_page){ .page = i, .buf = staging + (size_t)i * PS };
	}
	CHECK_EQ(pwriter_submit(g_pw, 0, id, sp, 16, sst, submit_done, NULL), 0);
	for (int i = 0; i < 1000 && __atomic_load_n(&g_cb_rc, __ATOMIC_ACQUIRE) == 1; i++)
		usleep(1000);
	CHECK_EQ(__atomic_load_n(&g_cb_rc, __ATOMIC_ACQUIRE), 0);
	for (unsigned i = 0; i < 16; i++)
		CHECK_EQ(sst[i], 0);
	struct pwriter_stats c0;
	pwriter_stats(g_pw, 0, &c0);
	CHECK_EQ(c0.ios, s[0].ios + 1);              /* 16 adjacent pages: one write */
	CHECK_EQ(c0.fixed_ios, s[0].fixed_ios + 1);  /* from the cloned second region */
	pwriter_stop(g_pw);
	char *b2 = tio_alloc(PS);
	for (uint64_t p = 0; p < 16; p++) {
		CHECK_EQ(pread(fd2, b2, PS, (off_t)(p * PS)), PS);
		CHECK(page_ok(b2, p, 77));
	}
	free(b2);
	free(staging);
	close(fd2);

	/* writer 1 fell back, the others did not */
	CHECK_EQ(s[1].fallbacks, 1);
	CHECK(!strcmp(s[1].backend, "aio"));
	for (unsigned i = 0; i < 3; i += 2) {
		CHECK_EQ(s[i].fallbacks, 0);
		CHECK(!strcmp(s[i].backend, "uring"));
		CHECK(s[i].fixed_ios > 0);
		CHECK_EQ(s[i].fixed_ios, s[i].ios);
	}
	/* the ENOSPC write was reported, kept dirty, and written again */
	CHECK(s[2].write_errors >= 1);
	CHECK(g_done_errors >= 1);
	CHECK_EQ(pages, (uint64_t)NPAGES * ROUNDS + NPAGES);
	CHECK(s[1].rounds >= 2);
	CHECK_EQ(g_done_calls, NPAGES + g_done_errors);
	/* coalescing: pages below 256 sit in adjacent frames */
	CHECK(s[0].ios < (uint64_t)(NPAGES / NCLIENTS) * ROUNDS);

	/* the file: every page holds its last version */
	char *buf = tio_alloc(PS);
	for (uint64_t p = 0; p < NPAGES; p++) {
		CHECK_EQ(pread(fd, buf, PS, (off_t)(p * PS)), PS);
		if (!page_ok(buf, p, g_version[p])) {
			fprintf(stderr, "FAIL: page %llu does not hold version %u\n",
				(unsigned long long)p, g_version[p]);
			tio_cleanup();
			return 1;
		}
	}
	free(buf);
	free(g_region);
	close(fd);
	tio_cleanup();
	printf("PASS\n");
	return 0;
}
