/*
 * resp.h - the Redis protocol (RESP2): a request parser and a reply encoder,
 * with no I/O and no knowledge of lotus.
 *
 * Parser.  resp_parse() looks at the bytes a connection has received and
 * returns one whole command or says that more bytes are needed.  It never
 * keeps state between calls: the caller keeps the bytes and calls again when
 * more arrive (a command is re-parsed from its first byte, which is cheap: a
 * bulk payload is skipped by its length, not scanned).  Arguments point into
 * the caller's buffer and stay valid until it changes.
 *
 * Two request forms, as Redis accepts them:
 *   multibulk  *<argc>\r\n then argc times $<len>\r\n<len bytes>\r\n
 *   inline     words separated by spaces or tabs, ended by \n (or \r\n)
 *
 * Every length is checked before it is used: a length line longer than 20
 * bytes, a negative or non-decimal length, more arguments than max_args, a
 * bulk longer than max_bulk, a payload not followed by \r\n, an inline line
 * longer than max_inline or holding control bytes (binary garbage) are all
 * protocol errors: the caller answers with an error and closes the
 * connection, because it cannot know where the next command would start.
 *
 * Encoder.  struct rbuf is a growable byte buffer; the resp_* writers append
 * one reply each.  An allocation failure is sticky (rbuf.oom) and the writes
 * after it are dropped, so callers check once.
 */
#ifndef LOTUS_SERVE_RESP_H
#define LOTUS_SERVE_RESP_H
#include <stddef.h>
#include <stdint.h>

struct rbuf {
	char *data;
	size_t len, cap;
	int oom;
};

void rbuf_init(struct rbuf *b);
void rbuf_free(struct rbuf *b);
/* Make room for n more bytes; 0 or -ENOMEM (and b->oom set). */
int rbuf_reserve(struct rbuf *b, size_t n);
void rbuf_put(struct rbuf *b, const void *p, size_t n);
/* Drop the first n bytes. */
void rbuf_consume(struct rbuf *b, size_t n);

void resp_simple(struct rbuf *b, const char *s);              /* +s */
void resp_error(struct rbuf *b, const char *fmt, ...)         /* -text (CR/LF become spaces) */
	__attribute__((format(printf, 2, 3)));
void resp_int(struct rbuf *b, long long v);                   /* :v */
void resp_bulk(struct rbuf *b, const void *p, size_t n);      /* $n payload */
void resp_bulk_str(struct rbuf *b, const char *s);
void resp_null(struct rbuf *b);                               /* $-1 */
void resp_null_array(struct rbuf *b);                         /* *-1 */
void resp_array(struct rbuf *b, long long n);                 /* *n (the n items follow) */

struct resp_arg {
	const char *p;
	size_t len;
};

struct resp_cmd {
	struct resp_arg *argv;   /* grown by resp_parse as needed */
	unsigned argc, cap;
};

struct resp_limits {
	size_t max_bulk;         /* longest bulk argument */
	unsigned max_args;       /* most arguments in one command */
	size_t max_inline;       /* longest inline command line */
};

#define RESP_MORE   0        /* incomplete: call again with more bytes */
#define RESP_OK     1        /* one command in cmd (argc may be 0: an empty line) */
#define RESP_EPROTO (-1)     /* malformed: *why says how; close the connection */
#define RESP_ENOMEM (-2)

/* Parse one command from buf[0..len).  On RESP_OK, *used is the number of
 * bytes it took.  On RESP_EPROTO, *why is a static message. */
int resp_parse(const char *buf, size_t len, const struct resp_limits *lim,
	       struct resp_cmd *cmd, size_t *used, const char **why);
void resp_cmd_free(struct resp_cmd *cmd);

/* Case-insensitive comparison of an argument with a NUL-terminated word. */
int resp_arg_is(const struct resp_arg *a, const char *word);
/* A decimal integer argument (Redis rules: optional '-', no spaces, fits in
 * int64).  0 or -1. */
int resp_arg_ll(const struct resp_arg *a, long long *out);

#endif
