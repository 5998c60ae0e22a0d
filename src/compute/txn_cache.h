/*
 * txn_cache.h - the record cache and co-partitioning as a policy the
 * two-sided engine calls through a hook table (the Lotus paper's
 * record-level caching and co-partitioning, its §2.3; docs/design.md).
 * Above session.h, below the engines: it knows keys, values and local
 * locks, never a transaction's structure, and never calls an engine.
 *
 * Non-partitioned (--partitioning none, --cache): location hints.  A request
 * carries the cached location (hint); every reply's location refreshes it
 * (on_reply); a key that is gone drops it.  A hint is never trusted for data:
 * the memory server validates it.
 *
 * Co-partitioned (--partitioning co): this compute server owns the keys
 * cluster_owns() says it does.  For them the engine takes local locks
 * (lock, begin_commit, release) in a lock table with the same protocols, and
 * the cache holds their data: read serves a hit; settle after the commit
 * fills values read from the memory servers, and replaces (or drops) the
 * values written, which the memory servers also got in the COMMIT
 * (write-through), so the cache is a clean copy of committed data.  After a
 * failed or unknown commit it forgets the written keys.
 *
 * A local lock that must wait parks the caller's struct cache_waiter; the
 * lock manager's notify (any thread) posts it to the waiter's session, where
 * post.fn runs inside that group's network dispatch with the result.
 *
 * Write-backs (dirty entries evicted; none while the engine writes through)
 * go through a session of the policy's own, under its mutex, so an eviction
 * needs no knowledge of the evicting thread's session.
 *
 * Threads: every hook may be called from any thread.
 */
#ifndef LOTUS_TXN_CACHE_H
#define LOTUS_TXN_CACHE_H
#include "compute/session.h"
#include "lock/lock.h"

struct cache_key {
	uint16_t table;           /* index in cluster->tables */
	uint16_t klen;
	const void *key;
};

/* A parked local lock request; the engine sets post.fn and s. */
struct cache_waiter {
	struct lock_waiter lw;
	struct sess_post post;
	lotus_session_t *s;
	int result;               /* the lock manager's answer (0: granted) */
};

/* One op of a transaction that ended, as the cache sees it. */
struct cache_settle {
	struct cache_key k;
	uint8_t write;            /* 0, or OP_LOCK_X / OP_INSERT / OP_DELETE */
	uint8_t applies;          /* the write took effect (if the commit did) */
	uint8_t local;            /* its lock was local (co-partitioned key) */
	uint8_t fill;             /* a value it read from the memory server */
	const void *rval, *wval;
	uint32_t rlen, wlen;
};

struct txn_cache;

struct txn_cache_ops {
	/* The location hint to send with a request of wire op `op` (0: none). */
	uint64_t (*hint)(struct txn_cache *tc, const struct cache_key *k, uint8_t op);
	/* A reply to such a request; 1 if it says the hint sent was stale. */
	int (*on_reply)(struct txn_cache *tc, const struct cache_key *k, uint8_t op, uint64_t hint,
			const struct wire_rep *r);
	/* Co-partitioning: is the key this compute server's? */
	int (*owns)(struct txn_cache *tc, const struct cache_key *k);
	/* Local lock of transaction (id, prio), whose lock-table entry *lt the
	 * first call creates: 0 held, 1 parked (w->post runs later), or an
	 * error (refused: LOTUS_EABORTED, LOTUS_EPREEMPTED, -ENOMEM). */
	int (*lock)(struct txn_cache *tc, lock_txn_t **lt, uint64_t id, uint64_t prio,
		    const struct cache_key *k, int exclusive, struct cache_waiter *w);
	int (*begin_commit)(struct txn_cache *tc, lock_txn_t *lt);
	void (*release)(struct txn_cache *tc, lock_txn_t **lt);
	/* Co-partitioning data: 1 and the value (up to cap; *vlen its length) on
	 * a hit, 0 on a miss.  buf NULL: is the key cached at all? */
	int (*read)(struct txn_cache *tc, const struct cache_key *k, void *buf, uint32_t cap,
		    uint32_t *vlen);
	/* The transaction ended: err 0 committed, else failed or unknown. */
	void (*settle)(struct txn_cache *tc, const struct cache_settle *op, int err);
};

struct txn_cache {
	const struct txn_cache_ops *ops;
};

/* The cluster's policy: *out NULL when there is neither a cache nor
 * co-partitioning. */
int txn_cache_create(lotus_cluster_t *c, struct txn_cache **out);
/* Write back what is dirty (clean shutdown), then free.  NULL: no-op. */
void txn_cache_destroy(struct txn_cache *tc);
/* lotus_cluster_cache_counters of the record cache (zeros without one; any
 * thread).  api.c asks the engine's own first (engine.h cache_counters). */
void txn_cache_counters(lotus_cluster_t *c, struct lotus_cache_counters *out);

#endif
