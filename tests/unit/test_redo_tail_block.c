/*
 * test_redo_tail_block - what a log write puts on disk past the end of the
 * records it covers is zero, on every backend.  Replay tells a torn tail (cut)
 * from damage (refused) by that: past the durable end a file holds zeroes,
 * so a record there that is whole-looking but fails its checksum is damage.
 * The writer used to write a batch's partial last block straight from the
 * ring while appenders went on copying the next records into it, so the
 * disk got whatever part of them was copied by then; when no later write
 * replaced that block (the log failed next, or a crash), a record caught half
 * copied made replay refuse the log ("its last record is complete ... but
 * fails its checksum": test_redo_fault, once, under ASan).
 *
 * Made deterministic with LOTUS_REDO_DELAY_MS (the writer sleeps between
 * taking a batch and writing it): record A starts a batch, B is appended
 * during the sleep, and once A is durable the file past A's end is read
 * before B's own batch can have been written (its sleep has not ended).
 */
#include <time.h>
#include "store/redo.h"
#include "test_redo_util.h"

#define DELAY_MS 600
#define TB_BLOCK 4096   /* the log's write unit (REDO_BLOCK) */

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* 1: checked, 0: the timing did not allow a verdict (try again) */
static int attempt(const char *dir, enum io_backend b)
{
	struct redo_opts o = { .dir = dir, .backend = b, .segment_bytes = 256 << 10 };
	redo_t *log;
	unsigned char a[100], bb[200];
	uint64_t la, lb;
	CHECK_RC(redo_open(&o, 0, &log));
	uint32_t na = tdur_payload(1, a, sizeof(a)), nb = tdur_payload(2, bb, sizeof(bb));
	uint64_t t_a = now_ms();
	CHECK_RC(redo_append(log, REDO_USER, 1, a, na, &la));
	usleep(DELAY_MS * 1000 / 5);   /* the writer took A and sleeps */
	CHECK_RC(redo_append(log, REDO_USER, 2, bb, nb, &lb));
	CHECK_RC(redo_wait(log, la));
	int verdict = redo_durable_lsn(log) < lb;   /* else B went with A's batch */
	unsigned char blk[TB_BLOCK];
	char path[1300];
	snprintf(path, sizeof(path), "%s/redo-%016x.log", dir, 0);
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	uint64_t from = la, to = (la | (TB_BLOCK - 1)) + 1;   /* the first segment: offset = LSN */
	CHECK_EQ(pread(fd, blk, to - from, (off_t)from), (ssize_t)(to - from));
	close(fd);
	/* B's batch writes only after a second sleep that begins once A's
	 * batch is durable, which is DELAY_MS after A's append at the soonest */
	verdict = verdict && now_ms() < t_a + 2 * DELAY_MS;
	unsigned nonzero = 0;
	for (uint64_t i = 0; i < to - from; i++)
		nonzero += blk[i] != 0;
	if (verdict) {
		printf("%s: A ends at %llu, B (appended while A's write waited) at %llu; "
		       "%u non-zero bytes on disk past A's end in its last block\n",
		       tdur_backend_name(b), (unsigned long long)la, (unsigned long long)lb, nonzero);
		CHECK_EQ(nonzero, 0);
	}
	CHECK_EQ(redo_wait(log, lb), 0);
	redo_close(log);
	return verdict;
}

int main(void)
{
	static const enum io_backend backends[] = { IO_BACKEND_URING, IO_BACKEND_AIO,
						    IO_BACKEND_SYNC };
	char sub[1200], delay[16];
	const char *dir = tdur_setup();
	int n = 0, checked = 0;
	snprintf(delay, sizeof(delay), "%d", DELAY_MS);
	setenv("LOTUS_REDO_DELAY_MS", delay, 1);
	setenv("LOTUS_REDO_MARK_MS", "0", 1);   /* no header writes in between */
	for (unsigned b = 0; b < 3; b++) {
		struct io_opts probe = { .backend = backends[b] };
		io_ctx_t *ctx;
		if (io_ctx_create(&probe, &ctx) < 0) {
			printf("%s unavailable here, skipped\n", tdur_backend_name(backends[b]));
			continue;
		}
		io_ctx_destroy(ctx);
		int ok = 0;
		for (int k = 0; k < 3 && !ok; k++) {
			snprintf(sub, sizeof(sub), "%s/log%d", dir, n++);
			ok = attempt(sub, backends[b]);
			if (!ok)
				printf("%s: too slow for a verdict, again\n", tdur_backend_name(backends[b]));
		}
		checked += ok;
	}
	if (!checked)
		tdur_skip("skip: no backend ran in time for a verdict (a loaded host)");
	tdur_cleanup();
	printf("ok\n");
	return 0;
}
