/*
 * serve_cmds.c - the command table of `lotus serve` and the commands that
 * need no connection state: the data commands (checked when they arrive, run
 * against a job's overlay, see serve_data.c) and the immediate ones (PING,
 * ECHO, COMMAND, CONFIG GET).
 *
 * Checks happen when a command arrives, so a bad command gets its error in
 * order and, inside MULTI, makes EXEC fail (EXECABORT) as in Redis; what can
 * only be known from the data (INCR of a non-number, APPEND past the value
 * limit) is an error in the command's reply and changes nothing.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "serve/serve_int.h"
#include "serve/serve_types.h"

/* ---- checks --------------------------------------------------------------- */

static int check_key(const struct resp_arg *k, struct rbuf *b)
{
	if (k->len == 0) {
		resp_error(b, "ERR empty key: lotus keys are 1 to %d bytes", KEY_MAX);
		return -1;
	}
	if (k->len > KEY_MAX) {
		resp_error(b, "ERR key is %zu bytes, over lotus's key limit of %d bytes",
			   k->len, KEY_MAX);
		return -1;
	}
	return 0;
}

static int check_value(struct server *sv, size_t len, struct rbuf *b)
{
	if (len > sv->max_value) {
		resp_error(b, "ERR value is %zu bytes, over this table's limit of %u bytes "
			   "(lotus serve --max-value)", len, (unsigned)sv->max_value);
		return -1;
	}
	return 0;
}

static int check_keys_from(const struct resp_cmd *cmd, unsigned from, unsigned step,
			   struct rbuf *b)
{
	for (unsigned i = from; i < cmd->argc; i += step)
		if (check_key(&cmd->argv[i], b))
			return -1;
	return 0;
}

static int check_key1(struct server *sv, const struct resp_cmd *cmd, struct rbuf *b)
{
	return check_key(&cmd->argv[1], b);
}

static int check_keys(struct server *sv, const struct resp_cmd *cmd, struct rbuf *b)
{
	return check_keys_from(cmd, 1, 1, b);
}

static int check_key_value(struct server *sv, const struct resp_cmd *cmd, struct rbuf *b)
{
	return check_key(&cmd->argv[1], b) || check_value(sv, cmd->argv[2].len, b) ? -1 : 0;
}

static int check_mset(struct server *sv, const struct resp_cmd *cmd, struct rbuf *b)
{
	if (cmd->argc % 2 == 0) {
		resp_error(b, "ERR wrong number of arguments for 'mset' command");
		return -1;
	}
	for (unsigned i = 1; i + 1 < cmd->argc; i += 2)
		if (check_key(&cmd->argv[i], b) || check_value(sv, cmd->argv[i + 1].len, b))
			return -1;
	return 0;
}

static int check_incrby(struct server *sv, const struct resp_cmd *cmd, struct rbuf *b)
{
	long long v;
	if (check_key(&cmd->argv[1], b))
		return -1;
	if (resp_arg_ll(&cmd->argv[2], &v)) {
		resp_error(b, "ERR value is not an integer or out of range");
		return -1;
	}
	return 0;
}

/* SET's options; *expire: -1 KEEPTTL, 0 none, else the time (ms). */
static int set_opts(const struct resp_arg *argv, unsigned argc, int *nx, int *xx, int *get,
		    int64_t *expire)
{
	int ttls = 0;
	*nx = *xx = *get = 0;
	*expire = 0;
	for (unsigned a = 3; a < argc; a++) {
		const struct resp_arg *o = &argv[a];
		long long t, unit = 0, at = 0;
		if (resp_arg_is(o, "NX"))
			*nx = 1;
		else if (resp_arg_is(o, "XX"))
			*xx = 1;
		else if (resp_arg_is(o, "GET"))
			*get = 1;
		else if (resp_arg_is(o, "KEEPTTL"))
			*expire = -1, ttls++;
		else if (resp_arg_is(o, "EX"))
			unit = 1000;
		else if (resp_arg_is(o, "PX"))
			unit = 1;
		else if (resp_arg_is(o, "EXAT"))
			unit = 1000, at = 1;
		else if (resp_arg_is(o, "PXAT"))
			unit = 1, at = 1;
		else
			return -1;
		if (!unit)
			continue;
		if (a + 1 >= argc || resp_arg_ll(&argv[a + 1], &t))
			return -1;
		if (t <= 0 || t > LLONG_MAX / 4000)
			return -2;
		*expire = t * unit + (at ? 0 : types_now_ms());
		ttls++;
		a++;
	}
	return (*nx && *xx) || ttls > 1 ? -1 : 0;
}

static int check_set(struct server *sv, const struct resp_cmd *cmd, struct rbuf *b)
{
	int nx, xx, get;
	int64_t ex;
	if (check_key_value(sv, cmd, b))
		return -1;
	int rc = set_opts(cmd->argv, cmd->argc, &nx, &xx, &get, &ex);
	if (rc == -2)
		resp_error(b, "ERR invalid expire time in 'set' command");
	else if (rc)
		resp_error(b, "ERR syntax error");
	return rc ? -1 : 0;
}

static int check_setex(struct server *sv, const struct resp_cmd *cmd, struct rbuf *b)
{
	return check_key(&cmd->argv[1], b) || check_value(sv, cmd->argv[3].len, b) ? -1 : 0;
}

static int check_key2(struct server *sv, const struct resp_cmd *cmd, struct rbuf *b)
{
	return check_key(&cmd->argv[1], b) || check_key(&cmd->argv[2], b) ? -1 : 0;
}

static int check_values_from2(struct server *sv, const struct resp_cmd *cmd, struct rbuf *b)
{
	if (check_key(&cmd->argv[1], b))
		return -1;
	for (unsigned i = 2; i < cmd->argc; i++)
		if (check_value(sv, cmd->argv[i].len, b))
			return -1;
	return 0;
}

static int check_scan(struct server *sv, const struct resp_cmd *cmd, struct rbuf *b)
{
	return 0;   /* checked when the job is set up (serve_data.c) */
}

/* ---- data commands (run against the overlay) ------------------------------ */

static void run_get(struct job *j, unsigned ci, struct rbuf *b)
{
	const char *v;
	size_t n;
	int r = str_get(j, ci, 1, &v, &n, NULL);
	if (r < 0)
		put_wrongtype(b);
	else if (r)
		resp_bulk(b, v, n);
	else
		resp_null(b);
}

static void run_set(struct job *j, unsigned ci, struct rbuf *b)
{
	int nx, xx, get;
	int64_t ex, old_ex = 0;
	const char *v;
	size_t n;
	struct resp_arg val = job_arg(j, ci, 2);
	struct resp_arg argv[16];
	unsigned argc = job_argc(j, ci) < 16 ? job_argc(j, ci) : 16;
	for (unsigned a = 0; a < argc; a++)
		argv[a] = job_arg(j, ci, a);
	set_opts(argv, argc, &nx, &xx, &get, &ex);   /* checked on arrival */
	int exists = (nx || xx || get || ex < 0) ? str_get(j, ci, 1, &v, &n, &old_ex) : 0;
	if (exists < 0 && get) {
		put_wrongtype(b);
		return;
	}
	if (ex < 0)
		ex = exists ? old_ex : 0;
	exists = exists != 0;
	struct rbuf old;
	rbuf_init(&old);
	if (get && exists)
		resp_bulk(&old, v, n);   /* before the set replaces it */
	if ((nx && exists) || (xx && !exists)) {
		if (get && exists)
			rbuf_put(b, old.data, old.len);
		else
			resp_null(b);
	} else if (str_set(j, ci, 1, val.p, val.len, ex)) {
		resp_error(b, "ERR out of memory");
	} else if (get) {
		if (exists)
			rbuf_put(b, old.data, old.len);
		else
			resp_null(b);
	} else {
		resp_simple(b, "OK");
	}
	rbuf_free(&old);
}

static void run_setnx(struct job *j, unsigned ci, struct rbuf *b)
{
	const char *v;
	size_t n;
	struct resp_arg val = job_arg(j, ci, 2);
	if (str_get(j, ci, 1, &v, &n, NULL)) {   /* any type: the key exists */
		resp_int(b, 0);
		return;
	}
	if (str_set(j, ci, 1, val.p, val.len, 0))
		resp_error(b, "ERR out of memory");
	else
		resp_int(b, 1);
}

static void run_getset(struct job *j, unsigned ci, struct rbuf *b)
{
	const char *v;
	size_t n;
	struct resp_arg val = job_arg(j, ci, 2);
	int r = str_get(j, ci, 1, &v, &n, NULL);
	if (r < 0) {
		put_wrongtype(b);
		return;
	}
	if (r)
		resp_bulk(b, v, n);
	else
		resp_null(b);
	if (str_set(j, ci, 1, val.p, val.len, 0))
		b->oom = 1;
}

static void run_mget(struct job *j, unsigned ci, struct rbuf *b)
{
	const char *v;
	size_t n;
	resp_array(b, job_argc(j, ci) - 1);
	for (unsigned i = 1; i < job_argc(j, ci); i++) {
		if (str_get(j, ci, i, &v, &n, NULL) == 1)
			resp_bulk(b, v, n);
		else
			resp_null(b);
	}
}

static void run_mset(struct job *j, unsigned ci, struct rbuf *b)
{
	for (unsigned i = 1; i + 1 < job_argc(j, ci); i += 2) {
		struct resp_arg val = job_arg(j, ci, i + 1);
		if (str_set(j, ci, i, val.p, val.len, 0)) {
			b->oom = 1;
			return;
		}
	}
	resp_simple(b, "OK");
}


static void incr_by(struct job *j, unsigned ci, struct rbuf *b, long long by)
{
	const char *v;
	size_t n;
	long long cur = 0;
	int64_t ex = 0;
	int r = str_get(j, ci, 1, &v, &n, &ex);
	if (r < 0) {
		put_wrongtype(b);
		return;
	}
	if (r) {
		struct resp_arg a = { v, n };
		if (resp_arg_ll(&a, &cur)) {
			resp_error(b, "ERR value is not an integer or out of range");
			return;
		}
	}
	if ((by > 0 && cur > LLONG_MAX - by) || (by < 0 && cur < LLONG_MIN - by)) {
		resp_error(b, "ERR increment or decrement would overflow");
		return;
	}
	cur += by;
	char s[24];
	int len = snprintf(s, sizeof(s), "%lld", cur);
	if (check_value(job_server(j), (size_t)len, b))
		return;
	if (str_set(j, ci, 1, s, (size_t)len, ex))
		resp_error(b, "ERR out of memory");
	else
		resp_int(b, cur);
}

static long long arg_ll(struct job *j, unsigned ci, unsigned i)
{
	struct resp_arg a = job_arg(j, ci, i);
	long long v = 0;
	resp_arg_ll(&a, &v);   /* checked on arrival */
	return v;
}

static void run_incr(struct job *j, unsigned ci, struct rbuf *b) { incr_by(j, ci, b, 1); }
static void run_decr(struct job *j, unsigned ci, struct rbuf *b) { incr_by(j, ci, b, -1); }
static void run_incrby(struct job *j, unsigned ci, struct rbuf *b)
{
	incr_by(j, ci, b, arg_ll(j, ci, 2));
}

static void run_decrby(struct job *j, unsigned ci, struct rbuf *b)
{
	long long by = arg_ll(j, ci, 2);
	if (by == LLONG_MIN) {
		resp_error(b, "ERR decrement would overflow");
		return;
	}
	incr_by(j, ci, b, -by);
}

static void run_append(struct job *j, unsigned ci, struct rbuf *b)
{
	const char *v;
	size_t n;
	struct resp_arg add = job_arg(j, ci, 2);
	struct rbuf nv;
	int64_t ex = 0;
	int r = str_get(j, ci, 1, &v, &n, &ex);
	if (r < 0) {
		put_wrongtype(b);
		return;
	}
	if (!r)
		n = 0;
	if (check_value(job_server(j), n + add.len, b))
		return;
	rbuf_init(&nv);
	rbuf_put(&nv, v, n);
	rbuf_put(&nv, add.p, add.len);
	if (nv.oom || str_set(j, ci, 1, nv.data ? nv.data : "", nv.len, ex))
		resp_error(b, "ERR out of memory");
	else
		resp_int(b, (long long)(n + add.len));
	rbuf_free(&nv);
}

static void run_strlen(struct job *j, unsigned ci, struct rbuf *b)
{
	const char *v;
	size_t n;
	int r = str_get(j, ci, 1, &v, &n, NULL);
	if (r < 0)
		put_wrongtype(b);
	else
		resp_int(b, r ? (long long)n : 0);
}

/* ---- immediate commands ----------------------------------------------------- */

static void cmd_ping(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b)
{
	if (cmd->argc > 2)
		resp_error(b, "ERR wrong number of arguments for 'ping' command");
	else if (cmd->argc == 2)
		resp_bulk(b, cmd->argv[1].p, cmd->argv[1].len);
	else
		resp_simple(b, "PONG");
}

static void cmd_echo(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b)
{
	resp_bulk(b, cmd->argv[1].p, cmd->argv[1].len);
}

static void put_lower(struct rbuf *b, const char *name)
{
	char s[32];
	size_t n = strlen(name);
	for (size_t i = 0; i < n && i < sizeof(s); i++)
		s[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
	resp_bulk(b, s, n < sizeof(s) ? n : sizeof(s));
}

static void command_info(struct rbuf *b, const struct cmd_def *d)
{
	resp_array(b, 6);
	put_lower(b, d->name);
	resp_int(b, d->arity);
	int flags = (d->kind == CK_DATA || d->kind == CK_SOLO) + (d->noauth != 0);
	resp_array(b, flags);
	if (d->kind == CK_DATA || d->kind == CK_SOLO)
		resp_simple(b, d->keys == KS_R1 || d->keys == KS_R_ALL ||
			       (d->kind == CK_SOLO && d->solo != SOLO_FLUSH) ? "readonly" : "write");
	if (d->noauth)
		resp_simple(b, "no_auth");
	resp_int(b, d->first_key);
	resp_int(b, d->last_key);
	resp_int(b, d->step);
}

static void cmd_command(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b)
{
	if (cmd->argc == 1) {
		resp_array(b, cmd_count);
		for (unsigned i = 0; i < cmd_count; i++)
			command_info(b, &cmd_table[i]);
	} else if (resp_arg_is(&cmd->argv[1], "COUNT")) {
		resp_int(b, cmd_count);
	} else if (resp_arg_is(&cmd->argv[1], "DOCS")) {
		resp_array(b, 0);
	} else if (resp_arg_is(&cmd->argv[1], "INFO")) {
		resp_array(b, cmd->argc - 2);
		for (unsigned i = 2; i < cmd->argc; i++) {
			const struct cmd_def *d = cmd_lookup(&cmd->argv[i]);
			if (d)
				command_info(b, d);
			else
				resp_null_array(b);
		}
	} else {
		resp_error(b, "ERR COMMAND %.*s is not supported by lotus serve (COUNT, DOCS, "
			   "INFO are)", (int)cmd->argv[1].len, cmd->argv[1].p);
	}
}

/* CONFIG GET for what clients ask at start (redis-benchmark: save, appendonly). */
static void cmd_config(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b)
{
	char timeout[16], maxclients[16];
	snprintf(timeout, sizeof(timeout), "%u", c->w->sv->o.timeout_s);
	snprintf(maxclients, sizeof(maxclients), "%u", c->w->sv->o.max_clients);
	const char *const known[][2] = {
		{ "save", "" }, { "appendonly", "no" }, { "databases", "1" },
		{ "maxmemory", "0" }, { "timeout", timeout }, { "maxclients", maxclients },
	};
	if (!resp_arg_is(&cmd->argv[1], "GET")) {
		resp_error(b, "ERR CONFIG %.*s is not supported by lotus serve (only CONFIG GET)",
			   (int)cmd->argv[1].len, cmd->argv[1].p);
		return;
	}
	if (cmd->argc < 3) {
		resp_error(b, "ERR wrong number of arguments for 'config|get' command");
		return;
	}
	unsigned n = 0;
	for (unsigned a = 2; a < cmd->argc; a++)
		for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			n += resp_arg_is(&cmd->argv[a], known[i][0]);
	resp_array(b, 2LL * n);
	for (unsigned a = 2; a < cmd->argc; a++)
		for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			if (resp_arg_is(&cmd->argv[a], known[i][0])) {
				resp_bulk_str(b, known[i][0]);
				resp_bulk_str(b, known[i][1]);
			}
}

/* ---- the table ------------------------------------------------------------ */

#define DATA(n, ar, ks, chk, fn, f, l, s) \
	{ .name = n, .arity = ar, .kind = CK_DATA, .keys = ks, .check = chk, .run = fn, \
	  .first_key = f, .last_key = l, .step = s }
#define NOW(n, ar, fn, na) { .name = n, .arity = ar, .kind = CK_IMMEDIATE, .now = fn, .noauth = na }
#define STATE(n, ar, fn, na) { .name = n, .arity = ar, .kind = CK_STATE, .now = fn, .noauth = na }

const struct cmd_def cmd_table[] = {
	NOW("PING", -1, cmd_ping, 0),
	NOW("ECHO", 2, cmd_echo, 0),
	NOW("COMMAND", -1, cmd_command, 0),
	NOW("CONFIG", -2, cmd_config, 0),
	STATE("AUTH", -2, cmd_auth, 1),
	STATE("HELLO", -1, cmd_hello, 1),
	STATE("SELECT", 2, cmd_select, 0),
	STATE("QUIT", -1, cmd_quit, 1),
	STATE("CLIENT", -2, cmd_client, 0),
	STATE("INFO", -1, cmd_info, 0),
	STATE("MULTI", 1, cmd_multi, 0),
	STATE("EXEC", 1, cmd_exec, 0),
	STATE("DISCARD", 1, cmd_discard, 0),
	DATA("WATCH", -2, KS_R_ALL, check_keys, run_watch, 1, -1, 1),
	STATE("UNWATCH", 1, cmd_watch, 0),
	STATE("RESET", 1, cmd_reset, 1),
	DATA("GET", 2, KS_R1, check_key1, run_get, 1, 1, 1),
	DATA("SET", -3, KS_SET, check_set, run_set, 1, 1, 1),
	DATA("SETNX", 3, KS_RW1, check_key_value, run_setnx, 1, 1, 1),
	DATA("GETSET", 3, KS_RW1, check_key_value, run_getset, 1, 1, 1),
	DATA("MGET", -2, KS_R_ALL, check_keys, run_mget, 1, -1, 1),
	DATA("MSET", -3, KS_W_PAIRS, check_mset, run_mset, 1, -1, 2),
	DATA("DEL", -2, KS_RW_ALL, check_keys, run_del, 1, -1, 1),
	DATA("EXISTS", -2, KS_R_ALL, check_keys, run_exists, 1, -1, 1),
	DATA("INCR", 2, KS_RW1, check_key1, run_incr, 1, 1, 1),
	DATA("DECR", 2, KS_RW1, check_key1, run_decr, 1, 1, 1),
	DATA("INCRBY", 3, KS_RW1, check_incrby, run_incrby, 1, 1, 1),
	DATA("DECRBY", 3, KS_RW1, check_incrby, run_decrby, 1, 1, 1),
	DATA("APPEND", 3, KS_RW1, check_key1, run_append, 1, 1, 1),
	DATA("STRLEN", 2, KS_R1, check_key1, run_strlen, 1, 1, 1),
	DATA("SETEX", 4, KS_W1, check_setex, run_setex, 1, 1, 1),
	DATA("PSETEX", 4, KS_W1, check_setex, run_psetex, 1, 1, 1),
	DATA("TYPE", 2, KS_R1, check_key1, run_type, 1, 1, 1),
	DATA("RENAME", 3, KS_RW12, check_key2, run_rename, 1, 2, 1),
	DATA("EXPIRE", -3, KS_RW1, check_key1, run_expire, 1, 1, 1),
	DATA("PEXPIRE", -3, KS_RW1, check_key1, run_pexpire, 1, 1, 1),
	DATA("EXPIREAT", -3, KS_RW1, check_key1, run_expireat, 1, 1, 1),
	DATA("PEXPIREAT", -3, KS_RW1, check_key1, run_pexpireat, 1, 1, 1),
	DATA("TTL", 2, KS_R1, check_key1, run_ttl, 1, 1, 1),
	DATA("PTTL", 2, KS_R1, check_key1, run_pttl, 1, 1, 1),
	DATA("PERSIST", 2, KS_RW1, check_key1, run_persist, 1, 1, 1),
	DATA("HSET", -4, KS_RW1, check_values_from2, run_hset, 1, 1, 1),
	DATA("HMSET", -4, KS_RW1, check_values_from2, run_hmset, 1, 1, 1),
	DATA("HSETNX", 4, KS_RW1, check_values_from2, run_hsetnx, 1, 1, 1),
	DATA("HGET", 3, KS_R1, check_key1, run_hget, 1, 1, 1),
	DATA("HMGET", -3, KS_R1, check_key1, run_hmget, 1, 1, 1),
	DATA("HDEL", -3, KS_RW1, check_key1, run_hdel, 1, 1, 1),
	DATA("HLEN", 2, KS_R1, check_key1, run_hlen, 1, 1, 1),
	DATA("HEXISTS", 3, KS_R1, check_key1, run_hexists, 1, 1, 1),
	DATA("HINCRBY", 4, KS_RW1, check_key1, run_hincrby, 1, 1, 1),
	DATA("HGETALL", 2, KS_R1, check_key1, run_hgetall, 1, 1, 1),
	DATA("HKEYS", 2, KS_R1, check_key1, run_hkeys, 1, 1, 1),
	DATA("HVALS", 2, KS_R1, check_key1, run_hvals, 1, 1, 1),
	DATA("HSCAN", -3, KS_R1, check_key1, run_hscan, 1, 1, 1),
	DATA("SADD", -3, KS_RW1, check_key1, run_sadd, 1, 1, 1),
	DATA("SREM", -3, KS_RW1, check_key1, run_srem, 1, 1, 1),
	DATA("SISMEMBER", 3, KS_R1, check_key1, run_sismember, 1, 1, 1),
	DATA("SCARD", 2, KS_R1, check_key1, run_scard, 1, 1, 1),
	DATA("SMEMBERS", 2, KS_R1, check_key1, run_smembers, 1, 1, 1),
	DATA("SPOP", -2, KS_RW1, check_key1, run_spop, 1, 1, 1),
	DATA("ZADD", -4, KS_RW1, check_key1, run_zadd, 1, 1, 1),
	DATA("ZSCORE", 3, KS_R1, check_key1, run_zscore, 1, 1, 1),
	DATA("ZCARD", 2, KS_R1, check_key1, run_zcard, 1, 1, 1),
	DATA("ZREM", -3, KS_RW1, check_key1, run_zrem, 1, 1, 1),
	DATA("ZRANGE", -4, KS_R1, check_key1, run_zrange, 1, 1, 1),
	DATA("ZRANGEBYSCORE", -4, KS_R1, check_key1, run_zrangebyscore, 1, 1, 1),
	DATA("ZPOPMIN", -2, KS_RW1, check_key1, run_zpopmin, 1, 1, 1),
	DATA("LPUSH", -3, KS_RW1, check_key1, run_lpush, 1, 1, 1),
	DATA("RPUSH", -3, KS_RW1, check_key1, run_rpush, 1, 1, 1),
	DATA("LPOP", -2, KS_RW1, check_key1, run_lpop, 1, 1, 1),
	DATA("RPOP", -2, KS_RW1, check_key1, run_rpop, 1, 1, 1),
	DATA("LLEN", 2, KS_R1, check_key1, run_llen, 1, 1, 1),
	DATA("LRANGE", 4, KS_R1, check_key1, run_lrange, 1, 1, 1),
	DATA("LINDEX", 3, KS_R1, check_key1, run_lindex, 1, 1, 1),
	{ .name = "KEYS", .arity = 2, .kind = CK_SOLO, .solo = SOLO_KEYS, .check = check_scan },
	{ .name = "FLUSHDB", .arity = -1, .kind = CK_SOLO, .solo = SOLO_FLUSH, .check = check_scan },
	{ .name = "FLUSHALL", .arity = -1, .kind = CK_SOLO, .solo = SOLO_FLUSH, .check = check_scan },
	{ .name = "SCAN", .arity = -2, .kind = CK_SOLO, .solo = SOLO_SCAN, .check = check_scan },
	{ .name = "DBSIZE", .arity = 1, .kind = CK_SOLO, .solo = SOLO_DBSIZE, .check = check_scan },
};
const unsigned cmd_count = sizeof(cmd_table) / sizeof(cmd_table[0]);

/* The command table by name: an open-addressing hash of the upper-case name
 * (index + 1 per slot), built once, so a lookup hashes the name and compares
 * it with one entry (two on a collision) instead of walking the table. */
#define CMD_NAME_MAX 32
#define CMD_HASH_SLOTS 1024   /* a power of two, well above cmd_count */
static uint16_t cmd_hash[CMD_HASH_SLOTS];
static pthread_once_t cmd_hash_once = PTHREAD_ONCE_INIT;

static unsigned cmd_name_hash(const char *p, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)(p[i] & ~0x20)) * 16777619u;   /* ASCII upper case */
	return (h ^ (h >> 15)) & (CMD_HASH_SLOTS - 1);
}

static void cmd_hash_build(void)
{
	for (unsigned i = cmd_count; i-- > 0;) {   /* the first of equal names wins */
		const char *nm = cmd_table[i].name;
		unsigned at = cmd_name_hash(nm, strlen(nm));
		while (cmd_hash[at] && strcmp(cmd_table[cmd_hash[at] - 1].name, nm))
			at = (at + 1) & (CMD_HASH_SLOTS - 1);
		cmd_hash[at] = (uint16_t)(i + 1);
	}
}

const struct cmd_def *cmd_lookup(const struct resp_arg *name)
{
	if (name->len == 0 || name->len > CMD_NAME_MAX)
		return NULL;
	pthread_once(&cmd_hash_once, cmd_hash_build);
	for (unsigned at = cmd_name_hash(name->p, name->len); cmd_hash[at];
	     at = (at + 1) & (CMD_HASH_SLOTS - 1)) {
		const struct cmd_def *d = &cmd_table[cmd_hash[at] - 1];
		if (resp_arg_is(name, d->name))
			return d;
	}
	return NULL;
}
