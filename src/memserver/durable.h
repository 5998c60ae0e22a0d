/*
 * durable.h - layer 3 of the memory server (durable.c): the redo log,
 * checkpoints, recovery, the prepared table of two-phase commit and the
 * replies that wait for the log.  What the layers above may call; the
 * request handlers reach the rest through srv->hooks.
 *
 * Threads: open/close from the main thread, before the workers start and
 * after they stopped.
 */
#ifndef LOTUS_MS_DURABLE_H
#define LOTUS_MS_DURABLE_H
#include "memserver/ms_int.h"

struct memserver_opts;
/* Fill this layer's hooks in srv->hooks (every server, with or without a
 * data directory); start-up, before any worker runs. */
void ms_durable_register(struct ms_server *srv);
/* Recover the store from o->data_dir, open the log and start the page writer.
 * 0 or an error (logged). */
int ms_durable_open(struct ms_server *srv, const struct memserver_opts *o);
/* clean: take a final checkpoint first.  Then stop the page writer and the log. */
void ms_durable_close(struct ms_server *srv, int clean);
/* The prepared table (and the outcome tables), every server: main thread,
 * before the workers start (and before recovery) / after they stopped. */
int ms_prep_open(struct ms_server *srv);
void ms_prep_close(struct ms_server *srv);
/* If txn_id is prepared here, log its DECIDE (no wait), apply its writes
 * (commit) or drop them, return 1 with *rc set; 0 if it is not prepared here.
 * Worker threads and the resolver. */
int ms_prepared_decide(struct ms_server *srv, uint64_t txn_id, int commit, int *rc);
/* A backup (replica.c, one thread at a time): append one record of its
 * primary's stream (rec[0..size), parsed as x) to the log, byte for byte,
 * and apply it to the store as recovery would: a PREPARE joins the
 * prepared table (locked, as recovered), a DECIDE settles it, a COMMIT's
 * writes land.  *lsn: the log's tail after it.  0 or an error (logged). */
int ms_durable_follow(struct ms_server *srv, const void *rec, size_t size,
		      const struct redo_rec *x, uint64_t *lsn);
/* srv->rec as one JSON object into buf (snprintf rules). */
int ms_recovery_json(const struct ms_server *srv, char *buf, size_t len);

#endif
