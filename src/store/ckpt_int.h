/*
 * ckpt_int.h - checkpoint internals shared by the three files of the module:
 *
 *   ckpt.c          the checkpoint run: change gate, one checkpoint, the
 *                   page writer thread, open / close
 *   ckpt_files.c    file names, atomic replacement, pages-X.crc, MANIFEST
 *   ckpt_recover.c  recovery from the images (eager and tiered / lazy)
 *
 * Only the ckpt*.c files include it; everyone else uses store/ckpt.h.
 */
#ifndef LOTUS_CKPT_INT_H
#define LOTUS_CKPT_INT_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "common/common.h"
#include "store/ckpt.h"
#include "store/pwriter.h"

#define CK_GATE_SHARDS   64

/* What the manifest says about one checkpoint. */
struct ck_info {
	uint64_t seq;        /* 0: none */
	uint64_t begin_lsn, pages_used;
	uint64_t need_lsn;   /* recovery from this image reads the log from here:
			      * min(begin, oldest PREPARE undecided at begin) */
	unsigned image;      /* 0 = a, 1 = b */
};

struct gate_shard {
	int64_t active;
} __attribute__((aligned(CACHELINE)));

/* The log-growth trigger: a redo_notify callback may outlive the ckpt. */
struct trigger {
	pthread_mutex_t mu;
	int refs;
	struct ckpt *c;      /* NULL once the ckpt closed */
};

struct ckpt {
	store_t *st;
	redo_t *log;
	char dir[4096];
	unsigned max_inflight;
	enum io_backend backend;
	uint64_t log_trigger;
	unsigned interval_ms;
	int checkpoint_on_close;
	uint32_t page_size;
	uint64_t npages;            /* pool pages (tiered: logical pages) */
	int tiered;                 /* store_tiered(): pages are reached through pins */
	unsigned pin_max;           /* tiered: most pages pinned at once */

	/* gate */
	int closed;
	struct gate_shard gate[CK_GATE_SHARDS];

	/* run state, under run_mu */
	pthread_mutex_t run_mu;
	uint8_t *stale;             /* per page: bit i = image i must be rewritten */
	uint32_t *crc[2];           /* per image: CRC of each page it holds */
	uint64_t crc_n[2];          /* entries valid in crc[i] (pages 0..n-1) */
	uint64_t marked_upto;       /* pages <= this had their stale bits set once */
	struct ck_info last, prev;
	uint64_t seq_floor;
	uint64_t recovered_seq;     /* ckpt_opts.recovered_seq */
	void (*on_begin)(void *arg);
	void *on_begin_arg;         /* after a fallback: the damaged checkpoint's seq */
	unsigned char *staging;
	size_t staging_bytes;
	int own_staging;            /* mmap'ed here (else the caller's: ckpt_opts) */
	/* Through the page writers (ckpt_opts.writers): each image's fd, open
	 * for the ckpt's life, and its file id in the writers' rings. */
	pwriter_t *pw;
	int pw_fd[2], pw_file[2];
	unsigned pw_next;           /* round robin over the writers */
	uint64_t keep_lsn;          /* atomic */
	uint64_t runs;              /* checkpoints run (under run_mu): a backup's copy
				       is whole only if none ran since its cut */
	uint64_t backup_until;      /* atomic: no checkpoint before this
				       (clock_now_ns; ckpt_backup_pin) */

	/* page writer thread */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	int thread_started, stop, kicked, armed;
	struct trigger *trig;
	uint64_t last_begin;        /* atomic: begin LSN of the last checkpoint */
	uint64_t last_seq;          /* atomic: its seq (0: none yet) */
	uint64_t last_wall_ns;      /* atomic: when it was written (0: before this run) */
};

/* The manifest as read back (ck_manifest_read). */
struct manifest {
	uint32_t page_size;
	struct ck_info cur, prev;
	uint64_t log_from;
	unsigned ntables;
	struct { char name[STORE_TABLE_NAME_MAX + 1]; uint32_t max_value; } tables[STORE_MAX_TABLES];
};

/* ---- ckpt_files.c ---- */

/* out = DIR/name */
void ck_path(char *out, size_t n, const char *dir, const char *name);
/* "pages-a.dat" / "pages-b.dat" (crc = 0) or their ".crc" files (crc = 1) */
const char *ck_image_name(unsigned image, int crc);
/* Write MANIFEST for checkpoint cur (prev: the one before; log_from: the
 * log is kept from this LSN), atomically.  0 or -errno. */
int ck_manifest_write(struct ckpt *c, const struct ck_info *cur, const struct ck_info *prev,
		      uint64_t log_from);
/* 0, -ENOENT (no manifest: a new database) or -EIO (damaged, logged). */
int ck_manifest_read(const char *dir, struct manifest *m);
/* Read DIR/pages-X.crc of image (seq: the checkpoint it must belong to, 0:
 * any).  0 (*crc malloc'ed, *n entries), or -errno / -EIO (logged unless
 * quiet). */
int ck_crc_read(const char *dir, unsigned image, uint64_t seq, uint32_t page_size,
		uint32_t **crc, uint64_t *n, int quiet);
/* Write pages-X.crc of image from c->crc[image] (npages entries), atomically. */
int ck_crc_write(struct ckpt *c, unsigned image, uint64_t seq, uint64_t npages);

#endif
