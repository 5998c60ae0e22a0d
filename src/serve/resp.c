/*
 * resp.c - RESP2 parser and encoder (the design is in resp.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "serve/resp.h"

/* ---- buffer ------------------------------------------------------------- */

void rbuf_init(struct rbuf *b)
{
	memset(b, 0, sizeof(*b));
}

void rbuf_free(struct rbuf *b)
{
	free(b->data);
	rbuf_init(b);
}

int rbuf_reserve(struct rbuf *b, size_t n)
{
	if (b->oom)
		return -ENOMEM;
	if (b->len + n <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + n)
		cap *= 2;
	char *p = realloc(b->data, cap);
	if (!p) {
		b->oom = 1;
		return -ENOMEM;
	}
	b->data = p;
	b->cap = cap;
	return 0;
}

void rbuf_put(struct rbuf *b, const void *p, size_t n)
{
	if (n == 0 || rbuf_reserve(b, n))
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

void rbuf_consume(struct rbuf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}

/* ---- encoder ------------------------------------------------------------ */

static void put_line(struct rbuf *b, char type, const char *s, size_t n)
{
	if (rbuf_reserve(b, n + 3))
		return;
	b->data[b->len++] = type;
	memcpy(b->data + b->len, s, n);
	for (size_t i = 0; i < n; i++)   /* a reply line must not break the framing */
		if (b->data[b->len + i] == '\r' || b->data[b->len + i] == '\n')
			b->data[b->len + i] = ' ';
	b->len += n;
	b->data[b->len++] = '\r';
	b->data[b->len++] = '\n';
}

void resp_simple(struct rbuf *b, const char *s)
{
	put_line(b, '+', s, strlen(s));
}

void resp_error(struct rbuf *b, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	put_line(b, '-', msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
}

/* <type><decimal v>\r\n, formatted here (snprintf costs more than the rest
 * of a GET reply). */
static void put_num(struct rbuf *b, char type, long long v)
{
	char s[24];
	size_t i = sizeof(s);
	unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
	do {
		s[--i] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		s[--i] = '-';
	size_t n = sizeof(s) - i;
	if (rbuf_reserve(b, n + 3))
		return;
	b->data[b->len++] = type;
	memcpy(b->data + b->len, s + i, n);
	b->len += n;
	b->data[b->len++] = '\r';
	b->data[b->len++] = '\n';
}

void resp_int(struct rbuf *b, long long v)
{
	put_num(b, ':', v);
}

void resp_array(struct rbuf *b, long long n)
{
	put_num(b, '*', n);
}

void resp_bulk(struct rbuf *b, const void *p, size_t n)
{
	put_num(b, '$', (long long)n);
	if (rbuf_reserve(b, n + 2))
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len++] = '\r';
	b->data[b->len++] = '\n';
}

void resp_bulk_str(struct rbuf *b, const char *s)
{
	resp_bulk(b, s, strlen(s));
}

void resp_null(struct rbuf *b)
{
	rbuf_put(b, "$-1\r\n", 5);
}

void resp_null_array(struct rbuf *b)
{
	rbuf_put(b, "*-1\r\n", 5);
}

/* ---- parser ------------------------------------------------------------- */

#define LEN_LINE_MAX 20   /* "*" or "$", up to 18 digits (or "-1"), CR */

static int cmd_push(struct resp_cmd *cmd, const char *p, size_t n)
{
	if (cmd->argc == cmd->cap) {
		unsigned cap = cmd->cap ? cmd->cap * 2 : 16;
		struct resp_arg *a = realloc(cmd->argv, cap * sizeof(*a));
		if (!a)
			return RESP_ENOMEM;
		cmd->argv = a;
		cmd->cap = cap;
	}
	cmd->argv[cmd->argc].p = p;
	cmd->argv[cmd->argc].len = n;
	cmd->argc++;
	return 0;
}

/* A length line "<type><digits>\r\n" at buf[*pos].  RESP_OK with *out and
 * *pos after the line, RESP_MORE, or RESP_EPROTO. */
static int parse_len(const char *buf, size_t len, size_t *pos, char type, long long *out,
		     const char **why)
{
	size_t i = *pos;
	if (i >= len)
		return RESP_MORE;
	if (buf[i] != type) {
		*why = type == '$' ? "expected '$'" : "expected '*'";
		return RESP_EPROTO;
	}
	/* The usual line, whole in buf: digits then CRLF within LEN_LINE_MAX
	 * bytes (so at most 18 digits).  Anything else takes the full checks. */
	size_t stop = len - i > LEN_LINE_MAX ? i + LEN_LINE_MAX : len, k = i + 1;
	unsigned long long v = 0;   /* unsigned: a 19th digit, refused below, wraps */
	while (k < stop && (unsigned char)(buf[k] - '0') <= 9)
		v = v * 10 + (unsigned)(buf[k++] - '0');
	if (k > i + 1 && k < stop && buf[k] == '\r' && k + 1 < len && buf[k + 1] == '\n') {
		*out = (long long)v;   /* at most 18 digits */
		*pos = k + 2;
		return RESP_OK;
	}
	/* One pass over at most LEN_LINE_MAX bytes: the value and whether the
	 * digits are well formed, judged once the line is known to be whole (a
	 * '\n' before the '\r' is an error first, an unended line next). */
	size_t win = len - i < LEN_LINE_MAX ? len - i : LEN_LINE_MAX;
	size_t d = i + 1, end = i + win;
	int neg = d < end && buf[d] == '-';
	if (neg)
		d++;
	size_t first = d;
	int bad = 0;
	v = 0;
	for (; d < end; d++) {
		char ch = buf[d];
		if (ch >= '0' && ch <= '9') {
			v = v * 10 + (unsigned)(ch - '0');   /* kept only for <= 18 digits */
			continue;
		}
		if (ch == '\r')
			break;
		if (ch == '\n') {
			*why = "length line not ended by CRLF";
			return RESP_EPROTO;
		}
		bad = 1;
	}
	if (d == end) {   /* no '\r' in the window */
		if (len - i >= LEN_LINE_MAX) {
			*why = type == '$' ? "invalid bulk length" : "invalid multibulk length";
			return RESP_EPROTO;
		}
		return RESP_MORE;
	}
	if (d + 1 >= len)
		return RESP_MORE;
	if (buf[d + 1] != '\n') {
		*why = "length line not ended by CRLF";
		return RESP_EPROTO;
	}
	if (bad || d == first) {
		*why = type == '$' ? "invalid bulk length" : "invalid multibulk length";
		return RESP_EPROTO;
	}
	*out = neg ? -(long long)v : (long long)v;
	*pos = d + 2;
	return RESP_OK;
}

static int parse_multibulk(const char *buf, size_t len, const struct resp_limits *lim,
			   struct resp_cmd *cmd, size_t *used, const char **why)
{
	size_t pos = 0;
	long long argc, n;
	int rc = parse_len(buf, len, &pos, '*', &argc, why);
	if (rc != RESP_OK)
		return rc;
	if (argc > (long long)lim->max_args) {
		*why = "invalid multibulk length";
		return RESP_EPROTO;
	}
	for (long long a = 0; a < argc; a++) {
		rc = parse_len(buf, len, &pos, '$', &n, why);
		if (rc != RESP_OK)
			return rc;
		if (n < 0 || (unsigned long long)n > lim->max_bulk) {
			*why = "invalid bulk length";
			return RESP_EPROTO;
		}
		if (len - pos < (size_t)n + 2)
			return RESP_MORE;
		if (buf[pos + (size_t)n] != '\r' || buf[pos + (size_t)n + 1] != '\n') {
			*why = "bulk payload not followed by CRLF";
			return RESP_EPROTO;
		}
		if (cmd_push(cmd, buf + pos, (size_t)n))
			return RESP_ENOMEM;
		pos += (size_t)n + 2;
	}
	*used = pos;   /* argc <= 0: an empty command, skipped by the caller */
	return RESP_OK;
}

static int parse_inline(const char *buf, size_t len, const struct resp_limits *lim,
			struct resp_cmd *cmd, size_t *used, const char **why)
{
	size_t scan = len < lim->max_inline + 1 ? len : lim->max_inline + 1;
	const char *nl = memchr(buf, '\n', scan);
	if (!nl) {
		if (len > lim->max_inline) {
			*why = "too big inline request";
			return RESP_EPROTO;
		}
		return RESP_MORE;
	}
	size_t end = (size_t)(nl - buf);
	size_t stop = end > 0 && buf[end - 1] == '\r' ? end - 1 : end;
	for (size_t i = 0; i < stop; i++) {
		unsigned char ch = (unsigned char)buf[i];
		if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
			*why = "binary data in an inline command";
			return RESP_EPROTO;
		}
	}
	size_t i = 0;
	while (i < stop) {
		while (i < stop && (buf[i] == ' ' || buf[i] == '\t'))
			i++;
		size_t s = i;
		while (i < stop && buf[i] != ' ' && buf[i] != '\t')
			i++;
		if (i > s) {
			if (cmd->argc >= lim->max_args) {
				*why = "too many arguments in an inline command";
				return RESP_EPROTO;
			}
			if (cmd_push(cmd, buf + s, i - s))
				return RESP_ENOMEM;
		}
	}
	*used = end + 1;
	return RESP_OK;
}

int resp_parse(const char *buf, size_t len, const struct resp_limits *lim,
	       struct resp_cmd *cmd, size_t *used, const char **why)
{
	cmd->argc = 0;
	*why = NULL;
	if (len == 0)
		return RESP_MORE;
	if (buf[0] == '*')
		return parse_multibulk(buf, len, lim, cmd, used, why);
	return parse_inline(buf, len, lim, cmd, used, why);
}

void resp_cmd_free(struct resp_cmd *cmd)
{
	free(cmd->argv);
	memset(cmd, 0, sizeof(*cmd));
}

int resp_arg_is(const struct resp_arg *a, const char *word)
{
	size_t i;
	for (i = 0; i < a->len; i++) {
		unsigned char c = (unsigned char)a->p[i], w = (unsigned char)word[i];
		if (!w)
			return 0;
		/* equal, or the same ASCII letter in the other case */
		if (c != w && ((c | 0x20) != (w | 0x20) || (unsigned)((w | 0x20) - 'a') > 25))
			return 0;
	}
	return word[i] == 0;
}

int resp_arg_ll(const struct resp_arg *a, long long *out)
{
	char s[24];
	if (a->len == 0 || a->len >= sizeof(s))
		return -1;
	memcpy(s, a->p, a->len);
	s[a->len] = 0;
	if (s[0] == '+' || s[0] == ' ' || (s[0] == '0' && a->len > 1) ||
	    (s[0] == '-' && (a->len == 1 || s[1] == '0')))
		return -1;   /* Redis refuses leading zeros, '+', and "-0" */
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}
