/*
 * config.c - read and write the cluster INI file (format in config.h).
 *
 * One pass over the lines; each "key = value" goes through the same key
 * table config_set() uses, so the file and the command-line flags accept
 * exactly the same values.  Checks that need the whole file (every server has
 * a listen address, ids are 0..N-1, no two servers share an address) run
 * after the pass and report the line of the offending section or key.
 *
 * Invariants after a successful config_load():
 *   - 1 <= nservers <= LOTUS_MAX_SERVERS and servers[i].id == i;
 *   - every server has a host and a non-zero port, and memory > 0;
 *   - no two servers have the same host:port;
 *   - replicas (R) divides nservers, and R > 1 has a coordinator.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "common/config.h"

#define MAX_THREADS          1024
#define MAX_COMPUTE_SERVERS  4096   /* compute ids are 0..4095 */

static const char *const transports[] = { "tcp", "sm", "rc", "ud", "dc" };
static const char *const cc_names[] = {
	[LOTUS_NO_WAIT] = "no_wait", [LOTUS_WAIT_DIE] = "wait_die",
	[LOTUS_WOUND_WAIT] = "wound_wait",
};
static const char *const dur_names[] = {
	[LOTUS_DUR_NONE] = "none", [LOTUS_DUR_ASYNC] = "async", [LOTUS_DUR_SYNC] = "sync",
};

static const char *const commit_names[] = {
	[LOTUS_COMMIT_TWO_PHASE] = "two_phase", [LOTUS_COMMIT_ONE_PHASE] = "one_phase",
};

static int name_index(const char *const *names, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (names[i] && strcmp(names[i], s) == 0)
			return (int)i;
	return -EINVAL;
}

const char *config_cc_name(int cc)
{
	return cc >= 0 && (size_t)cc < ARRAY_SIZE(cc_names) ? cc_names[cc] : "?";
}

const char *config_durability_name(int d)
{
	return d >= 0 && (size_t)d < ARRAY_SIZE(dur_names) ? dur_names[d] : "?";
}

int config_parse_cc(const char *s, int *out)
{
	int i = name_index(cc_names, ARRAY_SIZE(cc_names), s);
	if (i < 0)
		return i;
	*out = i;
	return 0;
}

const char *config_commit_name(int commit)
{
	return commit > 0 && (size_t)commit < ARRAY_SIZE(commit_names) ? commit_names[commit] : "?";
}

int config_parse_commit(const char *s, int *out)
{
	int i = name_index(commit_names, ARRAY_SIZE(commit_names), s);
	if (i < 0)
		return i;
	*out = i;
	return 0;
}

int config_parse_durability(const char *s, int *out)
{
	int i = name_index(dur_names, ARRAY_SIZE(dur_names), s);
	if (i < 0)
		return i;
	*out = i;
	return 0;
}

void config_defaults(struct lotus_config *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->transport, "tcp");
	c->cc = LOTUS_NO_WAIT;
	c->durability = LOTUS_DUR_NONE;
	c->commit = LOTUS_COMMIT_TWO_PHASE;
	c->compute_servers = 1;
}

static void server_defaults(struct lotus_server_config *s, unsigned id)
{
	memset(s, 0, sizeof(*s));
	s->id = id;
	s->memory = CONFIG_DEFAULT_MEMORY;
}

/* ---- the key table ---------------------------------------------------- */

/* Each setter returns 0 or -EINVAL/-ERANGE with a static reason in *why. */
typedef int (*cluster_set_fn)(struct lotus_config *c, const char *v, const char **why);
typedef int (*server_set_fn)(struct lotus_server_config *s, const char *v, const char **why);

static int set_transport(struct lotus_config *c, const char *v, const char **why)
{
	if (name_index(transports, ARRAY_SIZE(transports), v) < 0) {
		*why = "expected tcp, sm, rc, ud or dc";
		return -EINVAL;
	}
	memset(c->transport, 0, sizeof(c->transport));
	strcpy(c->transport, v);
	return 0;
}

static int set_cc(struct lotus_config *c, const char *v, const char **why)
{
	*why = "expected no_wait, wait_die or wound_wait";
	return config_parse_cc(v, &c->cc);
}

static int set_durability(struct lotus_config *c, const char *v, const char **why)
{
	*why = "expected none, async or sync";
	return config_parse_durability(v, &c->durability);
}

static int set_commit(struct lotus_config *c, const char *v, const char **why)
{
	*why = "expected two_phase or one_phase";
	return config_parse_commit(v, &c->commit);
}

static int set_compute_servers(struct lotus_config *c, const char *v, const char **why)
{
	uint64_t n;
	*why = "expected a number from 1 to 4096";
	if (parse_u64(v, &n) || n < 1 || n > MAX_COMPUTE_SERVERS)
		return -EINVAL;
	c->compute_servers = (unsigned)n;
	return 0;
}

static int set_timeout_ms(struct lotus_config *c, const char *v, const char **why)
{
	uint64_t n;
	*why = "expected milliseconds from 1 to 86400000";
	if (parse_u64(v, &n) || n < 1 || n > 86400000)
		return -EINVAL;
	c->timeout_ms = (unsigned)n;
	return 0;
}

static int set_lease_ms(struct lotus_config *c, const char *v, const char **why)
{
	uint64_t n;
	*why = "expected milliseconds from 100 to 3600000";
	if (parse_u64(v, &n) || n < 100 || n > 3600000)
		return -EINVAL;
	c->lease_ms = (unsigned)n;
	return 0;
}

static int set_secret_file(struct lotus_config *c, const char *v, const char **why)
{
	if (!*v || strlen(v) >= sizeof(c->secret_file) || strchr(v, '\n')) {
		*why = "expected a path (the file holding the cluster secret)";
		return -EINVAL;
	}
	memset(c->secret_file, 0, sizeof(c->secret_file));
	strcpy(c->secret_file, v);
	return 0;
}

static int set_max_clients(struct lotus_config *c, const char *v, const char **why)
{
	uint64_t n;
	*why = "expected a number of connections from 0 (no limit) to 1000000";
	if (parse_u64(v, &n) || n > 1000000)
		return -EINVAL;
	c->max_clients = (unsigned)n;
	return 0;
}

int config_parse_cluster_id(const char *s, uint64_t *out)
{
	size_t n = strlen(s);
	if (n == 0 || n > 64 || strspn(s, "0123456789abcdefABCDEFghijklmnopqrstuvwxyz"
				       "GHIJKLMNOPQRSTUVWXYZ._-") != n)
		return -EINVAL;
	uint64_t v;
	if (n == 16 && strspn(s, "0123456789abcdefABCDEF") == 16) {
		v = strtoull(s, NULL, 16);
		if (v == 0)
			return -EINVAL;
	} else {
		static const char tag[] = "lotus cluster name\n";
		v = fnv1a64(tag, sizeof(tag) - 1) ^ fnv1a64(s, n);
		v = v ? v : 1;
	}
	*out = v;
	return 0;
}

uint64_t config_servers_cluster_id(const struct lotus_config *c)
{
	char line[300];
	uint64_t v = fnv1a64("lotus servers v1\n", 17);
	for (unsigned i = 0; i < c->nservers; i++) {
		int n = snprintf(line, sizeof(line), "%u %s:%u\n", c->servers[i].id,
				 c->servers[i].host, c->servers[i].port);
		v = v * 1099511628211ULL ^ fnv1a64(line, (size_t)n);
	}
	return v ? v : 1;
}

static int set_cluster_id(struct lotus_config *c, const char *v, const char **why)
{
	*why = "expected 16 hex digits (not all zero) or a name of 1..64 characters "
	       "A-Z a-z 0-9 . _ -";
	return config_parse_cluster_id(v, &c->cluster_id);
}

static int set_replicas(struct lotus_config *c, const char *v, const char **why)
{
	uint64_t n;
	*why = "expected a number of servers per partition from 1 to 16";
	if (parse_u64(v, &n) || n < 1 || n > CONFIG_MAX_REPLICAS)
		return -EINVAL;
	c->replicas = (unsigned)n;
	return 0;
}

/* HOST:PORT[,HOST:PORT...], each with a port from 1 to 65535. */
static int set_coordinator(struct lotus_config *c, const char *v, const char **why)
{
	*why = "expected HOST:PORT[,HOST:PORT...] (a ZooKeeper ensemble)";
	if (strlen(v) >= sizeof(c->coordinator) || strpbrk(v, " \t\n"))
		return -EINVAL;
	char buf[sizeof(c->coordinator)], host[256];
	snprintf(buf, sizeof(buf), "%s", v);
	char *save = NULL;
	unsigned n = 0;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save), n++) {
		uint16_t port;
		if (parse_hostport(tok, host, sizeof(host), &port) || port == 0 || !host[0])
			return -EINVAL;
	}
	if (n == 0 || v[strlen(v) - 1] == ',' || v[0] == ',' || strstr(v, ",,"))
		return -EINVAL;
	memset(c->coordinator, 0, sizeof(c->coordinator));
	strcpy(c->coordinator, v);
	return 0;
}

unsigned config_replicas(const struct lotus_config *c)
{
	return c->replicas > 1 ? c->replicas : 1;
}

static int set_listen(struct lotus_server_config *s, const char *v, const char **why)
{
	char host[sizeof(s->host)];
	uint16_t port;
	/* Port 0 ("any") is for local children only: others could not dial it. */
	*why = "expected HOST:PORT with a port from 1 to 65535";
	if (parse_hostport(v, host, sizeof(host), &port) || port == 0 || !host[0])
		return -EINVAL;
	memset(s->host, 0, sizeof(s->host));
	strcpy(s->host, host);
	s->port = port;
	return 0;
}

static int set_threads(struct lotus_server_config *s, const char *v, const char **why)
{
	uint64_t n;
	*why = "expected a number from 0 (all cores) to 1024";
	if (parse_u64(v, &n) || n > MAX_THREADS)
		return -EINVAL;
	s->threads = (unsigned)n;
	return 0;
}

static int set_memory(struct lotus_server_config *s, const char *v, const char **why)
{
	uint64_t n;
	*why = "expected a size such as 512M or 16G";
	int rc = parse_size(v, &n);
	if (rc)
		return rc;
	if (n == 0) {
		*why = "memory must be more than 0";
		return -EINVAL;
	}
	s->memory = n;
	return 0;
}

static int set_data_dir(struct lotus_server_config *s, const char *v, const char **why)
{
	if (strlen(v) >= sizeof(s->data_dir) || strchr(v, '\n')) {
		*why = "path too long or not one line";
		return -EINVAL;
	}
	memset(s->data_dir, 0, sizeof(s->data_dir));
	strcpy(s->data_dir, v);
	return 0;
}

static int set_capacity(struct lotus_server_config *s, const char *v, const char **why)
{
	uint64_t n;
	*why = "expected a size such as 64G (0: the same as memory)";
	int rc = parse_size(v, &n);
	if (rc)
		return rc;
	s->capacity = n;
	return 0;
}

static int set_page_writers(struct lotus_server_config *s, const char *v, const char **why)
{
	uint64_t n;
	*why = "expected a number of threads, 0..64 (0: the default)";
	if (parse_u64(v, &n) || n > 64)
		return -EINVAL;
	s->page_writers = (unsigned)n;
	return 0;
}

static const struct { const char *name; cluster_set_fn set; } cluster_keys[] = {
	{ "transport", set_transport },
	{ "cc", set_cc },
	{ "durability", set_durability },
	{ "commit", set_commit },
	{ "compute_servers", set_compute_servers },
	{ "timeout_ms", set_timeout_ms },
	{ "lease_ms", set_lease_ms },
	{ "secret_file", set_secret_file },
	{ "max_clients", set_max_clients },
	{ "cluster_id", set_cluster_id },
	{ "replicas", set_replicas },
	{ "coordinator", set_coordinator },
};

static const struct { const char *name; server_set_fn set; } server_keys[] = {
	{ "listen", set_listen },
	{ "threads", set_threads },
	{ "memory", set_memory },
	{ "data_dir", set_data_dir },
	{ "capacity", set_capacity },
	{ "page_writers", set_page_writers },
};
#define KEY_LISTEN 0

/* Set key in [cluster] (server < 0) or in servers[server]; *idx = key index. */
static int set_key(struct lotus_config *c, int server, const char *key, const char *value,
		   const char **why, int *idx)
{
	const char *dummy;
	if (!why)
		why = &dummy;
	*why = "unknown key";
	if (server < 0) {
		for (size_t i = 0; i < ARRAY_SIZE(cluster_keys); i++) {
			if (strcmp(key, cluster_keys[i].name) == 0) {
				*idx = (int)i;
				return cluster_keys[i].set(c, value, why);
			}
		}
		return -ENOENT;
	}
	for (size_t i = 0; i < ARRAY_SIZE(server_keys); i++) {
		if (strcmp(key, server_keys[i].name) == 0) {
			*idx = (int)i;
			return server_keys[i].set(&c->servers[server], value, why);
		}
	}
	return -ENOENT;
}

int config_set(struct lotus_config *c, int server, const char *key, const char *value,
	       const char **why)
{
	int idx;
	if (server >= (int)c->nservers) {
		if (why)
			*why = "no such memory server";
		return -ENOENT;
	}
	return set_key(c, server, key, value, why, &idx);
}

int config_find_server(const struct lotus_config *c, unsigned id)
{
	for (unsigned i = 0; i < c->nservers; i++)
		if (c->servers[i].id == id)
			return (int)i;
	return -ENOENT;
}

/* ---- the reader ------------------------------------------------------- */

#define SECT_NONE    (-2)
#define SECT_CLUSTER (-1)

struct parse {
	const char *path;
	unsigned line;
	int sect;                               /* SECT_* or a server id */
	unsigned keys_seen;                     /* bit per key of this section */
	bool cluster_seen;
	unsigned replicas_line;                 /* the line of 'replicas =' (0: none) */
	bool seen[LOTUS_MAX_SERVERS];
	unsigned sect_line[LOTUS_MAX_SERVERS];
	unsigned listen_line[LOTUS_MAX_SERVERS];
};

__attribute__((format(printf, 3, 4)))
static int fail(const char *path, unsigned line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line)
		fprintf(stderr, "lotus: %s:%u: %s\n", path, line, msg);
	else
		fprintf(stderr, "lotus: %s: %s\n", path, msg);
	return LOTUS_ECONFIG;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' ||
		     s[n - 1] == '\n'))
		s[--n] = 0;
	return s;
}

/* A comment starts with '#' or ';' at the start of the line or after a blank. */
static void strip_comment(char *s)
{
	for (char *p = s; *p; p++) {
		if ((*p == '#' || *p == ';') && (p == s || p[-1] == ' ' || p[-1] == '\t')) {
			*p = 0;
			return;
		}
	}
}

static int parse_section(struct parse *ps, struct lotus_config *c, char *s)
{
	size_t n = strlen(s);
	if (s[n - 1] != ']')
		return fail(ps->path, ps->line, "section header without ']'");
	s[n - 1] = 0;
	char *name = trim(s + 1);
	ps->keys_seen = 0;
	if (strcmp(name, "cluster") == 0) {
		if (ps->cluster_seen)
			return fail(ps->path, ps->line, "duplicate [cluster] section");
		ps->cluster_seen = true;
		ps->sect = SECT_CLUSTER;
		return 0;
	}
	if (strncmp(name, "memserver", 9) != 0 || (name[9] != ' ' && name[9] != '\t'))
		return fail(ps->path, ps->line, "unknown section [%s]%s", name,
			    strcmp(name, "memserver") == 0 ? " (expected [memserver ID])" : "");
	char *idstr = trim(name + 9);
	uint64_t id;
	if (parse_u64(idstr, &id))
		return fail(ps->path, ps->line, "bad memory server id '%s'", idstr);
	if (id >= LOTUS_MAX_SERVERS)
		return fail(ps->path, ps->line, "memory server id %llu too large (at most %d)",
			    (unsigned long long)id, LOTUS_MAX_SERVERS - 1);
	if (ps->seen[id])
		return fail(ps->path, ps->line, "duplicate memory server id %llu (first at line %u)",
			    (unsigned long long)id, ps->sect_line[id]);
	ps->seen[id] = true;
	ps->sect_line[id] = ps->line;
	ps->sect = (int)id;
	server_defaults(&c->servers[id], (unsigned)id);
	return 0;
}

static int parse_assignment(struct parse *ps, struct lotus_config *c, char *s)
{
	char *eq = strchr(s, '=');
	if (!eq)
		return fail(ps->path, ps->line, "expected 'key = value' or '[section]'");
	*eq = 0;
	char *key = trim(s), *value = trim(eq + 1);
	if (!*key)
		return fail(ps->path, ps->line, "missing key before '='");
	if (ps->sect == SECT_NONE)
		return fail(ps->path, ps->line, "key '%s' outside a section", key);
	char where[32];
	if (ps->sect == SECT_CLUSTER)
		snprintf(where, sizeof(where), "[cluster]");
	else
		snprintf(where, sizeof(where), "[memserver %d]", ps->sect);
	if (!*value)
		return fail(ps->path, ps->line, "empty value for '%s'", key);

	const char *why = "";
	int idx = -1;
	int rc = set_key(c, ps->sect, key, value, &why, &idx);
	if (rc == -ENOENT)
		return fail(ps->path, ps->line, "unknown key '%s' in %s", key, where);
	if (ps->keys_seen & (1u << idx))
		return fail(ps->path, ps->line, "duplicate key '%s' in %s", key, where);
	if (rc)
		return fail(ps->path, ps->line, "bad value '%s' for '%s': %s", value, key, why);
	ps->keys_seen |= 1u << idx;
	if (ps->sect == SECT_CLUSTER && !strcmp(key, "replicas"))
		ps->replicas_line = ps->line;
	if (ps->sect >= 0 && idx == KEY_LISTEN)
		ps->listen_line[ps->sect] = ps->line;
	return 0;
}

/* Whole-file checks, after the last line has been read. */
static int check_servers(struct parse *ps, struct lotus_config *c)
{
	unsigned n = 0;
	for (unsigned id = 0; id < LOTUS_MAX_SERVERS; id++)
		n += ps->seen[id];
	if (n == 0)
		return fail(ps->path, 0, "no [memserver ID] section");
	for (unsigned id = 0; id < LOTUS_MAX_SERVERS; id++) {
		if (!ps->seen[id] || id < n)
			continue;
		unsigned missing = 0;
		while (ps->seen[missing])
			missing++;
		return fail(ps->path, ps->sect_line[id],
			    "memory server ids must be 0..%u: [memserver %u] given but "
			    "[memserver %u] is missing", n - 1, id, missing);
	}
	for (unsigned id = 0; id < n; id++) {
		struct lotus_server_config *s = &c->servers[id];
		if (!ps->listen_line[id])
			return fail(ps->path, ps->sect_line[id],
				    "[memserver %u] has no 'listen' address", id);
		for (unsigned j = 0; j < id; j++) {
			if (c->servers[j].port == s->port &&
			    strcmp(c->servers[j].host, s->host) == 0)
				return fail(ps->path, ps->listen_line[id],
					    "[memserver %u] listens on %s:%u like [memserver %u]",
					    id, s->host, s->port, j);
		}
	}
	c->nservers = n;
	unsigned r = config_replicas(c);
	if (n % r)
		return fail(ps->path, ps->replicas_line, "replicas = %u does not divide the %u "
			    "memory servers (partition p is servers p*%u .. p*%u+%u)", r, n, r, r,
			    r - 1);
	if (r > 1 && !c->coordinator[0])
		return fail(ps->path, ps->replicas_line, "replicas = %u needs a coordinator: "
			    "coordinator = HOST:PORT[,HOST:PORT...] in [cluster], the ZooKeeper "
			    "ensemble that holds the partitions' configuration", r);
	return 0;
}

/* p (a field of PATH_MAX bytes) relative to the directory of the config
 * file at path, unless absolute or empty.  0, or LOTUS_ECONFIG (logged). */
static int resolve_path(const char *path, const char *key, char *p)
{
	const char *slash = strrchr(path, '/');
	char full[sizeof(((struct lotus_config *)0)->secret_file)] = "";  /* zeroed: configs compare whole */
	if (!p[0] || p[0] == '/' || !slash)
		return 0;
	int n = snprintf(full, sizeof(full), "%.*s/%s", (int)(slash - path), path, p);
	if (n < 0 || (size_t)n >= sizeof(full))
		return fail(path, 0, "%s: path too long", key);
	memcpy(p, full, sizeof(full));
	return 0;
}

int config_load(const char *path, struct lotus_config *out)
{
	struct parse ps = { .path = path, .sect = SECT_NONE };
	char *buf = NULL;
	size_t cap = 0;
	int rc = 0;

	config_defaults(out);
	FILE *f = fopen(path, "r");
	if (!f)
		return fail(path, 0, "%s", strerror(errno));
	while (getline(&buf, &cap, f) >= 0) {
		ps.line++;
		strip_comment(buf);
		char *s = trim(buf);
		if (!*s)
			continue;
		rc = *s == '[' ? parse_section(&ps, out, s) : parse_assignment(&ps, out, s);
		if (rc)
			goto out;
	}
	if (ferror(f)) {
		rc = fail(path, ps.line + 1, "%s", strerror(errno));
		goto out;
	}
	rc = check_servers(&ps, out);
	/* Relative paths in the file are relative to the file's directory. */
	if (rc == 0)
		rc = resolve_path(path, "secret_file", out->secret_file);
	for (unsigned i = 0; rc == 0 && i < out->nservers; i++)
		rc = resolve_path(path, "data_dir", out->servers[i].data_dir);
out:
	free(buf);
	fclose(f);
	return rc;
}

/* ---- the writer ------------------------------------------------------- */

const char *config_format_size(uint64_t v, char *buf, size_t len)
{
	static const char sfx[] = "KMGT";
	int unit = -1;
	while (unit < 3 && v && (v & 1023) == 0) {
		v >>= 10;
		unit++;
	}
	if (unit < 0)
		snprintf(buf, len, "%llu", (unsigned long long)v);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)v, sfx[unit]);
	return buf;
}

int config_write(FILE *f, const struct lotus_config *c)
{
	char mem[32];
	fprintf(f, "# lotus cluster configuration\n[cluster]\n"
		"transport = %s\ncc = %s\ndurability = %s\ncommit = %s\ncompute_servers = %u\n",
		c->transport, config_cc_name(c->cc), config_durability_name(c->durability),
		config_commit_name(c->commit), c->compute_servers);
	if (c->timeout_ms)
		fprintf(f, "timeout_ms = %u\n", c->timeout_ms);
	if (c->lease_ms)
		fprintf(f, "lease_ms = %u\n", c->lease_ms);
	if (c->secret_file[0])
		fprintf(f, "secret_file = %s\n", c->secret_file);
	if (c->max_clients)
		fprintf(f, "max_clients = %u\n", c->max_clients);
	if (c->cluster_id)
		fprintf(f, "cluster_id = %016llx\n", (unsigned long long)c->cluster_id);
	if (c->replicas)
		fprintf(f, "replicas = %u\n", c->replicas);
	if (c->coordinator[0])
		fprintf(f, "coordinator = %s\n", c->coordinator);
	for (unsigned i = 0; i < c->nservers; i++) {
		const struct lotus_server_config *s = &c->servers[i];
		config_format_size(s->memory, mem, sizeof(mem));
		fprintf(f, "\n[memserver %u]\nlisten = %s:%u\nthreads = %u\nmemory = %s\n",
			s->id, s->host, s->port, s->threads, mem);
		if (s->data_dir[0])
			fprintf(f, "data_dir = %s\n", s->data_dir);
		if (s->capacity) {
			config_format_size(s->capacity, mem, sizeof(mem));
			fprintf(f, "capacity = %s\n", mem);
		}
		if (s->page_writers)
			fprintf(f, "page_writers = %u\n", s->page_writers);
	}
	return fflush(f) || ferror(f) ? -EIO : 0;
}
