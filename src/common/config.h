/*
 * config.h - the cluster configuration file (INI) shared by every process.
 *
 *   # comment                      ('#' or ';' at line start, or after blanks)
 *   [cluster]
 *   transport = tcp                ; tcp|sm|rc|ud|dc
 *   cc = no_wait                   ; no_wait|wait_die|wound_wait
 *   durability = none              ; none|async|sync
 *   commit = two_phase             ; two_phase|one_phase (multi-server writes)
 *   compute_servers = 1
 *   timeout_ms = 10000             ; clients: deadline of every wait (ms)
 *   lease_ms = 3000                ; every process: a peer silent this long is
 *                                  ; lost, and so are its transactions (ms)
 *   secret_file = cluster.key      ; the shared secret every connection proves
 *                                  ; (relative: to this file's directory)
 *   max_clients = 0                ; connections per memory server; 0: no limit
 *   cluster_id = prod-east         ; the cluster's identity: 16 hex digits, or a
 *                                  ; name (hashed); default: derived from the
 *                                  ; secret, else from the server list
 *   replicas = 1                   ; servers per partition (1..16, default 1);
 *                                  ; must divide the server count: partition p
 *                                  ; is servers p*R .. p*R+R-1
 *   coordinator = zk1:2181,zk2:2181 ; the ZooKeeper ensemble holding the
 *                                  ; partitions' configuration; required when
 *                                  ; replicas > 1 (docs/replication.md)
 *
 *   [memserver 0]                  ; ids are 0..N-1, each exactly once
 *   listen = 10.0.0.1:7000         ; required
 *   threads = 8                    ; 0 (default): follow the core count
 *   memory = 16G                   ; default 1G; K/M/G/T are powers of 1024
 *   data_dir = /var/lib/lotus/ms0  ; default: none (no log, no checkpoint);
 *                                  ; relative: to this file's directory
 *   capacity = 64G                 ; data it may hold; default: = memory (no
 *                                  ; tiering); more than memory needs data_dir
 *   page_writers = 2               ; page-writer threads (tiering only);
 *                                  ; 0 (default): min(2, cores)
 *
 * Every section is optional except at least one [memserver N].  Command-line
 * flags override the file: the CLI loads the file, then calls config_set()
 * for each flag.
 *
 * Errors: config_load() prints ONE line "lotus: FILE:LINE: reason" (or
 * "lotus: FILE: reason" when no line applies) and returns LOTUS_ECONFIG.
 *
 * Threads: no global state; any thread may use its own struct.
 */
#ifndef LOTUS_CONFIG_H
#define LOTUS_CONFIG_H
#include <stdint.h>
#include <stdio.h>
#include "lotus.h"

#define LOTUS_MAX_SERVERS 64

enum lotus_durability { LOTUS_DUR_NONE = 0, LOTUS_DUR_ASYNC = 1, LOTUS_DUR_SYNC = 2 };

#define CONFIG_DEFAULT_MEMORY (1ULL << 30)
#define CONFIG_MAX_REPLICAS 16

struct lotus_server_config {
	unsigned id;             /* == its index in servers[] */
	char host[256];
	uint16_t port;
	unsigned threads;        /* 0: follow the core count */
	uint64_t memory;         /* bytes */
	char data_dir[4096];     /* "" if none */
	uint64_t capacity;       /* bytes of data it may hold; 0: = memory */
	unsigned page_writers;   /* 0: the default (min(2, cores)) */
};

struct lotus_config {
	char transport[16];      /* "tcp", "sm", "rc", "ud", "dc" */
	int cc;                  /* enum lotus_cc */
	int durability;          /* enum lotus_durability */
	int commit;              /* enum lotus_commit: TWO_PHASE (default) or ONE_PHASE */
	unsigned compute_servers;
	unsigned timeout_ms;     /* compute side: deadline of every wait; 0: default */
	unsigned lease_ms;       /* every connection's lease; 0: default (3000) */
	char secret_file[4096];  /* "" if none */
	unsigned max_clients;    /* per memory server; 0: no limit */
	uint64_t cluster_id;     /* [cluster] cluster_id; 0: not given */
	unsigned replicas;       /* servers per partition; 0 or 1: no replication */
	char coordinator[1024];  /* ZooKeeper "HOST:PORT[,HOST:PORT...]"; "" if none */
	unsigned nservers;
	struct lotus_server_config servers[LOTUS_MAX_SERVERS];
};

/* tcp transport, no_wait, no durability, two-phase commit, 1 compute server,
 * no servers. */
void config_defaults(struct lotus_config *c);

/* Defaults, then the file.  0 or LOTUS_ECONFIG (one line on stderr). */
int config_load(const char *path, struct lotus_config *out);

/*
 * Set one key as if read from the file: server < 0 names a [cluster] key,
 * otherwise a key of servers[server] (which must be < nservers).  For flags.
 * 0, -ENOENT (no such key) or -EINVAL/-ERANGE (bad value); *why, if not
 * NULL, gets a static reason on error.
 */
int config_set(struct lotus_config *c, int server, const char *key, const char *value,
	       const char **why);

/* A cluster id as cluster_id = / --cluster-id spell it: 16 hex digits are
 * the id itself, any other name of 1..64 characters [A-Za-z0-9._-] is
 * hashed to one.  0, or -EINVAL (*out untouched).  Never yields 0. */
int config_parse_cluster_id(const char *s, uint64_t *out);
/* The cluster id derived from the server list (ids, hosts and ports): the
 * rule of last resort, for a config with neither cluster_id nor a secret. */
uint64_t config_servers_cluster_id(const struct lotus_config *c);

/* Servers per partition (1 when replicas is 0), and the partitions. */
unsigned config_replicas(const struct lotus_config *c);
static inline unsigned config_partitions(const struct lotus_config *c)
{
	return c->nservers / config_replicas(c);
}

/* Index of server id in c->servers, or -ENOENT. */
int config_find_server(const struct lotus_config *c, unsigned id);

/* Write c in the file format (config_load reads it back equal).  0 or -EIO. */
int config_write(FILE *f, const struct lotus_config *c);
/* v as config_write writes sizes (the largest exact K/M/G/T unit): buf. */
const char *config_format_size(uint64_t v, char *buf, size_t len);

/* Names of the enum values ("no_wait", "sync", ...); parsers return -EINVAL. */
const char *config_cc_name(int cc);
const char *config_durability_name(int d);
int config_parse_cc(const char *s, int *out);
int config_parse_durability(const char *s, int *out);
const char *config_commit_name(int commit);
int config_parse_commit(const char *s, int *out);   /* two_phase|one_phase */

#endif
