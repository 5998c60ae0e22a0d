/*
 * log.h - leveled logging to stderr, one line per call, thread-safe
 * (one write per line), or to a sink the host program installs
 * (lotus_options.log_fn).  LOTUS_LOG=debug|info|warn|error sets the level;
 * the default is info.  Every line, on stderr or to the sink, reads
 *
 *   2026-12-02T00:50:24.123Z memserver 0: info: listening on ...
 *
 * a UTC timestamp (ISO 8601, milliseconds), the process tag set with
 * log_set_tag() ("memserver N" carries the server id), the level, the text.
 */
#ifndef LOTUS_LOG_H
#define LOTUS_LOG_H
enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };
void log_set_tag(const char *tag);
void log_set_level(enum log_level lvl);
int log_enabled(enum log_level lvl);
/* Error lines printed so far (a command that exits on an error already
 * logged need not print a second line saying less). */
unsigned log_error_count(void);
void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Send the lines to fn (with arg) instead of stderr; NULL: stderr again.
 * log_sink_clear() restores stderr only if fn/arg is still the sink.  Set
 * them while no other thread logs (lotus_connect / lotus_disconnect). */
typedef void (*log_sink_fn)(enum log_level lvl, const char *line, void *arg);
void log_set_sink(log_sink_fn fn, void *arg);
void log_sink_clear(log_sink_fn fn, void *arg);
/* --log-file: make fd 2 (stderr: these lines and anything else the process
 * prints there) an O_APPEND file at path, reopened on SIGHUP (logrotate:
 * rename it, send SIGHUP, the next lines go to a new file at path).  Once,
 * from the main thread before others start.  0 or -errno. */
int log_file_open(const char *path);
#define log_debug(...) do { if (log_enabled(LOG_DEBUG)) log_msg(LOG_DEBUG, __VA_ARGS__); } while (0)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

/* A budget for a warning a peer can trigger at will (a malformed message, a
 * failed handshake): at most `lines` lines per window of `window_ns`, the rest
 * counted.  One thread per throttle (or the caller's lock); zero-initialise.
 *
 *   uint64_t n;
 *   if (log_throttle_pass(&t, 10, 1000000000ULL, &n))
 *           log_warn("...");           (and, if n, that n were not logged)
 *
 * log_throttle_pass returns 1 when this line may be printed; *missed is then
 * the count not printed since the last line that was (0 most times).
 * log_throttle_flush returns (and clears) the count not printed once the
 * window they fell in is over, for a caller with a timer: 0 otherwise. */
#include <stdint.h>
struct log_throttle {
	uint64_t window_start;
	unsigned printed;       /* lines printed in this window */
	uint64_t missed;        /* not printed since the last one that was */
	uint64_t missed_at;     /* window in which the last one was missed */
};
int log_throttle_pass(struct log_throttle *t, unsigned lines, uint64_t window_ns,
		      uint64_t *missed);
uint64_t log_throttle_flush(struct log_throttle *t, uint64_t window_ns);
#endif
