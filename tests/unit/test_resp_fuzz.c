/*
 * test_resp_fuzz.c - the RESP2 parser (src/serve/resp.c) against random and
 * truncated input.
 *
 *   1. Random valid commands (multibulk with binary arguments, and inline)
 *      parse back to exactly their arguments; every proper prefix of them
 *      says "more" and never claims a command; several in one buffer parse
 *      one after another.
 *   2. Known malformed inputs are protocol errors with a reason: bad and
 *      huge lengths, a missing CRLF, too many arguments, binary garbage in an
 *      inline line, an endless line.
 *   3. Mutations of valid commands (byte flips, length edits, cuts) and pure
 *      garbage never crash and never report more bytes used than given; an
 *      accepted command's arguments lie inside the input.
 *   4. The encoder escapes CR/LF in error lines and frames bulk replies.
 *
 * Each input sits in a malloc'd block of exactly its length (ASan catches an
 * over-read).  LOTUS_FUZZ_SEED picks the seed; bounded by count and ~10 s.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "serve/resp.h"
#include "check.h"

static unsigned long long seed0, rs;


static unsigned long long rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

static const struct resp_limits lim = { .max_bulk = 1 << 16, .max_args = 1024, .max_inline = 4096 };

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* parse a copy of buf[0..n) in a block of exactly n bytes */
static int parse_exact(const char *buf, size_t n, struct resp_cmd *cmd, size_t *used,
		       const char **why, char **copy)
{
	*copy = malloc(n ? n : 1);
	CHECK(*copy);
	memcpy(*copy, buf, n);
	return resp_parse(*copy, n, &lim, cmd, used, why);
}

struct argset {
	unsigned argc;
	size_t len[64];
	char data[64][300];
};

static void random_args(struct argset *a, int inline_form)
{
	a->argc = 1 + (unsigned)(rnd() % (inline_form ? 8 : 64));
	for (unsigned i = 0; i < a->argc; i++) {
		a->len[i] = (inline_form ? 1 : 0) + rnd() % 299;
		for (size_t k = 0; k < a->len[i]; k++)
			a->data[i][k] = inline_form ? (char)('!' + rnd() % 94) : (char)rnd();
	}
	if (inline_form && a->data[0][0] == '*')
		a->data[0][0] = 'x';   /* a line starting with '*' is multibulk */
}

static size_t encode(const struct argset *a, int inline_form, char *out)
{
	size_t n = 0;
	if (inline_form) {
		for (unsigned i = 0; i < a->argc; i++) {
			if (i)
				out[n++] = rnd() % 2 ? ' ' : '\t';
			memcpy(out + n, a->data[i], a->len[i]);
			n += a->len[i];
		}
		if (rnd() % 2)
			out[n++] = '\r';
		out[n++] = '\n';
		return n;
	}
	n += (size_t)sprintf(out + n, "*%u\r\n", a->argc);
	for (unsigned i = 0; i < a->argc; i++) {
		n += (size_t)sprintf(out + n, "$%zu\r\n", a->len[i]);
		memcpy(out + n, a->data[i], a->len[i]);
		n += a->len[i];
		out[n++] = '\r';
		out[n++] = '\n';
	}
	return n;
}

static void check_args(const struct resp_cmd *cmd, const struct argset *a)
{
	CHECK(cmd->argc == a->argc);
	for (unsigned i = 0; i < a->argc; i++) {
		CHECK(cmd->argv[i].len == a->len[i]);
		CHECK(memcmp(cmd->argv[i].p, a->data[i], a->len[i]) == 0);
	}
}

static void test_valid(struct resp_cmd *cmd, double until)
{
	static char buf[64 * 320 + 64], two[2 * sizeof(buf)];
	struct argset a, b;
	for (int it = 0; it < 3000 && now_s() < until; it++) {
		int inl = rnd() % 4 == 0;
		random_args(&a, inl);
		size_t n = encode(&a, inl, buf), used;
		const char *why;
		char *copy;
		int rc = parse_exact(buf, n, cmd, &used, &why, &copy);
		CHECK(rc == RESP_OK);
		CHECK(used == n);
		check_args(cmd, &a);
		free(copy);
		/* every proper prefix is incomplete (a few checked per command) */
		for (int k = 0; k < 24; k++) {
			size_t cut = k < 4 ? (size_t)k : rnd() % n;
			if (cut >= n)   /* a short command: no proper prefix that long */
				continue;
			if (inl && cut > 0 && buf[cut - 1] == '\n')
				continue;
			rc = parse_exact(buf, cut, cmd, &used, &why, &copy);
			CHECK(rc == RESP_MORE);
			free(copy);
		}
		/* two commands in one buffer: the first, then the rest */
		int inl2 = rnd() % 4 == 0;
		random_args(&b, inl2);
		size_t n2 = encode(&b, inl2, two + n);
		memcpy(two, buf, n);
		rc = parse_exact(two, n + n2, cmd, &used, &why, &copy);
		CHECK(rc == RESP_OK && used == n);
		check_args(cmd, &a);
		size_t u2;
		rc = resp_parse(copy + used, n2, &lim, cmd, &u2, &why);
		CHECK(rc == RESP_OK && u2 == n2);
		check_args(cmd, &b);
		free(copy);
	}
}

static void expect_proto(struct resp_cmd *cmd, const char *s, size_t n)
{
	size_t used;
	const char *why;
	char *copy;
	int rc = parse_exact(s, n, cmd, &used, &why, &copy);
	if (rc != RESP_EPROTO)
		fprintf(stderr, "input %.*s: rc %d\n", (int)n, s, rc);
	CHECK(rc == RESP_EPROTO);
	CHECK(why && *why);
	free(copy);
}
#define PROTO(s) expect_proto(cmd, s, sizeof(s) - 1)

static void test_malformed(struct resp_cmd *cmd)
{
	PROTO("*x\r\n");
	PROTO("*-\r\n");
	PROTO("*1\r\n$x\r\nab\r\n");
	PROTO("*1\r\n$-5\r\n");
	PROTO("*1\r\n$3\r\nabcXY");                       /* payload not ended by CRLF */
	PROTO("*1\r\n:3\r\n");                            /* not a bulk */
	PROTO("*1\n");                                    /* LF without CR */
	PROTO("*1\r\n$99999999999999999999999\r\n");     /* endless length line */
	PROTO("*1\r\n$999999999999999999\r\n");           /* huge bulk */
	PROTO("*1\r\n$65537\r\n");                        /* over max_bulk */
	PROTO("*1025\r\n");                               /* over max_args */
	PROTO("*2147483648\r\n");
	PROTO("GET \x01\x02\r\n");                       /* binary garbage inline */
	PROTO("\x00\x01\x02\x03\n");
	char *line = malloc(5000);
	CHECK(line);
	memset(line, 'a', 5000);
	expect_proto(cmd, line, 5000);                    /* endless inline line */
	free(line);
	size_t used;
	const char *why;
	CHECK(resp_parse("*0\r\n", 4, &lim, cmd, &used, &why) == RESP_OK && cmd->argc == 0 &&
	      used == 4);
	CHECK(resp_parse("*-1\r\n", 5, &lim, cmd, &used, &why) == RESP_OK && cmd->argc == 0);
	CHECK(resp_parse("\r\n", 2, &lim, cmd, &used, &why) == RESP_OK && cmd->argc == 0);
	CHECK(resp_parse("*1\r\n$65536\r\n", 12, &lim, cmd, &used, &why) == RESP_MORE);
}

static void test_mutations(struct resp_cmd *cmd, double until)
{
	static char buf[64 * 320 + 64];
	struct argset a;
	long accepted = 0, errors = 0;
	for (int it = 0; it < 200000 && now_s() < until; it++) {
		size_t n, used = 0;
		if (rnd() % 5 == 0) {   /* pure garbage */
			n = rnd() % 600;
			for (size_t i = 0; i < n; i++)
				buf[i] = rnd() % 3 ? (char)rnd() : "*$\r\n0123456789-"[rnd() % 15];
		} else {
			int inl = rnd() % 4 == 0;
			random_args(&a, inl);
			n = encode(&a, inl, buf);
			for (int m = 1 + (int)(rnd() % 4); m-- > 0;) {
				size_t at = rnd() % n;
				switch (rnd() % 4) {
				case 0: buf[at] = (char)rnd(); break;
				case 1: buf[at] = (char)('0' + rnd() % 10); break;
				case 2: buf[at] = "*$\r\n-"[rnd() % 5]; break;
				default: n = at + 1; break;
				}
			}
		}
		const char *why;
		char *copy;
		int rc = parse_exact(buf, n, cmd, &used, &why, &copy);
		CHECK(rc == RESP_OK || rc == RESP_MORE || rc == RESP_EPROTO);
		if (rc == RESP_OK) {
			accepted++;
			CHECK(used <= n);
			for (unsigned i = 0; i < cmd->argc; i++) {
				CHECK(cmd->argv[i].p >= copy);
				CHECK(cmd->argv[i].p + cmd->argv[i].len <= copy + used);
			}
		} else if (rc == RESP_EPROTO) {
			errors++;
			CHECK(why != NULL);
		}
		free(copy);
	}
	printf("mutations: %ld accepted, %ld protocol errors\n", accepted, errors);
	CHECK(accepted > 0 && errors > 0);
}

static void test_encoder(void)
{
	struct rbuf b;
	rbuf_init(&b);
	resp_error(&b, "ERR bad\r\nthing");
	resp_bulk(&b, "a\r\nb", 4);
	resp_int(&b, -42);
	resp_null(&b);
	const char want[] = "-ERR bad  thing\r\n$4\r\na\r\nb\r\n:-42\r\n$-1\r\n";
	CHECK(b.len == sizeof(want) - 1 && memcmp(b.data, want, b.len) == 0);
	rbuf_free(&b);
}

int main(void)
{
	const char *s = getenv("LOTUS_FUZZ_SEED");
	seed0 = s ? strtoull(s, NULL, 10) : (unsigned long long)time(NULL);
	rs = seed0 * 2654435761ULL + 1;
	printf("seed %llu\n", seed0);
	snprintf(check_note, sizeof(check_note), "seed %llu", seed0);
	struct resp_cmd cmd = { 0 };
	double until = now_s() + 10;
	test_encoder();
	test_malformed(&cmd);
	test_valid(&cmd, until - 5);
	test_mutations(&cmd, until);
	resp_cmd_free(&cmd);
	printf("ok\n");
	return 0;
}
