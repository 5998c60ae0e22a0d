/*
 * iobench_raw.c - `lotus iobench` experiments on raw io_uring (liburing and
 * raw io_uring_register), for kernel mechanisms the hybrid I/O layer does not
 * expose on purpose:
 *
 *   table4  one ring shared by all threads behind a mutex vs a ring per
 *           thread (the layer forbids sharing: io.h's thread rule)
 *   table5  IORING_REGISTER_BUFFERS time against buffer size
 *   table6  N rings registering the same buffer vs one registration cloned
 *           into N rings (IORING_REGISTER_CLONE_BUFFERS, opcode 30), with
 *           threads and with processes.  Between processes the kernel refuses
 *           the clone (-EINVAL: another mm); the pattern that works is shown:
 *             parent: create N rings R_DISABLED|SINGLE_ISSUER, register once
 *                     on a donor, clone into every ring, fork
 *             child i: IORING_REGISTER_ENABLE_RINGS on ring i (it becomes the
 *                     single issuer), READ_FIXED through the cloned buffer
 *   poll    SQPOLL and IOPOLL on the batched pipeline, where the kernel and
 *           the device allow them; otherwise "unsupported here" and why
 *
 * Timing rules: rings are created before the clock starts; the clock covers
 * only the registration (or clone) calls; teardown (unpinning) is outside.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include "bench/iobench.h"
#include "common/clock.h"
#include "common/common.h"

#define REG_CLONE_BUFFERS 30      /* IORING_REGISTER_CLONE_BUFFERS (6.12+) */
#define REG_CHUNK (1ULL << 30)    /* the kernel caps one registered iovec at 1 GiB */

struct clone_arg {                /* struct io_uring_clone_buffers */
	uint32_t src_fd, flags, src_off, dst_off, nr, pad[3];
};

static int ring_clone_buffers(int dst_fd, int src_fd)
{
	struct clone_arg a = { .src_fd = (uint32_t)src_fd };
	long rc = syscall(__NR_io_uring_register, dst_fd, REG_CLONE_BUFFERS, &a, 1);
	return rc < 0 ? -errno : 0;
}

static double ms_since(uint64_t t0)
{
	return (double)(clock_now_ns() - t0) / 1e6;
}

/* ---- shared buffers -------------------------------------------------------- */

/* Anonymous memory in 4 KiB pages (THP off, as the paper counts pages),
 * pre-faulted so that registration measures pinning, not page allocation. */
static void *reg_alloc(size_t len, bool shared)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	madvise(p, len, MADV_NOHUGEPAGE);
	for (size_t off = 0; off < len; off += 4096)
		((volatile char *)p)[off] = 1;
	return p;
}

static int reg_buffers(struct io_uring *ring, void *base, size_t len)
{
	struct iovec iov[64];
	unsigned n = 0;
	for (size_t off = 0; off < len && n < ARRAY_SIZE(iov); off += REG_CHUNK, n++) {
		iov[n].iov_base = (char *)base + off;
		iov[n].iov_len = MIN(REG_CHUNK, len - off);
	}
	return io_uring_register_buffers(ring, iov, n);
}

/* Why a registration might fail: a one-line hint about RLIMIT_MEMLOCK. */
static void memlock_hint(char *buf, size_t len)
{
	struct rlimit rl;
	getrlimit(RLIMIT_MEMLOCK, &rl);
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long eff = 0;
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "CapEff:", 7))
			eff = strtoull(line + 7, NULL, 16);
	if (f)
		fclose(f);
	bool ipc_lock = eff & (1ULL << 14);
	char lim[32];
	if (rl.rlim_cur == RLIM_INFINITY)
		snprintf(lim, sizeof(lim), "unlimited");
	else
		iob_fmt_size(rl.rlim_cur, lim, sizeof(lim));
	snprintf(buf, len, "RLIMIT_MEMLOCK=%s, CAP_IPC_LOCK %s%s", lim,
		 ipc_lock ? "present (pinned pages are not charged to the limit)" : "absent",
		 !ipc_lock && rl.rlim_cur != RLIM_INFINITY
			 ? ": registrations above the limit fail with ENOMEM; raise it "
			   "(ulimit -l unlimited, or memlock in limits.conf)"
			 : "");
}

/* ---- IOPOLL probe ---------------------------------------------------------- */

int raw_iopoll_probe(char *reason, size_t len)
{
	static int cached = -1000;
	static char why[200];
	if (cached != -1000) {
		snprintf(reason, len, "%s", why);
		return cached;
	}
	const char *path = iob_data_file(0);
	char dev[64] = "?";
	int dev_poll = path ? iob_dev_poll(path, dev, sizeof(dev)) : -ENOENT;
	struct io_uring ring;
	int fd = path ? open(path, O_RDONLY | O_DIRECT) : -1;
	void *buf = iob_alloc(4096);
	int rc = fd < 0 || !buf ? -EIO : io_uring_queue_init(4, &ring, IORING_SETUP_IOPOLL);
	if (rc) {
		snprintf(why, sizeof(why), "io_uring_setup(IOPOLL): %s", strerror(-rc));
		cached = 0;
		goto out;
	}
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	io_uring_prep_read(sqe, fd, buf, 4096, 0);
	struct io_uring_cqe *cqe;
	rc = io_uring_submit_and_wait(&ring, 1);
	if (rc >= 0)
		rc = io_uring_wait_cqe(&ring, &cqe);
	if (rc == 0) {
		rc = cqe->res;
		io_uring_cqe_seen(&ring, cqe);
	}
	io_uring_queue_exit(&ring);
	if (rc == 4096) {
		cached = 1;
		snprintf(why, sizeof(why), "IOPOLL works on %s", dev);
	} else {
		cached = 0;
		snprintf(why, sizeof(why), "a polled O_DIRECT read on %s returns %s; the device has "
			 "no poll queues (queue/io_poll=%d; virtio_blk/nvme need poll_queues>0)",
			 dev, rc < 0 ? strerror(-rc) : "a short count", dev_poll);
	}
out:
	if (fd >= 0)
		close(fd);
	iob_free(buf, 4096);
	snprintf(reason, len, "%s", why);
	return cached;
}

/* ---- Table 4: shared ring behind a mutex vs per-thread rings ------------ */

struct t4_shared {
	bool shared;
	struct io_uring ring;     /* the shared ring */
	pthread_mutex_t mu;
	int fd;
	uint64_t fsize;
	size_t bs;
	volatile int stop;
	pthread_barrier_t start;
};

struct t4_worker {
	pthread_t tid;
	struct t4_shared *sh;
	unsigned idx;
	uint64_t ios;
	struct iob_hist lat;
	int err;
};

/* Shared ring: submit under the mutex, then whoever holds the mutex waits on
 * the CQ and hands each completion to its owner's flag (the convoy). */
static int t4_read_shared(struct t4_shared *sh, void *buf, off_t off)
{
	volatile int done = 0;
	pthread_mutex_lock(&sh->mu);
	struct io_uring_sqe *sqe = io_uring_get_sqe(&sh->ring);
	if (!sqe) {
		pthread_mutex_unlock(&sh->mu);
		return -EBUSY;
	}
	io_uring_prep_read(sqe, sh->fd, buf, (unsigned)sh->bs, off);
	io_uring_sqe_set_data(sqe, (void *)&done);
	int rc = io_uring_submit(&sh->ring);
	pthread_mutex_unlock(&sh->mu);
	if (rc < 0)
		return rc;
	while (!done) {
		pthread_mutex_lock(&sh->mu);
		struct io_uring_cqe *cqe;
		if (!done && io_uring_wait_cqe(&sh->ring, &cqe) == 0) {
			unsigned head, n = 0;
			io_uring_for_each_cqe(&sh->ring, head, cqe) {
				volatile int *flag = io_uring_cqe_get_data(cqe);
				*flag = cqe->res == (int)sh->bs ? 1 : -EIO;
				n++;
			}
			io_uring_cq_advance(&sh->ring, n);
		}
		pthread_mutex_unlock(&sh->mu);
	}
	return done == 1 ? 0 : -EIO;
}

static int t4_read_private(struct io_uring *ring, struct t4_shared *sh, void *buf, off_t off)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	io_uring_prep_read(sqe, sh->fd, buf, (unsigned)sh->bs, off);
	int rc = io_uring_submit_and_wait(ring, 1);
	struct io_uring_cqe *cqe;
	if (rc >= 0)
		rc = io_uring_peek_cqe(ring, &cqe);
	if (rc)
		return rc;
	rc = cqe->res == (int)sh->bs ? 0 : -EIO;
	io_uring_cqe_seen(ring, cqe);
	return rc;
}

static void *t4_main(void *arg)
{
	struct t4_worker *w = arg;
	struct t4_shared *sh = w->sh;
	struct io_uring ring;
	uint64_t rng = 0x2545f4914f6cdd1dULL * (w->idx + 1), n = 0;
	void *buf = iob_alloc(sh->bs);
	int rc = buf ? 0 : -ENOMEM;
	if (!rc && !sh->shared)
		rc = io_uring_queue_init(4, &ring, IORING_SETUP_SINGLE_ISSUER);
	w->err = rc;
	pthread_barrier_wait(&sh->start);
	while (!rc && !sh->stop) {
		off_t off = (off_t)(iob_rand(&rng) % (sh->fsize / sh->bs) * sh->bs);
		uint64_t t = clock_now_ns();
		rc = sh->shared ? t4_read_shared(sh, buf, off) : t4_read_private(&ring, sh, buf, off);
		iob_hist_add(&w->lat, clock_now_ns() - t, 1);
		__atomic_store_n(&w->ios, ++n, __ATOMIC_RELAXED);
		iob_spin_ns(iob_uniform(&rng, iob_cfg->think_us[0] * 1000, iob_cfg->think_us[1] * 1000));
	}
	if (rc && !w->err)
		w->err = rc;
	if (!sh->shared && w->err != -ENOMEM)
		io_uring_queue_exit(&ring);
	iob_free(buf, sh->bs);
	return NULL;
}

static int t4_cell(bool shared, unsigned threads, struct iob_row *r)
{
	struct t4_shared sh = { .shared = shared, .fd = -1, .bs = 4096 };
	struct t4_worker *w = calloc(threads, sizeof(*w));
	const char *path = iob_data_file(0);
	int rc = 0;
	if (iob_cfg->block_sizes.n)
		sh.bs = iob_cfg->block_sizes.v[0];
	sh.fsize = iob_cfg->file_size;
	if (!w || !path || (sh.fd = open(path, O_RDONLY | O_DIRECT)) < 0) {
		rc = -EIO;
		goto out;
	}
	pthread_mutex_init(&sh.mu, NULL);
	if (shared && (rc = io_uring_queue_init(MAX(threads, 4), &sh.ring, 0)))
		goto out;
	pthread_barrier_init(&sh.start, NULL, threads + 1);
	for (unsigned i = 0; i < threads; i++) {
		w[i].sh = &sh;
		w[i].idx = i;
		if (pthread_create(&w[i].tid, NULL, t4_main, &w[i])) {
			fprintf(stderr, "lotus iobench: pthread_create failed\n");
			exit(1);
		}
	}
	pthread_barrier_wait(&sh.start);
	uint64_t t0 = clock_now_ns(), c0 = clock_process_cpu_ns(), n0 = 0, n1 = 0;
	struct timespec ts = { (time_t)iob_cfg->seconds,
			       (long)((iob_cfg->seconds - (double)(time_t)iob_cfg->seconds) * 1e9) };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	sh.stop = 1;
	uint64_t t1 = clock_now_ns(), c1 = clock_process_cpu_ns();
	for (unsigned i = 0; i < threads; i++)
		n1 += __atomic_load_n(&w[i].ios, __ATOMIC_RELAXED);
	struct iob_hist *h = calloc(1, sizeof(*h));
	for (unsigned i = 0; i < threads; i++) {
		pthread_join(w[i].tid, NULL);
		if (h)
			iob_hist_merge(h, &w[i].lat);
		if (w[i].err && !rc)
			rc = w[i].err;
	}
	pthread_barrier_destroy(&sh.start);
	if (shared)
		io_uring_queue_exit(&sh.ring);
	double ios = (double)(n1 - n0), secs = (double)(t1 - t0) / 1e9;
	row_met(r, "iops", ios / secs);
	row_met(r, "lat_mean_us", h && h->count ? (double)h->sum / (double)h->count / 1e3 : NAN);
	row_met(r, "lat_p99_us", h ? iob_hist_pct(h, 99) / 1e3 : NAN);
	row_met(r, "cpu_us_per_io", ios > 0 ? (double)(c1 - c0) / 1e3 / ios : NAN);
	free(h);
out:
	if (sh.fd >= 0)
		close(sh.fd);
	free(w);
	if (rc) {
		r->status = "error";
		snprintf(r->note, sizeof(r->note), "%s", strerror(-rc));
	}
	return rc;
}

int exp_table4(void)
{
	static const uint64_t def[] = { 4, 8, 16, 32, 64 };
	uint64_t th[IOB_MAX_LIST];
	int nth = iob_list_or(&iob_cfg->threads, def, ARRAY_SIZE(def), th), failed = 0;
	iob_title("Table 4: depth-1 random reads, one ring shared behind a mutex vs a ring per "
		  "thread (raw io_uring)");
	for (int i = 0; i < nth; i++) {
		double p99[2] = { 0, 0 };
		for (int k = 0; k < 2; k++) {
			struct iob_row r;
			row_init(&r, "table4");
			row_cfg_s(&r, "ring", k ? "shared+mutex" : "per-thread");
			row_cfg_n(&r, "threads", (double)th[i]);
			iob_progress("[table4 %d/%d] %s threads=%llu", i * 2 + k + 1, nth * 2,
				     k ? "shared" : "per-thread", (unsigned long long)th[i]);
			failed |= t4_cell(k, (unsigned)th[i], &r) != 0;
			p99[k] = r.nmet > 2 ? r.met[2].num : NAN;
			row_met(&r, "p99_vs_per_thread", k ? p99[1] / p99[0] : 1.0);
			iob_emit(&r);
		}
	}
	iob_note("shared ring: submit under the mutex; the mutex holder waits on the CQ and "
		 "hands completions to their owners, so submit and reap serialize");
	return failed;
}

/* ---- Table 5: registration time against size --------------------------- */

static uint64_t mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[128];
	unsigned long long kb = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024;
}

int exp_table5(void)
{
	uint64_t cap = iob_cfg->reg_max ? iob_cfg->reg_max : 4ULL << 30;
	uint64_t avail = mem_available() * 7 / 10;
	char hint[256], s1[16], s2[16];
	int failed = 0;
	memlock_hint(hint, sizeof(hint));
	iob_title("Table 5: IORING_REGISTER_BUFFERS time against buffer size (one ring, "
		  "4 KiB pages, pre-faulted, mean of 3)");
	iob_note("%s", hint);
	if (cap > avail) {
		iob_note("capping at %s: 70%% of MemAvailable", iob_fmt_size(avail >> 20 << 20, s1,
									       sizeof(s1)));
		cap = avail;
	}
	for (uint64_t sz = 64ULL << 20; sz <= cap; sz *= 2) {
		struct iob_row r;
		row_init(&r, "table5");
		row_cfg_s(&r, "buffer", iob_fmt_size(sz, s2, sizeof(s2)));
		row_cfg_n(&r, "pages", (double)(sz / 4096));
		iob_progress("[table5] %s", s2);
		void *buf = reg_alloc(sz, false);
		struct io_uring ring;
		int rc = buf ? io_uring_queue_init(4, &ring, 0) : -ENOMEM;
		double reg = 0, unreg = 0, best = INFINITY;
		for (int rep = 0; !rc && rep < 3; rep++) {
			uint64_t t0 = clock_now_ns();
			rc = reg_buffers(&ring, buf, sz);
			double ms = ms_since(t0);
			if (rc)
				break;
			reg += ms;
			best = MIN(best, ms);
			t0 = clock_now_ns();
			io_uring_unregister_buffers(&ring);
			unreg += ms_since(t0);
		}
		if (buf && rc != -ENOMEM)
			io_uring_queue_exit(&ring);
		iob_free(buf, sz);
		if (rc) {
			r.status = "error";
			snprintf(r.note, sizeof(r.note), "%.40s; %.150s", strerror(-rc), hint);
			iob_emit(&r);
			failed = 1;
			break;
		}
		row_met(&r, "time_ms", reg / 3);
		row_met(&r, "min_ms", best);
		row_met(&r, "ns_per_page", reg / 3 * 1e6 / (double)(sz / 4096));
		row_met(&r, "unregister_ms", unreg / 3);
		iob_emit(&r);
	}
	if (!iob_cfg->reg_max)
		iob_note("default cap 4G; --reg-max SIZE goes further (RAM permitting)");
	return failed;
}

/* ---- Table 6 with threads ---------------------------------------------------- */

struct t6_sync {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned ready, done;
	bool go, quit;
	uint64_t t_start;
};

struct t6_thread {
	pthread_t tid;
	struct t6_sync *s;
	bool clone;
	int donor_fd;
	void *buf;
	size_t len;
	uint64_t t_end;
	int rc;
};

static void t6_wait(struct t6_sync *s, bool *flag, unsigned *count)
{
	pthread_mutex_lock(&s->mu);
	if (count) {
		(*count)++;
		pthread_cond_broadcast(&s->cv);
	}
	while (flag && !*flag)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
}

static void *t6_main(void *arg)
{
	struct t6_thread *t = arg;
	struct io_uring ring;
	int rc = io_uring_queue_init(4, &ring, IORING_SETUP_SINGLE_ISSUER);
	t6_wait(t->s, &t->s->go, &t->s->ready);
	if (!rc)
		rc = t->clone ? ring_clone_buffers(ring.ring_fd, t->donor_fd)
			      : reg_buffers(&ring, t->buf, t->len);
	t->t_end = clock_now_ns();
	t->rc = rc;
	t6_wait(t->s, &t->s->quit, &t->s->done);
	io_uring_queue_exit(&ring);
	return NULL;
}

static void t6_set(struct t6_sync *s, bool *flag)
{
	pthread_mutex_lock(&s->mu);
	if (flag == &s->go)
		s->t_start = clock_now_ns();
	*flag = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static void t6_await(struct t6_sync *s, unsigned *count, unsigned n)
{
	pthread_mutex_lock(&s->mu);
	while (*count < n)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
}

/* N threads each register (or clone); returns wall ms, sets *slowest_ms. */
static double t6_threads(unsigned n, bool clone, int donor_fd, void *buf, size_t len,
			 double *slowest_ms, int *err)
{
	struct t6_sync s = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	struct t6_thread *t = calloc(n, sizeof(*t));
	uint64_t last = 0;
	if (!t) {
		*err = -ENOMEM;
		return NAN;
	}
	for (unsigned i = 0; i < n; i++) {
		t[i] = (struct t6_thread){ .s = &s, .clone = clone, .donor_fd = donor_fd,
					   .buf = buf, .len = len };
		if (pthread_create(&t[i].tid, NULL, t6_main, &t[i])) {
			fprintf(stderr, "lotus iobench: pthread_create failed\n");
			exit(1);
		}
	}
	t6_await(&s, &s.ready, n);
	t6_set(&s, &s.go);
	t6_await(&s, &s.done, n);
	for (unsigned i = 0; i < n; i++) {
		last = MAX(last, t[i].t_end);
		if (t[i].rc && !*err)
			*err = t[i].rc;
	}
	t6_set(&s, &s.quit);
	for (unsigned i = 0; i < n; i++)
		pthread_join(t[i].tid, NULL);
	free(t);
	*slowest_ms = (double)(last - s.t_start) / 1e6;
	return *slowest_ms;
}

/* ---- Table 6 with processes ---------------------------------------------------- */

struct t6_proc_result {
	uint64_t t_end;
	int rc;
};

/* N children each create a ring and register buf; wall ms to the last. */
static double t6_procs_separate(unsigned n, void *buf, size_t len, struct t6_proc_result *res,
				int *err)
{
	int ready[2], go[2], quit[2];
	if (pipe(ready) || pipe(go) || pipe(quit)) {
		*err = -errno;
		return NAN;
	}
	pid_t *pids = calloc(n, sizeof(*pids));
	for (unsigned i = 0; pids && i < n; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			struct io_uring ring;
			char c = 1;
			close(go[1]);
			close(quit[1]);
			int rc = io_uring_queue_init(4, &ring, IORING_SETUP_SINGLE_ISSUER);
			/* fork does not copy the page tables of a shared mapping: fault
			 * them in first so that the clock measures pinning only */
			if (madvise(buf, len, 23 /* MADV_POPULATE_WRITE, 5.14+ */))
				for (size_t off = 0; off < len; off += 4096)
					(void)((volatile char *)buf)[off];
			if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) < 0)
				_exit(1);
			if (!rc)
				rc = reg_buffers(&ring, buf, len);
			res[i].t_end = clock_now_ns();
			res[i].rc = rc;
			if (write(ready[1], &c, 1) != 1 || read(quit[0], &c, 1) < 0)
				_exit(1);
			_exit(0);
		}
		if (pids[i] < 0) {
			*err = -errno;
			n = i;
			break;
		}
	}
	close(go[0]);
	close(quit[0]);
	char c;
	for (unsigned i = 0; i < n; i++)
		if (read(ready[0], &c, 1) != 1)
			*err = -EIO;
	uint64_t t0 = clock_now_ns(), last = t0;
	close(go[1]);                         /* every child's read(go) returns 0 now */
	for (unsigned i = 0; i < n; i++)
		if (read(ready[0], &c, 1) != 1)
			*err = -EIO;
	for (unsigned i = 0; i < n; i++) {
		last = MAX(last, res[i].t_end);
		if (res[i].rc && !*err)
			*err = res[i].rc;
	}
	close(quit[1]);
	for (unsigned i = 0; pids && i < n; i++)
		waitpid(pids[i], NULL, 0);
	close(ready[0]);
	close(ready[1]);
	free(pids);
	return (double)(last - t0) / 1e6;
}

/* A child of this process tries to clone from our ring: the kernel refuses. */
static int t6_cross_process_clone(int donor_fd)
{
	int p[2];
	if (pipe(p))
		return -errno;
	pid_t pid = fork();
	if (pid == 0) {
		struct io_uring ring;
		int rc = io_uring_queue_init(4, &ring, 0);
		if (!rc)
			rc = ring_clone_buffers(ring.ring_fd, donor_fd);
		if (write(p[1], &rc, sizeof(rc)) != sizeof(rc))
			_exit(1);
		_exit(0);
	}
	int rc = -ECHILD;
	if (pid > 0) {
		if (read(p[0], &rc, sizeof(rc)) != sizeof(rc))
			rc = -EIO;
		waitpid(pid, NULL, 0);
	}
	close(p[0]);
	close(p[1]);
	return rc;
}

/* The working pattern: rings made R_DISABLED in the parent, cloned, forked;
 * each child enables its ring and reads through the cloned buffer. */
struct t6_fork_times {
	double create_ms, clone_ms, fork_ms;
	int ok_children;
};

static int t6_child_io(struct io_uring *ring, int fd, char *buf, unsigned i)
{
	/* liburing 2.3 declares io_uring_enable_rings() but does not export it */
	if (syscall(__NR_io_uring_register, ring->ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0))
		return -errno;
	int rc;
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	io_uring_prep_read_fixed(sqe, fd, buf + (size_t)i * 4096, 4096, (off_t)i * 4096, 0);
	struct io_uring_cqe *cqe;
	rc = io_uring_submit_and_wait(ring, 1);
	if (rc >= 0)
		rc = io_uring_peek_cqe(ring, &cqe);
	if (rc)
		return rc;
	rc = cqe->res == 4096 ? 0 : cqe->res < 0 ? cqe->res : -EIO;
	io_uring_cqe_seen(ring, cqe);
	return rc;
}

static int t6_procs_clone(unsigned n, int donor_fd, char *buf, struct t6_fork_times *ft)
{
	struct io_uring *rings = calloc(n, sizeof(*rings));
	pid_t *pids = calloc(n, sizeof(*pids));
	const char *path = iob_data_file(0);
	int fd = path ? open(path, O_RDONLY | O_DIRECT) : -1, rc = 0;
	unsigned made = 0;
	if (!rings || !pids || fd < 0) {
		rc = -ENOMEM;
		goto out;
	}
	uint64_t t0 = clock_now_ns();
	for (; made < n; made++) {
		rc = io_uring_queue_init(4, &rings[made],
					 IORING_SETUP_R_DISABLED | IORING_SETUP_SINGLE_ISSUER);
		if (rc)
			goto out;
	}
	ft->create_ms = ms_since(t0);
	t0 = clock_now_ns();
	for (unsigned i = 0; i < n && !rc; i++)
		rc = ring_clone_buffers(rings[i].ring_fd, donor_fd);
	ft->clone_ms = ms_since(t0);
	if (rc)
		goto out;
	t0 = clock_now_ns();
	for (unsigned i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] == 0)
			_exit(t6_child_io(&rings[i], fd, buf, i % 4096) ? 1 : 0);
	}
	for (unsigned i = 0; i < n; i++) {
		int st = 0;
		if (pids[i] > 0 && waitpid(pids[i], &st, 0) > 0 && WIFEXITED(st) &&
		    WEXITSTATUS(st) == 0)
			ft->ok_children++;
	}
	ft->fork_ms = ms_since(t0);
out:
	for (unsigned i = 0; i < made; i++)
		io_uring_queue_exit(&rings[i]);
	if (fd >= 0)
		close(fd);
	free(rings);
	free(pids);
	return rc;
}

static void t6_emit(const char *who, unsigned n, const char *method, double ms, double slowest,
		    double speedup, int err, const char *note)
{
	struct iob_row r;
	row_init(&r, "table6");
	row_cfg_s(&r, "tasks", who);
	row_cfg_n(&r, "rings", n);
	row_cfg_s(&r, "method", method);
	row_met(&r, "time_ms", ms);
	row_met(&r, "per_ring_ms", ms / n);
	row_met(&r, "slowest_ms", slowest);
	row_met(&r, "speedup", speedup);
	if (err) {
		r.status = "error";
		snprintf(r.note, sizeof(r.note), "%s", strerror(-err));
	} else if (note) {
		snprintf(r.note, sizeof(r.note), "%s", note);
	}
	iob_emit(&r);
}

static int t6_one_n(unsigned n, int donor_fd, char *buf, size_t len)
{
	int failed = 0, err = 0;
	double slow, sep, cl;
	iob_progress("[table6] N=%u threads: separate", n);
	sep = t6_threads(n, false, -1, buf, len, &slow, &err);
	t6_emit("threads", n, "separate", sep, slow, NAN, err, NULL);
	failed |= err != 0;
	err = 0;
	iob_progress("[table6] N=%u threads: clone", n);
	cl = t6_threads(n, true, donor_fd, buf, len, &slow, &err);
	t6_emit("threads", n, "clone", cl, slow, sep / cl, err, NULL);
	failed |= err != 0;

	struct t6_proc_result *res = mmap(NULL, n * sizeof(*res), PROT_READ | PROT_WRITE,
					  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	err = res == MAP_FAILED ? -ENOMEM : 0;
	iob_progress("[table6] N=%u processes: separate", n);
	sep = err ? NAN : t6_procs_separate(n, buf, len, res, &err);
	t6_emit("processes", n, "separate", sep, sep, NAN, err, NULL);
	failed |= err != 0;
	if (res != MAP_FAILED)
		munmap(res, n * sizeof(*res));

	struct t6_fork_times ft = { 0 };
	iob_progress("[table6] N=%u processes: clone-then-fork", n);
	err = t6_procs_clone(n, donor_fd, buf, &ft);
	char note[160];
	snprintf(note, sizeof(note), "create %u R_DISABLED rings %.2f ms; fork+enable+READ_FIXED "
		 "%.1f ms, %d/%u children ok", n, ft.create_ms, ft.fork_ms, ft.ok_children, n);
	if (!err && ft.ok_children != (int)n)
		err = -EIO;
	t6_emit("processes", n, "clone+fork", ft.clone_ms, NAN, sep / ft.clone_ms, err, note);
	failed |= err != 0;
	return failed;
}

int exp_table6(void)
{
	static const uint64_t def[] = { 1, 4, 16, 64, 200 };
	uint64_t ns[IOB_MAX_LIST];
	int nn = iob_list_or(&iob_cfg->rings, def, ARRAY_SIZE(def), ns), failed = 0;
	size_t len = iob_cfg->reg_size ? iob_cfg->reg_size : 1ULL << 30;
	char s[16], hint[256];
	iob_title("Table 6: N rings registering the same %s buffer vs one registration cloned "
		  "into N rings", iob_fmt_size(len, s, sizeof(s)));
	memlock_hint(hint, sizeof(hint));
	iob_note("%s", hint);
	char *buf = reg_alloc(len, true);       /* MAP_SHARED: the same pages in children */
	struct io_uring donor;
	int rc = buf ? io_uring_queue_init(4, &donor, 0) : -ENOMEM;
	if (rc) {
		iob_note("error: %s", strerror(-rc));
		iob_free(buf, len);
		return 1;
	}
	uint64_t t0 = clock_now_ns();
	rc = reg_buffers(&donor, buf, len);
	double donor_ms = ms_since(t0);
	if (rc) {
		iob_note("donor registration failed: %s; %s", strerror(-rc), hint);
		io_uring_queue_exit(&donor);
		iob_free(buf, len);
		return 1;
	}
	iob_note("donor ring (no SINGLE_ISSUER) registered once in %.1f ms; clone rows exclude it",
		 donor_ms);
	rc = t6_cross_process_clone(donor.ring_fd);
	iob_note("clone from a ring of another process: %s (%s)",
		 rc ? strerror(-rc) : "succeeded", rc == -EINVAL ? "refused, as expected"
								: "unexpected");
	for (int i = 0; i < nn; i++)
		failed |= t6_one_n((unsigned)ns[i], donor.ring_fd, buf, len);
	iob_note("time_ms: wall time from a common start to the last ring done (threads and "
		 "processes start together); clone+fork counts the parent's N clone calls");
	io_uring_queue_exit(&donor);
	iob_free(buf, len);
	return failed;
}

/* ---- poll: SQPOLL and IOPOLL on a raw batched pipeline ---------------------- */

struct poll_cell {
	unsigned flags, threads, depth;
	size_t bs;
	int fd;
	uint64_t fsize;
	volatile int stop;
	pthread_barrier_t start;
	uint64_t ios[IOB_MAX_LIST * 8];
	int err;
};

struct poll_arg {
	struct poll_cell *c;
	unsigned idx;
};

static void *poll_main(void *arg)
{
	struct poll_arg *a = arg;
	struct poll_cell *c = a->c;
	struct io_uring ring;
	struct io_uring_params p = { .flags = c->flags, .sq_thread_idle = 100 };
	char *buf = iob_alloc(c->depth * c->bs);
	uint64_t rng = 0x51ed2701ULL * (a->idx + 7), n = 0;
	int rc = buf ? io_uring_queue_init_params(c->depth, &ring, &p) : -ENOMEM;
	bool have_ring = rc == 0;
	if (!rc)
		rc = io_uring_register_files(&ring, &c->fd, 1);
	pthread_barrier_wait(&c->start);
	while (!rc && !c->stop) {
		for (unsigned i = 0; i < c->depth; i++) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			off_t off = (off_t)(iob_rand(&rng) % (c->fsize / c->bs) * c->bs);
			io_uring_prep_read(sqe, 0, buf + i * c->bs, (unsigned)c->bs, off);
			sqe->flags |= IOSQE_FIXED_FILE;
		}
		rc = io_uring_submit_and_wait(&ring, c->depth);
		if (rc < 0)
			break;
		rc = 0;
		struct io_uring_cqe *cqe;
		unsigned head, got = 0;
		io_uring_for_each_cqe(&ring, head, cqe) {
			if (cqe->res != (int)c->bs && !rc)
				rc = cqe->res < 0 ? cqe->res : -EIO;
			got++;
		}
		io_uring_cq_advance(&ring, got);
		n += got;
		/* a partial reap can leave I/Os in flight: wait for them here */
		while (!rc && got < c->depth) {
			unsigned m = 0;
			if ((rc = io_uring_wait_cqe(&ring, &cqe)))
				break;
			io_uring_for_each_cqe(&ring, head, cqe) {
				if (cqe->res != (int)c->bs && !rc)
					rc = cqe->res < 0 ? cqe->res : -EIO;
				m++;
			}
			io_uring_cq_advance(&ring, m);
			got += m;
			n += m;
		}
		__atomic_store_n(&c->ios[a->idx], n, __ATOMIC_RELAXED);
		iob_spin_ns(iob_uniform(&rng, iob_cfg->think_us[0] * 1000, iob_cfg->think_us[1] * 1000));
	}
	if (rc && !c->err)
		c->err = rc;
	if (have_ring)
		io_uring_queue_exit(&ring);
	iob_free(buf, c->depth * c->bs);
	return NULL;
}

static int poll_cell_run(struct poll_cell *c, struct iob_row *r)
{
	pthread_t tid[IOB_MAX_LIST * 8];
	struct poll_arg args[IOB_MAX_LIST * 8];
	pthread_barrier_init(&c->start, NULL, c->threads + 1);
	for (unsigned i = 0; i < c->threads; i++) {
		args[i] = (struct poll_arg){ c, i };
		if (pthread_create(&tid[i], NULL, poll_main, &args[i])) {
			fprintf(stderr, "lotus iobench: pthread_create failed\n");
			exit(1);
		}
	}
	pthread_barrier_wait(&c->start);
	uint64_t t0 = clock_now_ns(), c0 = clock_process_cpu_ns(), n = 0;
	struct timespec ts = { (time_t)iob_cfg->seconds,
			       (long)((iob_cfg->seconds - (double)(time_t)iob_cfg->seconds) * 1e9) };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	c->stop = 1;
	uint64_t t1 = clock_now_ns(), c1 = clock_process_cpu_ns();
	for (unsigned i = 0; i < c->threads; i++)
		n += __atomic_load_n(&c->ios[i], __ATOMIC_RELAXED);
	for (unsigned i = 0; i < c->threads; i++)
		pthread_join(tid[i], NULL);
	pthread_barrier_destroy(&c->start);
	row_met(r, "iops", (double)n / ((double)(t1 - t0) / 1e9));
	row_met(r, "cpu_us_per_io", n ? (double)(c1 - c0) / 1e3 / (double)n : NAN);
	return c->err;
}

int exp_poll(void)
{
	static const uint64_t def[] = { 1, 2 };
	static const struct {
		const char *name;
		unsigned flags;
	} modes[] = {
		{ "interrupt", 0 },
		{ "sqpoll", IORING_SETUP_SQPOLL },
		{ "iopoll", IORING_SETUP_IOPOLL },
		{ "sqpoll+iopoll", IORING_SETUP_SQPOLL | IORING_SETUP_IOPOLL },
	};
	uint64_t th[IOB_MAX_LIST];
	int nth = iob_list_or(&iob_cfg->threads, def, ARRAY_SIZE(def), th), failed = 0;
	char why[200];
	int iopoll = raw_iopoll_probe(why, sizeof(why));
	const char *path = iob_data_file(0);
	int fd = path ? open(path, O_RDONLY | O_DIRECT) : -1;
	if (fd < 0) {
		iob_note("error: cannot open the data file");
		return 1;
	}
	iob_title("Polling modes: SQPOLL and IOPOLL on the batched pipeline (raw io_uring, "
		  "depth=batch, registered file)");
	for (size_t m = 0; m < ARRAY_SIZE(modes); m++) {
		for (int t = 0; t < nth; t++) {
			struct poll_cell c = { .flags = modes[m].flags, .threads = (unsigned)th[t],
					       .fd = fd, .fsize = iob_cfg->file_size };
			c.depth = iob_cfg->depth ? iob_cfg->depth : 32;
			c.bs = iob_cfg->block_sizes.n ? iob_cfg->block_sizes.v[0] : 4096;
			struct iob_row r;
			row_init(&r, "poll");
			row_cfg_s(&r, "mode", modes[m].name);
			row_cfg_n(&r, "threads", (double)th[t]);
			row_cfg_n(&r, "depth", c.depth);
			if ((modes[m].flags & IORING_SETUP_IOPOLL) && iopoll != 1) {
				r.status = "unsupported";
				snprintf(r.note, sizeof(r.note), "unsupported here: %.170s", why);
				iob_emit(&r);
				continue;
			}
			if (c.threads > ARRAY_SIZE(c.ios)) {
				r.status = "error";
				snprintf(r.note, sizeof(r.note), "too many threads");
				iob_emit(&r);
				continue;
			}
			iob_progress("[poll] %s threads=%u", modes[m].name, c.threads);
			int rc = poll_cell_run(&c, &r);
			if (rc) {
				r.status = (modes[m].flags & IORING_SETUP_SQPOLL) && rc == -EPERM
						   ? "unsupported" : "error";
				snprintf(r.note, sizeof(r.note), "%s%s", r.status[0] == 'u'
						 ? "unsupported here: io_uring_setup(SQPOLL): " : "",
					 strerror(-rc));
				failed |= r.status[0] == 'e';
			}
			iob_emit(&r);
		}
	}
	close(fd);
	iob_note("SQPOLL's kernel thread belongs to the process, so its CPU is in "
		 "cpu_us_per_io (RUSAGE_SELF); it spins for sq_thread_idle (100 ms) after work");
	if (iopoll != 1)
		iob_note("IOPOLL: unsupported here: %s", why);
	return failed;
}
