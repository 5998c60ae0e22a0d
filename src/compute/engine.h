/*
 * engine.h - the transaction engine interface: what the public transaction
 * API (lotus_txn_*, lotus_session_poll) and the drivers above it call, and
 * what every engine implements.  Three engines sit below it as siblings:
 *
 *   twosided  lotus itself: requests to the memory servers' lock managers
 *             and stores as two-sided messages (txn.c, txn_view.c)
 *   onesided  the Sherman/Deft-style baseline over UCX RMA (issue 13)
 *   dex       DEX over the same RMA regions: compute-side partitioning,
 *             a coherence-free index cache, offloading (docs/dex.md)
 *
 * The cluster picks one at lotus_connect() (lotus_options.engine); nothing
 * above this header asks which one it got.
 *
 * A transaction handle starts with struct lotus_txn (the part every engine
 * shares: engine, session, id, priority); an engine allocates its own larger
 * struct around it and finds it again with container_of.
 *
 * Steps are asynchronous: execute, commit and abort start a step and return
 * 0 (the callback then runs exactly once, from the engine's poll) or an
 * error (the callback never runs).  The synchronous lotus_txn_* forms wait
 * by calling poll until the callback ran (api.c).
 *
 * Threads: a session and its transactions belong to one thread, which makes
 * every call below on them; callbacks run on that thread, from poll.
 *
 * Counting: every engine keeps per-session counters of its network work per
 * transaction attempt (struct lotus_txn_counters, lotus.h): round trips
 * (waits for a network completion), operations on the wire by type, and the
 * bytes each sends and receives, split by how the attempt ended.  An engine
 * accumulates an attempt in a struct engine_attempt with the helpers below
 * and moves it into the session's counters when the attempt ends.
 */
#ifndef LOTUS_ENGINE_H
#define LOTUS_ENGINE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lotus.h"

/* The shared head of every engine's transaction. */
struct lotus_txn {
	const struct engine *eng;
	lotus_session_t *s;
	uint64_t id;              /* this attempt's id (new on restart) */
	uint64_t prio;            /* kept by restart, new on recycle */
};

enum engine_op_kind {
	ENGINE_READ,              /* S lock, read */
	ENGINE_READ_X,            /* X lock, read (read-for-update) */
	ENGINE_WRITE,             /* X lock, value applied at commit */
	ENGINE_INSERT,
	ENGINE_DELETE,
	ENGINE_SCAN,              /* count rows with key >= key */
};

/* One operation to stage.  Keys and values are copied by stage(). */
struct engine_op {
	enum engine_op_kind kind;
	lotus_table_t table;
	const void *key;
	size_t klen;
	const void *value;        /* WRITE, INSERT */
	size_t vlen;
	unsigned count;           /* SCAN */
};

struct engine {
	const char *name;         /* "twosided", "onesided", "dex" */
	/* Optional (NULL: nothing to do).  cluster_open runs at the end of
	 * lotus_connect (servers reachable, no table yet); cluster_close at the
	 * start of lotus_disconnect.  session_open/close run after the session
	 * layer has opened / before it closes the session. */
	int (*cluster_open)(lotus_cluster_t *c);
	void (*cluster_close)(lotus_cluster_t *c);
	int (*session_open)(lotus_session_t *s);
	void (*session_close)(lotus_session_t *s);

	/* lotus_session_poll: drive the network, complete steps, run callbacks.
	 * Returns the network events handled (>= 0). */
	int (*poll)(lotus_session_t *s, int timeout_ms);

	/* Transactions (the errors are those lotus.h documents). */
	int (*begin)(lotus_session_t *s, lotus_txn_t **out);
	/* Reuse after the end (new id); new_priority: recycle, else restart. */
	int (*restart)(lotus_txn_t *t, bool new_priority);
	void (*free)(lotus_txn_t *t);
	/* Stage one operation: its op index >= 0, or a (sticky) error. */
	int (*stage)(lotus_txn_t *t, const struct engine_op *op);
	int (*execute)(lotus_txn_t *t, lotus_txn_cb cb, void *arg);
	int (*commit)(lotus_txn_t *t, lotus_txn_cb cb, void *arg);
	int (*abort)(lotus_txn_t *t, lotus_txn_cb cb, void *arg);
	/* 1 once a commit or abort step has ended the transaction (it holds
	 * nothing); the synchronous commit aborts a failed one that is not. */
	int (*finished)(const lotus_txn_t *t);
	int (*result)(const lotus_txn_t *t, int op, const void **value, size_t *vlen);
	/* Optional (NULL: LOTUS_EUNSUPPORTED): lotus_txn_result_version. */
	int (*result_version)(const lotus_txn_t *t, int op, uint64_t *version);
	int (*scan_rows)(const lotus_txn_t *t, int op);
	int (*scan_row)(const lotus_txn_t *t, int op, unsigned i, const void **key, size_t *klen,
			const void **value, size_t *vlen);

	/* The session's counters so far (lotus_session_txn_counters). */
	void (*counters)(const lotus_session_t *s, struct lotus_txn_counters *out);
	/* Optional: the engine's own cache (lotus_cluster_cache_counters); NULL:
	 * the record cache's (txn_cache.c). */
	void (*cache_counters)(lotus_cluster_t *c, struct lotus_cache_counters *out);
};

/* The engine of that kind, or NULL if this build has none (api.c: the
 * engines below are declared here, defined by their implementations). */
const struct engine *engine_find(enum lotus_engine kind);
const char *engine_kind_name(enum lotus_engine kind);

extern const struct engine engine_twosided;
extern const struct engine engine_onesided;   /* src/onesided/os_lotus.c */
extern const struct engine engine_dex;        /* src/onesided/dex_engine.c */

/* ---- counting helpers (any engine) ----------------------------------------- */

/* One attempt's network work, until it ends. */
struct engine_attempt {
	bool open;                /* something counted since the last end */
	uint64_t round_trips, ops, bytes_sent, bytes_recv;
	struct lotus_op_counters type[LOTUS_OP_TYPES];
	uint64_t servers;         /* bit i: a request went to server i */
};

/* An attempt runs from its first step to the end of its commit or abort
 * (counting a step starts it, too). */
static inline void engine_attempt_start(struct engine_attempt *a)
{
	a->open = true;
}

static inline void engine_count_round_trip(struct engine_attempt *a)
{
	a->open = true;
	a->round_trips++;
}

/* One operation of type ty (an index into the engine's type names) with the
 * bytes it put on the wire; its answer's bytes come with engine_count_recv. */
static inline void engine_count_op(struct engine_attempt *a, unsigned ty, uint64_t sent)
{
	a->open = true;
	a->ops++;
	a->bytes_sent += sent;
	if (ty < LOTUS_OP_TYPES) {
		a->type[ty].ops++;
		a->type[ty].bytes_sent += sent;
	}
}

static inline void engine_count_recv(struct engine_attempt *a, unsigned ty, uint64_t recv)
{
	a->open = true;
	a->bytes_recv += recv;
	if (ty < LOTUS_OP_TYPES)
		a->type[ty].bytes_recv += recv;
}

/* The attempt ended (committed, or not): add it to out and start afresh.
 * Without a start since the last end it adds nothing (an abort after a
 * failed commit is the same attempt). */
void engine_attempt_end(struct engine_attempt *a, bool committed, struct lotus_txn_counters *out);

#endif
