/*
 * pwriter.h - page writers (the DBWR of the Oracle paper): N threads that
 * write buffer-pool pages to one file in large batches, each through its own
 * I/O context (src/io/io.h), with the pool registered ONCE and cloned into
 * every writer's ring so that writes are WRITE_FIXED straight from the pool.
 *
 * The module knows nothing of the store: what to write comes from
 * pwriter_ops (the memory server plugs store_evict_pick / store_evict_done
 * in) or from pwriter_write() jobs.  A page is (page number, buffer); page p
 * goes to offset p * page_size of the file.
 *
 * Threads: pwriter_start / pwriter_stop from one thread; pwriter_kick and
 * pwriter_stats from any thread; pwriter_write, pwriter_submit and
 * pwriter_add_file from any thread but never from a writer's own callbacks
 * (ops or a job's cb), which run on writer threads.
 *
 * Returns 0 or -errno.
 */
#ifndef LOTUS_PWRITER_H
#define LOTUS_PWRITER_H
#include <stddef.h>
#include <stdint.h>
#include "io/io.h"

typedef struct pwriter pwriter_t;

/* One page to write: its number (file offset = page * page_size) and its
 * bytes (page_size of them); frame is the caller's, passed back as is. */
struct pw_page {
	uint64_t page;
	uint32_t frame;
	void *buf;
};

/* Where the writers' eviction work comes from (all optional: NULL ops means
 * the writers only run pwriter_write jobs). */
struct pwriter_ops {
	/* Up to max dirty victims for writer `part` of `nparts` (they are
	 * locked: nobody changes them until done); *dropped += clean pages
	 * freed without a write. */
	size_t (*pick)(void *arg, unsigned part, unsigned nparts, struct pw_page *v, size_t max,
		       size_t *dropped);
	/* The write of v finished: status 0, or -errno (the page must stay). */
	void (*done)(void *arg, const struct pw_page *v, int status);
	/* 1 while frames are short (the writers keep evicting), else 0. */
	int (*need)(void *arg);
	void *arg;
};

struct pwriter_opts {
	unsigned nwriters;        /* 0: 2 */
	int fd;                   /* the file the pages go to (O_DIRECT or not) */
	uint32_t page_size;
	void *region;             /* registered once and cloned (NULL: none) */
	size_t region_len;
	void *region2;            /* a second region registered with it (NULL: none) */
	size_t region2_len;
	unsigned batch;           /* victims per round (default 256) */
	unsigned depth;           /* ring depth (default 256) */
	unsigned interval_ms;     /* periodic look at need() (default 20) */
	enum io_backend backend;  /* AUTO: LOTUS_IO, else io_uring */
	/* Per-writer I/O fault specs for tests, "W=SPEC[;W=SPEC...]" with the
	 * LOTUS_IO_FAULT grammar (e.g. "1=enter:3"); NULL: $LOTUS_PW_FAULT. */
	const char *fault;
	struct pwriter_ops ops;
};

/* Create the donor ring, register the region, start the writers (each
 * creates its ring and clones the registration before this returns). */
int pwriter_start(const struct pwriter_opts *o, pwriter_t **out);
/* Stop and join the writers (finishing what they hold), free everything. */
void pwriter_stop(pwriter_t *pw);
/* Wake every writer to look at need() now; cheap, any thread. */
void pwriter_kick(pwriter_t *pw);
unsigned pwriter_count(const pwriter_t *pw);

/* Write pages[0..n) through writer w (w % nwriters) and wait; status[i] gets
 * 0 or -errno per page.  Adjacent pages with adjacent buffers are coalesced.
 * Returns 0 if every page was written, else the first error. */
int pwriter_write(pwriter_t *pw, unsigned w, const struct pw_page *pages, size_t n, int *status);

/* Add fd to every writer's ring (done in each writer's thread, waited for).
 * Returns a file id >= 1 for pwriter_submit (0 is opts.fd), or -errno. */
int pwriter_add_file(pwriter_t *pw, int fd);
/* Queue pages[0..n) for file id `file` on writer w and return at once; the
 * writer fills status[] and then calls cb(arg, rc) on its thread (rc: 0 or
 * the first error).  pages and status stay the caller's until cb.  0, or
 * -ESHUTDOWN / -ENOMEM (cb is then never called). */
int pwriter_submit(pwriter_t *pw, unsigned w, int file, const struct pw_page *pages, size_t n,
		   int *status, void (*cb)(void *arg, int rc), void *arg);

struct pwriter_stats {
	const char *backend;       /* the writer's backend now: uring, aio, sync */
	uint64_t ios, bytes, pages, fixed_ios, rounds;
	uint64_t job_pages;        /* of pages: written for jobs (checkpoints) */
	uint64_t write_errors;     /* pages whose write failed */
	uint64_t dropped;          /* clean victims freed by this writer's picks */
	uint64_t cpu_ns;           /* the writer thread's CPU time */
	uint64_t io_cpu_ns;        /* of which inside the I/O layer */
	uint64_t syscalls;
	int cloned;                /* 1: the pool registration was cloned in (at start) */
	uint64_t fallbacks;        /* level 2 switches to libaio (0 or 1) */
	int setup_fallback;        /* level 1: the ring never came up */
};
/* Writer i's figures (racy reads of counters: fine for stats). */
void pwriter_stats(pwriter_t *pw, unsigned i, struct pwriter_stats *out);
/* 1 if the region was registered on the donor ring (registrations). */
int pwriter_registered(const pwriter_t *pw);
/* The ring that holds the pool's registration (NULL: none registered), for
 * other rings to clone it (io_ctx_clone_buffers_from; one clone at a time). */
io_ctx_t *pwriter_donor(const pwriter_t *pw);

#endif
