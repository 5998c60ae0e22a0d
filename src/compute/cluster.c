/*
 * cluster.c - the cluster handle (cluster.h): options, routing, and local
 * clusters (memory servers started as child processes on loopback).
 * lotus_connect() (api.c) creates it first and destroys it last.
 *
 * A local server is `lotus memserver --listen 127.0.0.1:0 --ready-json`: it
 * picks a free port itself and reports it on a pipe, so there is no race for
 * ports.  Children get PR_SET_PDEATHSIG, so they die with the parent even if
 * the parent is killed, and run in their own process group, so a signal to
 * the caller's group (Ctrl-C) does not stop them under a running client;
 * lotus_disconnect() stops them with SIGTERM and reaps them, and SIGKILLs any
 * that do not exit within a few seconds.
 *
 * Local servers know each other as config-file servers do: each is started
 * with --peers /proc/self/fd/N, an anonymous in-memory file (memfd) the parent
 * creates and the children inherit.  Once every port is known the parent
 * writes a cluster config naming them all into it and seals it against
 * writes, which tells a server the file is complete; a server then asks the
 * others about a prepared transaction (termination, durable or in memory).
 * The file lives as long as the last process holding it: nothing is left on
 * disk, even when the client is killed.
 *
 * Identity (docs/durability.md): a local cluster with a data directory is
 * new when no server's directory (DIR/ms<i>) exists yet.  Then the parent
 * makes a random cluster id and starts every server with --init and
 * --cluster-id; otherwise with neither, so each server recovers its own
 * directory and refuses a missing or empty one.  Each ready line names the
 * server's cluster; servers of two clusters (a directory copied from
 * elsewhere) fail the start.  The peers file carries the id.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "compute/cluster.h"
#include "coord/coord.h"
#include "lotus_prefix.h"   /* generated: LOTUS_INSTALLED_BIN */

void lotus_options_init(struct lotus_options *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->batch = LOTUS_BATCH_INTRA;
	o->cc = LOTUS_NO_WAIT;
	o->compute_count = 1;
	o->cache_admit = 1.0;
	o->group_size = 8;
}

unsigned cluster_route(const lotus_cluster_t *c, lotus_table_t tb, const void *key, size_t klen)
{
	const struct table_ent *te = tb < LOTUS_MAX_TABLES ? &c->tables[tb] : NULL;
	if (te && te->place_len && klen >= (size_t)te->place_off + te->place_len) {
		const unsigned char *k = (const unsigned char *)key + te->place_off;
		uint64_t n = 0;
		for (unsigned i = 0; i < te->place_len; i++)
			n = n << 8 | k[i];
		return (unsigned)(n % c->nservers);
	}
	return (unsigned)(fnv1a64(key, klen) % c->nservers);
}

bool cluster_scan_local(const lotus_cluster_t *c, lotus_table_t tb, size_t klen)
{
	const struct table_ent *te = tb < LOTUS_MAX_TABLES ? &c->tables[tb] : NULL;
	return te && te->place_len && te->place_scan_local &&
	       klen >= (size_t)te->place_off + te->place_len;
}

void cluster_place_table(const lotus_cluster_t *c, struct table_ent *te)
{
	te->place_off = te->place_len = te->place_scan_local = 0;
	for (unsigned i = 0; i < c->nplace; i++) {
		const struct place_rule *r = &c->place[i];
		size_t n = strlen(r->table);
		bool match = r->table[n - 1] == '*' ? !strncmp(te->name, r->table, n - 1)
			   : !strcmp(te->name, r->table);
		if (match) {
			te->place_off = r->off;
			te->place_len = r->len;
			te->place_scan_local = r->scan_local;
			return;
		}
	}
}

/* Copy and check lotus_options.placement. */
static int place_rules(lotus_cluster_t *c, const struct lotus_options *o)
{
	c->opts.placement = NULL;
	c->opts.nplacement = 0;
	if (o->nplacement > LOTUS_MAX_TABLES || (o->nplacement && !o->placement)) {
		log_error("lotus_connect: %u placement rules (at most %d)", o->nplacement,
			  LOTUS_MAX_TABLES);
		return LOTUS_ECONFIG;
	}
	for (unsigned i = 0; i < o->nplacement; i++) {
		const struct lotus_placement *p = &o->placement[i];
		size_t n = p->table ? strnlen(p->table, 66) : 0;
		bool star = n && p->table[n - 1] == '*';
		if (n == 0 || n > 64 + (size_t)star || p->key_bytes < 1 || p->key_bytes > 8 ||
		    p->key_offset > 128 - p->key_bytes) {
			log_error("lotus_connect: placement rule %u (table %s, key bytes %u at %u): "
				  "needs a table name of 1..64 bytes and 1..8 key bytes within 128",
				  i, p->table ? p->table : "(null)", p->key_bytes, p->key_offset);
			return LOTUS_ECONFIG;
		}
		memcpy(c->place[i].table, p->table, n + 1);
		c->place[i].off = (uint8_t)p->key_offset;
		c->place[i].len = (uint8_t)p->key_bytes;
		c->place[i].scan_local = (p->flags & LOTUS_PLACE_SCAN_LOCAL) != 0;
	}
	c->nplace = o->nplacement;
	return 0;
}

int cluster_owns(const lotus_cluster_t *c, const void *key, size_t klen)
{
	unsigned n = c->opts.compute_count ? c->opts.compute_count : 1;
	return (unsigned)((fnv1a64(key, klen) >> 32) % n) == c->opts.compute_id;
}

int cluster_table_find(const lotus_cluster_t *c, const char *name)
{
	for (unsigned i = 0; i < c->ntables; i++)
		if (!strcmp(c->tables[i].name, name))
			return (int)i;
	return -1;
}

unsigned lotus_cluster_servers(const lotus_cluster_t *c)
{
	return c ? c->nservers : 0;
}

const char *lotus_cluster_transport(const lotus_cluster_t *c)
{
	return c ? c->transport : NULL;
}

/* An executable regular file? */
static int is_exe(const char *path)
{
	struct stat st;
	return path && *path && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       access(path, X_OK) == 0;
}

/* The `lotus` binary that runs the local memory servers: the caller's
 * lotus_bin, else $LOTUS_BIN, else the installed one, else `lotus` on PATH.
 * Never /proc/self/exe: in a user's program that would re-run the program
 * itself (the lotus command points LOTUS_BIN at itself instead). */
static const char *lotus_binary(const lotus_cluster_t *c, char *buf, size_t len)
{
	if (c->opts.lotus_bin)
		return c->opts.lotus_bin;
	const char *env = getenv("LOTUS_BIN");
	if (env && *env)
		return env;
	if (is_exe(LOTUS_INSTALLED_BIN))
		return LOTUS_INSTALLED_BIN;
	const char *path = getenv("PATH");
	while (path && *path) {
		size_t n = strcspn(path, ":");
		if (n > 0 && (size_t)snprintf(buf, len, "%.*s/lotus", (int)n, path) < len &&
		    is_exe(buf))
			return buf;
		path += n + (path[n] == ':');
	}
	return NULL;
}

static void child_exec(const lotus_cluster_t *c, unsigned id, int outfd, const char *bin)
{
	char ids[16], threads[16], mem[32], dir[PATH_MAX], lease[16], cap[32], pw[16], md[16], cid[20];
	const char *argv[32];
	int n = 0;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Its own process group: a Ctrl-C (or `timeout -s INT`, or any signal to
	 * the caller's group) reaches the client only, which finishes what is in
	 * flight, reports, and then stops its servers itself. */
	setpgid(0, 0);
	dup2(outfd, STDOUT_FILENO);
	setenv("LOTUS_LOG", "warn", 0); /* local servers speak only of trouble */
	snprintf(ids, sizeof(ids), "%u", id);
	snprintf(threads, sizeof(threads), "%u", c->opts.server_threads);
	snprintf(mem, sizeof(mem), "%llu",
		 (unsigned long long)(c->opts.server_memory ? c->opts.server_memory : 1ULL << 30));
	const char *fixed[] = { "lotus", "memserver", "--listen", "127.0.0.1:0", "--id", ids,
				"--threads", threads, "--memory", mem, "--transport", c->transport,
				"--ready-json" };
	for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
		argv[n++] = fixed[i];
	if (c->opts.data_dir) {
		snprintf(dir, sizeof(dir), "%s/ms%u", c->opts.data_dir, id);
		argv[n++] = "--data-dir";
		argv[n++] = dir;
	}
	if (c->local_init)   /* a new cluster: the server creates its own ms<i> */
		argv[n++] = "--init";
	if (c->cluster_id) {
		snprintf(cid, sizeof(cid), "%016" PRIx64, c->cluster_id);
		argv[n++] = "--cluster-id";
		argv[n++] = cid;
	}
	if (c->opts.durability) {
		argv[n++] = "--durability";
		argv[n++] = c->opts.durability;
	}
	if (c->opts.server_capacity) {
		snprintf(cap, sizeof(cap), "%llu", (unsigned long long)c->opts.server_capacity);
		argv[n++] = "--capacity";
		argv[n++] = cap;
	}
	if (c->opts.server_page_writers) {
		snprintf(pw, sizeof(pw), "%u", c->opts.server_page_writers);
		argv[n++] = "--page-writers";
		argv[n++] = pw;
	}
	if (c->opts.server_miss_depth && c->opts.server_capacity) {
		snprintf(md, sizeof(md), "%u", c->opts.server_miss_depth == UINT32_MAX ? 0
			 : c->opts.server_miss_depth);
		argv[n++] = "--miss-depth";
		argv[n++] = md;
	}
	snprintf(lease, sizeof(lease), "%u", c->lease_ms);
	argv[n++] = "--lease-ms";
	argv[n++] = lease;
	if (c->peers_path[0]) {
		argv[n++] = "--peers";
		argv[n++] = c->peers_path;
	}
	if (c->secret_path[0]) {
		if (c->secret_fd >= 0)
			fcntl(c->secret_fd, F_SETFD, 0);   /* this child inherits it */
		argv[n++] = "--secret-file";
		argv[n++] = c->secret_path;
	}
	argv[n] = NULL;
	execv(bin, (char *const *)argv);
	fprintf(stderr, "lotus: cannot run %s: %s\n", bin, strerror(errno));
	_exit(127);
}

/* Read the child's ready line {"ready":true,"id":I,"port":P,...}.  Other
 * lines on its stdout (a library's warning) are skipped. */
/* A server that exited before its ready line: reaped, with its wait status
 * in *status (-1: still running). */
static int ready_exited(pid_t pid, int *status, int wait_ms)
{
	for (int i = 0;; i++) {
		if (waitpid(pid, status, WNOHANG) == pid)
			return 1;
		if (i * 10 >= wait_ms) {
			*status = -1;
			return 0;
		}
		usleep(10000);
	}
}

static int read_ready_port(int fd, pid_t pid, uint16_t *port, uint64_t *cluster, int *status)
{
	char line[4096];
	size_t n = 0;
	uint64_t deadline = clock_now_ns() + 20ULL * 1000000000ULL;
	*status = -1;
	while (clock_now_ns() < deadline) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (poll(&pfd, 1, 200) <= 0) {
			if (ready_exited(pid, status, 0))
				return LOTUS_EUNAVAIL;
			continue;
		}
		if (n == sizeof(line) - 1)
			n = 0;   /* a line longer than any ready line: drop it */
		ssize_t r = read(fd, line + n, sizeof(line) - 1 - n);
		if (r <= 0) {   /* its end of the pipe closed: it is exiting */
			ready_exited(pid, status, 1000);
			return LOTUS_EUNAVAIL;
		}
		n += (size_t)r;
		line[n] = 0;
		char *nl;
		while ((nl = strchr(line, '\n')) != NULL) {
			*nl = 0;
			const char *p = strstr(line, "\"port\":");
			if (strstr(line, "\"ready\":true") && p) {
				const char *cp = strstr(line, "\"cluster\":\"");
				*port = (uint16_t)atoi(p + 7);
				*cluster = cp ? strtoull(cp + 11, NULL, 16) : 0;
				return 0;
			}
			n -= (size_t)(nl + 1 - line);
			memmove(line, nl + 1, n + 1);
		}
	}
	return LOTUS_ETIMEOUT;
}

/* The peers file (see the top comment); without it the servers cannot
 * settle prepared transactions among themselves, which is logged. */
static void peers_prepare(lotus_cluster_t *c)
{
	int fd = memfd_create("lotus-peers", MFD_ALLOW_SEALING);   /* inherited */
	if (fd < 0) {
		log_warn("local cluster: no peers file (memfd_create: %s); the servers cannot "
			 "settle prepared transactions among themselves", strerror(errno));
		return;
	}
	c->peers_fd = fd;
	snprintf(c->peers_path, sizeof(c->peers_path), "/proc/self/fd/%d", fd);
}

/* DIR/ms<i>, made absolute when DIR is relative (to the working directory). */
static void local_abs_dir(const char *base, unsigned i, char *out, size_t len)
{
	char cwd[PATH_MAX];
	int n;
	if (base[0] != '/' && getcwd(cwd, sizeof(cwd)))
		n = snprintf(out, len, "%s/%s/ms%u", cwd, base, i);
	else
		n = snprintf(out, len, "%s/ms%u", base, i);
	if (n < 0 || (size_t)n >= len)
		out[0] = 0;   /* too long for a config: the file names no directory */
}

/* New or existing cluster (see the top comment): sets local_init and, for a
 * new one (or one without a data directory), a random cluster id. */
static void local_identity(lotus_cluster_t *c)
{
	unsigned have = 0;
	if (c->opts.data_dir) {
		mkdir(c->opts.data_dir, 0755);
		for (unsigned i = 0; i < c->nservers; i++) {
			char dir[PATH_MAX];
			struct stat st;
			snprintf(dir, sizeof(dir), "%s/ms%u", c->opts.data_dir, i);
			have += stat(dir, &st) == 0;
		}
	}
	c->local_init = c->opts.data_dir && have == 0;
	if (!c->opts.data_dir || have == 0)
		while (c->cluster_id == 0)
			door_random(&c->cluster_id, sizeof(c->cluster_id));
}

/* Every server is listening: name them all in the peers file, then seal it. */
static int peers_write(lotus_cluster_t *c)
{
	struct lotus_config *cfg = calloc(1, sizeof(*cfg));
	char *buf = NULL;
	size_t len = 0;
	int rc = 0;
	if (c->peers_fd < 0) {
		free(cfg);
		return 0;
	}
	if (!cfg)
		return -ENOMEM;
	config_defaults(cfg);
	snprintf(cfg->transport, sizeof(cfg->transport), "%s", c->transport);
	if (c->opts.durability)
		config_parse_durability(c->opts.durability, &cfg->durability);
	else if (c->opts.data_dir)
		cfg->durability = LOTUS_DUR_SYNC;
	cfg->lease_ms = c->lease_ms;
	cfg->nservers = c->nservers;
	cfg->cluster_id = c->cluster_id;
	snprintf(cfg->secret_file, sizeof(cfg->secret_file), "%s", c->secret_path);
	for (unsigned i = 0; i < c->nservers; i++) {
		struct lotus_server_config *s = &cfg->servers[i];
		s->id = i;
		snprintf(s->host, sizeof(s->host), "%s", c->servers[i].host);
		s->port = c->servers[i].port;
		s->threads = c->opts.server_threads;
		s->memory = c->opts.server_memory ? c->opts.server_memory : 1ULL << 30;
		if (c->opts.data_dir)   /* absolute: a file's relative paths are its own */
			local_abs_dir(c->opts.data_dir, i, s->data_dir, sizeof(s->data_dir));
	}
	FILE *f = open_memstream(&buf, &len);
	if (!f || config_write(f, cfg) != 0)
		rc = -ENOMEM;
	if (f && fclose(f) != 0)
		rc = -ENOMEM;
	for (size_t off = 0; rc == 0 && off < len;) {
		ssize_t w = write(c->peers_fd, buf + off, len - off);
		if (w < 0 && errno != EINTR)
			rc = -errno;
		else if (w > 0)
			off += (size_t)w;
	}
	if (rc == 0 && fcntl(c->peers_fd, F_ADD_SEALS,
			     F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0)
		rc = -errno;
	if (rc)
		log_error("local cluster: cannot write the peers file: %s", lotus_strerror(rc));
	free(buf);
	free(cfg);
	return rc;
}

static void peers_remove(lotus_cluster_t *c)
{
	if (c->peers_fd >= 0)
		close(c->peers_fd);
	c->peers_fd = -1;
	c->peers_path[0] = 0;
}

static int cluster_start_local(lotus_cluster_t *c)
{
	char buf[PATH_MAX];
	const char *bin = lotus_binary(c, buf, sizeof(buf));
	if (!bin) {
		log_error("local memory servers need the lotus binary: none at %s or on PATH; "
			  "set LOTUS_BIN or lotus_options.lotus_bin", LOTUS_INSTALLED_BIN);
		return LOTUS_EUNAVAIL;
	}
	peers_prepare(c);
	for (unsigned i = 0; i < c->nservers; i++) {
		int pfd[2];
		if (pipe2(pfd, O_CLOEXEC))
			return -errno;
		pid_t pid = fork();
		if (pid < 0) {
			close(pfd[0]);
			close(pfd[1]);
			return -errno;
		}
		if (pid == 0) {
			close(pfd[0]);
			child_exec(c, i, pfd[1], bin);
		}
		close(pfd[1]);
		c->servers[i].pid = pid;
		snprintf(c->servers[i].host, sizeof(c->servers[i].host), "127.0.0.1");
		int status;
		uint64_t cid = 0;
		int rc = read_ready_port(pfd[0], pid, &c->servers[i].port, &cid, &status);
		close(pfd[0]);
		if (rc == 0 && cid && !c->cluster_id)
			c->cluster_id = cid;   /* an existing cluster: server 0's */
		if (rc == 0 && cid && cid != c->cluster_id) {
			log_error("local memory server %u belongs to cluster %016" PRIx64 ", the "
				  "others to %016" PRIx64 ": %s/ms%u holds another cluster's data", i,
				  cid, c->cluster_id, c->opts.data_dir ? c->opts.data_dir : ".", i);
			return LOTUS_ECONFIG;
		}
		if (rc) {
			char how[64] = "";
			if (status != -1) {   /* reaped: its pid is no longer ours to signal */
				c->servers[i].pid = 0;
				if (WIFEXITED(status))
					snprintf(how, sizeof(how), " (exit status %d)",
						 WEXITSTATUS(status));
				else if (WIFSIGNALED(status))
					snprintf(how, sizeof(how), " (killed by signal %d, %s)",
						 WTERMSIG(status), strsignal(WTERMSIG(status)));
			}
			log_error("local memory server %u did not start: %s%s", i,
				  lotus_strerror(rc), how);
			return rc;
		}
	}
	return peers_write(c);
}

static void cluster_stop_local(lotus_cluster_t *c)
{
	for (unsigned i = 0; i < c->nservers; i++)
		if (c->servers[i].pid > 0)
			kill(c->servers[i].pid, SIGTERM);
	uint64_t deadline = clock_now_ns() + 5ULL * 1000000000ULL;
	for (unsigned i = 0; i < c->nservers; i++) {
		pid_t pid = c->servers[i].pid;
		if (pid <= 0)
			continue;
		while (waitpid(pid, NULL, WNOHANG) == 0) {
			if (clock_now_ns() > deadline) {
				kill(pid, SIGKILL);
				waitpid(pid, NULL, 0);
				break;
			}
			usleep(10000);
		}
		c->servers[i].pid = 0;
	}
	peers_remove(c);
	if (c->secret_fd >= 0)
		close(c->secret_fd);
	c->secret_fd = -1;
}

/* A replicated cluster (replicas > 1): servers[p] is partition p's primary,
 * as the coordinator names it. */
static int cluster_primaries(lotus_cluster_t *c, const struct lotus_config *cfg,
			     const char *path)
{
	unsigned r = config_replicas(cfg), np = config_partitions(cfg);
	uint64_t cid;
	coord_t *co = NULL;
	unsigned lease = c->lease_ms ? c->lease_ms : cfg->lease_ms ? cfg->lease_ms
			 : LOTUS_DEFAULT_LEASE_MS;
	const char *secret = c->opts.secret_file ? c->opts.secret_file : cfg->secret_file;
	int rc = door_config_cluster_id(cfg, secret, &cid);
	if (rc) {
		log_error("%s: cannot read the cluster secret for the cluster id: %s", path,
			  lotus_strerror(rc));
		return LOTUS_ECONFIG;
	}
	rc = coord_open(cfg->coordinator, lease, (unsigned)(c->timeout_ns / 1000000ULL), &co);
	for (unsigned p = 0; rc == 0 && p < np; p++) {
		struct coord_partition part;
		rc = coord_get_partition(co, cid, p, &part);
		if (rc == -ENOENT) {
			log_error("partition %u (memory servers %u..%u) has no configuration at the "
				  "coordinator %s yet: none of its servers has started", p, p * r,
				  p * r + r - 1, cfg->coordinator);
			rc = LOTUS_EUNAVAIL;
		} else if (rc == 0 && (part.primary < p * r || part.primary >= p * r + r)) {
			log_error("the coordinator names server %u the primary of partition %u, "
				  "which is servers %u..%u", part.primary, p, p * r, p * r + r - 1);
			rc = LOTUS_ECONFIG;
		} else if (rc == 0) {
			const struct lotus_server_config *s = &cfg->servers[part.primary];
			snprintf(c->servers[p].host, sizeof(c->servers[p].host), "%s", s->host);
			c->servers[p].port = s->port;
			c->repl.epoch[p] = part.epoch;
		}
	}
	coord_close(co);
	if (rc == 0) {
		c->nservers = np;
		c->repl.replicas = r;
		c->repl.cid = cid;
		snprintf(c->repl.coordinator, sizeof(c->repl.coordinator), "%s", cfg->coordinator);
		for (unsigned i = 0; i < cfg->nservers; i++) {
			snprintf(c->repl.members[i].host, sizeof(c->repl.members[i].host), "%s",
				 cfg->servers[i].host);
			c->repl.members[i].port = cfg->servers[i].port;
		}
	}
	return rc;
}

int cluster_primary_of(lotus_cluster_t *c, unsigned p, char *host, size_t hlen, uint16_t *port,
		       unsigned wait_ms)
{
	unsigned r = c->repl.replicas;
	unsigned lease = c->lease_ms ? c->lease_ms : LOTUS_DEFAULT_LEASE_MS;
	uint64_t deadline = clock_now_ns() + (uint64_t)wait_ms * 1000000ULL;
	int rc = 0;
	if (r < 2)
		return LOTUS_EUNAVAIL;
	pthread_mutex_lock(&c->repl.mu);
	if (c->repl.co && coord_expired(c->repl.co)) {
		coord_close(c->repl.co);
		c->repl.co = NULL;
	}
	if (!c->repl.co)   /* kept for the next failover */
		rc = coord_open(c->repl.coordinator, lease, MAX(wait_ms, 1000u), &c->repl.co);
	coord_t *co = c->repl.co;
	while (rc == 0) {
		struct coord_partition part;
		char h[256];
		uint16_t pt;
		rc = coord_get_partition(co, c->repl.cid, p, &part);
		/* the named primary must be live: its ephemeral znode */
		if (rc == 0 && part.primary / r == p &&
		    coord_server_addr(co, c->repl.cid, part.primary, h, sizeof(h), &pt) == 0) {
			snprintf(host, hlen, "%s", c->repl.members[part.primary].host);
			*port = c->repl.members[part.primary].port;
			if (part.epoch != c->repl.epoch[p])
				log_info("partition %u: primary is server %u (epoch %" PRIu64 ")", p,
					 part.primary, part.epoch);
			c->repl.epoch[p] = part.epoch;
			break;
		}
		if (clock_now_ns() >= deadline) {
			rc = LOTUS_EUNAVAIL;
			break;
		}
		struct timespec ts = { 0, 100 * 1000000L };   /* a takeover is on its way */
		nanosleep(&ts, NULL);
		rc = 0;
	}
	pthread_mutex_unlock(&c->repl.mu);
	return rc;
}

static int cluster_from_config(lotus_cluster_t *c, const char *path)
{
	struct lotus_config cfg;
	if (config_load(path, &cfg))
		return LOTUS_ECONFIG;
	c->nservers = cfg.nservers;
	for (unsigned i = 0; i < cfg.nservers; i++) {
		snprintf(c->servers[i].host, sizeof(c->servers[i].host), "%s", cfg.servers[i].host);
		c->servers[i].port = cfg.servers[i].port;
	}
	if (!c->opts.transport)
		snprintf(c->transport, sizeof(c->transport), "%s", cfg.transport);
	/* compute_servers is the cluster's compute count, which co-partitioning
	 * divides the keys by; an explicit compute_count above 1 wins. */
	if (c->opts.compute_count <= 1)
		c->opts.compute_count = cfg.compute_servers;
	/* The cluster every server must announce: the config's cluster_id, else
	 * the first server's (servers started without this config announce
	 * their directory's id, not one derived from the file). */
	c->cluster_id = cfg.cluster_id;
	if (c->opts.partitioning == LOTUS_PART_CO && c->opts.compute_id >= c->opts.compute_count) {
		log_error("compute id %u is not below the compute count %u (compute_servers in %s)",
			  c->opts.compute_id, c->opts.compute_count, path);
		return LOTUS_ECONFIG;
	}
	if (!c->opts.timeout_ms && cfg.timeout_ms)
		c->timeout_ns = cfg.timeout_ms * 1000000ULL;
	if (!c->opts.lease_ms && cfg.lease_ms)
		c->lease_ms = cfg.lease_ms;
	/* as on the servers: a data directory without a durability means sync */
	c->durable = cfg.durability != LOTUS_DUR_NONE;
	for (unsigned i = 0; i < cfg.nservers; i++)
		c->durable |= cfg.servers[i].data_dir[0] != 0;
	if (c->opts.commit == LOTUS_COMMIT_DEFAULT)
		c->opts.commit = (enum lotus_commit)cfg.commit;
	if (!c->opts.secret_file && cfg.secret_file[0])
		snprintf(c->secret_path, sizeof(c->secret_path), "%s", cfg.secret_file);
	/* Keys hash to partitions; a partition's requests go to its primary. */
	if (config_replicas(&cfg) > 1)
		return cluster_primaries(c, &cfg, path);
	return 0;
}

/* A local cluster's secret: random, in a sealed memfd that only the server
 * children inherit (child_exec clears its close-on-exec flag). */
static int secret_make_local(lotus_cluster_t *c)
{
	int fd = door_secret_memfd(c->secret_path, sizeof(c->secret_path));
	if (fd < 0)
		return fd;
	c->secret_fd = fd;
	return 0;
}

int cluster_create(const struct lotus_options *o, lotus_cluster_t **out)
{
	lotus_cluster_t *c = calloc(1, sizeof(*c));
	int rc;
	if (!c)
		return -ENOMEM;
	c->opts = *o;
	c->timeout_ns = (uint64_t)(o->timeout_ms ? o->timeout_ms : LOTUS_DEFAULT_TIMEOUT_MS) *
			1000000ULL;
	c->lease_ms = o->lease_ms ? o->lease_ms : LOTUS_DEFAULT_LEASE_MS;
	c->peers_fd = -1;
	c->secret_fd = -1;
	if (o->secret_file)
		snprintf(c->secret_path, sizeof(c->secret_path), "%s", o->secret_file);
	pthread_mutex_init(&c->tables_mu, NULL);
	pthread_mutex_init(&c->groups_mu, NULL);
	pthread_mutex_init(&c->repl.mu, NULL);
	snprintf(c->transport, sizeof(c->transport), "%s", o->transport ? o->transport : "tcp");
	rc = place_rules(c, o);
	if (rc == 0 && o->config_path) {
		rc = cluster_from_config(c, o->config_path);
	} else if (rc == 0 && o->local_servers > 0 && o->local_servers <= LOTUS_MAX_SERVERS) {
		int d = LOTUS_DUR_NONE;
		c->nservers = (unsigned)o->local_servers;
		rc = 0;
		/* a data directory without a durability setting means sync */
		if (o->durability)
			config_parse_durability(o->durability, &d);
		else if (o->data_dir)
			d = LOTUS_DUR_SYNC;
		c->durable = d != LOTUS_DUR_NONE;
	} else if (rc == 0) {
		log_error("lotus_connect: give a config file or 1..%d local servers",
			  LOTUS_MAX_SERVERS);
		rc = LOTUS_ECONFIG;
	}
	if (rc == 0 && c->opts.commit != LOTUS_COMMIT_DEFAULT &&
	    c->opts.commit != LOTUS_COMMIT_TWO_PHASE && c->opts.commit != LOTUS_COMMIT_ONE_PHASE) {
		log_error("lotus_connect: commit %d is not LOTUS_COMMIT_TWO_PHASE or _ONE_PHASE",
			  (int)c->opts.commit);
		rc = LOTUS_ECONFIG;
	}
	/* durable servers always prepare (a logged tear would outlive restarts) */
	c->two_phase = c->durable || c->opts.commit != LOTUS_COMMIT_ONE_PHASE;
	if (rc == 0 && !o->config_path && !o->secret_file)
		rc = secret_make_local(c);
	if (rc == 0 && !o->config_path)
		local_identity(c);
	if (rc == 0) {
		/* UCX's network transports only on the interfaces that reach the servers */
		const char *hosts[LOTUS_MAX_SERVERS];
		for (unsigned i = 0; i < c->nservers; i++)
			hosts[i] = o->config_path ? c->servers[i].host : "127.0.0.1";
		struct net_opts no = { .transport = c->transport, .lease_ms = c->lease_ms,
				       .secret_file = c->secret_path[0] ? c->secret_path : NULL,
				       .hosts = hosts, .nhosts = c->nservers,
				       .cluster_id = c->cluster_id };
		rc = net_ctx_create(&no, &c->net);
	}
	if (rc == 0 && !o->config_path)
		rc = cluster_start_local(c);
	if (rc) {
		cluster_destroy(c);
		return rc;
	}
	*out = c;
	return 0;
}

void cluster_destroy(lotus_cluster_t *c)
{
	if (!c)
		return;
	cluster_stop_local(c);
	if (c->net)
		net_ctx_destroy(c->net);
	pthread_mutex_destroy(&c->tables_mu);
	pthread_mutex_destroy(&c->groups_mu);
	pthread_mutex_destroy(&c->repl.mu);
	coord_close(c->repl.co);
	free(c);
}
