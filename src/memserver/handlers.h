/*
 * handlers.h - layer 2 of the memory server (handlers.c): the request
 * handlers and applying writes.  What the layers above may call; handlers.c
 * reaches the log and the resolver only through srv->hooks.
 */
#ifndef LOTUS_MS_HANDLERS_H
#define LOTUS_MS_HANDLERS_H
#include "memserver/ms_int.h"

/* Fill this layer's hooks in srv->hooks (handle_req, resume,
 * conn_drop_pending); start-up, before any worker runs. */
void ms_handlers_register(struct ms_server *srv);
/* Append a reply to b, the message being built for wk->out_conn: a full
 * message is sent first and the reply starts the next; a reply that cannot
 * be queued at all marks the connection broken. */
void ms_rep_add(struct ms_worker *wk, struct wire_buf *b, const struct wire_rep *rep,
		const void *value);
/* Upsert or delete one write (a COMMIT item, a writeback or a replayed
 * record).  hint may be 0.  rp (may be NULL): the slot reservation inserts
 * take from and deletes give to. */
int ms_write_apply(store_t *st, store_resv_t **rp, const struct wire_write *w,
		   const unsigned char *k, const unsigned char *v);
/* Apply a checked and reserved COMMIT's writes; 0 or the first store error
 * (none once ms_writes_reserve() succeeded). */
int ms_commit_apply(struct ms_server *srv, const struct wire_req *r, const unsigned char *val,
		    store_resv_t **rp);
/* Make *rp hold a slot for every write of the list (len bytes, at most count
 * items) whose key does not exist yet, so that applying the list cannot run
 * out of space.  On a tiered store it also pins (store_resv_pin) the pages
 * the list will write, so that applying it after its log write cannot miss.
 * 0, LOTUS_ENOSPACE or -ENOMEM (then *rp holds what it held before, plus
 * nothing), or -EIO (tiered: a page could not be read in; refused before
 * anything is logged). */
int ms_writes_reserve(store_t *st, const unsigned char *wl, size_t len, unsigned count,
		      store_resv_t **rp);

#endif
