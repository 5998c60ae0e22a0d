/*
 * serve.c - `lotus serve`: threads, event loops and connections.  The
 * commands that change a connection (AUTH, HELLO, MULTI/EXEC, ...) are in
 * serve_conncmds.c, the commands on keys in serve_data.c and serve_cmds.c.
 *
 * Threads.  The main thread connects to the cluster, creates the table, opens
 * the listening socket and starts --threads workers; then it only waits for
 * them.  Worker 0 also accepts: each new socket goes to the next worker in
 * turn (its inbox, woken through an eventfd), so connections are spread
 * evenly.  SIGINT/SIGTERM set the stop flag and signal an eventfd that every
 * worker's epoll set watches.
 *
 * A worker's loop (one lotus session, one epoll set, no blocking call on a
 * transaction):
 *
 *   epoll_wait (0 ms while jobs are in flight, else 100 ms)
 *     -> read sockets, parse, start jobs (serve_data.c): lotus requests are
 *        only staged and buffered, not sent
 *   lotus_session_poll (up to 1 ms when it has jobs in flight and no socket
 *     was ready): sends the buffered requests of EVERY job of the worker as
 *     one message per memory server (--batch inter), handles replies, runs
 *     the jobs' callbacks, which stage the next steps
 *   connections whose job ended: write their replies, parse what waits
 *
 * Connection state:
 *
 *   idle --commands--> job in flight --job_end--> idle (replies written)
 *     |  MULTI: commands go to c->mq (+QUEUED) until EXEC (one job) / DISCARD
 *     '--QUIT, protocol error--> close_after --written--> closed
 *   a socket that closes while its job is in flight is freed when the job
 *   ends (the job never touches the socket).
 *
 * Back-pressure: a connection with more than OUT_PAUSE bytes unwritten, or
 * with a job in flight and IN_SOFT bytes already buffered, is not read until
 * that drains.
 *
 * Admission (worker 0, accept_all): a client beyond --max-clients gets
 * "-ERR max number of clients reached" and is closed.  Out of descriptors
 * (EMFILE/ENFILE), the pending client is accepted on the reserve descriptor
 * (closed for that, then reopened) and refused the same way, because the
 * listener is level-triggered: a client left in the backlog would wake
 * epoll_wait at once, forever.  If even that fails, the listener is disarmed
 * for LISTEN_PAUSE_NS.  Such errors are logged at most once per
 * ACCEPT_LOG_NS, with a count.  --timeout S closes a client that sent and
 * received nothing for S seconds and has no job in flight.
 *
 * AUTH throttle: a failed AUTH holds its connection for a growing delay
 * (serve_conncmds.c); the loop lets a held connection go (worker_tick).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "serve/serve_int.h"
#include "serve/serve_types.h"

#define OUT_PAUSE   (4u << 20)
#define IN_SOFT     (1u << 20)
#define IN_MAX      (64u << 20)
#define READ_CHUNK  (64u << 10)
#define MAX_BULK    (8u << 20)
#define LISTEN_PAUSE_NS   100000000ULL    /* accept failing for want of memory/fds */
#define ACCEPT_LOG_NS     10000000000ULL

static struct server *g_server;   /* for the signal handler */
static void (*serve_log_fn)(int level, const char *msg);   /* serve_opts.log */

/* One message of serve's own, through serve_opts.log (else stderr). */
static void __attribute__((format(printf, 2, 3))) slog(int level, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (serve_log_fn)
		serve_log_fn(level, msg);
	else
		fprintf(stderr, "lotus serve: %s\n", msg);
}
static char tag_listen, tag_wake, tag_stop;

uint64_t serve_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void serve_opts_init(struct serve_opts *o)
{
	memset(o, 0, sizeof(*o));
	lotus_options_init(&o->lo);
	o->listen = "127.0.0.1:6379";
	o->threads = 1;
	o->max_value = 4096;
	o->pipeline_max = 64;
	o->retries = 100;
	o->table = "serve";
}

static int split_hostport(const char *s, char *host, size_t hlen, uint16_t *port)
{
	const char *colon = strrchr(s, ':');
	if (!colon || colon == s || (size_t)(colon - s) >= hlen)
		return -1;
	char *end;
	long p = strtol(colon + 1, &end, 10);
	if (*end || colon[1] == 0 || p < 0 || p > 65535)
		return -1;
	size_t n = (size_t)(colon - s);
	if (s[0] == '[' && n >= 2 && s[n - 1] == ']') {   /* [::1]:6379 */
		memcpy(host, s + 1, n - 2);
		host[n - 2] = 0;
	} else {
		memcpy(host, s, n);
		host[n] = 0;
	}
	*port = (uint16_t)p;
	return 0;
}

int serve_listen_check(const char *hostport, char *why, size_t n)
{
	const char *colon = strrchr(hostport, ':');
	if (!colon || colon == hostport || colon[1] == 0) {
		snprintf(why, n, "expected HOST:PORT");
		return -EINVAL;
	}
	const char *ps = colon + 1;
	size_t digits = strspn(ps, "0123456789");
	if (ps[digits] || digits > 5 || atol(ps) > 65535) {
		snprintf(why, n, "invalid port '%.16s%s': a port is a number from 0 to 65535", ps,
			 strlen(ps) > 16 ? "..." : "");
		return -EINVAL;
	}
	if ((size_t)(colon - hostport) >= 256) {
		snprintf(why, n, "the host is longer than 255 bytes");
		return -EINVAL;
	}
	return 0;
}

int serve_host_is_loopback(const char *hostport)
{
	char host[256];
	uint16_t port;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	if (split_hostport(hostport, host, sizeof(host), &port))
		return 0;
	if (getaddrinfo(host, NULL, &hints, &res))
		return 0;
	int loop = 1;
	for (ai = res; ai; ai = ai->ai_next) {
		if (ai->ai_family == AF_INET) {
			const struct sockaddr_in *a = (const void *)ai->ai_addr;
			loop &= (ntohl(a->sin_addr.s_addr) >> 24) == 127;
		} else if (ai->ai_family == AF_INET6) {
			const struct sockaddr_in6 *a = (const void *)ai->ai_addr;
			loop &= IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
		} else {
			loop = 0;
		}
	}
	freeaddrinfo(res);
	return loop;
}

static int listen_on(const char *hostport, uint16_t *bound)
{
	char host[256];
	uint16_t port;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *res;
	if (split_hostport(hostport, host, sizeof(host), &port)) {
		slog(LOTUS_LOG_ERROR, "--listen %s: expected HOST:PORT", hostport);
		return -EINVAL;
	}
	char ps[8];
	snprintf(ps, sizeof(ps), "%u", port);
	int rc = getaddrinfo(host, ps, &hints, &res);
	if (rc) {
		slog(LOTUS_LOG_ERROR, "--listen %s: %s", hostport, gai_strerror(rc));
		return -EINVAL;
	}
	int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 511)) {
		rc = -errno;
		slog(LOTUS_LOG_ERROR, "cannot listen on %s: %s", hostport, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(res);
		return rc;
	}
	freeaddrinfo(res);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	*bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						: ((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}

/* ---- connections ---------------------------------------------------------- */

void conn_events(struct conn *c)
{
	size_t inq = c->in.len - c->in_off, outq = c->out.len - c->out_off;
	if (c->dead)
		return;
	int want_in = !c->close_after && outq <= OUT_PAUSE && !(c->job && inq >= IN_SOFT) &&
		      !c->w->sv->stop && !c->hold_until_ns;
	int want_out = outq > 0 && c->blocked;
	if (want_in == c->reading && want_out == c->writing)
		return;
	struct epoll_event ev = { .events = (want_in ? EPOLLIN : 0) | (want_out ? EPOLLOUT : 0),
				  .data.ptr = c };
	epoll_ctl(c->w->ep, EPOLL_CTL_MOD, c->fd, &ev);
	c->reading = want_in;
	c->writing = want_out;
}

static void conn_kill(struct conn *c)
{
	if (c->fd >= 0) {
		epoll_ctl(c->w->ep, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->fd = -1;
		atomic_fetch_sub(&c->w->sv->ctr.conns_now, 1);
	}
	c->dead = 1;
}

static void conn_free(struct conn *c)
{
	struct worker *w = c->w;
	if (c->prev)
		c->prev->next = c->next;
	else
		w->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (c->hold_until_ns)
		w->nheld--;
	rbuf_free(&c->in);
	rbuf_free(&c->watch);
	rbuf_free(&c->in);
	rbuf_free(&c->out);
	resp_cmd_free(&c->cmd);
	free(c);
}

static void conn_mark_runnable(struct conn *c)
{
	if (c->on_run)
		return;
	c->on_run = 1;
	c->run_next = c->w->runnable;
	c->w->runnable = c;
}

/* Write what is pending; 0, or -1 if the connection died. */
static int conn_flush(struct conn *c)
{
	if (c->hold_until_ns && !c->dead)
		return 0;   /* the AUTH throttle: written when let go */
	while (!c->dead && c->out_off < c->out.len) {
		ssize_t n = send(c->fd, c->out.data + c->out_off, c->out.len - c->out_off,
				 MSG_NOSIGNAL);
		if (n > 0) {
			c->out_off += (size_t)n;
			c->last_ns = serve_now_ns();
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			c->blocked = 1;
			conn_events(c);
			return 0;
		}
		conn_kill(c);
		return -1;
	}
	if (c->dead)
		return -1;
	size_t was = c->out.len;
	c->out.len = c->out_off = 0;
	if (c->out.cap > OUT_PAUSE && was < OUT_PAUSE / 4)
		rbuf_free(&c->out);
	c->blocked = 0;
	if (c->close_after) {
		conn_kill(c);
		return -1;
	}
	conn_events(c);
	return 0;
}

static void put_unknown(struct rbuf *b, const struct resp_cmd *cmd)
{
	char args[160];
	size_t n = 0;
	args[0] = 0;
	for (unsigned i = 1; i < cmd->argc && n + 4 < sizeof(args); i++) {
		int w = snprintf(args + n, sizeof(args) - n, "'%.*s' ",
				 (int)(cmd->argv[i].len > 40 ? 40 : cmd->argv[i].len), cmd->argv[i].p);
		if (w < 0 || (size_t)w >= sizeof(args) - n)
			break;
		n += (size_t)w;
	}
	resp_error(b, "ERR unknown command '%.*s', with args beginning with: %s",
		   (int)(cmd->argv[0].len > 64 ? 64 : cmd->argv[0].len), cmd->argv[0].p, args);
}

static int arity_ok(const struct cmd_def *d, unsigned argc)
{
	return d->arity >= 0 ? argc == (unsigned)d->arity : argc >= (unsigned)-d->arity;
}

static void put_arity(struct rbuf *b, const struct cmd_def *d)
{
	char lower[32];
	size_t n = strlen(d->name);
	for (size_t i = 0; i <= n && i < sizeof(lower); i++)
		lower[i] = (char)(d->name[i] >= 'A' && d->name[i] <= 'Z' ? d->name[i] + 32
									  : d->name[i]);
	resp_error(b, "ERR wrong number of arguments for '%s' command", lower);
}

static int multi_passes(const struct cmd_def *d)
{
	return d->now == cmd_exec || d->now == cmd_discard || d->now == cmd_multi ||
	       d->now == cmd_watch || d->now == cmd_quit || d->now == cmd_reset;
}

/* Inside MULTI: queue the command (or refuse it, which makes EXEC fail). */
static void conn_queue(struct conn *c, const struct cmd_def *d, const struct resp_cmd *cmd,
		       struct rbuf *pre)
{
	struct server *sv = c->w->sv;
	pre->len = 0;
	if (d->run == run_watch) {
		resp_error(&c->out, "ERR WATCH inside MULTI is not allowed");
		c->multi_err = 1;
		return;
	}
	if (d->kind == CK_STATE || d->kind == CK_SOLO) {
		resp_error(&c->out, "ERR %s inside MULTI is not supported by lotus serve", d->name);
		c->multi_err = 1;
		return;
	}
	if (d->kind == CK_DATA && d->check(sv, cmd, pre)) {
		rbuf_put(&c->out, pre->data, pre->len);
		c->multi_err = 1;
		return;
	}
	if (d->kind == CK_IMMEDIATE)
		d->now(c, cmd, pre);
	if (job_add(c->mq, d, cmd, d->kind == CK_IMMEDIATE ? pre : NULL)) {
		resp_error(&c->out, "ERR out of memory");
		c->multi_err = 1;
		return;
	}
	resp_simple(&c->out, "QUEUED");
}

/* Parse and handle the buffered commands, up to a job. */
static void conn_process(struct conn *c)
{
	struct server *sv = c->w->sv;
	struct rbuf pre;
	rbuf_init(&pre);
	while (!c->job && !c->dead && !c->close_after && !sv->stop && !c->hold_until_ns) {
		struct job *batch = NULL;
		int barrier = 0;
		for (;;) {
			size_t used = 0;
			const char *why;
			if (c->out.len - c->out_off > OUT_PAUSE)
				break;
			int rc = resp_parse(c->in.data + c->in_off, c->in.len - c->in_off, &sv->lim,
					    &c->cmd, &used, &why);
			if (rc == RESP_MORE)
				break;
			if (rc < 0) {
				if (batch)
					break;   /* answer what came before first */
				resp_error(&c->out, "ERR Protocol error: %s",
					   rc == RESP_ENOMEM ? "out of memory" : why);
				atomic_fetch_add(&sv->ctr.proto_errors, 1);
				c->close_after = 1;
				break;
			}
			const struct resp_cmd *cmd = &c->cmd;
			if (cmd->argc == 0) {
				c->in_off += used;
				continue;
			}
			const struct cmd_def *d = cmd_lookup(&cmd->argv[0]);
			int immediate = 1;
			pre.len = 0;
			if (!d) {
				put_unknown(&pre, cmd);
			} else if (!arity_ok(d, cmd->argc)) {
				put_arity(&pre, d);
				d = NULL;
			} else if (sv->o.requirepass && !c->authed && !d->noauth) {
				resp_error(&pre, "NOAUTH Authentication required.");
			} else if (c->multi && !multi_passes(d)) {
				if (batch)
					break;
				c->in_off += used;
				atomic_fetch_add(&sv->ctr.commands, 1);
				conn_queue(c, d, cmd, &pre);
				continue;
			} else if (d->kind == CK_DATA) {
				immediate = d->check(sv, cmd, &pre) != 0;
			} else if (d->kind == CK_IMMEDIATE) {
				d->now(c, cmd, &pre);
			} else {
				/* CK_STATE / CK_SOLO: a barrier, handled with no job before it */
				if (batch)
					break;
				c->in_off += used;
				atomic_fetch_add(&sv->ctr.commands, 1);
				if (d->kind == CK_SOLO)
					job_start_solo(c, d, cmd);
				else
					d->now(c, cmd, &c->out);
				barrier = 1;
				break;
			}
			if (c->multi && (!d || (sv->o.requirepass && !c->authed))) {
				/* an unknown or malformed command inside MULTI fails EXEC */
				if (batch)
					break;
				c->in_off += used;
				rbuf_put(&c->out, pre.data, pre.len);
				c->multi_err = 1;
				continue;
			}
			if (!batch && !(batch = job_new(c, 0)))
				break;
			if (job_add(batch, d, cmd, immediate ? &pre : NULL)) {
				resp_error(&c->out, "ERR out of memory");
				c->close_after = 1;
				break;
			}
			c->in_off += used;
			atomic_fetch_add(&sv->ctr.commands, 1);
			if (job_ncmds(batch) >= sv->o.pipeline_max)
				break;
		}
		if (!batch) {
			if (barrier)
				continue;
			break;
		}
		if (job_has_data(batch))
			job_start(batch);
		else
			job_reply_now(batch);
	}
	rbuf_free(&pre);
	if (c->in_off) {
		rbuf_consume(&c->in, c->in_off);
		c->in_off = 0;
		if (c->in.len == 0 && c->in.cap > IN_SOFT)
			rbuf_free(&c->in);
	}
	conn_flush(c);
}

void conn_job_done(struct conn *c)
{
	conn_mark_runnable(c);
}

static void conn_read(struct conn *c)
{
	size_t got = 0;
	while (!c->dead && got < 4 * READ_CHUNK) {
		if (c->in.len >= IN_MAX) {
			resp_error(&c->out, "ERR Protocol error: command larger than %u bytes", IN_MAX);
			c->close_after = 1;
			break;
		}
		if (rbuf_reserve(&c->in, READ_CHUNK)) {
			conn_kill(c);
			return;
		}
		ssize_t n = recv(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len, 0);
		if (n > 0) {
			c->in.len += (size_t)n;
			got += (size_t)n;
			c->last_ns = serve_now_ns();
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		conn_kill(c);   /* closed by the client, or an error */
		return;
	}
	if (!c->job)
		conn_process(c);
	else
		conn_events(c);
}

/* A socket accepted (and counted in conns_now) becomes a connection of w. */
static void conn_new(struct worker *w, int fd)
{
	struct conn *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		atomic_fetch_sub(&w->sv->ctr.conns_now, 1);
		return;
	}
	c->w = w;
	c->fd = fd;
	c->id = atomic_fetch_add(&w->sv->next_conn_id, 1) + 1;
	c->authed = w->sv->o.requirepass == NULL;
	c->reading = 1;
	c->last_ns = serve_now_ns();
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
	if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev)) {
		close(fd);
		free(c);
		atomic_fetch_sub(&w->sv->ctr.conns_now, 1);
		return;
	}
	c->next = w->conns;
	if (w->conns)
		w->conns->prev = c;
	w->conns = c;
	atomic_fetch_add(&w->sv->ctr.conns_total, 1);
}

/* Answer a client that is not admitted, and close it.  A fresh socket has
 * room for the line; what the client already sent is read first, so that
 * the close does not reset the connection before the line is read. */
static void refuse_client(struct server *sv, int fd)
{
	static const char msg[] = "-ERR max number of clients reached\r\n";
	char sink[4096];
	for (int i = 0; i < 4 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
		;
	if (send(fd, msg, sizeof(msg) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) { /* gone */ }
	shutdown(fd, SHUT_WR);
	close(fd);
	atomic_fetch_add(&sv->ctr.rejected, 1);
}

static void accept_log(struct server *sv, int err)
{
	uint64_t now = serve_now_ns();
	sv->accept_refused++;
	if (now < sv->accept_log_ns)
		return;
	slog(LOTUS_LOG_WARN, "cannot accept clients: %s (%llu clients refused since "
		"this was last logged; raise the descriptor limit, ulimit -n, or set "
		"--max-clients)",
		strerror(err), (unsigned long long)sv->accept_refused);
	sv->accept_refused = 0;
	sv->accept_log_ns = now + ACCEPT_LOG_NS;
}

/* accept failed with err (not EAGAIN): 0 to go on accepting, -1 to stop. */
static int accept_failed(struct worker *w, int err)
{
	struct server *sv = w->sv;
	if (err == EINTR || err == ECONNABORTED || err == EPERM || err == EPROTO)
		return 0;   /* that client only */
	if ((err == EMFILE || err == ENFILE) && sv->reserve_fd >= 0) {
		close(sv->reserve_fd);
		int fd = accept4(sv->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		int again = fd < 0 ? errno : 0;
		if (fd >= 0)
			refuse_client(sv, fd);
		sv->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (again == EAGAIN || again == EWOULDBLOCK)
			return -1;   /* the backlog is empty */
		accept_log(sv, err);
		if (fd >= 0 && sv->reserve_fd >= 0)
			return 0;
	} else {
		accept_log(sv, err);
	}
	/* No reserve (another thread took its number), or ENOBUFS/ENOMEM: stop
	 * watching the listener for a while rather than wake on it at once. */
	struct epoll_event ev = { .events = 0, .data.ptr = &tag_listen };
	epoll_ctl(w->ep, EPOLL_CTL_MOD, sv->lfd, &ev);
	sv->listen_resume_ns = serve_now_ns() + LISTEN_PAUSE_NS;
	return -1;
}

static void accept_all(struct worker *w)
{
	struct server *sv = w->sv;
	for (;;) {
		int fd = accept4(sv->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || accept_failed(w, errno))
				return;
			continue;
		}
		if (sv->o.max_clients &&
		    atomic_load(&sv->ctr.conns_now) >= (int64_t)sv->o.max_clients) {
			refuse_client(sv, fd);
			continue;
		}
		atomic_fetch_add(&sv->ctr.conns_now, 1);
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct worker *to = &sv->workers[atomic_fetch_add(&sv->next_worker, 1) % sv->nworkers];
		if (to == w) {
			conn_new(w, fd);
			continue;
		}
		pthread_mutex_lock(&to->inbox_mu);
		if (to->ninbox == to->capinbox) {
			unsigned cap = to->capinbox ? to->capinbox * 2 : 16;
			int *p = realloc(to->inbox, cap * sizeof(*p));
			if (!p) {
				pthread_mutex_unlock(&to->inbox_mu);
				close(fd);
				atomic_fetch_sub(&sv->ctr.conns_now, 1);
				continue;
			}
			to->inbox = p;
			to->capinbox = cap;
		}
		to->inbox[to->ninbox++] = fd;
		pthread_mutex_unlock(&to->inbox_mu);
		uint64_t one64 = 1;
		if (write(to->efd, &one64, sizeof(one64)) < 0) { /* the count just grows */ }
	}
}

static void take_inbox(struct worker *w)
{
	uint64_t v;
	if (read(w->efd, &v, sizeof(v)) < 0) { /* nothing to drain */ }
	pthread_mutex_lock(&w->inbox_mu);
	unsigned n = w->ninbox;
	int fds[64];
	if (n > 64)
		n = 64;
	memcpy(fds, w->inbox, n * sizeof(int));
	memmove(w->inbox, w->inbox + n, (w->ninbox - n) * sizeof(int));
	w->ninbox -= n;
	int more = w->ninbox > 0;
	pthread_mutex_unlock(&w->inbox_mu);
	for (unsigned i = 0; i < n; i++)
		conn_new(w, fds[i]);
	if (more) {
		uint64_t one = 1;
		if (write(w->efd, &one, sizeof(one)) < 0) { /* woken anyway */ }
	}
}

/* ---- the worker loop -------------------------------------------------------- */

static void run_runnable(struct worker *w)
{
	while (w->runnable) {
		struct conn *c = w->runnable;
		w->runnable = c->run_next;
		c->on_run = 0;
		if (!c->dead)
			conn_process(c);
	}
}

static void reap_dead(struct worker *w)
{
	for (struct conn *c = w->conns, *next; c; c = next) {
		next = c->next;
		if (c->dead && !c->job && !c->on_run)
			conn_free(c);
	}
}

static void worker_snapshot(struct worker *w)
{
	struct lotus_net_counters n;
	lotus_session_counters(w->s, &n);
	n.msgs_sent += w->net_old.msgs_sent;
	n.bytes_sent += w->net_old.bytes_sent;
	n.msgs_recv += w->net_old.msgs_recv;
	n.bytes_recv += w->net_old.bytes_recv;
	n.reqs_sent += w->net_old.reqs_sent;
	n.hint_stale += w->net_old.hint_stale;
	n.local_hits += w->net_old.local_hits;
	pthread_mutex_lock(&w->stats_mu);
	w->net = n;
	pthread_mutex_unlock(&w->stats_mu);
}

static void worker_events(struct worker *w, struct epoll_event *ev, int n)
{
	for (int i = 0; i < n; i++) {
		void *p = ev[i].data.ptr;
		if (p == &tag_listen) {
			accept_all(w);
		} else if (p == &tag_wake) {
			take_inbox(w);
		} else if (p == &tag_stop) {
			/* the loop sees sv->stop */
		} else {
			struct conn *c = p;
			if (c->dead)
				continue;
			if (ev[i].events & EPOLLOUT && conn_flush(c) == 0 && !c->job &&
			    c->in.len > 0)
				conn_mark_runnable(c);   /* commands held back by OUT_PAUSE */
			if (!c->dead && ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
				conn_read(c);
		}
	}
}

/* Timed duties of the loop: let go the connections the AUTH throttle held
 * whose time came, close the clients idle past --timeout (once a second),
 * and re-arm a listener disarmed by accept_failed. */
static void worker_tick(struct worker *w)
{
	struct server *sv = w->sv;
	uint64_t now = serve_now_ns();
	int idle = sv->o.timeout_s && now >= w->idle_check_ns;
	if (idle)
		w->idle_check_ns = now + 1000000000ULL;
	if (w->nheld || idle)
		for (struct conn *c = w->conns; c; c = c->next) {
			if (c->hold_until_ns && now >= c->hold_until_ns) {
				c->hold_until_ns = 0;
				w->nheld--;
				/* write the held reply before a pipelined AUTH holds again */
				if (!c->dead && conn_flush(c) == 0)
					conn_mark_runnable(c);
			}
			if (idle && !c->dead && !c->job && !c->hold_until_ns &&
			    now - c->last_ns >= sv->o.timeout_s * 1000000000ULL)
				conn_kill(c);
		}
	/* the active expiry sweep: a batch of due keys at a time, every 100 ms
	 * (at once again while it finds due keys) */
	int idle_sweep = 0;
	if (w->id == 0 && !sv->stop && now >= sv->sweep_next_ns && !w->renew &&
	    atomic_compare_exchange_strong(&sv->sweep_running, &idle_sweep, 1)) {
		sv->sweep_next_ns = now + 100000000ULL;
		job_start_bg(w, SOLO_SWEEP);
	}
	if (w->id == 0 && sv->listen_resume_ns && now >= sv->listen_resume_ns) {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &tag_listen };
		epoll_ctl(w->ep, EPOLL_CTL_MOD, sv->lfd, &ev);
		sv->listen_resume_ns = 0;
	}
}

/* Stop: finish the jobs in flight (bounded), write their replies, close. */
static void worker_drain(struct worker *w)
{
	uint64_t deadline = serve_now_ns() + 5000000000ULL;
	while (w->inflight && serve_now_ns() < deadline) {
		lotus_session_poll(w->s, 1);
		worker_run_delayed(w);
		run_runnable(w);
	}
	for (struct conn *c = w->conns; c; c = c->next)
		if (!c->dead) {
			if (c->hold_until_ns)
				w->nheld--;
			c->hold_until_ns = 0;
			conn_flush(c);
			conn_kill(c);
		}
	if (w->inflight)
		slog(LOTUS_LOG_WARN, "worker %u: %u transactions still in flight at stop",
			w->id, w->inflight);
	else
		reap_dead(w);
}

/* A session whose connection to a memory server was lost (its lease expired
 * while this process was paused, or the server went away) stays without it:
 * open a new one once no transaction of the old one is in flight, so the
 * clients are served again (by the server that is back).  A failed try keeps
 * the old session and is repeated at most once a second. */
static void worker_renew(struct worker *w)
{
	if (!w->renew || w->inflight || serve_now_ns() < w->renew_after_ns)
		return;
	lotus_session_t *s;
	int rc = lotus_session_open(w->sv->cl, &s);
	if (rc) {
		w->renew_after_ns = serve_now_ns() + 1000000000ull;
		return;
	}
	worker_snapshot(w);
	w->net_old = w->net;
	for (unsigned i = 0; i < w->npool; i++)
		lotus_txn_free(w->txn_pool[i]);
	w->npool = 0;
	lotus_session_close(w->s);
	w->s = s;
	w->renew = 0;
	slog(LOTUS_LOG_INFO, "worker %u: opened a new session (a memory server's "
		"connection was lost)", w->id);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct server *sv = w->sv;
	struct epoll_event ev[256];
	unsigned iter = 0;
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &ss, NULL);   /* the main thread takes them */
	int rc = lotus_session_open(sv->cl, &w->s);   /* used by this thread only */
	pthread_mutex_lock(&sv->ready_mu);
	if (rc) {
		slog(LOTUS_LOG_ERROR, "worker %u: cannot open a session: %s", w->id,
			lotus_strerror(rc));
		sv->ready_err = rc;
	}
	sv->ready++;
	pthread_cond_broadcast(&sv->ready_cv);
	pthread_mutex_unlock(&sv->ready_mu);
	if (rc)
		return NULL;
	while (!sv->stop) {
		int n = epoll_wait(w->ep, ev, 256, w->inflight ? 0 : w->nheld ? 10 : 100);
		if (n > 0)
			worker_events(w, ev, n);
		worker_tick(w);
		lotus_session_poll(w->s, w->inflight && n <= 0 ? 1 : 0);
		worker_run_delayed(w);
		run_runnable(w);
		reap_dead(w);
		worker_renew(w);
		if ((++iter & 63) == 0 || !w->inflight)
			worker_snapshot(w);
	}
	worker_drain(w);
	worker_snapshot(w);
	for (unsigned i = 0; i < w->npool; i++)
		lotus_txn_free(w->txn_pool[i]);
	w->npool = 0;
	free(w->txn_pool);
	w->txn_pool = NULL;
	w->cappool = 0;
	worker_jobs_free(w);
	if (!w->inflight)   /* else its transactions still point at it: leave it */
		lotus_session_close(w->s);
	w->s = NULL;
	return NULL;
}

static int worker_setup(struct server *sv, struct worker *w, unsigned id)
{
	w->sv = sv;
	w->id = id;
	w->rnd = 0x9e3779b97f4a7c15ULL * (id + 1) ^ (uint64_t)serve_now_ns();
	pthread_mutex_init(&w->inbox_mu, NULL);
	pthread_mutex_init(&w->stats_mu, NULL);
	w->ep = epoll_create1(EPOLL_CLOEXEC);
	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->ep < 0 || w->efd < 0)
		return -errno;
	struct epoll_event e1 = { .events = EPOLLIN, .data.ptr = &tag_wake };
	struct epoll_event e2 = { .events = EPOLLIN, .data.ptr = &tag_stop };
	if (epoll_ctl(w->ep, EPOLL_CTL_ADD, w->efd, &e1) ||
	    epoll_ctl(w->ep, EPOLL_CTL_ADD, sv->stop_efd, &e2))
		return -errno;
	if (id == 0) {
		struct epoll_event e3 = { .events = EPOLLIN, .data.ptr = &tag_listen };
		if (epoll_ctl(w->ep, EPOLL_CTL_ADD, sv->lfd, &e3))
			return -errno;
	}
	return 0;
}

static void worker_teardown(struct worker *w)
{
	if (w->ep >= 0)
		close(w->ep);
	if (w->efd >= 0)
		close(w->efd);
	free(w->inbox);
	pthread_mutex_destroy(&w->inbox_mu);
	pthread_mutex_destroy(&w->stats_mu);
}

static void on_signal(int sig)
{
	(void)sig;
	if (!g_server)
		return;
	g_server->stop = 1;
	uint64_t one = 1;
	if (write(g_server->stop_efd, &one, sizeof(one)) < 0) { /* already signalled */ }
}

static int create_table(struct server *sv)
{
	lotus_session_t *s;
	int rc = lotus_session_open(sv->cl, &s);
	if (rc) {
		slog(LOTUS_LOG_ERROR, "cannot open a session: %s", lotus_strerror(rc));
		return rc;
	}
	/* a row holds the value and serve's header (type, stamp, expiry; 61 bytes
	 * for a container): the table is SERVE_ROW_EXTRA bigger than --max-value.
	 * A table made by an older serve (--max-value bytes exactly) is opened as
	 * it is, and values SERVE_ROW_EXTRA short of it are taken. */
	char sub[80];
	rc = lotus_table_create(s, sv->o.table, sv->max_value + SERVE_ROW_EXTRA, &sv->tb);
	if (rc == LOTUS_EEXISTS && lotus_table_open(s, sv->o.table, &sv->tb) == 0 &&
	    lotus_table_max_value(s, sv->tb) > SERVE_ROW_EXTRA) {
		sv->max_value = lotus_table_max_value(s, sv->tb) - SERVE_ROW_EXTRA;
		slog(LOTUS_LOG_WARN, "table '%s' exists with another size: values up to %u bytes",
		     sv->o.table, (unsigned)sv->max_value);
		rc = 0;
	}
	snprintf(sub, sizeof(sub), "%s.sub", sv->o.table);
	if (rc == 0)
		rc = lotus_table_create(s, sub, sv->max_value + SERVE_ROW_EXTRA, &sv->tb_sub);
	if (rc == LOTUS_EEXISTS)
		rc = lotus_table_open(s, sub, &sv->tb_sub);
	snprintf(sub, sizeof(sub), "%s.exp", sv->o.table);
	if (rc == 0)
		rc = lotus_table_create(s, sub, 2 * KEY_MAX, &sv->tb_exp);
	if (rc == LOTUS_EEXISTS)
		rc = lotus_table_open(s, sub, &sv->tb_exp);
	lotus_session_close(s);
	if (rc == LOTUS_EEXISTS)
		slog(LOTUS_LOG_ERROR, "table '%s' exists with another maximum value size "
			"than --max-value %u", sv->o.table, (unsigned)sv->max_value);
	else if (rc)
		slog(LOTUS_LOG_ERROR, "cannot create table '%s': %s", sv->o.table,
			lotus_strerror(rc));
	return rc;
}

int serve_run(const struct serve_opts *o)
{
	struct server *sv = calloc(1, sizeof(*sv));
	int rc, status = 1;
	if (!sv)
		return 1;
	sv->o = *o;
	serve_log_fn = o->log;
	sv->lfd = sv->stop_efd = -1;
	sv->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	sv->auth_seed = serve_now_ns() ^ ((uint64_t)getpid() << 32) ^ 0xcbf29ce484222325ULL;
	pthread_mutex_init(&sv->auth_mu, NULL);
	sv->max_value = o->max_value;
	{   /* write stamps: unique per write (serve_types.c): the compute id on top */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		sv->stamp_seq = ((uint64_t)o->lo.compute_id << 52) +
				((uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000);
	}
	sv->lim.max_bulk = MAX_BULK;
	sv->lim.max_args = 1u << 20;
	sv->lim.max_inline = 64u << 10;
	sv->start_ns = serve_now_ns();
	pthread_mutex_init(&sv->cursor_mu, NULL);
	pthread_mutex_init(&sv->ready_mu, NULL);
	pthread_cond_init(&sv->ready_cv, NULL);
	sv->cursor_seq = (uint64_t)time(NULL) << 20;   /* cursors differ across restarts */
	int lfd = listen_on(o->listen, &sv->port);
	if (lfd < 0)
		goto out;
	sv->lfd = lfd;
	rc = lotus_connect(&sv->o.lo, &sv->cl);
	if (rc) {
		slog(LOTUS_LOG_ERROR, "cannot connect to the cluster: %s", lotus_strerror(rc));
		goto out;
	}
	if (create_table(sv))
		goto out;
	sv->stop_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	sv->nworkers = o->threads ? o->threads : 1;
	sv->workers = calloc(sv->nworkers, sizeof(*sv->workers));
	if (sv->stop_efd < 0 || !sv->workers)
		goto out;
	for (unsigned i = 0; i < sv->nworkers; i++)
		sv->workers[i].ep = sv->workers[i].efd = -1;
	for (unsigned i = 0; i < sv->nworkers; i++) {
		rc = worker_setup(sv, &sv->workers[i], i);
		if (rc) {
			slog(LOTUS_LOG_ERROR, "worker %u: %s", i, lotus_strerror(rc));
			goto out_workers;
		}
	}
	g_server = sv;
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	unsigned started = 0;
	for (unsigned i = 0; i < sv->nworkers; i++)
		if (pthread_create(&sv->workers[i].th, NULL, worker_main, &sv->workers[i]) == 0)
			started++;
		else
			break;
	pthread_mutex_lock(&sv->ready_mu);
	while (sv->ready < started)
		pthread_cond_wait(&sv->ready_cv, &sv->ready_mu);
	pthread_mutex_unlock(&sv->ready_mu);
	if (started == sv->nworkers && !sv->ready_err) {
		char host[256];
		uint16_t given;
		split_hostport(o->listen, host, sizeof(host), &given);
		printf("lotus serve: listening on %s:%u (%u memory servers, table '%s', "
		       "values up to %u bytes, %u threads)\n", host, sv->port,
		       lotus_cluster_servers(sv->cl), o->table, (unsigned)sv->max_value,
		       sv->nworkers);
		fflush(stdout);
		status = 0;
	} else {
		if (!sv->ready_err)
			slog(LOTUS_LOG_ERROR, "cannot start worker threads");
		on_signal(0);
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(sv->workers[i].th, NULL);
	g_server = NULL;
out_workers:
	for (unsigned i = 0; i < sv->nworkers; i++)
		worker_teardown(&sv->workers[i]);
out:
	if (sv->cl)
		lotus_disconnect(sv->cl);
	if (sv->lfd >= 0)
		close(sv->lfd);
	if (sv->stop_efd >= 0)
		close(sv->stop_efd);
	if (sv->reserve_fd >= 0)
		close(sv->reserve_fd);
	free(sv->workers);
	pthread_mutex_destroy(&sv->cursor_mu);
	pthread_mutex_destroy(&sv->auth_mu);
	free(sv);
	return status;
}
