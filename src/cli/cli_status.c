/*
 * cli_status.c - `lotus status`: one row per memory server of a cluster
 * config, for an operator and for a monitoring stack (docs/operations.md,
 * "status" and "metrics").
 *
 * Each server is asked on its own connection, one after the other: the door
 * handshake proves the cluster secret like any client's, then one OP_STATS
 * request brings the server's counters (the JSON text of h_stats in
 * src/memserver/handlers.c), from which the row is taken.  A server that
 * cannot be reached within --timeout-ms (refused, unknown host, silent, of
 * another cluster, a wrong secret) is a row that is down, with the reason;
 * the others are still asked.  Nothing here goes through lotus_connect,
 * which needs every server up.
 *
 * Three forms of the same rows: a table (default), one JSON document
 * (--json) and the Prometheus text exposition format (--prometheus, for
 * node_exporter's textfile collector).  Exit 0: every server answered;
 * 1: at least one did not; 2: bad usage or an unreadable config.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/opts.h"
#include "common/clock.h"
#include "common/common.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "net/net.h"
#include "net/wire.h"

#define ST_TAG 0x5354u   /* "ST": our one request's tag */

/* What one server told us (or why it did not). */
struct st_row {
	unsigned id;
	char address[300];
	int up;
	char reason[160];
	char *stats;          /* its OP_STATS text (malloc'd), up only */
};

/* The single outstanding request's state, filled by the handlers. */
struct st_wait {
	int got, closed;
	int status;           /* the reply's status */
	char *text;
};

static void st_on_msg(void *arg, net_conn_t *c, const void *data, size_t len)
{
	struct st_wait *w = arg;
	const struct wire_hdr *h = data;
	struct wire_iter it;
	const struct wire_rep *r;
	const unsigned char *key, *val;
	(void)c;
	if (wire_msg_check(data, len) != 0) {   /* nothing is read from it */
		w->closed = LOTUS_EPROTO;
		return;
	}
	if (h->type == WIRE_ERROR) {
		w->closed = h->aux ? h->aux : LOTUS_EPROTO;
		return;
	}
	if (h->type != WIRE_REP)
		return;
	wire_iter_init(&it, data, len);
	while (wire_next_rep(&it, &r, &key, &val) == 1) {
		if (r->tag != ST_TAG || r->op != OP_STATS || w->got)
			continue;
		w->got = 1;
		w->status = r->status;
		w->text = malloc((size_t)r->value_len + 1);
		if (w->text) {
			memcpy(w->text, val, r->value_len);
			w->text[r->value_len] = 0;
		}
	}
}

static void st_on_close(void *arg, net_conn_t *c, int reason)
{
	struct st_wait *w = arg;
	(void)c;
	w->closed = reason ? reason : LOTUS_EUNAVAIL;
}

static void st_on_accept(void *arg, net_conn_t *c) { (void)arg; (void)c; }
static void st_on_post(void *arg, void *item) { (void)arg; (void)item; }

static const struct net_handlers st_handlers = {
	.on_msg = st_on_msg, .on_accept = st_on_accept,
	.on_close = st_on_close, .on_post = st_on_post,
};

static int st_send(net_conn_t *c, enum wire_type type, uint32_t sender, const struct wire_req *r)
{
	struct wire_buf b;
	size_t len;
	wire_buf_init(&b);
	int rc = wire_buf_begin(&b, type, sender, 1);
	if (rc == 0 && r)
		rc = wire_buf_add_req(&b, r, NULL, NULL);
	if (rc) {
		wire_buf_free(&b);
		return rc;
	}
	wire_buf_end(&b);
	unsigned char *p = wire_buf_detach(&b, &len);
	return net_send(c, p, len);
}

/* Ask one server; fills row->up/reason/stats. */
static void st_ask(net_worker_t *nw, struct st_wait *w, const struct lotus_server_config *sc,
		   uint32_t compute_id, int timeout_ms, struct st_row *row)
{
	net_conn_t *c = NULL;
	*w = (struct st_wait){ 0 };
	uint64_t deadline = clock_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
	int rc = net_connect(nw, sc->host, sc->port, timeout_ms, &c);
	const char *stage = "cannot connect";
	if (rc == 0)
		rc = st_send(c, WIRE_HELLO, compute_id, NULL);
	struct wire_req r = { .op = OP_STATS, .tag = ST_TAG };
	if (rc == 0)
		rc = st_send(c, WIRE_REQ, compute_id, &r);
	if (rc == 0)
		stage = "no answer";
	while (rc == 0 && !w->got && !w->closed && clock_now_ns() < deadline)
		if (net_progress(nw) == 0)
			net_wait(nw, 20);
	if (rc == 0 && !w->got)
		rc = w->closed ? w->closed : LOTUS_ETIMEOUT;
	if (rc == 0 && w->status)
		rc = w->status;
	if (rc == 0 && (!w->text || w->text[0] != '{'))
		rc = w->text ? LOTUS_EPROTO : -ENOMEM;
	if (c && !w->closed)
		net_conn_close(c);
	if (rc) {
		row->up = 0;
		const char *why = rc == -EACCES ? "authentication failed (the cluster secrets differ)"
				: rc == -EUSERS ? "the server is full (max_clients)"
				: rc == LOTUS_ECONFIG ? "a server of another cluster"
				: lotus_strerror(rc);
		snprintf(row->reason, sizeof(row->reason), "%s: %s", stage, why);
		free(w->text);
	} else {
		row->up = 1;
		row->stats = w->text;
	}
	w->text = NULL;
}

/* ---- reading the stats text --------------------------------------------- */

/* The value of member key of the object at p ('{'), or NULL.  The text is the
 * server's own compact JSON; a key is a string followed by ':' at depth 1. */
static const char *j_member(const char *p, const char *key, size_t klen)
{
	int depth = 0;
	if (!p || *p != '{')
		return NULL;
	for (; *p; p++) {
		if (*p == '"') {
			const char *s = ++p;
			while (*p && *p != '"') {
				if (*p == '\\' && p[1])
					p++;
				p++;
			}
			if (!*p)
				return NULL;
			if (depth == 1 && (size_t)(p - s) == klen && !memcmp(s, key, klen) &&
			    p[1] == ':')
				return p + 2;
		} else if (*p == '{' || *p == '[') {
			depth++;
		} else if (*p == '}' || *p == ']') {
			if (--depth == 0)
				return NULL;
		}
	}
	return NULL;
}

/* The value at a dotted path ("durability.checkpoint.seq"), or NULL. */
static const char *j_path(const char *js, const char *path)
{
	const char *p = js;
	while (p && *path) {
		const char *dot = strchr(path, '.');
		size_t l = dot ? (size_t)(dot - path) : strlen(path);
		p = j_member(p, path, l);
		path += l + (dot ? 1 : 0);
	}
	return p;
}

static int j_u64(const char *js, const char *path, uint64_t *out)
{
	const char *v = j_path(js, path);
	char *end;
	if (!v || *v < '0' || *v > '9')
		return 0;
	*out = strtoull(v, &end, 10);
	return end != v;
}

static uint64_t j_u64_or0(const char *js, const char *path)
{
	uint64_t v = 0;
	j_u64(js, path, &v);
	return v;
}

/* The string literal at path, as it stands (quotes and escapes kept) into
 * buf; 0 if absent or not a string. */
static int j_lit(const char *js, const char *path, char *buf, size_t len)
{
	const char *v = j_path(js, path), *p;
	if (!v || *v != '"')
		return 0;
	for (p = v + 1; *p && *p != '"'; p++)
		if (*p == '\\' && p[1])
			p++;
	if (*p != '"' || (size_t)(p + 1 - v) >= len)
		return 0;
	memcpy(buf, v, (size_t)(p + 1 - v));
	buf[p + 1 - v] = 0;
	return 1;
}

/* The same, unescaped (\" and \\ and \uXXXX below 0x80; for the table and
 * for Prometheus labels). */
static int j_str(const char *js, const char *path, char *buf, size_t len)
{
	char lit[4200];
	size_t n = 0;
	if (!len || !j_lit(js, path, lit, sizeof(lit)))
		return 0;
	for (const char *p = lit + 1; *p && *p != '"' && n + 1 < len; p++) {
		if (*p == '\\' && p[1] == 'u' && strlen(p) >= 6) {
			buf[n++] = (char)strtoul((char[]){ p[2], p[3], p[4], p[5], 0 }, NULL, 16);
			p += 5;
		} else {
			if (*p == '\\' && p[1])
				p++;
			buf[n++] = *p;
		}
	}
	buf[n] = 0;
	return 1;
}

/* ---- the row's figures ---------------------------------------------------- */

/* Clients connected, not counting this status query's own connection. */
static uint64_t row_clients(const char *js)
{
	uint64_t n = j_u64_or0(js, "door.clients");
	return n ? n - 1 : 0;
}

/* Door refusals, by reason: connections the door closed without admitting. */
static const char *const door_reasons[] = {
	"auth_failed", "bad_frames", "timed_out", "refused_full", "dropped", "bad_addr",
	"evicted", NULL,
};

static uint64_t door_refusals(const char *js)
{
	uint64_t sum = 0;
	char path[64];
	for (unsigned i = 0; door_reasons[i]; i++) {
		snprintf(path, sizeof(path), "door.%s", door_reasons[i]);
		sum += j_u64_or0(js, path);
	}
	return sum;
}

static const char *row_durability(const struct st_row *r, char *buf, size_t len)
{
	if (!j_str(r->stats, "durability.mode", buf, len))
		snprintf(buf, len, "none");
	return buf;
}

/* ---- output --------------------------------------------------------------- */

static void print_json(const struct st_row *rows, unsigned n)
{
	printf("{\"servers\":[");
	for (unsigned i = 0; i < n; i++) {
		const struct st_row *r = &rows[i];
		const char *js = r->stats;
		printf("%s{\"id\":%u,\"up\":%s,", i ? "," : "", r->id, r->up ? "true" : "false");
		if (!r->up) {
			printf("\"pid\":null,\"address\":");
			json_write_str(stdout, r->address);
			printf(",\"reason\":");
			json_write_str(stdout, r->reason);
			printf("}");
			continue;
		}
		char dur[32], dir[4200];
		printf("\"pid\":%" PRIu64 ",\"address\":", j_u64_or0(js, "pid"));
		json_write_str(stdout, r->address);
		printf(",\"durability\":\"%s\",\"data_dir\":%s", row_durability(r, dur, sizeof(dur)),
		       j_lit(js, "durability.data_dir", dir, sizeof(dir)) ? dir : "null");
		printf(",\"pool_used_bytes\":%" PRIu64 ",\"pool_free_bytes\":%" PRIu64
		       ",\"tables\":%" PRIu64 ",\"records\":%" PRIu64 ",\"clients\":%" PRIu64,
		       j_u64_or0(js, "pool_used_bytes"), j_u64_or0(js, "pool_free_bytes"),
		       j_u64_or0(js, "tables"), j_u64_or0(js, "records"), row_clients(js));
		if (j_path(js, "durability")) {
			printf(",\"log_bytes\":%" PRIu64 ",\"lsn\":%" PRIu64 ",\"durable_lsn\":%" PRIu64,
			       j_u64_or0(js, "durability.log_disk_bytes"),
			       j_u64_or0(js, "durability.next_lsn"),
			       j_u64_or0(js, "durability.durable_lsn"));
			if (j_u64_or0(js, "durability.checkpoint.seq"))
				printf(",\"checkpoint\":{\"seq\":%" PRIu64 ",\"begin_lsn\":%" PRIu64
				       ",\"unix_ms\":%" PRIu64 "}",
				       j_u64_or0(js, "durability.checkpoint.seq"),
				       j_u64_or0(js, "durability.checkpoint.begin_lsn"),
				       j_u64_or0(js, "durability.checkpoint.unix_ms"));
			else
				printf(",\"checkpoint\":null");
		} else
			printf(",\"log_bytes\":null,\"lsn\":null,\"durable_lsn\":null,"
			       "\"checkpoint\":null");
		char role[16];
		if (j_str(js, "replication.role", role, sizeof(role)))
			printf(",\"partition\":%" PRIu64 ",\"role\":\"%s\",\"epoch\":%" PRIu64
			       ",\"lag\":%" PRIu64, j_u64_or0(js, "replication.partition"), role,
			       j_u64_or0(js, "replication.epoch"), j_u64_or0(js, "replication.lag"));
		else
			printf(",\"partition\":null,\"role\":null,\"epoch\":null,\"lag\":null");
		printf(",\"prepared\":%" PRIu64 ",\"lease_losses\":%" PRIu64
		       ",\"door_refusals\":%" PRIu64 ",\"requests\":%" PRIu64 "}",
		       j_u64_or0(js, "prepared"), j_u64_or0(js, "lease_losses"), door_refusals(js),
		       j_u64_or0(js, "requests"));
	}
	printf("]}\n");
}

static const char *human_bytes(uint64_t v, char *buf, size_t len)
{
	static const char units[] = "BKMGTP";
	double d = (double)v;
	unsigned u = 0;
	while (d >= 1024 && u + 1 < sizeof(units) - 1) {
		d /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 "B", v);
	else
		snprintf(buf, len, "%.1f%c", d, units[u]);
	return buf;
}

static void print_table(const struct st_row *rows, unsigned n)
{
	printf("%-3s %-4s %-7s %-8s %-21s %-5s %9s %9s %6s %10s %7s %9s %12s %8s %4s %6s %7s  %s\n",
	       "ID", "UP", "ROLE", "PID", "ADDRESS", "DUR", "POOL-USED", "POOL-FREE", "TABLES", "RECORDS",
	       "CLIENTS", "LOG", "LSN", "CKPT-AGE", "PREP", "LEASES", "REFUSED", "DATA-DIR");
	uint64_t now_ms = clock_wall_ns() / 1000000;
	for (unsigned i = 0; i < n; i++) {
		const struct st_row *r = &rows[i];
		const char *js = r->stats;
		if (!r->up) {
			printf("%-3u %-4s %-7s %-8s %-21s %s\n", r->id, "down", "-", "-", r->address,
			       r->reason);
			continue;
		}
		char dur[32], dir[4096], used[16], fr[16], lg[16], age[24], lsn[24], role[16];
		if (!j_str(js, "replication.role", role, sizeof(role)))
			snprintf(role, sizeof(role), "-");   /* not replicated */
		int durable = j_path(js, "durability") != NULL;
		uint64_t ck = j_u64_or0(js, "durability.checkpoint.unix_ms");
		if (!durable || !j_u64_or0(js, "durability.checkpoint.seq"))
			snprintf(age, sizeof(age), "-");
		else if (!ck)
			snprintf(age, sizeof(age), "?");
		else
			snprintf(age, sizeof(age), "%" PRIu64 "s", now_ms > ck ? (now_ms - ck) / 1000 : 0);
		if (durable)
			snprintf(lsn, sizeof(lsn), "%" PRIu64, j_u64_or0(js, "durability.next_lsn"));
		else
			snprintf(lsn, sizeof(lsn), "-");
		printf("%-3u %-4s %-7s %-8" PRIu64 " %-21s %-5s %9s %9s %6" PRIu64 " %10" PRIu64
		       " %7" PRIu64 " %9s %12s %8s %4" PRIu64 " %6" PRIu64 " %7" PRIu64 "  %s\n",
		       r->id, "up", role, j_u64_or0(js, "pid"), r->address,
		       row_durability(r, dur, sizeof(dur)),
		       human_bytes(j_u64_or0(js, "pool_used_bytes"), used, sizeof(used)),
		       human_bytes(j_u64_or0(js, "pool_free_bytes"), fr, sizeof(fr)),
		       j_u64_or0(js, "tables"), j_u64_or0(js, "records"), row_clients(js),
		       durable ? human_bytes(j_u64_or0(js, "durability.log_disk_bytes"), lg, sizeof(lg)) : "-",
		       lsn, age, j_u64_or0(js, "prepared"), j_u64_or0(js, "lease_losses"),
		       door_refusals(js), j_str(js, "durability.data_dir", dir, sizeof(dir)) ? dir : "-");
	}
}

/* A Prometheus label value: backslash, double quote and newline escaped. */
static void prom_label(const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			printf("\\%c", *s);
		else if (*s == '\n')
			printf("\\n");
		else
			putchar(*s);
	}
}

struct prom_metric {
	const char *name, *type, *help;
	const char *path;        /* in the stats text; NULL: computed below */
	int durable;             /* only servers with a data directory have it */
	double scale;            /* 0: as is */
};

static const struct prom_metric prom_metrics[] = {
	{ "lotus_pool_used_bytes", "gauge", "Bytes of the record pool in use.", "pool_used_bytes", 0, 0 },
	{ "lotus_pool_free_bytes", "gauge", "Bytes of the record pool still free.", "pool_free_bytes", 0, 0 },
	{ "lotus_tables", "gauge", "Tables on the memory server.", "tables", 0, 0 },
	{ "lotus_records", "gauge", "Records on the memory server.", "records", 0, 0 },
	{ "lotus_clients", "gauge", "Client connections open (this query's own not counted).", "door.clients", 0, 0 },
	{ "lotus_prepared_transactions", "gauge", "Prepared transactions awaiting a decision.", "prepared", 0, 0 },
	{ "lotus_requests_total", "counter", "Requests served since the start.", "requests", 0, 0 },
	{ "lotus_lease_losses_total", "counter", "Client connections closed because their lease lapsed.", "lease_losses", 0, 0 },
	{ "lotus_log_disk_bytes", "gauge", "Bytes of redo log segment files on disk.", "durability.log_disk_bytes", 1, 0 },
	{ "lotus_log_lsn", "gauge", "Next LSN of the redo log (bytes logged since the database began).", "durability.next_lsn", 1, 0 },
	{ "lotus_log_durable_lsn", "gauge", "LSN up to which the redo log is durable.", "durability.durable_lsn", 1, 0 },
	{ "lotus_log_readonly", "gauge", "1 if the redo log failed and the server refuses writes.", "durability.readonly", 1, 0 },
	{ "lotus_checkpoint_seq", "gauge", "Sequence number of the checkpoint in effect (0: none).", "durability.checkpoint.seq", 1, 0 },
	{ "lotus_checkpoint_begin_lsn", "gauge", "Begin LSN of the checkpoint in effect.", "durability.checkpoint.begin_lsn", 1, 0 },
	{ "lotus_checkpoint_timestamp_seconds", "gauge", "Unix time the checkpoint in effect was written (0: unknown).", "durability.checkpoint.unix_ms", 1, 1e-3 },
	{ 0 },
};

static void prom_labels(const struct st_row *r)
{
	printf("{server=\"%u\",address=\"", r->id);
	prom_label(r->address);
	printf("\"");
}

static void print_prometheus(const struct st_row *rows, unsigned n)
{
	printf("# HELP lotus_up 1 if the memory server answered lotus status, else 0.\n"
	       "# TYPE lotus_up gauge\n");
	for (unsigned i = 0; i < n; i++) {
		printf("lotus_up");
		prom_labels(&rows[i]);
		printf("} %d\n", rows[i].up);
	}
	printf("# HELP lotus_server_info The memory server's pid, durability and data directory (value 1).\n"
	       "# TYPE lotus_server_info gauge\n");
	for (unsigned i = 0; i < n; i++) {
		const struct st_row *r = &rows[i];
		char dur[32], dir[4096];
		if (!r->up)
			continue;
		printf("lotus_server_info");
		prom_labels(r);
		printf(",pid=\"%" PRIu64 "\",durability=\"%s\",data_dir=\"", j_u64_or0(r->stats, "pid"),
		       row_durability(r, dur, sizeof(dur)));
		prom_label(j_str(r->stats, "durability.data_dir", dir, sizeof(dir)) ? dir : "");
		printf("\"} 1\n");
	}
	for (const struct prom_metric *m = prom_metrics; m->name; m++) {
		printf("# HELP %s %s\n# TYPE %s %s\n", m->name, m->help, m->name, m->type);
		for (unsigned i = 0; i < n; i++) {
			uint64_t v;
			if (!rows[i].up || !j_u64(rows[i].stats, m->path, &v))
				continue;
			if (!strcmp(m->path, "door.clients"))
				v = row_clients(rows[i].stats);   /* not this query's own */
			printf("%s", m->name);
			prom_labels(&rows[i]);
			if (m->scale)
				printf("} %.3f\n", (double)v * m->scale);
			else
				printf("} %" PRIu64 "\n", v);
		}
	}
	printf("# HELP lotus_door_refusals_total Connections the server's door closed without "
	       "admitting them, by reason.\n# TYPE lotus_door_refusals_total counter\n");
	for (unsigned i = 0; i < n; i++) {
		char path[64];
		if (!rows[i].up)
			continue;
		for (unsigned k = 0; door_reasons[k]; k++) {
			snprintf(path, sizeof(path), "door.%s", door_reasons[k]);
			printf("lotus_door_refusals_total");
			prom_labels(&rows[i]);
			printf(",reason=\"%s\"} %" PRIu64 "\n", door_reasons[k],
			       j_u64_or0(rows[i].stats, path));
		}
	}
}

int cmd_status(int argc, char **argv)
{
	const char *config = NULL, *secret = NULL;
	uint64_t timeout_ms = 2000, compute_id = 4000;
	bool json = false, prom = false;
	struct cli_opt opts[] = {
		{ "config", OPT_STR, &config, "FILE", "cluster config file (required)" },
		{ "json", OPT_FLAG, &json, NULL, "print one JSON document {\"servers\":[...]} (docs/operations.md has the schema)" },
		{ "prometheus", OPT_FLAG, &prom, NULL, "print the counters in the Prometheus text format (for node_exporter's textfile collector)" },
		{ "timeout-ms", OPT_U64, &timeout_ms, "MS", "how long to wait for each server before it counts as down (default 2000)", .min = 1, .max = 600000 },
		{ "secret-file", OPT_STR, &secret, "FILE", "the cluster secret file (default: the config's secret_file)" },
		{ "compute-id", OPT_U64, &compute_id, "N", "the compute id this client names in its hello (default 4000)", .min = 0, .max = 4095 },
		{ 0 },
	};
	int rc = cli_parse("status", "Ask every memory server of a config how it is: up or down, "
			   "pid, address, durability, pool, tables and records, clients, log and "
			   "checkpoint, prepared transactions, lease losses, door refusals.  Exit 0 if "
			   "every server answered, 1 if one did not, 2 on bad usage.",
			   opts, argc, argv, NULL, NULL);
	if (rc)
		return rc == 1 ? 0 : rc;
	if (!config)
		return cli_fail("status", "give --config FILE");
	if (json && prom)
		return cli_fail("status", "give --json or --prometheus, not both");
	struct lotus_config *cfg = malloc(sizeof(*cfg));
	struct st_row *rows = NULL;
	net_ctx_t *ctx = NULL;
	net_worker_t *nw = NULL;
	struct st_wait w = { 0 };
	int ret = 2;
	if (!cfg || config_load(config, cfg))
		goto out;
	rows = calloc(cfg->nservers, sizeof(*rows));
	if (!rows)
		goto out;
	const char *hosts[LOTUS_MAX_SERVERS];
	for (unsigned i = 0; i < cfg->nservers; i++)
		hosts[i] = cfg->servers[i].host;
	struct net_opts no = { .transport = cfg->transport, .lease_ms = cfg->lease_ms,
			       .secret_file = secret ? secret : cfg->secret_file[0] ? cfg->secret_file : NULL,
			       .hosts = hosts, .nhosts = cfg->nservers, .cluster_id = cfg->cluster_id };
	rc = net_ctx_create(&no, &ctx);
	if (rc == 0)
		rc = net_worker_create(ctx, &st_handlers, &w, &nw);
	if (rc) {
		log_error("status: %s", lotus_strerror(rc));
		goto out;
	}
	ret = 0;
	for (unsigned i = 0; i < cfg->nservers; i++) {
		const struct lotus_server_config *sc = &cfg->servers[i];
		rows[i].id = sc->id;
		snprintf(rows[i].address, sizeof(rows[i].address),
			 strchr(sc->host, ':') ? "[%s]:%u" : "%s:%u", sc->host, sc->port);
		st_ask(nw, &w, sc, (uint32_t)compute_id, (int)timeout_ms, &rows[i]);
		if (!rows[i].up)
			ret = 1;
	}
	if (json)
		print_json(rows, cfg->nservers);
	else if (prom)
		print_prometheus(rows, cfg->nservers);
	else
		print_table(rows, cfg->nservers);
	fflush(stdout);
out:
	if (rows)
		for (unsigned i = 0; i < cfg->nservers; i++)
			free(rows[i].stats);
	free(rows);
	if (nw)
		net_worker_destroy(nw);
	if (ctx)
		net_ctx_destroy(ctx);
	free(cfg);
	return ret;
}
