/*
 * crash.h - crash points for tests.  LOTUS_CRASH_AT=NAME[:N] kills the process
 * with SIGKILL (as `kill -9` would: no clean-up, no flush) the Nth time it
 * passes the point NAME (default: the first).  Unset, a point costs one
 * predictable branch.  Points: "prepared" (a PREPARE is durable, its vote not
 * yet sent), "before_commit" (all prepared, the COMMIT arrived, nothing
 * applied), "checkpoint" (a checkpoint's pages written, its manifest not);
 * in a compute server: "client_prepared" (every writer of a two-phase commit
 * voted yes, the COMMIT not yet sent), "client_committing" (the WOUND_WAIT
 * committing round answered, the COMMIT not yet sent).  Any thread.
 */
#ifndef LOTUS_CRASH_H
#define LOTUS_CRASH_H
#include <stdbool.h>
/* True if LOTUS_CRASH_AT names this point (it may fire on a later pass). */
bool crash_point_armed(const char *name);
/* Count a pass of the point; at the Nth, log one line and SIGKILL ourselves. */
void crash_point(const char *name);
#endif
