/* err.c - lotus_strerror(): names for -errno and for lotus's own codes. */
#include <string.h>
#include "lotus.h"

static const char *const lotus_errs[] = {
	[-(LOTUS_EABORTED - LOTUS_EBASE)] = "transaction aborted by a lock conflict",
	[-(LOTUS_EPREEMPTED - LOTUS_EBASE)] = "transaction preempted by an older one",
	[-(LOTUS_ENOTFOUND - LOTUS_EBASE)] = "key not found",
	[-(LOTUS_EEXISTS - LOTUS_EBASE)] = "already exists",
	[-(LOTUS_EPROTO - LOTUS_EBASE)] = "malformed message",
	[-(LOTUS_EVERSION - LOTUS_EBASE)] = "unsupported protocol version",
	[-(LOTUS_ECONFIG - LOTUS_EBASE)] = "bad configuration",
	[-(LOTUS_ENOTABLE - LOTUS_EBASE)] = "no such table",
	[-(LOTUS_ETOOBIG - LOTUS_EBASE)] = "key or value too large",
	[-(LOTUS_ESTATE - LOTUS_EBASE)] = "operation not valid in this state",
	[-(LOTUS_EUNAVAIL - LOTUS_EBASE)] = "memory server unavailable",
	[-(LOTUS_ETIMEOUT - LOTUS_EBASE)] = "timed out",
	[-(LOTUS_ENOSPACE - LOTUS_EBASE)] = "memory server out of space",
	[-(LOTUS_EUNSUPPORTED - LOTUS_EBASE)] = "not supported here",
	[-(LOTUS_EREADONLY - LOTUS_EBASE)] = "server refuses writes",
	[-(LOTUS_EDURABLE - LOTUS_EBASE)] = "commit could not be made durable",
	[-(LOTUS_ELIMIT - LOTUS_EBASE)] = "memory server limit per connection hit (parked requests or bytes in flight)",
	[-(LOTUS_ELEASE - LOTUS_EBASE)] = "lease with the memory server expired; its "
					   "transactions there were released",
	[-(LOTUS_EINDOUBT - LOTUS_EBASE)] = "commit outcome in doubt (a memory server was lost "
					     "or silent): it may have been applied",
	[-(LOTUS_EFAILOVER - LOTUS_EBASE)] = "a partition's primary was lost and its backup "
					     "takes over: nothing was applied, retry",
};

const char *lotus_strerror(int err)
{
	if (err == 0)
		return "success";
	if (err < LOTUS_EBASE && err >= LOTUS_ELAST) {
		const char *s = lotus_errs[-(err - LOTUS_EBASE)];
		return s ? s : "unknown lotus error";
	}
	if (err < 0 && err > -4096)
		return strerror(-err);
	return "unknown error";
}

int lotus_err_retryable(int err)
{
	return err == LOTUS_EABORTED || err == LOTUS_EPREEMPTED || err == LOTUS_ELIMIT ||
	       err == LOTUS_EFAILOVER;
}
