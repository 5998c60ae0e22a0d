/* crash.c - see crash.h. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "common/crash.h"
#include "common/log.h"

static pthread_once_t crash_once = PTHREAD_ONCE_INIT;
static char crash_name[32];
static unsigned long crash_at = 1;
static _Atomic unsigned long crash_passes;

static void crash_parse(void)
{
	const char *e = getenv("LOTUS_CRASH_AT");
	if (!e || !*e)
		return;
	size_t n = strcspn(e, ":");
	if (n >= sizeof(crash_name))
		return;
	memcpy(crash_name, e, n);
	if (e[n] == ':')
		crash_at = strtoul(e + n + 1, NULL, 10);
	if (crash_at == 0)
		crash_at = 1;
}

bool crash_point_armed(const char *name)
{
	pthread_once(&crash_once, crash_parse);
	return crash_name[0] && !strcmp(crash_name, name);
}

void crash_point(const char *name)
{
	if (!crash_point_armed(name))
		return;
	if (atomic_fetch_add(&crash_passes, 1) + 1 != crash_at)
		return;
	log_error("crash point %s reached (LOTUS_CRASH_AT): killing this process", name);
	raise(SIGKILL);
}
