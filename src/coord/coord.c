/*
 * coord.c - the coordinator over the ZooKeeper C client (coord.h).
 *
 * One session per handle (the multi-threaded client: its I/O and completion
 * threads run the watcher, which only records the session state).  Every call
 * here is synchronous; a call made while the connection is lost fails with
 * ZooKeeper's reason and the caller decides.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "coord/coord.h"

static int fmt_ids(char *buf, size_t len, size_t *off, const char *name, const unsigned *ids,
		   unsigned n)
{
	int k = snprintf(buf + *off, len - *off, "%s\"%s\":[", *off > 1 ? "," : "", name);
	if (k < 0 || (size_t)k >= len - *off)
		return -EINVAL;
	*off += (size_t)k;
	for (unsigned i = 0; i < n; i++) {
		k = snprintf(buf + *off, len - *off, "%s%u", i ? "," : "", ids[i]);
		if (k < 0 || (size_t)k >= len - *off)
			return -EINVAL;
		*off += (size_t)k;
	}
	k = snprintf(buf + *off, len - *off, "]");
	if (k < 0 || (size_t)k >= len - *off)
		return -EINVAL;
	*off += (size_t)k;
	return 0;
}

int coord_partition_format(const struct coord_partition *part, char *buf, size_t len)
{
	size_t off;
	int n = snprintf(buf, len, "{\"epoch\":%" PRIu64 ",\"primary\":%u", part->epoch,
			 part->primary);
	if (n < 0 || (size_t)n >= len)
		return -EINVAL;
	off = (size_t)n;
	if (fmt_ids(buf, len, &off, "members", part->members, part->nmembers) ||
	    fmt_ids(buf, len, &off, "insync", part->insync, part->ninsync))
		return -EINVAL;
	n = snprintf(buf + off, len - off, "}");
	return n < 0 || (size_t)n >= len - off ? -EINVAL : (int)(off + (size_t)n);
}

/* "N,N,...]" at *s into ids; *s moves past the ']'. */
static int parse_ids(const char **s, unsigned *ids, unsigned *n)
{
	const char *p = *s;
	*n = 0;
	while (*p != ']') {
		char *end;
		unsigned long v = strtoul(p, &end, 10);
		if (end == p || v >= LOTUS_MAX_SERVERS || *n == CONFIG_MAX_REPLICAS)
			return -EINVAL;
		ids[(*n)++] = (unsigned)v;
		p = end;
		if (*p == ',')
			p++;
		else if (*p != ']')
			return -EINVAL;
	}
	*s = p + 1;
	return 0;
}

int coord_partition_parse(const char *s, struct coord_partition *part)
{
	unsigned long long epoch;
	unsigned primary;
	int pos = 0;
	struct coord_partition p = { 0 };
	if (sscanf(s, "{\"epoch\":%llu,\"primary\":%u,\"members\":[%n", &epoch, &primary,
		   &pos) != 2 || pos == 0)
		return -EINVAL;
	p.epoch = epoch;
	p.primary = primary;
	s += pos;
	if (parse_ids(&s, p.members, &p.nmembers) || p.nmembers == 0)
		return -EINVAL;
	if (strncmp(s, ",\"insync\":[", 11) == 0) {
		s += 11;
		if (parse_ids(&s, p.insync, &p.ninsync))
			return -EINVAL;
	} else {   /* written before the in-sync set: every member */
		memcpy(p.insync, p.members, sizeof(p.insync));
		p.ninsync = p.nmembers;
	}
	if (strcmp(s, "}") != 0)
		return -EINVAL;
	*part = p;
	return 0;
}

int coord_partition_insync(const struct coord_partition *part, unsigned id)
{
	for (unsigned i = 0; i < part->ninsync; i++)
		if (part->insync[i] == id)
			return 1;
	return 0;
}

#ifdef LOTUS_HAVE_ZK
#define THREADED   /* the multi-threaded client: its synchronous calls */
#include <zookeeper/zookeeper.h>

/* Weak: a program linking the static liblotus.a needs -lzookeeper_mt only if
 * it uses replication (pkg-config --static lists it); without it these are
 * NULL and coord_open() says so.  The lotus binary and liblotus.so link it. */
#pragma weak zookeeper_init
#pragma weak zookeeper_close
#pragma weak zoo_set_debug_level
#pragma weak zoo_recv_timeout
#pragma weak zoo_get
#pragma weak zoo_create
#pragma weak zoo_set
#pragma weak zoo_exists
#pragma weak zerror
#pragma weak ZOO_OPEN_ACL_UNSAFE
#pragma weak ZOO_PERSISTENT
#pragma weak ZOO_EPHEMERAL
#pragma weak ZOO_SESSION_EVENT
#pragma weak ZOO_CONNECTED_STATE
#pragma weak ZOO_CONNECTING_STATE
#pragma weak ZOO_EXPIRED_SESSION_STATE

struct coord {
	zhandle_t *zh;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int connected;
	int expired;
	int lost;            /* the connection was lost (said once, until back) */
};

int coord_available(void)
{
	return zookeeper_init != NULL;
}

static void coord_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	struct coord *co = ctx;
	if (type != ZOO_SESSION_EVENT || !co)
		return;
	pthread_mutex_lock(&co->mu);
	if (state == ZOO_CONNECTED_STATE) {
		if (co->lost)
			log_info("coordinator: connected to ZooKeeper again, same session");
		co->connected = 1;
		co->lost = 0;
	} else if (state == ZOO_CONNECTING_STATE) {
		if (co->connected && !co->lost)
			log_warn("coordinator: lost the connection to ZooKeeper; retrying (within "
				 "the session timeout the session and its znodes survive)");
		co->lost |= co->connected;
		co->connected = 0;
	} else if (state == ZOO_EXPIRED_SESSION_STATE) {
		if (!co->expired)
			log_warn("ZooKeeper expired this process's session: its ephemeral znodes "
				 "are gone");
		co->expired = 1;
		co->connected = 0;
	} else {
		co->connected = 0;
	}
	pthread_cond_broadcast(&co->cv);
	pthread_mutex_unlock(&co->mu);
}

int coord_open(const char *hosts, unsigned session_ms, unsigned wait_ms, coord_t **out)
{
	if (!coord_available()) {
		log_error("replicas > 1 needs the ZooKeeper C client, and this program was "
			  "linked without it: link with -lzookeeper_mt (pkg-config --static "
			  "--libs lotus lists it)");
		return LOTUS_ECONFIG;
	}
	struct coord *co = calloc(1, sizeof(*co));
	if (!co)
		return -ENOMEM;
	pthread_mutex_init(&co->mu, NULL);
	pthread_cond_init(&co->cv, NULL);
	/* The client library's own log says every failed retry (one line each
	 * few ms while the ensemble is away): off; the watcher says what matters. */
	zoo_set_debug_level((ZooLogLevel)0);
	co->zh = zookeeper_init(hosts, coord_watcher, (int)session_ms, NULL, co, 0);
	if (!co->zh) {
		log_error("coordinator %s: %s", hosts, strerror(errno));
		coord_close(co);
		return LOTUS_ECONFIG;
	}
	uint64_t deadline = clock_now_ns() + (uint64_t)wait_ms * 1000000ULL;
	pthread_mutex_lock(&co->mu);
	while (!co->connected && !co->expired && clock_now_ns() < deadline) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&co->cv, &co->mu, &ts);
	}
	int ok = co->connected;
	pthread_mutex_unlock(&co->mu);
	if (!ok) {
		log_error("coordinator %s: no ZooKeeper session within %u ms (is the ensemble "
			  "running?)", hosts, wait_ms);
		coord_close(co);
		return LOTUS_EUNAVAIL;
	}
	*out = co;
	return 0;
}

void coord_close(coord_t *co)
{
	if (!co)
		return;
	if (co->zh)
		zookeeper_close(co->zh);
	pthread_cond_destroy(&co->cv);
	pthread_mutex_destroy(&co->mu);
	free(co);
}

unsigned coord_session_ms(const coord_t *co)
{
	return (unsigned)zoo_recv_timeout(co->zh);
}

int coord_expired(const coord_t *co)
{
	struct coord *c = (struct coord *)co;
	pthread_mutex_lock(&c->mu);
	int e = c->expired;
	pthread_mutex_unlock(&c->mu);
	return e;
}

static int zk_fail(const char *what, const char *path, int zrc)
{
	log_error("coordinator: %s %s: %s", what, path, zerror(zrc));
	return zrc == ZCONNECTIONLOSS || zrc == ZOPERATIONTIMEOUT ? LOTUS_EUNAVAIL : -EIO;
}

/* Create a persistent znode unless it exists. */
static int zk_ensure(coord_t *co, const char *path)
{
	int zrc = zoo_create(co->zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT,
			     NULL, 0);
	return zrc == ZOK || zrc == ZNODEEXISTS ? 0 : zk_fail("create", path, zrc);
}

int coord_get_partition(coord_t *co, uint64_t cluster_id, unsigned p,
			struct coord_partition *part)
{
	return coord_get_partition_v(co, cluster_id, p, part, NULL);
}

int coord_get_partition_v(coord_t *co, uint64_t cluster_id, unsigned p,
			  struct coord_partition *part, int *version)
{
	char path[128], buf[512];
	int len = (int)sizeof(buf) - 1;
	struct Stat st;
	snprintf(path, sizeof(path), "/lotus/%016" PRIx64 "/partitions/%u", cluster_id, p);
	int zrc = zoo_get(co->zh, path, 0, buf, &len, &st);
	if (zrc == ZOK && version)
		*version = st.version;
	if (zrc == ZNONODE)
		return -ENOENT;
	if (zrc != ZOK)
		return zk_fail("read", path, zrc);
	buf[len < 0 ? 0 : len] = 0;
	if (coord_partition_parse(buf, part)) {
		log_error("coordinator: %s holds '%s', not a partition's configuration", path, buf);
		return -EIO;
	}
	return 0;
}

int coord_set_partition(coord_t *co, uint64_t cluster_id, unsigned p,
			const struct coord_partition *part, int version)
{
	char path[128], data[512];
	snprintf(path, sizeof(path), "/lotus/%016" PRIx64 "/partitions/%u", cluster_id, p);
	int n = coord_partition_format(part, data, sizeof(data));
	if (n < 0)
		return n;
	int zrc = zoo_set(co->zh, path, data, n, version);
	if (zrc == ZBADVERSION)
		return -ESTALE;
	if (zrc != ZOK)
		return zk_fail("update", path, zrc);
	log_info("coordinator: %s is now %s", path, data);
	return 0;
}

int coord_server_addr(coord_t *co, uint64_t cluster_id, unsigned id, char *host, size_t hlen,
		      uint16_t *port)
{
	char path[128], buf[512];
	int len = (int)sizeof(buf) - 1;
	snprintf(path, sizeof(path), "/lotus/%016" PRIx64 "/servers/%u", cluster_id, id);
	int zrc = zoo_get(co->zh, path, 0, buf, &len, NULL);
	if (zrc == ZNONODE)
		return -ENOENT;
	if (zrc != ZOK)
		return zrc == ZCONNECTIONLOSS || zrc == ZOPERATIONTIMEOUT ? LOTUS_EUNAVAIL : -EIO;
	buf[len < 0 ? 0 : len] = 0;
	char h[256];
	unsigned pt;
	if (sscanf(buf, "{\"host\":\"%255[^\"]\",\"port\":%u", h, &pt) != 2 || pt > 65535)
		return -EIO;
	snprintf(host, hlen, "%s", h);
	*port = (uint16_t)pt;
	return 0;
}

int coord_register_server(coord_t *co, unsigned replicas, uint64_t cluster_id,
			  unsigned id, const char *host, uint16_t port, unsigned wait_ms,
			  struct coord_partition *part)
{
	unsigned r = replicas > 1 ? replicas : 1, p = id / r;
	char path[128], data[512];
	struct coord_partition want = { .epoch = 1, .primary = p * r, .nmembers = r,
					.ninsync = r };
	for (unsigned i = 0; i < r; i++)
		want.members[i] = want.insync[i] = p * r + i;
	const char *dirs[] = { "/lotus", "", "", "" };
	char root[64], parts[80], servers[80];
	snprintf(root, sizeof(root), "/lotus/%016" PRIx64, cluster_id);
	snprintf(parts, sizeof(parts), "%s/partitions", root);
	snprintf(servers, sizeof(servers), "%s/servers", root);
	dirs[1] = root;
	dirs[2] = parts;
	dirs[3] = servers;
	for (unsigned i = 0; i < ARRAY_SIZE(dirs); i++) {
		int rc = zk_ensure(co, dirs[i]);
		if (rc)
			return rc;
	}
	/* The partition's configuration: exactly one creator wins. */
	snprintf(path, sizeof(path), "%s/%u", parts, p);
	int n = coord_partition_format(&want, data, sizeof(data));
	int zrc = zoo_create(co->zh, path, data, n, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT,
			     NULL, 0);
	if (zrc == ZOK)
		log_info("coordinator: created %s %s", path, data);
	else if (zrc != ZNODEEXISTS)
		return zk_fail("create", path, zrc);
	int rc = coord_get_partition(co, cluster_id, p, part);
	if (rc == -ENOENT)
		log_error("coordinator: %s vanished (deleted by hand?)", path);
	if (rc)
		return rc == -ENOENT ? -EIO : rc;
	if (part->nmembers != want.nmembers ||
	    memcmp(part->members, want.members, r * sizeof(want.members[0])) != 0) {
		coord_partition_format(part, data, sizeof(data));
		log_error("coordinator: %s holds %s, but the config's replicas = %u makes partition "
			  "%u servers %u..%u: a cluster of another shape used this coordinator "
			  "and cluster id", path, data, r, p, p * r, p * r + r - 1);
		return LOTUS_ECONFIG;
	}
	/* Liveness: an ephemeral znode under this session.  One left by an
	 * earlier session of this id (killed moments ago) goes when that
	 * session expires: wait for it. */
	snprintf(path, sizeof(path), "%s/%u", servers, id);
	n = snprintf(data, sizeof(data), "{\"host\":\"%s\",\"port\":%u,\"partition\":%u}", host,
		     port, p);
	uint64_t deadline = clock_now_ns() + (uint64_t)wait_ms * 1000000ULL;
	int said = 0;
	for (;;) {
		zrc = zoo_create(co->zh, path, data, n, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL,
				 NULL, 0);
		if (zrc == ZOK)   /* read again: a takeover may have come while we waited */
			return coord_get_partition(co, cluster_id, p, part);
		if (zrc != ZNODEEXISTS)
			return zk_fail("create", path, zrc);
		if (clock_now_ns() >= deadline) {
			log_error("coordinator: %s still exists after %u ms: another memory "
				  "server %u is live", path, wait_ms, id);
			return LOTUS_ECONFIG;
		}
		if (!said++)
			log_info("coordinator: %s exists (an earlier run of server %u); waiting for "
				 "its session to expire", path, id);
		struct timespec ts = { 0, 100 * 1000000L };
		nanosleep(&ts, NULL);
	}
}

#else   /* built without the ZooKeeper client */

int coord_available(void)
{
	return 0;
}

int coord_open(const char *hosts, unsigned session_ms, unsigned wait_ms, coord_t **out)
{
	log_error("replicas > 1 needs the ZooKeeper C client, and this lotus was built without "
		  "it: install libzookeeper-mt-dev (scripts/deps.sh) and rebuild");
	return LOTUS_ECONFIG;
}

void coord_close(coord_t *co)
{
}

unsigned coord_session_ms(const coord_t *co)
{
	return 0;
}

int coord_expired(const coord_t *co)
{
	return 0;
}

int coord_register_server(coord_t *co, unsigned replicas, uint64_t cluster_id,
			  unsigned id, const char *host, uint16_t port, unsigned wait_ms,
			  struct coord_partition *part)
{
	return LOTUS_ECONFIG;
}

int coord_get_partition(coord_t *co, uint64_t cluster_id, unsigned p,
			struct coord_partition *part)
{
	return LOTUS_ECONFIG;
}

int coord_get_partition_v(coord_t *co, uint64_t cluster_id, unsigned p,
			  struct coord_partition *part, int *version)
{
	return LOTUS_ECONFIG;
}

int coord_set_partition(coord_t *co, uint64_t cluster_id, unsigned p,
			const struct coord_partition *part, int version)
{
	return LOTUS_ECONFIG;
}

int coord_server_addr(coord_t *co, uint64_t cluster_id, unsigned id, char *host, size_t hlen,
		      uint16_t *port)
{
	return LOTUS_ECONFIG;
}

#endif
