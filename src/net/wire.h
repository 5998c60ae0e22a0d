/*
 * wire.h - the lotus wire format (docs/design.md, "Wire protocol").
 *
 * A message is a header followed by `count` items.  In a REQ message each item
 * is a request; in a REP message each item is a reply.  Every request gets
 * exactly one reply, matched by (txn_id, tag); replies to the requests of one
 * message go out together in one message unless a request waits for a lock
 * (lazy notification), in which case its reply comes later in another message,
 * or they would exceed WIRE_MAX_MSG, in which case they fill several messages
 * of the same seq.  A memory server that cannot send a reply closes the
 * connection instead.
 *
 *   message := wire_hdr item*               (hdr.length = total bytes)
 *   request := wire_req key[key_len] value[value_len] pad-to-8
 *   reply   := wire_rep key[key_len] value[value_len] pad-to-8
 *
 * All integers are little-endian (both ends are x86-64 or aarch64; a big-endian
 * host would need swaps in wire.c only).  Every length is checked against the
 * bytes received before use (wire_msg_check); a message that fails the check is
 * answered with a WIRE_ERROR message and never touches data.
 *
 * COMMIT requests carry their writes in the value: a sequence of wire_write
 * items, each followed by its key and value and padded to 8.
 * SCAN replies carry their rows in the value: a sequence of wire_row items.
 */
#ifndef LOTUS_WIRE_H
#define LOTUS_WIRE_H
#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define WIRE_MAGIC   0x4c54u   /* "LT" */
#define WIRE_VERSION 1
/* The largest message either side sends or accepts.  It bounds what one
 * message can pin at a receiver; the largest legitimate one is a COMMIT or
 * PREPARE carrying all of a transaction's writes to one server (at most
 * about 250 values of the 64 KiB maximum), or a batch of replies, which the
 * server splits at this size (SCAN replies stop at 4 MiB). */
#define WIRE_MAX_MSG (16u << 20)
/* The most file bytes one OP_BACKUP_READ reply carries. */
#define WIRE_BACKUP_CHUNK (1u << 20)

enum wire_type {
	WIRE_REQ = 1,     /* batch of requests */
	WIRE_REP = 2,     /* batch of replies */
	WIRE_ERROR = 3,   /* message-level error: status in hdr.aux */
	WIRE_HELLO = 4,   /* client -> server: sender = compute id */
	WIRE_PING = 5,    /* liveness (shared memory has no peer error handling) */
	WIRE_PONG = 6,
	WIRE_TYPE_MAX
};

enum wire_op {
	OP_READ = 1,      /* S lock + value */
	OP_READ_X,        /* X lock + value (read-for-update) */
	OP_LOCK_X,        /* X lock, no value back (blind write) */
	OP_INSERT,        /* X lock on an absent key; LOTUS_EEXISTS if present */
	OP_DELETE,        /* X lock on a present key; LOTUS_ENOTFOUND if absent */
	OP_SCAN,          /* arg = max rows; S lock on each returned key; the
			     server may answer fewer (WIRE_REP_F_SCAN_MORE) */
	OP_COMMIT,        /* apply writes in value, release all locks */
	OP_ABORT,         /* release all locks */
	OP_CREATE_TABLE,  /* key = name, arg = max value size; reply arg = table id
			     | max value size << 32 (WIRE_REQ_F_TABLE_OPEN: open an
			     existing table only, else LOTUS_ENOTABLE) */
	OP_STATS,         /* reply value = JSON text of server counters */
	OP_WRITEBACK,     /* upsert key=value outside any transaction: a
			     co-partitioned compute server's evicted dirty
			     record (it owns the key, its own locks cover it) */
	OP_TXN_STATUS,    /* memory server -> memory server: what became of
			     txn_id here?  reply arg = enum wire_txn_status.  A
			     server that never prepared txn_id answers UNKNOWN
			     and refuses to prepare it from then on */
	OP_PREPARE,       /* two-phase commit, phase one: writes in value as in
			     COMMIT (arg = count > 0), hint = bitmask of the
			     writing participants' server indexes (the order of
			     the cluster config).  The txn becomes COMMITTING and
			     the writes are held (logged first on a durable
			     server), not applied, until the COMMIT without
			     writes that follows, an ABORT, or the resolver */
	OP_OS_ATTACH,     /* the one-sided baseline: key = table name, value
			     empty or the u32 chunks known (grow); reply value
			     = struct os_attach_info and each chunk's info and
			     packed rkey (src/onesided/os_layout.h), the region
			     built from the table's records at the first call */
	/* `lotus backup` (src/memserver/backup.c, docs/operations.md): */
	OP_BACKUP_HOLD,   /* arg = W ms (1..10000): hold every commit decision
			     on prepared txns here for W ms, then record the
			     cut LSN; reply arg = the hold's id */
	OP_BACKUP_MARK,   /* arg = hold id: wait for the hold's end; reply arg =
			     its cut LSN, value = the ns it held decisions
			     (decimal text) */
	OP_BACKUP_BEGIN,  /* arg = that cut LSN: wait until the log is durable
			     there, stop checkpoints, list what a restore needs;
			     reply value = "NAME BYTES\n" lines */
	OP_BACKUP_READ,   /* key = a NAME of the list (1..64 bytes; no other
			     name is served), arg = offset: reply value
			     = up to WIRE_BACKUP_CHUNK bytes from there, arg =
			     their count (0: the end) */
	OP_BACKUP_END,    /* the copy is done: checkpoints go on */
	OP_DEX_LOOKUP,    /* `--engine dex` offloading: key = table name, arg =
			     the key as a number; the server walks the table's
			     one-sided region itself; reply value = struct
			     dex_lookup_rep and the record's value
			     (src/onesided/dex.h), or LOTUS_ENOTFOUND */
	/* Replication (src/memserver/replica.c, docs/replication.md), primary
	 * -> backup; txn_id = the primary's epoch (older: LOTUS_ESTATE): */
	OP_REPL_HELLO,    /* the primary starts a stream: reply arg = the
			     backup's log tail, where the stream goes on */
	OP_REPL_SHIP,     /* arg = stream position of value's first byte, value =
			     the primary's log bytes from there; reply (once
			     they are durable here, with durability sync) arg
			     = how far this log holds the stream */
	OP_MAX
};

struct wire_hdr {
	uint16_t magic;
	uint8_t version;
	uint8_t type;
	uint16_t flags;
	uint16_t count;     /* items that follow */
	uint32_t length;    /* whole message, header included */
	uint32_t sender;    /* compute id or memory server id */
	uint64_t seq;
	int32_t aux;        /* WIRE_ERROR: status */
	uint32_t reserved;
};
static_assert(sizeof(struct wire_hdr) == 32, "wire_hdr size");
static_assert(offsetof(struct wire_hdr, length) == 8, "wire_hdr.length");
static_assert(offsetof(struct wire_hdr, seq) == 16, "wire_hdr.seq");

struct wire_req {
	uint8_t op;
	uint8_t cc;         /* enum cc_proto of the transaction */
	uint16_t table;
	uint16_t key_len;
	uint16_t flags;
	uint32_t value_len;
	uint32_t tag;       /* chosen by the client, echoed in the reply */
	uint64_t txn_id;
	uint64_t priority;
	uint64_t hint;      /* record location hint (store_loc_t) or 0 */
	uint64_t arg;
};
static_assert(sizeof(struct wire_req) == 48, "wire_req size");
static_assert(offsetof(struct wire_req, txn_id) == 16, "wire_req.txn_id");
static_assert(offsetof(struct wire_req, hint) == 32, "wire_req.hint");

struct wire_rep {
	uint8_t op;
	uint8_t flags;
	uint16_t key_len;
	int32_t status;     /* 0 or LOTUS_E* / -errno */
	uint32_t tag;
	uint32_t value_len;
	uint64_t txn_id;
	uint64_t loc;       /* record location for the client's cache */
	uint64_t arg;       /* SCAN: rows; CREATE_TABLE: table id; READ/READ_X:
			       the record's version (store_rec_version) */
};
static_assert(sizeof(struct wire_rep) == 40, "wire_rep size");
static_assert(offsetof(struct wire_rep, txn_id) == 16, "wire_rep.txn_id");

#define WIRE_REP_F_HINT_STALE 0x1   /* the request's hint did not validate */
#define WIRE_REP_F_DEP        0x4   /* the read saw a change whose commit
				       record is not durable yet (sync): its
				       txn's read-only COMMIT there waits */
#define WIRE_REP_F_SCAN_MORE  0x2   /* SCAN: the server capped its answer (rows or
				       bytes); the reply's key is the last key it
				       covered, and rows after it may exist */
#define WIRE_REP_F_VERSION    0x8   /* READ/READ_X: arg is the record's version
				       (a server without versions leaves it
				       clear, and the client reports none) */
#define WIRE_REQ_F_TABLE_OPEN 0x2   /* CREATE_TABLE: open, never create */
#define WIRE_REQ_F_SCAN_AFTER 0x2   /* SCAN: rows with key > the key given (a
				       continuation), not >= */
#define WIRE_REQ_F_COMMITTING 0x1   /* COMMIT without writes (arg 0): the
				       WOUND_WAIT round, move the txn to
				       COMMITTING and keep its locks; the COMMIT
				       that follows brings the writes */

/* OP_TXN_STATUS answers (wire_rep.arg). */
enum wire_txn_status {
	WIRE_TXN_COMMITTED = 1,
	WIRE_TXN_ABORTED = 2,
	WIRE_TXN_PREPARED = 3,     /* prepared, undecided */
	WIRE_TXN_UNKNOWN = 4,      /* never prepared here (now refused) */
};

/* One write inside a COMMIT's value. */
struct wire_write {
	uint8_t op;         /* OP_READ_X/OP_LOCK_X (update), OP_INSERT, OP_DELETE */
	uint8_t pad;
	uint16_t table;
	uint16_t key_len;
	uint16_t pad2;
	uint32_t value_len;
	uint32_t pad3;
	uint64_t hint;
};
static_assert(sizeof(struct wire_write) == 24, "wire_write size");

/* One row inside a SCAN reply's value. */
struct wire_row {
	uint16_t key_len;
	uint16_t pad;
	uint32_t value_len;
	uint64_t loc;
};
static_assert(sizeof(struct wire_row) == 16, "wire_row size");

static inline size_t wire_pad8(size_t n) { return (n + 7) & ~(size_t)7; }

/* ---- building ------------------------------------------------------------ */
/* A growable message buffer.  Owned by one thread. */
struct wire_buf {
	unsigned char *data;
	size_t len, cap;
	unsigned count;
};
void wire_buf_init(struct wire_buf *b);
void wire_buf_free(struct wire_buf *b);
/* Make room for cap bytes in all (at most WIRE_MAX_MSG) unless there is:
 * one allocation instead of doubling from 4 KiB.  0 or -ENOMEM. */
int wire_buf_prealloc(struct wire_buf *b, size_t cap);
/* Start a message (resets the buffer). */
int wire_buf_begin(struct wire_buf *b, enum wire_type type, uint32_t sender, uint64_t seq);
/* Append an item; key and value are copied.  -ENOMEM, -E2BIG (message limit). */
int wire_buf_add_req(struct wire_buf *b, const struct wire_req *r, const void *key,
		     const void *value);
int wire_buf_add_rep(struct wire_buf *b, const struct wire_rep *r, const void *key,
		     const void *value);
/* Reserve room for an item whose value is written in place by the caller:
 * returns a pointer to value_len bytes (valid until the next append). */
void *wire_buf_add_rep_inplace(struct wire_buf *b, const struct wire_rep *r, const void *key);
/* Seal: write count and length into the header.  Returns the message length. */
size_t wire_buf_end(struct wire_buf *b);
/* Hand the bytes to a sender that takes ownership; the buffer is emptied. */
unsigned char *wire_buf_detach(struct wire_buf *b, size_t *len);

/* Append (w, key, value) to a byte buffer as one COMMIT write item / scan row. */
int wire_buf_append_write(struct wire_buf *b, const struct wire_write *w, const void *key,
			  const void *value);
int wire_buf_append_row(struct wire_buf *b, const struct wire_row *row, const void *key,
			const void *value);

/* ---- parsing ------------------------------------------------------------- */
/* Check a whole message: header fields, total length, and every item's lengths
 * (and, for REQ, op codes and key lengths; COMMIT writes are checked too).
 * Returns 0, LOTUS_EPROTO (malformed) or LOTUS_EVERSION. */
int wire_msg_check(const void *msg, size_t len);

struct wire_iter {
	const unsigned char *p, *end;
	unsigned left;
};
/* After wire_msg_check succeeded. */
void wire_iter_init(struct wire_iter *it, const void *msg, size_t len);
/* Next item: 1 with the pointers set, 0 at the end, LOTUS_EPROTO if malformed. */
int wire_next_req(struct wire_iter *it, const struct wire_req **r, const unsigned char **key,
		  const unsigned char **value);
int wire_next_rep(struct wire_iter *it, const struct wire_rep **r, const unsigned char **key,
		  const unsigned char **value);
/* Iterate COMMIT writes / SCAN rows inside a value of len bytes. */
int wire_next_write(struct wire_iter *it, const struct wire_write **w, const unsigned char **key,
		    const unsigned char **value);
int wire_next_row(struct wire_iter *it, const struct wire_row **row, const unsigned char **key,
		  const unsigned char **value);
void wire_iter_bytes(struct wire_iter *it, const void *p, size_t len, unsigned count);

const char *wire_type_name(unsigned type);
const char *wire_op_name(unsigned op);

#endif
