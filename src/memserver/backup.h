/*
 * backup.h - layer 4 of the memory server (backup.c): `lotus backup`'s
 * decision hold and the copy of the data directory over the wire.
 */
#ifndef LOTUS_MS_BACKUP_H
#define LOTUS_MS_BACKUP_H
#include "memserver/ms_int.h"

/* Fill srv->hooks.backup_req and set up the hold; start-up, before any
 * worker runs.  0 or -ENOMEM. */
int ms_backup_register(struct ms_server *srv);
/* After the workers stopped. */
void ms_backup_free(struct ms_server *srv);

#endif
