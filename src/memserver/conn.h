/*
 * conn.h - layer 1 of the memory server (conn.c): connections.  What the
 * layers above may call; conn.c reaches them only through srv->hooks.
 */
#ifndef LOTUS_MS_CONN_H
#define LOTUS_MS_CONN_H
#include "memserver/ms_int.h"

/* The worker callbacks of every memory-server worker (net_worker_create). */
extern const struct net_handlers ms_handlers;
/* Posted to a worker to wake it; carries nothing. */
extern int ms_wake_item;

void ms_conn_unref(struct ms_conn *c);
/* Shutdown only, after the worker thread and its net worker are gone. */
void ms_conns_free(struct ms_worker *wk);
/* net_post from any thread, retried for a while if memory is short (a reply
 * waits on the item); 0 or -ENOMEM (logged). */
int ms_post(net_worker_t *w, void *item);
/* Send a reply message (nothing if c is closed).  A failed send marks c
 * broken: its replies are lost, so the client must see the connection go. */
int ms_send_reply_msg(struct ms_worker *wk, struct ms_conn *c, struct wire_buf *b);
/* Owner thread, where c is known to be alive: close a broken c (release its
 * transactions and parked requests as for a lost client). */
void ms_conn_settle(struct ms_worker *wk, struct ms_conn *c);
/* Worker thread, now and then: log the count of bad messages whose lines
 * were held back (once their second is over). */
void ms_conn_log_flush(struct ms_worker *wk);

#endif
