/*
 * outcomes.h - the lower half of layer 3 of the memory server (outcomes.c):
 * the outcomes of prepared transactions remembered for cooperative
 * termination.  What durable.c and the layers above may call.
 */
#ifndef LOTUS_MS_OUTCOMES_H
#define LOTUS_MS_OUTCOMES_H
#include "memserver/ms_int.h"

/* The tables; main thread, open before recovery, free after the workers
 * stopped.  note/find: prep_mu held. */
int ms_term_open(struct ms_server *srv);
void ms_term_free(struct ms_server *srv);
void ms_outcome_note(struct ms_server *srv, uint64_t txn_id, enum ms_outcome o);
enum ms_outcome ms_outcome_find(struct ms_server *srv, uint64_t txn_id);
/* The checkpoint hook that logs the remembered COMMITs again (page writer
 * thread; arg = srv), and their replay at recovery. */
void ms_outcomes_relog(void *arg);
void ms_outcomes_replay(struct ms_server *srv, const void *payload, uint32_t len);

#endif
