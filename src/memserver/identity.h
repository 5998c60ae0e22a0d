/*
 * identity.h - whose data a data directory holds: the file DIR/IDENTITY,
 * written once by `lotus memserver --init` and checked at every start
 * (identity.c; docs/durability.md, "Identity").
 *
 * Threads: main thread, at start, with the directory locked (durable.c).
 */
#ifndef LOTUS_MS_IDENTITY_H
#define LOTUS_MS_IDENTITY_H
#include <stdint.h>

#define IDENTITY_FILE    "IDENTITY"
#define IDENTITY_VERSION 1

struct ms_identity {
	uint64_t cluster_id;     /* never 0 */
	unsigned server_id;
	uint64_t created;        /* seconds since the epoch */
};

/*
 * Settle the identity of data directory dir (locked by the caller) for server
 * server_id.  want: the cluster id this server belongs to (0: not known, adopt
 * the one on disk).  init (--init): an empty directory gets a new identity
 * (cluster want, or a random id when want is 0), and a directory of data
 * without an IDENTITY (lotus before identity files) is stamped; a matching
 * identity is left alone.  Without init an empty directory is refused.
 * A directory of another server, or of another cluster, is always refused.
 * *out gets the identity in force.  0, LOTUS_ECONFIG (refused; one error line
 * logged that says what to do) or -errno.
 */
int identity_settle(const char *dir, unsigned server_id, uint64_t want, int init,
		    struct ms_identity *out);

#endif
