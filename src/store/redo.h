/*
 * redo.h - the memory server's redo log (docs/design.md, "Storage engine"; the
 * redo log writes of the hybrid I/O paper, "io_uring in Oracle Database", §3.6).
 *
 * The log is a byte stream cut into segment files (DIR/redo-<first-lsn>.log),
 * each opening with a 4 KiB header whose watermark says how far the log was
 * durable (written at most every 100 ms, off the commit path).
 * An LSN is a byte offset in that stream; a record's LSN is the offset just
 * past its end, so "lsn durable" means the record and everything before it
 * are on disk.  Every record carries its length, LSN, transaction id, type
 * and a CRC32C over header and payload; records are 8-byte aligned.
 *
 * Group commit: workers append records into a shared in-memory buffer; one
 * log writer thread takes everything appended since its last write and
 * writes it as one large aligned O_DIRECT write with RWF_DSYNC (or O_DSYNC),
 * through the hybrid I/O layer (io_uring with a registered buffer where
 * available, libaio otherwise).  A partly filled last block is rewritten by
 * the next write.  When a write completes, the writer calls the notify
 * callbacks of every LSN it made durable, in LSN order.
 *
 * Errors: a failed log write (EIO, ENOSPC, ...) makes the log read-only for
 * good: the callbacks waiting for LSNs not yet durable get LOTUS_EDURABLE,
 * and every later append fails with LOTUS_EREADONLY.  Nothing that was not
 * durable is ever reported durable.
 *
 * Threads: redo_append/redo_notify/redo_wait/redo_*_lsn from any thread;
 * callbacks run on the log writer thread and must not block or call
 * redo_wait (they may call redo_append).  open/close/truncate/replay from
 * the owner (the memory server's main thread or its page writer).
 */
#ifndef LOTUS_REDO_H
#define LOTUS_REDO_H
#include <stdint.h>
#include "common/crc32c.h"   /* the records' checksum */
#include "io/io.h"

enum redo_type {
	REDO_COMMIT = 1,   /* writes of a committed txn (payload: wire_write items) */
	REDO_PREPARE = 2,  /* writes + participant list of a prepared txn */
	REDO_DECIDE = 3,   /* commit/abort decision of a prepared txn */
	REDO_REFUSE = 4,   /* this server never prepared the txn and never will */
	REDO_TABLE = 5,    /* a table was created (name, max value, id) */
	REDO_OUTCOMES = 6, /* COMMIT outcomes remembered, logged again at a checkpoint (u64 ids) */
	REDO_USER = 16,    /* first type free for other users */
};

struct redo_opts {
	const char *dir;
	uint64_t segment_bytes;   /* default 64 MiB */
	uint32_t max_write;       /* largest single log write, default 1 MiB */
	enum io_backend backend;  /* AUTO: io_uring, else libaio */
	int use_odsync;           /* 1: open with O_DSYNC instead of RWF_DSYNC per write */
	int prealloc;             /* 1: new segments come zero-filled to segment_bytes
				   * (a spare made ahead by a helper thread), so
				   * that log writes overwrite instead of extending
				   * the file; LOTUS_REDO_PREALLOC=0 turns it off */
};

typedef struct redo redo_t;

/* Open the log for appending at next_lsn (from redo_replay, or 0 for a new
 * log) and start the log writer thread. */
int redo_open(const struct redo_opts *o, uint64_t next_lsn, redo_t **out);
/* Stop the writer after writing everything appended; close the segment. */
void redo_close(redo_t *r);

/* Append one record (payload copied).  *lsn gets its LSN.
 * LOTUS_EREADONLY after a log I/O error; -E2BIG for a payload over 16 MiB. */
int redo_append(redo_t *r, uint8_t type, uint64_t txn_id, const void *payload, uint32_t len,
		uint64_t *lsn);
/* The same, but the record does not wake the log writer: it is written with
 * the next record appended by redo_append, or once somebody waits for it
 * (redo_notify, redo_wait), or after at most 2 ms.  For records whose
 * durability nobody waits for (a 2PC decision implied by durable votes), so
 * that they share a write instead of costing one each. */
int redo_append_lazy(redo_t *r, uint8_t type, uint64_t txn_id, const void *payload,
		     uint32_t len, uint64_t *lsn);
/* Call cb(arg, status) on the log writer thread once lsn is durable (status
 * 0) or can never be (LOTUS_EDURABLE).  If lsn is durable already, cb runs
 * before this returns, on the calling thread. */
int redo_notify(redo_t *r, uint64_t lsn, void (*cb)(void *arg, int status), void *arg);
/* Block until lsn is durable: 0 or LOTUS_EDURABLE. */
int redo_wait(redo_t *r, uint64_t lsn);
uint64_t redo_durable_lsn(redo_t *r);
uint64_t redo_next_lsn(redo_t *r);
/* 0 while the log accepts appends; LOTUS_EREADONLY after an I/O error. */
int redo_status(redo_t *r);

/* Delete the segment files that lie wholly below lsn (after a checkpoint). */
int redo_truncate(redo_t *r, uint64_t lsn);
/* `lotus restore`: the log in dir (not open) was copied up to LSN cut, its
 * last segment cut there.  Fill that segment's last block with zeros and
 * lower its header's mark to the cut, clearing its next-segment flag, so
 * that recovery replays exactly up to the cut.  0, -ENOENT (no segment
 * below cut; nothing to do if there is no segment at all), -EEXIST (a
 * segment at or past the cut) or -errno. */
int redo_restore_tail(const char *dir, uint64_t cut);

/* ---- replication (docs/replication.md) ----
 * A primary's log writer hands every batch to ship() before it writes it,
 * and writes it only if ship() returned 0: so the log never holds what the
 * backups lack.  A backup's log mirrors its primary's byte for byte: it
 * appends the primary's records with redo_append_raw, at the same LSNs, and
 * rolls its segments where the primary's SEGEND records say. */

/* Called on the log writer thread with the stream bytes [from, to) (in the
 * ring: p1[0..n1) then p2[0..n2)), which stay put until it returns.  0: the
 * backups have them (or none is owed them); else the log fails as on an I/O
 * error (-ESTALE: the hook logged why). */
typedef int (*redo_ship_fn)(void *arg, uint64_t from, uint64_t to, const void *p1, size_t n1,
			    const void *p2, size_t n2);
void redo_set_ship(redo_t *r, redo_ship_fn fn, void *arg);
/* Append one record of a primary's stream (header, payload, pad: len =
 * its size), which must be the record after this log's tail (-ESPIPE
 * otherwise).  A SEGEND record ends the segment here.  *lsn: where the
 * tail is now.  Durable as redo_append's records are. */
int redo_append_raw(redo_t *r, const void *rec, size_t len, uint64_t *lsn);
/* The record at the start of p[0..n), which the stream holds at position
 * pos: its size (> 0; p holds all of it), 0 (p holds only part of it), or
 * -EINVAL (not a valid record there: a bad CRC, magic or LSN).  *out: its
 * parts (type REDO_SEGEND_TYPE: the stream goes on at
 * redo_after_segend(lsn)). */
struct redo_rec {
	uint8_t type;
	uint64_t txn_id, lsn;
	const void *payload;   /* inside p */
	uint32_t len;
};
int64_t redo_stream_record(const void *p, size_t n, uint64_t pos, struct redo_rec *out);
#define REDO_SEGEND_TYPE 0xfe
/* Where the stream goes on after a SEGEND record whose LSN is lsn. */
uint64_t redo_after_segend(uint64_t lsn);
/* Read the stream bytes [from, to) of the log in dir (open or not) from its
 * segment files; the bytes the stream skips (segment ends, header blocks)
 * read as zeroes.  0, -ENOENT (no segment holds from: truncated after a
 * checkpoint) or -errno. */
int redo_read_stream(const char *dir, uint64_t from, uint64_t to, void *buf);

/* writes counts group-commit batches (one per wake-up of the log writer);
 * ios counts the I/Os they were split into (pieces of at most max_write). */
struct redo_stats {
	uint64_t writes, records, bytes, syscalls, cpu_ns;
	uint64_t notified, segments_created, segments_deleted;
	const char *backend;
	uint64_t ios;
	uint64_t marks;   /* watermark writes into segment headers */
};
void redo_stats(redo_t *r, struct redo_stats *out);

/* Recovery: call cb for every valid record with LSN > from_lsn, in order.
 * Where no valid record is found (bad CRC, bad length, a gap), replay looks
 * ahead, in this segment and the later ones, for valid records:
 *  - none: a torn tail (the last write was partial, so never acknowledged).
 *    It is cut: the file is truncated there, later segments are renamed
 *    *.cut, and one log line says where and how many bytes were dropped.
 *  - some, but the damaged bytes lie wholly below from_lsn: not needed;
 *    replay skips to the next valid record (one log line).
 *  - some, above: damage in the middle of the log.  REDO_RECOVERY_STRICT
 *    refuses with -EIO and a log line naming the file, the offset and the
 *    LSN range at stake, and changes nothing on disk.  TOLERATE_TAIL cuts
 *    there if the damage and every valid record after it lie in the same
 *    segment; POINT_IN_TIME always cuts there (the records after it are lost,
 *    loudly).  Damage below from_lsn that reaches into it always fails.
 * A log that ends below the watermark of a segment header, past a segment
 * whose header says a next one was created, or in a file whose size is no
 * whole number of 4 KiB blocks was cut, not torn: refused by STRICT, cut
 * (with the watermark lowered) by the other modes.  A log that starts past
 * from_lsn (also past 0: no checkpoint) fails with -ENOENT in every mode.
 * *next_lsn is where appending resumes.  cb returns 0 to go on, or an error
 * to stop the replay.  redo_replay is redo_replay_mode(STRICT). */
enum redo_recovery {
	REDO_RECOVERY_STRICT = 0,        /* default: never drop a record that may be acknowledged */
	REDO_RECOVERY_TOLERATE_TAIL = 1, /* also cut damage in the log's last segment */
	REDO_RECOVERY_POINT_IN_TIME = 2, /* recover up to the first damage, drop the rest */
};
typedef int (*redo_replay_fn)(void *arg, uint64_t lsn, uint8_t type, uint64_t txn_id,
			      const void *payload, uint32_t len);
struct redo_replay_stats {
	uint64_t records, bytes, cut_bytes, segments;
	uint64_t elapsed_ns;
	uint64_t skipped_bytes;               /* damaged, below from_lsn, skipped */
	uint64_t damaged_lsn, damaged_to_lsn; /* mid-log damage found (0: none) */
};
int redo_replay(const char *dir, uint64_t from_lsn, redo_replay_fn cb, void *arg,
		struct redo_replay_stats *st, uint64_t *next_lsn);
int redo_replay_mode(const char *dir, uint64_t from_lsn, enum redo_recovery mode,
		     redo_replay_fn cb, void *arg, struct redo_replay_stats *st,
		     uint64_t *next_lsn);

#endif
