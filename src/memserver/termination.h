/*
 * termination.h - layer 4 of the memory server (termination.c): the resolver
 * of prepared transactions (cooperative termination).  What memserver.c may
 * call.
 */
#ifndef LOTUS_MS_TERMINATION_H
#define LOTUS_MS_TERMINATION_H
#include "memserver/ms_int.h"

/* Fill this layer's hooks in srv->hooks (txn_status); start-up, before any
 * worker runs. */
void ms_term_register(struct ms_server *srv);
/* The resolver thread; main thread, after the log is open / before it closes. */
void ms_term_start(struct ms_server *srv);
void ms_term_stop(struct ms_server *srv);

#endif
