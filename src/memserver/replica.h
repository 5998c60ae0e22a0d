/*
 * replica.h - layer 5 of the memory server (replica.c): replicated memory
 * servers ([cluster] replicas > 1; docs/replication.md).  A primary ships
 * its redo log to its partition's backups before writing it; a backup
 * mirrors that log byte for byte and applies it, and takes over when the
 * primary's ZooKeeper session ends.
 *
 * Threads: start/stop from the main thread; the request hook on workers.
 */
#ifndef LOTUS_MS_REPLICA_H
#define LOTUS_MS_REPLICA_H
#include "memserver/ms_int.h"

struct memserver_opts;

/* Fill this layer's hooks (every server). */
void ms_repl_register(struct ms_server *srv);
/* After the listener is up and the workers run: join the partition at the
 * coordinator (the partition's znode, this server's ephemeral znode), take
 * the role it names, and start the shipper (primary) and the monitor.
 * 0 or an error (logged). */
int ms_repl_start(struct ms_server *srv, const struct memserver_opts *o);
/* Stop the monitor (before the workers stop). */
void ms_repl_quiesce(struct ms_server *srv);
/* The server stops (before its log closes): a last batch that would wait
 * for an unreachable coordinator fails instead. */
void ms_repl_closing(struct ms_server *srv);
/* Stop the shipper and close the coordinator session (after the log was
 * closed: its last batches are shipped too). */
void ms_repl_stop(struct ms_server *srv);
/* This server lost its primaryship to a newer epoch (or its session): it
 * must stop.  1 if so. */
int ms_repl_deposed(const struct ms_server *srv);

#endif
