/*
 * memserver.h - a lotus memory server: W worker threads serving transactions
 * over the transport, sharing one record store and one lock manager.
 *
 * Threads: memserver_run() is called by the process's main thread and returns
 * after memserver_stop() (async-signal-safe) or a fatal start-up error.
 */
#ifndef LOTUS_MEMSERVER_H
#define LOTUS_MEMSERVER_H
#include <stdint.h>

struct memserver_opts {
	unsigned id;
	const char *host;        /* listen address */
	uint16_t port;
	unsigned threads;        /* 0: the core count */
	uint64_t memory;         /* buffer pool bytes */
	const char *transport;   /* tcp, sm, ... (NULL: $UCX_TLS or tcp) */
	int json_ready;          /* print one JSON line on stdout when listening */
	unsigned lease_ms;       /* a connection silent this long is lost (0: 3000) */
	/* Durability (docs/durability.md).  durability LOTUS_DUR_NONE (0) keeps
	 * everything in memory and ignores data_dir; ASYNC and SYNC need data_dir:
	 * recovery from it at start, a redo log and checkpoints while running,
	 * and a final checkpoint on a clean stop. */
	int durability;          /* enum lotus_durability (common/config.h) */
	const char *data_dir;
	/* Identity (identity.h): init (--init) lets an empty or missing data_dir
	 * become a new database; cluster_id is the cluster this server belongs
	 * to (0: not known; a durable server then adopts its directory's).  The
	 * server announces it at the door, and clients refuse a server of
	 * another cluster. */
	int init;
	uint64_t cluster_id;
	uint64_t checkpoint_log; /* log growth that triggers a checkpoint (0: 256 MiB) */
	unsigned checkpoint_interval_ms; /* and at least this often (0: no timer) */
	/* The cluster config (NULL: none).  A server asks the servers it lists
	 * about prepared transactions left undecided (termination.c). */
	const char *config_path;
	/* Without config_path: a cluster config file read only to find the other
	 * servers, whenever a prepared transaction needs them; it may be written
	 * after the start (local clusters know the ports only then). */
	const char *peers_path;
	/* What recovery does with damage in the middle of the redo log (enum
	 * redo_recovery: 0 strict refuses; see redo_replay_mode). */
	int recovery_mode;
	/* Per-connection limits (docs/net.md, "Limits"; 0: the default, see
	 * MS_DEFAULT_*): requests parked in lock wait queues, and bytes in flight
	 * (messages held plus replies queued).  Over either, a request is refused
	 * with LOTUS_ELIMIT. */
	unsigned max_parked;
	uint64_t max_conn_bytes;
	/* The front door (docs/net.md): the cluster secret every connection must
	 * prove (NULL: none, loopback only unless insecure), and the most
	 * connections served at once (0: no limit). */
	const char *secret_file;
	int insecure;
	unsigned max_clients;
	/* Tiering (docs/durability.md, "Memory servers larger than memory"):
	 * capacity = bytes of data the server may hold (logical pages); 0 or
	 * <= memory: no tiering, the whole store lives in the buffer pool.  More
	 * than memory needs a data directory: cold pages are evicted to
	 * DIR/pages.swap by page_writers threads (0: min(2, cores)). */
	uint64_t capacity;
	unsigned page_writers;
	/* Misses that do not block (docs/store.md): reads in flight per worker
	 * for requests parked on a non-resident page (0: the default, 32;
	 * UINT32_MAX: none, every miss is a blocking pread). */
	unsigned miss_depth;
	/* Replication (docs/replication.md): replicas > 1 makes this server a
	 * member of partition id / replicas; it registers with the coordinator
	 * (a ZooKeeper ensemble, "HOST:PORT[,...]") before it reports ready,
	 * under a session of lease_ms. */
	unsigned replicas;
	const char *coordinator;
};
#define MS_DEFAULT_MAX_PARKED     1024
/* A transaction step's replies must fit (test_big_reply reads 67.5 MB in one
 * execute); requests beyond it in the same step are refused. */
#define MS_DEFAULT_MAX_CONN_BYTES (256ULL << 20)

/* Runs until stopped.  0 on a clean stop, or an error (message logged). */
int memserver_run(const struct memserver_opts *o);
/* Ask the running server to stop; safe from a signal handler. */
void memserver_stop(void);

#endif
