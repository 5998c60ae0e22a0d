/*
 * cluster.h - the bottom layer of the compute side (liblotus): the cluster
 * handle, the memory servers and how keys route to them, the table registry,
 * and local clusters (memory servers started as child processes).
 *
 * Layers of src/compute, each including only the headers below it
 * (scripts/check-layers enforces it):
 *
 *   api.c                     the public API, lotus_connect (composes the rest)
 *   txn.c txn_view.c          the two-sided engine (twosided.h)
 *   engine.h engine.c         the engine interface
 *   txn_cache.h txn_cache.c   the record cache / co-partitioning policy
 *   session.h session.c       sessions, sending groups, reply delivery
 *   cluster.h cluster.c       routing, servers, tables, local clusters
 *   cache.h cache.c           the record cache itself (a data structure)
 *   keeper.h keeper.c         the lease keeper (also the one-sided engine's)
 *
 * Request routing: hash partitioning, server = fnv1a64(key) % nservers,
 * unless a placement rule (lotus_options.placement) names the key's table:
 * then server = the big-endian number in the rule's key bytes % nservers.
 * With [cluster] replicas = R > 1 (docs/replication.md) nservers counts the
 * partitions (the config's servers / R) and servers[p] is partition p's
 * primary, as the coordinator (ZooKeeper) named it at connect time.
 * Co-partitioning: compute server c owns the keys with
 * (fnv1a64(key) >> 32) % compute_count == c.
 *
 * Threads: the cluster is shared by every session; after lotus_connect only
 * the table registry changes (tables_mu) and the session groups
 * (groups_mu, session.c).
 */
#ifndef LOTUS_CLUSTER_H
#define LOTUS_CLUSTER_H
#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>
#include "lotus.h"
#include "common/common.h"
#include "common/config.h"
#include "compute/keeper.h"
#include "net/net.h"

#define LOTUS_MAX_TABLES 64
#define LOTUS_DEFAULT_TIMEOUT_MS 10000
#define LOTUS_DEFAULT_LEASE_MS   3000

struct table_ent {
	char name[65];
	uint32_t max_value;
	uint16_t ids[LOTUS_MAX_SERVERS];
	uint8_t place_off, place_len;   /* placement field (place_len 0: hash) */
	uint8_t place_scan_local;       /* LOTUS_PLACE_SCAN_LOCAL */
};

/* A placement rule, copied from lotus_options.placement. */
struct place_rule {
	char table[66];                 /* a name, or a prefix ending in '*' */
	uint8_t off, len, scan_local;
};

struct server_ent {
	char host[256];
	uint16_t port;
	pid_t pid;            /* local clusters: the child process */
};

/* Held by the cluster for the layers above, which alone know their types. */
struct sgroup;
struct engine;
struct txn_cache;

struct lotus_cluster {
	struct lotus_options opts;
	char transport[16];
	unsigned nservers;              /* replicas > 1: the partitions */
	struct server_ent servers[LOTUS_MAX_SERVERS];   /* replicas > 1: the primaries */
	net_ctx_t *net;
	uint64_t timeout_ns;            /* deadline of every wait (opts.timeout_ms) */
	int durable;                    /* the servers log (durability async|sync) */
	int two_phase;                  /* multi-writer commits prepare with their
					   writes: durable, or commit != ONE_PHASE */
	pthread_mutex_t tables_mu;
	unsigned ntables;
	struct table_ent tables[LOTUS_MAX_TABLES];
	unsigned nplace;                /* placement rules (opts.placement is
					   NULL after connect: they live here) */
	struct place_rule place[LOTUS_MAX_TABLES];
	int peers_fd;                   /* local: the memfd the servers read to find
					   each other (-1 if none) */
	char peers_path[32];            /* "/proc/self/fd/N" in the children */
	char secret_path[4096];         /* the cluster secret ("" if none) */
	int secret_fd;                  /* local: the memfd holding a random one */
	uint64_t cluster_id;            /* the cluster every server must announce
					   (0: the first one's); local: made at
					   creation, or learnt from ready lines */
	int local_init;                 /* local: a new cluster, servers get --init */
	/* session.c */
	pthread_mutex_t groups_mu;
	struct sgroup *groups[256];      /* --batch inter: sessions idx/group_size */
	_Atomic unsigned next_session;
	/* api.c */
	const struct engine *engine;    /* lotus_options.engine */
	struct txn_cache *cache;        /* NULL without --cache or co-partitioning */
	unsigned lease_ms;              /* every connection's lease (opts, config, 3000) */
	/* the lease keeper (keeper.h, session.c): progresses every group now
	 * and then, so a session whose thread is busy elsewhere keeps its leases */
	struct lease_keeper keeper;
	/* replicas > 1 (cluster.c): where a lost primary's successor is found */
	struct cluster_repl {
		unsigned replicas;          /* 0 or 1: not replicated */
		char coordinator[1024];
		uint64_t cid;
		struct server_ent members[LOTUS_MAX_SERVERS];   /* the config's servers */
		uint64_t epoch[LOTUS_MAX_SERVERS];              /* per partition, as last read */
		pthread_mutex_t mu;         /* one coordinator question at a time */
		struct coord *co;           /* opened at the first failover, kept */
	} repl;
};

/* Parse the options (config file or local servers), start local servers,
 * create the network context.  On error the cluster is freed. */
int cluster_create(const struct lotus_options *o, lotus_cluster_t **out);
/* A replicated cluster: partition p's primary, as the coordinator names it
 * now, into host and port: one whose ephemeral znode is there (waiting up
 * to wait_ms for one; a lost primary whose session has not ended yet is
 * still named, and the caller's connect fails).  0 or LOTUS_EUNAVAIL. */
int cluster_primary_of(lotus_cluster_t *c, unsigned p, char *host, size_t hlen, uint16_t *port,
		       unsigned wait_ms);
/* Stop local servers, free everything.  NULL is a no-op. */
void cluster_destroy(lotus_cluster_t *c);
/* The server of a key of table tb (tb < ntables): its placement rule's
 * field modulo the servers, else its hash. */
unsigned cluster_route(const lotus_cluster_t *c, lotus_table_t tb, const void *key, size_t klen);
/* Does a scan from key (of table tb) go to its routed server alone? */
bool cluster_scan_local(const lotus_cluster_t *c, lotus_table_t tb, size_t klen);
/* Fill te's placement from the first rule that names te->name. */
void cluster_place_table(const lotus_cluster_t *c, struct table_ent *te);
/* CO partitioning: does this compute server own the key? */
int cluster_owns(const lotus_cluster_t *c, const void *key, size_t klen);
/* The table registry: index of name, or -1 (tables_mu held). */
int cluster_table_find(const lotus_cluster_t *c, const char *name);

#endif
