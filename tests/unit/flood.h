/*
 * flood.h - a hostile wire-protocol client (header-only; used by
 * tests/unit/test_limits.c and tests/stress/flood.c).  It talks to one memory
 * server through the internal net layer, as a compute server would, but
 * sends what a well-behaved client never would: many huge messages, a flood
 * of small ones, thousands of requests parked behind one lock, or a message
 * whose replies are thousands of times its size.  Every loop is bounded in
 * count and time.
 */
#ifndef LOTUS_FLOOD_H
#define LOTUS_FLOOD_H
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/clock.h"
#include "common/common.h"
#include "net/net.h"
#include "net/wire.h"

struct flood_args {
	const char *host;
	uint16_t port;
	const char *mode;        /* big, small, park, amplify */
	uint64_t count, size;
	double seconds;
};

#define FLOOD_NSTATUS 8
struct flood_result {
	uint64_t msgs_sent, bytes_sent, send_errors;
	uint64_t replies, reply_bytes, wire_errors;
	int last_wire_error;
	int closed, close_reason;
	/* replies by status: [0] ok, then the first other statuses seen */
	int status[FLOOD_NSTATUS];
	uint64_t by_status[FLOOD_NSTATUS];
	double elapsed_s;
};

struct flood {
	net_worker_t *w;
	net_conn_t *c;
	struct flood_result *r;
	uint64_t seq;
	uint16_t table;
	int table_ok;
};

static inline void flood_count_status(struct flood_result *r, int st)
{
	for (int i = 0; i < FLOOD_NSTATUS; i++) {
		if (r->by_status[i] && r->status[i] == st) {
			r->by_status[i]++;
			return;
		}
		if (!r->by_status[i]) {
			r->status[i] = st;
			r->by_status[i] = 1;
			return;
		}
	}
}

static inline uint64_t flood_status_count(const struct flood_result *r, int st)
{
	for (int i = 0; i < FLOOD_NSTATUS; i++)
		if (r->by_status[i] && r->status[i] == st)
			return r->by_status[i];
	return 0;
}

static void flood_on_msg(void *arg, net_conn_t *c, const void *data, size_t len)
{
	struct flood *f = arg;
	const struct wire_hdr *h = data;
	struct wire_iter it;
	const struct wire_rep *rep;
	const unsigned char *k, *v;
	f->r->reply_bytes += len;
	if (wire_msg_check(data, len) != 0)
		return;
	if (h->type == WIRE_ERROR) {
		f->r->wire_errors++;
		f->r->last_wire_error = h->aux;
		return;
	}
	if (h->type != WIRE_REP)
		return;
	wire_iter_init(&it, data, len);
	while (wire_next_rep(&it, &rep, &k, &v) == 1) {
		f->r->replies++;
		flood_count_status(f->r, rep->status);
		if (rep->op == OP_CREATE_TABLE && rep->status == 0) {
			f->table = (uint16_t)rep->arg;
			f->table_ok = 1;
		}
	}
}

static void flood_on_close(void *arg, net_conn_t *c, int reason)
{
	struct flood *f = arg;
	f->r->closed = 1;
	f->r->close_reason = reason;
	f->c = NULL;
}

static inline void flood_send(struct flood *f, struct wire_buf *b)
{
	size_t len;
	wire_buf_end(b);
	unsigned char *p = wire_buf_detach(b, &len);
	if (!f->c) {
		free(p);
		return;
	}
	f->r->msgs_sent++;
	f->r->bytes_sent += len;
	if (net_send(f->c, p, len))
		f->r->send_errors++;
}

/* Progress until pred(f) or the deadline; returns 1 if pred held. */
static inline int flood_wait(struct flood *f, uint64_t deadline_ns, int (*pred)(struct flood *),
			     uint64_t want)
{
	(void)want;
	while (clock_now_ns() < deadline_ns) {
		if (pred && pred(f))
			return 1;
		if (!f->c)
			return pred ? pred(f) : 0;
		net_wait(f->w, 10);
	}
	return pred ? pred(f) : 0;
}

static uint64_t flood_want;
static int flood_pred_replies(struct flood *f)
{
	return f->r->replies + f->r->wire_errors >= flood_want;
}

static int flood_pred_table(struct flood *f)
{
	return f->table_ok;
}

static inline void flood_req(struct flood *f, struct wire_buf *b, const struct wire_req *r,
			     const void *key, const void *value)
{
	if (b->len == 0)
		wire_buf_begin(b, WIRE_REQ, 4242, ++f->seq);
	if (wire_buf_add_req(b, r, key, value) != 0 || b->count == 0xffff) {
		if (b->count)
			flood_send(f, b);
		wire_buf_begin(b, WIRE_REQ, 4242, ++f->seq);
		wire_buf_add_req(b, r, key, value);
	}
}

/* A table for the flood (max value 64 KiB) and one 64 KiB record "k0". */
static inline int flood_setup(struct flood *f, uint64_t deadline)
{
	struct wire_buf b;
	static unsigned char big[64 << 10];
	wire_buf_init(&b);
	struct wire_req ct = { .op = OP_CREATE_TABLE, .key_len = 5, .arg = 64 << 10 };
	flood_req(f, &b, &ct, "flood", NULL);
	flood_send(f, &b);
	if (!flood_wait(f, deadline, flood_pred_table, 0)) {
		wire_buf_free(&b);
		return LOTUS_ETIMEOUT;
	}
	struct wire_req wb = { .op = OP_WRITEBACK, .table = f->table, .key_len = 2,
			       .value_len = sizeof(big) };
	flood_req(f, &b, &wb, "k0", big);
	flood_send(f, &b);
	wire_buf_free(&b);
	flood_want = f->r->replies + 1;
	return flood_wait(f, deadline, flood_pred_replies, 0) ? 0 : LOTUS_ETIMEOUT;
}

static inline void flood_big(struct flood *f, const struct flood_args *a, uint64_t deadline)
{
	size_t vlen = a->size > 256 ? a->size - 32 - 48 - 8 : 64;
	unsigned char *val = calloc(1, vlen);
	struct wire_buf b;
	wire_buf_init(&b);
	struct wire_req r = { .op = OP_WRITEBACK, .table = f->table, .key_len = 2,
			      .value_len = (uint32_t)vlen };
	for (uint64_t i = 0; i < a->count && f->c; i++) {
		/* built by hand: wire_buf refuses what is over WIRE_MAX_MSG */
		size_t len = sizeof(struct wire_hdr) + sizeof(r) + wire_pad8(2 + vlen);
		unsigned char *p = net_buf_alloc(len);
		memset(p, 0, len);
		struct wire_hdr *h = (struct wire_hdr *)p;
		h->magic = WIRE_MAGIC;
		h->version = WIRE_VERSION;
		h->type = WIRE_REQ;
		h->count = 1;
		h->length = (uint32_t)len;
		h->sender = 4242;
		h->seq = ++f->seq;
		memcpy(p + sizeof(*h), &r, sizeof(r));
		memcpy(p + sizeof(*h) + sizeof(r), "k1", 2);
		f->r->msgs_sent++;
		f->r->bytes_sent += len;
		if (net_send(f->c, p, len))
			f->r->send_errors++;
	}
	(void)val;
	free(val);
	wire_buf_free(&b);
	flood_want = f->r->replies + a->count;
	flood_wait(f, deadline, flood_pred_replies, 0);
}

static inline void flood_small(struct flood *f, const struct flood_args *a, uint64_t deadline)
{
	struct wire_buf b;
	wire_buf_init(&b);
	uint64_t txn = 1;
	while (clock_now_ns() < deadline && f->c) {
		for (int i = 0; i < 64; i++, txn++) {
			char key[16];
			int kl = snprintf(key, sizeof(key), "s%llu", (unsigned long long)(txn % 1000));
			struct wire_req r = { .op = OP_READ, .cc = 0, .table = f->table,
					      .key_len = (uint16_t)kl, .txn_id = txn | 1ULL << 60,
					      .priority = txn };
			flood_req(f, &b, &r, key, NULL);
		}
		flood_send(f, &b);
		net_progress(f->w);
	}
	wire_buf_free(&b);
}

static inline void flood_park(struct flood *f, const struct flood_args *a, uint64_t deadline)
{
	struct wire_buf b;
	wire_buf_init(&b);
	/* the holder: young (large priority), WAIT_DIE */
	struct wire_req hold = { .op = OP_READ_X, .cc = 1, .table = f->table, .key_len = 2,
				 .txn_id = 1ULL << 61, .priority = 1ULL << 62 };
	uint64_t base = f->r->replies;
	flood_req(f, &b, &hold, "k0", NULL);
	flood_send(f, &b);
	flood_want = base + 1;
	flood_wait(f, deadline, flood_pred_replies, 0);
	/* older readers: each waits for the holder */
	for (uint64_t i = 0; i < a->count && f->c; i++) {
		struct wire_req r = { .op = OP_READ, .cc = 1, .table = f->table, .key_len = 2,
				      .txn_id = (1ULL << 59) + i, .priority = 1 + i };
		flood_req(f, &b, &r, "k0", NULL);
		if (b.count >= 1000)
			flood_send(f, &b);
	}
	if (b.count)
		flood_send(f, &b);
	wire_buf_free(&b);
	/* The refused ones answer at once; the parked ones stay until the
	 * deadline.  A stalled server may not have answered by then: wait (5 s
	 * at most) for the holder's answer and a first one to the readers, or
	 * the caller would see no refusal from a server that did refuse. */
	flood_wait(f, deadline, NULL, 0);
	flood_want = base + 2;
	flood_wait(f, clock_now_ns() + 5000000000ULL, flood_pred_replies, 0);
}

static inline void flood_amplify(struct flood *f, const struct flood_args *a, uint64_t deadline)
{
	struct wire_buf b;
	wire_buf_init(&b);
	uint64_t txn = 1ULL << 58;
	for (uint64_t m = 0; m < a->count && f->c; m++) {
		for (unsigned i = 0; i < 0xffff; i++, txn++) {
			struct wire_req r = { .op = OP_READ, .cc = 0, .table = f->table, .key_len = 2,
					      .txn_id = txn, .priority = txn };
			flood_req(f, &b, &r, "k0", NULL);
		}
		if (b.count)
			flood_send(f, &b);
	}
	wire_buf_free(&b);
	flood_want = f->r->replies + a->count * 0xffff;
	flood_wait(f, deadline, flood_pred_replies, 0);
}

/* Run one flood; 0 or the connect error.  The connection is closed after. */
static inline int flood_run(const struct flood_args *a, struct flood_result *r)
{
	struct net_handlers h = { .on_msg = flood_on_msg, .on_close = flood_on_close };
	/* as a lotus client does: UCX's interfaces are those that reach the server
	 * (a worker address listing every interface is refused by the server's
	 * address check when their device addresses differ from its own) */
	const char *hosts[] = { a->host };
	struct net_opts no = { .transport = "tcp", .hosts = hosts, .nhosts = 1 };
	net_ctx_t *ctx = NULL;
	struct flood f = { .r = r };
	uint64_t start = clock_now_ns(), deadline;
	memset(r, 0, sizeof(*r));
	int rc = net_ctx_create(&no, &ctx);
	if (rc == 0)
		rc = net_worker_create(ctx, &h, &f, &f.w);
	if (rc == 0)
		rc = net_connect(f.w, a->host, a->port, 5000, &f.c);
	if (rc == 0)
		rc = flood_setup(&f, start + 5000000000ULL);
	/* The mode's time starts once the table is there: a slow connect or
	 * setup (a loaded machine, an ASan server) must not eat it. */
	deadline = clock_now_ns() + (uint64_t)(a->seconds * 1e9);
	if (rc == 0) {
		if (!strcmp(a->mode, "big"))
			flood_big(&f, a, deadline);
		else if (!strcmp(a->mode, "small"))
			flood_small(&f, a, deadline);
		else if (!strcmp(a->mode, "park"))
			flood_park(&f, a, deadline);
		else if (!strcmp(a->mode, "amplify"))
			flood_amplify(&f, a, deadline);
		else
			rc = -EINVAL;
	}
	r->elapsed_s = (double)(clock_now_ns() - start) / 1e9;
	/* The worker and context are left to the process's exit: a server that
	 * still holds our unfetched sends keeps the worker from closing, and
	 * UCX 1.13 aborts in ucp_cleanup then. */
	if (f.c)
		net_conn_close(f.c);
	return rc;
}

static inline void flood_print(const struct flood_result *r, FILE *out)
{
	fprintf(out, "{\"msgs_sent\":%llu,\"bytes_sent\":%llu,\"send_errors\":%llu,"
		"\"replies\":%llu,\"reply_bytes\":%llu,\"wire_errors\":%llu,\"closed\":%d,"
		"\"elapsed_s\":%.2f,\"status\":{",
		(unsigned long long)r->msgs_sent, (unsigned long long)r->bytes_sent,
		(unsigned long long)r->send_errors, (unsigned long long)r->replies,
		(unsigned long long)r->reply_bytes, (unsigned long long)r->wire_errors, r->closed,
		r->elapsed_s);
	for (int i = 0; i < FLOOD_NSTATUS && r->by_status[i]; i++)
		fprintf(out, "%s\"%s\":%llu", i ? "," : "",
			r->status[i] ? lotus_strerror(r->status[i]) : "ok",
			(unsigned long long)r->by_status[i]);
	fprintf(out, "}}\n");
}

#endif
