/* clock.h - monotonic and CPU clocks in nanoseconds.  Any thread. */
#ifndef LOTUS_CLOCK_H
#define LOTUS_CLOCK_H
#include <stdint.h>
#include <time.h>
#include <sys/resource.h>

static inline uint64_t clock_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Wall-clock nanoseconds: the base of transaction priorities across hosts. */
static inline uint64_t clock_wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* User + system CPU of the whole process (all threads, io-wq included). */
static inline uint64_t clock_process_cpu_ns(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ULL +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ULL;
}

/* CPU time of the calling thread. */
static inline uint64_t clock_thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* *ts = now + ms on clock id (the clock of the condition variable the
 * deadline is for: CLOCK_MONOTONIC with pthread_condattr_setclock, else
 * CLOCK_REALTIME), normalised for pthread_cond_timedwait. */
static inline void clock_deadline_in(clockid_t id, struct timespec *ts, unsigned ms)
{
	clock_gettime(id, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}
#endif
