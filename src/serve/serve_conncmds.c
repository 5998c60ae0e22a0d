/*
 * serve_conncmds.c - the commands that change a connection rather than data:
 * AUTH (and its throttle), HELLO, SELECT, QUIT, CLIENT, MULTI / EXEC /
 * DISCARD / WATCH / RESET, INFO.  They run at once in the worker that owns
 * the connection (struct cmd_def.now); EXEC hands the queued commands to one
 * job (serve_data.c).
 *
 * The AUTH throttle: each failed AUTH (or HELLO ... AUTH) holds the
 * connection, its reply and everything after it, for a delay that doubles per
 * failure, 100 ms up to 3.2 s.  Failures are counted per connection and per
 * client address (the last minute's, in a table of AUTH_SLOTS; addresses share
 * a slot only when the AUTH_PROBE slots an address may take are all taken),
 * and the larger count sets the delay, so many connections from one address
 * are slowed down together.  While its address has recent failures, a right
 * password is held as long as a wrong one: else a client could tell a wrong
 * guess by the missing immediate answer and move on to a fresh connection.  A
 * held connection is neither read nor written; the worker lets it go in its
 * loop (worker_tick in serve.c), so the loop never blocks.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "serve/serve_int.h"
#include "serve/serve_types.h"

#define AUTH_DELAY_NS     100000000ULL    /* after the first failure; doubles */
#define AUTH_DELAY_DOUBLINGS 5            /* to 3.2 s at most */
#define AUTH_FORGET_NS    60000000000ULL  /* an address's failures are forgotten */

/* ---- connection commands ---------------------------------------------------- */

static int pass_equal(const char *want, const struct resp_arg *got)
{
	size_t n = strlen(want);
	unsigned char diff = (unsigned char)(n != got->len);
	for (size_t i = 0; i < got->len; i++)
		diff |= (unsigned char)(got->p[i] ^ (i < n ? want[i] : 0));
	return diff == 0;
}

/* The client's address as 16 bytes (IPv4 mapped into IPv6); zeros if unknown. */
static void peer_key(int fd, unsigned char key[16])
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	memset(key, 0, 16);
	if (getpeername(fd, (struct sockaddr *)&ss, &sl))
		return;
	if (ss.ss_family == AF_INET6) {
		memcpy(key, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
	} else if (ss.ss_family == AF_INET) {
		key[10] = key[11] = 0xff;
		memcpy(key + 12, &((struct sockaddr_in *)&ss)->sin_addr, 4);
	}
}

/* The slot of key's address (under auth_mu): its own among the AUTH_PROBE
 * slots from its hash on, else a free one; when all are taken by other
 * addresses, it shares the first. */
static struct auth_ent *auth_slot(struct server *sv, const unsigned char key[16], uint64_t now)
{
	uint64_t h = sv->auth_seed;
	struct auth_ent *free_e = NULL;
	for (int i = 0; i < 16; i++)
		h = (h ^ key[i]) * 0x100000001b3ULL;
	for (unsigned i = 0; i < AUTH_PROBE; i++) {
		struct auth_ent *e = &sv->auth[(h + i) % AUTH_SLOTS];
		if (e->fails && now - e->last_ns > AUTH_FORGET_NS)
			e->fails = 0;
		if (e->fails && !memcmp(e->addr, key, 16))
			return e;
		if (!e->fails && !free_e)
			free_e = e;
	}
	if (!free_e)
		return &sv->auth[h % AUTH_SLOTS];
	memcpy(free_e->addr, key, 16);
	return free_e;
}

/* Count an AUTH's outcome and return how long to hold the connection (see
 * the file comment): the delay of the larger of the connection's and the
 * address's failure counts; 0 for a right password from an address without
 * recent failures. */
static uint64_t auth_throttle(struct conn *c, int ok)
{
	struct server *sv = c->w->sv;
	unsigned char key[16];
	uint64_t now = serve_now_ns();
	peer_key(c->fd, key);
	pthread_mutex_lock(&sv->auth_mu);
	struct auth_ent *e = auth_slot(sv, key, now);
	unsigned addr_fails = e->fails;
	if (!ok) {
		e->fails += e->fails < 1000000;
		e->last_ns = now;
	}
	pthread_mutex_unlock(&sv->auth_mu);
	unsigned n = addr_fails;
	if (!ok) {
		c->auth_fails += c->auth_fails < 1000000;
		n = c->auth_fails > addr_fails + 1 ? c->auth_fails : addr_fails + 1;
	}
	if (!n)
		return 0;
	return AUTH_DELAY_NS << (n - 1 < AUTH_DELAY_DOUBLINGS ? n - 1 : AUTH_DELAY_DOUBLINGS);
}

/* Neither read nor write c for delay_ns; worker_tick lets it go. */
static void conn_hold(struct conn *c, uint64_t delay_ns)
{
	if (!c->hold_until_ns)
		c->w->nheld++;
	c->hold_until_ns = serve_now_ns() + delay_ns;
	conn_events(c);
}

static int auth_check(struct conn *c, const struct resp_arg *user, const struct resp_arg *pass,
		      struct rbuf *b)
{
	const char *pw = c->w->sv->o.requirepass;
	if (!pw) {
		resp_error(b, "ERR AUTH <password> called without any password configured for "
			   "the default user. Are you sure your configuration is correct?");
		return -1;
	}
	int ok = !(user && !resp_arg_is(user, "default")) && pass_equal(pw, pass);
	uint64_t hold = auth_throttle(c, ok);
	if (hold)
		conn_hold(c, hold);
	if (!ok) {
		resp_error(b, "WRONGPASS invalid username-password pair or user is disabled.");
		return -1;
	}
	c->authed = 1;
	return 0;
}

void cmd_auth(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b)
{
	if (cmd->argc > 3) {
		resp_error(b, "ERR syntax error");
		return;
	}
	if (auth_check(c, cmd->argc == 3 ? &cmd->argv[1] : NULL, &cmd->argv[cmd->argc - 1], b) == 0)
		resp_simple(b, "OK");
}

static int set_name(struct conn *c, const struct resp_arg *a, struct rbuf *b)
{
	for (size_t i = 0; i < a->len; i++)
		if (a->p[i] <= ' ' || a->p[i] > '~') {
			resp_error(b, "ERR Client names cannot contain spaces, newlines or special "
				   "characters.");
			return -1;
		}
	size_t n = a->len < sizeof(c->name) - 1 ? a->len : sizeof(c->name) - 1;
	memcpy(c->name, a->p, n);
	c->name[n] = 0;
	return 0;
}

void cmd_hello(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b)
{
	long long proto = 2;
	if (cmd->argc >= 2 && (resp_arg_ll(&cmd->argv[1], &proto) || proto != 2)) {
		if (resp_arg_ll(&cmd->argv[1], &proto))
			resp_error(b, "ERR Protocol version is not an integer or out of range");
		else
			resp_error(b, "NOPROTO sorry, this protocol version is not supported "
				   "(lotus serve speaks RESP2)");
		return;
	}
	for (unsigned a = 2; a < cmd->argc; a++) {
		if (resp_arg_is(&cmd->argv[a], "AUTH") && a + 2 < cmd->argc) {
			if (auth_check(c, &cmd->argv[a + 1], &cmd->argv[a + 2], b))
				return;
			a += 2;
		} else if (resp_arg_is(&cmd->argv[a], "SETNAME") && a + 1 < cmd->argc) {
			if (set_name(c, &cmd->argv[a + 1], b))
				return;
			a += 1;
		} else {
			resp_error(b, "ERR Syntax error in HELLO option '%.*s'",
				   (int)cmd->argv[a].len, cmd->argv[a].p);
			return;
		}
	}
	if (!c->authed) {
		resp_error(b, "NOAUTH HELLO must be called with the client already authenticated, "
			   "otherwise the HELLO <proto> AUTH <user> <pass> option can be used");
		return;
	}
	resp_array(b, 14);
	resp_bulk_str(b, "server");
	resp_bulk_str(b, "lotus");
	resp_bulk_str(b, "version");
	resp_bulk_str(b, "7.0.0");
	resp_bulk_str(b, "proto");
	resp_int(b, 2);
	resp_bulk_str(b, "id");
	resp_int(b, (long long)c->id);
	resp_bulk_str(b, "mode");
	resp_bulk_str(b, "standalone");
	resp_bulk_str(b, "role");
	resp_bulk_str(b, "master");
	resp_bulk_str(b, "modules");
	resp_array(b, 0);
}

void cmd_select(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b)
{
	long long db;
	if (resp_arg_ll(&cmd->argv[1], &db))
		resp_error(b, "ERR value is not an integer or out of range");
	else if (db != 0)
		resp_error(b, "ERR DB index is out of range (lotus serve has one database, 0)");
	else
		resp_simple(b, "OK");
}

void cmd_quit(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b)
{
	resp_simple(b, "OK");
	c->close_after = 1;
}

void cmd_client(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b)
{
	const struct resp_arg *sub = &cmd->argv[1];
	if (resp_arg_is(sub, "SETNAME") && cmd->argc == 3) {
		if (set_name(c, &cmd->argv[2], b) == 0)
			resp_simple(b, "OK");
	} else if (resp_arg_is(sub, "GETNAME") && cmd->argc == 2) {
		if (c->name[0])
			resp_bulk_str(b, c->name);
		else
			resp_null(b);
	} else if (resp_arg_is(sub, "ID") && cmd->argc == 2) {
		resp_int(b, (long long)c->id);
	} else if (resp_arg_is(sub, "SETINFO") && cmd->argc == 4) {
		resp_simple(b, "OK");
	} else {
		resp_error(b, "ERR CLIENT %.*s is not supported by lotus serve (SETNAME, GETNAME, "
			   "ID, SETINFO are)", (int)sub->len, sub->p);
	}
}

void cmd_multi(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b)
{
	if (c->multi) {
		resp_error(b, "ERR MULTI calls can not be nested");
		return;
	}
	c->mq = job_new(c, 1);
	if (!c->mq) {
		resp_error(b, "ERR out of memory");
		return;
	}
	c->multi = 1;
	c->multi_err = 0;
	resp_simple(b, "OK");
}

static void watch_clear(struct conn *c)
{
	c->watch.len = 0;
	c->watch.oom = 0;
	c->nwatch = 0;
}

static void multi_end(struct conn *c)
{
	job_free(c->mq);
	c->mq = NULL;
	c->multi = c->multi_err = 0;
}

/* EXEC after WATCH: a first command that compares each watched key's stamp
 * (serve_types.c) inside the EXEC's own transaction, whose reads lock them
 * until the commit: a change after WATCH makes EXEC answer nil. */
static int exec_add_watch(struct conn *c, struct job *j)
{
	struct resp_cmd cmd = { NULL, 0, 0 };
	int rc = -ENOMEM;
	if (c->watch.oom || !(cmd.argv = calloc(1 + 2 * (size_t)c->nwatch, sizeof(*cmd.argv))))
		goto out;
	cmd.argv[cmd.argc++] = (struct resp_arg){ "WATCHCHECK", 10 };
	for (size_t off = 0; off < c->watch.len && cmd.argc < 1 + 2 * c->nwatch;) {
		size_t kl = (unsigned char)c->watch.data[off];
		cmd.argv[cmd.argc++] = (struct resp_arg){ c->watch.data + off + 1, kl };
		cmd.argv[cmd.argc++] = (struct resp_arg){ c->watch.data + off + 1 + kl, 9 };
		off += 1 + kl + 9;
	}
	rc = job_add_watchcheck(j, &cmd);
out:
	free(cmd.argv);
	return rc;
}

void cmd_exec(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b)
{
	if (!c->multi) {
		resp_error(b, "ERR EXEC without MULTI");
		return;
	}
	if (c->multi_err) {
		multi_end(c);
		watch_clear(c);
		resp_error(b, "EXECABORT Transaction discarded because of previous errors.");
		return;
	}
	struct job *j = c->mq;
	c->mq = NULL;
	multi_end(c);
	if (c->nwatch && exec_add_watch(c, j)) {
		watch_clear(c);
		job_free(j);
		resp_error(b, "ERR out of memory");
		return;
	}
	watch_clear(c);
	if (job_has_data(j))
		job_start(j);
	else
		job_reply_now(j);
}

void cmd_discard(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b)
{
	if (!c->multi) {
		resp_error(b, "ERR DISCARD without MULTI");
		return;
	}
	multi_end(c);
	watch_clear(c);
	resp_simple(b, "OK");
}

void cmd_watch(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b)
{
	watch_clear(c);   /* UNWATCH; WATCH itself is a data command (serve_types.c) */
	resp_simple(b, "OK");
}

void cmd_reset(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b)
{
	multi_end(c);
	watch_clear(c);
	c->name[0] = 0;
	c->authed = c->w->sv->o.requirepass == NULL;
	resp_simple(b, "RESET");
}

static void info_lotus(struct conn *c, struct rbuf *t)
{
	struct server *sv = c->w->sv;
	struct lotus_net_counters sum = { 0 };
	char line[2300];
	for (unsigned i = 0; i < sv->nworkers; i++) {
		struct worker *w = &sv->workers[i];
		pthread_mutex_lock(&w->stats_mu);
		sum.msgs_sent += w->net.msgs_sent;
		sum.bytes_sent += w->net.bytes_sent;
		sum.msgs_recv += w->net.msgs_recv;
		sum.bytes_recv += w->net.bytes_recv;
		sum.reqs_sent += w->net.reqs_sent;
		pthread_mutex_unlock(&w->stats_mu);
	}
	static const char *const ccs[] = { "no_wait", "wait_die", "wound_wait" };
	int n = snprintf(line, sizeof(line),
		"# Lotus\r\nlotus_memory_servers:%u\r\nlotus_transport:%s\r\nlotus_cc:%s\r\n"
		"lotus_table:%s\r\nlotus_max_value:%u\r\nlotus_pipeline_max:%u\r\n"
		"lotus_txn_committed:%llu\r\nlotus_txn_retried:%llu\r\nlotus_txn_failed:%llu\r\n"
		"lotus_msgs_sent:%llu\r\nlotus_bytes_sent:%llu\r\nlotus_msgs_recv:%llu\r\n"
		"lotus_bytes_recv:%llu\r\nlotus_requests_sent:%llu\r\nlotus_requests_per_msg:%.2f\r\n",
		lotus_cluster_servers(sv->cl), lotus_cluster_transport(sv->cl),
		ccs[sv->o.lo.cc % 3], sv->o.table, (unsigned)sv->max_value, sv->o.pipeline_max,
		(unsigned long long)sv->ctr.txn_commit, (unsigned long long)sv->ctr.txn_retry,
		(unsigned long long)sv->ctr.txn_fail, (unsigned long long)sum.msgs_sent,
		(unsigned long long)sum.bytes_sent, (unsigned long long)sum.msgs_recv,
		(unsigned long long)sum.bytes_recv, (unsigned long long)sum.reqs_sent,
		sum.msgs_sent ? (double)sum.reqs_sent / (double)sum.msgs_sent : 0.0);
	rbuf_put(t, line, (size_t)n);
	for (unsigned i = 0; i < lotus_cluster_servers(sv->cl); i++) {
		const char *js = lotus_server_stats(c->w->s, i);   /* one round trip */
		n = snprintf(line, sizeof(line), "lotus_memserver%u:%s\r\n", i,
			     js ? js : "unreachable");
		rbuf_put(t, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
	}
}

/* used_memory: the bytes the memory servers' pools hold (their stats, one
 * round trip each), summed. */
static void info_memory(struct conn *c, struct rbuf *t)
{
	struct server *sv = c->w->sv;
	unsigned long long used = 0, total = 0;
	char line[512];
	for (unsigned i = 0; i < lotus_cluster_servers(sv->cl); i++) {
		const char *js = lotus_server_stats(c->w->s, i);
		const char *u = js ? strstr(js, "\"pool_used_bytes\":") : NULL;
		const char *p = js ? strstr(js, "\"pool_bytes\":") : NULL;
		if (u)
			used += strtoull(u + 18, NULL, 10);
		if (p)
			total += strtoull(p + 13, NULL, 10);
	}
	int n = snprintf(line, sizeof(line), "# Memory\r\nused_memory:%llu\r\n"
			 "used_memory_human:%.2fM\r\nmaxmemory:%llu\r\n"
			 "mem_allocator:lotus-pool\r\n\r\n", used, (double)used / 1048576.0, total);
	rbuf_put(t, line, (size_t)n);
}

void cmd_info(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b)
{
	struct server *sv = c->w->sv;
	struct rbuf t;
	char line[1024];
	int all = cmd->argc == 1;
	int want[6] = { all, all, all, all, all, all };
	static const char *const names[] = { "server", "clients", "stats", "lotus", "keyspace",
					     "memory" };
	for (unsigned a = 1; a < cmd->argc; a++)
		for (int i = 0; i < 6; i++)
			if (resp_arg_is(&cmd->argv[a], names[i]) || resp_arg_is(&cmd->argv[a], "all") ||
			    resp_arg_is(&cmd->argv[a], "everything") ||
			    resp_arg_is(&cmd->argv[a], "default"))
				want[i] = 1;
	rbuf_init(&t);
	uint64_t up = (serve_now_ns() - sv->start_ns) / 1000000000ULL;
	if (want[0]) {
		int n = snprintf(line, sizeof(line),
			"# Server\r\nredis_version:7.0.0\r\nlotus_serve:1\r\nredis_mode:standalone\r\n"
			"process_id:%d\r\ntcp_port:%u\r\nuptime_in_seconds:%llu\r\n"
			"io_threads_active:%u\r\n\r\n", (int)getpid(), sv->port,
			(unsigned long long)up, sv->nworkers);
		rbuf_put(&t, line, (size_t)n);
	}
	if (want[1]) {
		int n = snprintf(line, sizeof(line), "# Clients\r\nconnected_clients:%lld\r\n"
				 "blocked_clients:0\r\nmaxclients:%u\r\n\r\n",
				 (long long)sv->ctr.conns_now, sv->o.max_clients);
		rbuf_put(&t, line, (size_t)n);
	}
	if (want[2]) {
		int n = snprintf(line, sizeof(line),
			"# Stats\r\ntotal_connections_received:%llu\r\ntotal_commands_processed:%llu\r\n"
			"rejected_connections:%llu\r\nprotocol_errors:%llu\r\n\r\n",
			(unsigned long long)sv->ctr.conns_total, (unsigned long long)sv->ctr.commands,
			(unsigned long long)sv->ctr.rejected, (unsigned long long)sv->ctr.proto_errors);
		rbuf_put(&t, line, (size_t)n);
	}
	if (want[5])
		info_memory(c, &t);
	if (want[3]) {
		info_lotus(c, &t);
		rbuf_put(&t, "\r\n", 2);
	}
	if (want[4]) {
		/* counted by a scan in the background, at most once a second: the
		 * numbers are those of the last count (none before the first) */
		uint64_t at = sv->ks_at_ns;
		int idle = 0;
		if ((!at || serve_now_ns() - at > 1000000000ULL) &&
		    atomic_compare_exchange_strong(&sv->ks_running, &idle, 1))
			job_start_bg(c->w, SOLO_COUNT);
		rbuf_put(&t, "# Keyspace\r\n", 12);
		if (at && sv->ks_keys > 0) {
			int n = snprintf(line, sizeof(line), "db0:keys=%lld,expires=%lld,avg_ttl=0\r\n",
					 (long long)sv->ks_keys, (long long)sv->ks_expires);
			rbuf_put(&t, line, (size_t)n);
		}
	}
	resp_bulk(b, t.data ? t.data : "", t.len);
	rbuf_free(&t);
}

