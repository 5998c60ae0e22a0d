/*
 * coord.h - the coordinator: a ZooKeeper ensemble holding each partition's
 * configuration and every replicated memory server's liveness
 * (docs/replication.md).  Used only when [cluster] replicas > 1.
 *
 * Znodes, under /lotus/<cluster id, 16 hex digits>:
 *   partitions/<p>   persistent; {"epoch":E,"primary":ID,"members":[ID,...],
 *                    "insync":[ID,...]} created once, by a conditional
 *                    create (the first server of the partition to start
 *                    wins; primary = its lowest id, epoch 1, every member in
 *                    sync), then changed only by versioned updates: the
 *                    primary drops a lost backup from insync (and adds a
 *                    caught-up one), a backup in sync takes over under
 *                    epoch + 1 (docs/replication.md)
 *   servers/<id>     ephemeral, under the server's session:
 *                    {"host":"H","port":P,"partition":p}; gone once the
 *                    session expires (a dead or stopped server)
 *
 * Built without the ZooKeeper C client (libzookeeper-mt-dev), or linked
 * without -lzookeeper_mt (its symbols are weak: a static liblotus.a user
 * needs it only for replication), coord_open() fails with one clear line and
 * LOTUS_ECONFIG.
 *
 * Threads: a handle may be used by one thread at a time; the client library's
 * own threads call nothing of ours but the session watcher.
 */
#ifndef LOTUS_COORD_H
#define LOTUS_COORD_H
#include <stdint.h>
#include "common/config.h"

struct coord_partition {
	uint64_t epoch;
	unsigned primary;                 /* a memory server id */
	unsigned nmembers;
	unsigned members[CONFIG_MAX_REPLICAS];
	unsigned ninsync;                 /* the members that hold every acknowledged */
	unsigned insync[CONFIG_MAX_REPLICAS];   /* record: the primary, and its live backups */
};

typedef struct coord coord_t;

/* Built and linked with the ZooKeeper client? */
int coord_available(void);

/* Open a session with hosts ("H:P[,H:P...]") asking for a session timeout of
 * session_ms (ZooKeeper bounds it to 2..20 x its tickTime), waiting at most
 * wait_ms for it.  0, LOTUS_EUNAVAIL (no answer in time) or LOTUS_ECONFIG;
 * the reason is logged. */
int coord_open(const char *hosts, unsigned session_ms, unsigned wait_ms, coord_t **out);
/* Close the session (its ephemeral znodes go at once).  NULL is a no-op. */
void coord_close(coord_t *co);
/* The session timeout the ensemble granted (ms). */
unsigned coord_session_ms(const coord_t *co);
/* Has the ensemble expired the session (a server paused past its timeout)? */
int coord_expired(const coord_t *co);

/* A memory server of a replicated cluster joins: the partition's znode is
 * created if it does not exist yet (and checked against the config if it
 * does), then the server's ephemeral znode, waiting up to wait_ms for one
 * of an earlier session of the same id to expire.  *part: the partition's
 * configuration.  0 or an error (logged). */
int coord_register_server(coord_t *co, unsigned replicas, uint64_t cluster_id,
			  unsigned id, const char *host, uint16_t port, unsigned wait_ms,
			  struct coord_partition *part);

/* The configuration of partition p.  0, -ENOENT (no server of it has
 * started yet) or an error (logged). */
int coord_get_partition(coord_t *co, uint64_t cluster_id, unsigned p,
			struct coord_partition *part);

/* The same, with the znode's version for coord_set_partition. */
int coord_get_partition_v(coord_t *co, uint64_t cluster_id, unsigned p,
			  struct coord_partition *part, int *version);
/* Replace partition p's configuration if the znode is still at version:
 * 0, -ESTALE (somebody changed it since: read it again) or an error. */
int coord_set_partition(coord_t *co, uint64_t cluster_id, unsigned p,
			const struct coord_partition *part, int version);
/* Where live memory server id listens (its ephemeral znode): 0, -ENOENT
 * (no live session of it), LOTUS_EUNAVAIL or -EIO. */
int coord_server_addr(coord_t *co, uint64_t cluster_id, unsigned id, char *host, size_t hlen,
		      uint16_t *port);
/* Is id in part's in-sync set? */
int coord_partition_insync(const struct coord_partition *part, unsigned id);

/* The znode text of a partition and its parser (0 or -EINVAL; a text
 * without "insync" has every member in sync). */
int coord_partition_format(const struct coord_partition *part, char *buf, size_t len);
int coord_partition_parse(const char *s, struct coord_partition *part);

#endif
