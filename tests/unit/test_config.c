/*
 * test_config - a good cluster file parses to the expected struct and
 * survives a config_write/config_load round trip; every kind of error returns
 * LOTUS_ECONFIG and prints exactly one line naming the file and the line.
 * stderr is redirected to a temporary file to read the message back.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/config.h"
#include "check.h"


static char dir[] = "/tmp/lotus-test-config.XXXXXX";
static char cfg_path[256], err_path[256];
static int saved_stderr = -1;

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f)) {
		perror(path);
		exit(1);
	}
}

/* Load text as a config file with stderr captured into msg. */
static int load_text(const char *text, struct lotus_config *c, char *msg, size_t len)
{
	write_file(cfg_path, text);
	fflush(stderr);
	int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	dup2(fd, 2);
	close(fd);
	int rc = config_load(cfg_path, c);
	fflush(stderr);
	dup2(saved_stderr, 2);

	FILE *f = fopen(err_path, "r");
	size_t n = f ? fread(msg, 1, len - 1, f) : 0;
	msg[n] = 0;
	if (f)
		fclose(f);
	return rc;
}

static const char good[] =
	"# a two-server cluster\n"
	"[cluster]\n"
	"transport = rc          ; RDMA\n"
	"cc = wound_wait\n"
	"durability = sync\n"
	"compute_servers = 3\n"
	"lease_ms = 1500\n"
	"secret_file = cluster.key   ; relative to the file\n"
	"max_clients = 100\n"
	"cluster_id = prod-east\n"
	"replicas = 2\n"
	"coordinator = zk1:2181,10.0.0.9:2182\n"
	"\n"
	"  [memserver 1]   # order does not matter\n"
	"listen = 10.0.0.2:7001\n"
	"threads = 4\n"
	"memory = 512M\n"
	"data_dir = data/ms1          ; relative to the file too\n"
	"\n"
	"[memserver 0]\n"
	"listen=10.0.0.1:7000\n"
	"threads = 8\n"
	"memory = 16G\n"
	"data_dir = /var/lib/lotus/ms#0\n";

static void test_good(void)
{
	struct lotus_config c, d;
	char msg[1024];
	int rc = load_text(good, &c, msg, sizeof(msg));
	CHECK(rc == 0, "good file: rc %d, stderr '%s'", rc, msg);
	CHECK(msg[0] == 0, "good file printed '%s'", msg);
	CHECK(strcmp(c.transport, "rc") == 0, "transport %s", c.transport);
	CHECK(c.cc == LOTUS_WOUND_WAIT && c.durability == LOTUS_DUR_SYNC, "cc/durability");
	CHECK(c.compute_servers == 3 && c.nservers == 2, "counts %u %u",
	      c.compute_servers, c.nservers);
	CHECK(c.lease_ms == 1500, "lease_ms %u", c.lease_ms);
	CHECK(c.servers[0].id == 0 && strcmp(c.servers[0].host, "10.0.0.1") == 0 &&
	      c.servers[0].port == 7000 && c.servers[0].threads == 8 &&
	      c.servers[0].memory == 16ULL << 30 &&
	      strcmp(c.servers[0].data_dir, "/var/lib/lotus/ms#0") == 0, "server 0");
	CHECK(c.servers[1].id == 1 && strcmp(c.servers[1].host, "10.0.0.2") == 0 &&
	      c.servers[1].port == 7001 && c.servers[1].threads == 4 &&
	      c.servers[1].memory == 512ULL << 20, "server 1");
	CHECK(config_find_server(&c, 1) == 1 && config_find_server(&c, 2) == -ENOENT,
	      "find_server");
	char key[512];
	snprintf(key, sizeof(key), "%s/cluster.key", dir);
	CHECK(strcmp(c.secret_file, key) == 0, "secret_file '%s', want '%s'", c.secret_file, key);
	CHECK(c.max_clients == 100, "max_clients %u", c.max_clients);
	CHECK(c.replicas == 2 && config_replicas(&c) == 2 && config_partitions(&c) == 1 &&
	      strcmp(c.coordinator, "zk1:2181,10.0.0.9:2182") == 0, "replicas %u coordinator '%s'",
	      c.replicas, c.coordinator);
	snprintf(key, sizeof(key), "%s/data/ms1", dir);
	CHECK(strcmp(c.servers[1].data_dir, key) == 0, "data_dir '%s', want '%s'",
	      c.servers[1].data_dir, key);
	uint64_t cid = 0, hex = 0;
	CHECK(config_parse_cluster_id("prod-east", &cid) == 0 && cid && c.cluster_id == cid,
	      "cluster_id %llx", (unsigned long long)c.cluster_id);
	CHECK(config_parse_cluster_id("00000000000000ff", &hex) == 0 && hex == 0xff, "hex id");
	CHECK(config_parse_cluster_id("0000000000000000", &hex) == -EINVAL &&
	      config_parse_cluster_id("", &hex) == -EINVAL &&
	      config_parse_cluster_id("a b", &hex) == -EINVAL && hex == 0xff, "bad ids");

	/* Flags override the file. */
	const char *why = NULL;
	CHECK(config_set(&c, -1, "cc", "wait_die", &why) == 0 && c.cc == LOTUS_WAIT_DIE,
	      "set cc");
	CHECK(config_set(&c, 1, "memory", "2G", &why) == 0 && c.servers[1].memory == 2ULL << 30,
	      "set memory");
	CHECK(config_set(&c, -1, "cc", "lazy", &why) == -EINVAL && why && *why, "bad cc");
	CHECK(config_set(&c, -1, "colour", "red", &why) == -ENOENT, "unknown key");
	CHECK(config_set(&c, 5, "threads", "1", &why) == -ENOENT, "no server 5");
	CHECK(config_set(&c, 1, "capacity", "8G", &why) == 0 && c.servers[1].capacity == 8ULL << 30,
	      "set capacity");
	CHECK(config_set(&c, 1, "page_writers", "3", &why) == 0 && c.servers[1].page_writers == 3,
	      "set page_writers");
	CHECK(config_set(&c, 1, "page_writers", "65", &why) == -EINVAL && why && *why,
	      "page_writers 65");
	CHECK(config_set(&c, 1, "capacity", "huge", &why) != 0, "bad capacity");

	/* Round trip through config_write. */
	char text[8192];
	FILE *m = fmemopen(text, sizeof(text), "w");
	CHECK(m && config_write(m, &c) == 0, "config_write");
	if (m)
		fclose(m);
	rc = load_text(text, &d, msg, sizeof(msg));
	CHECK(rc == 0, "round trip: rc %d '%s'\n%s", rc, msg, text);
	CHECK(memcmp(&c, &d, sizeof(c)) == 0, "round trip differs:\n%s", text);

	/* Defaults: one server with only a listen address. */
	rc = load_text("[memserver 0]\nlisten = localhost:7000\n", &c, msg, sizeof(msg));
	CHECK(rc == 0 && c.nservers == 1 && strcmp(c.transport, "tcp") == 0 &&
	      c.cc == LOTUS_NO_WAIT && c.durability == LOTUS_DUR_NONE &&
	      c.compute_servers == 1 && c.servers[0].threads == 0 &&
	      c.servers[0].memory == CONFIG_DEFAULT_MEMORY, "defaults");
	CHECK(config_replicas(&c) == 1 && config_partitions(&c) == 1 && !c.coordinator[0],
	      "default: no replication, no coordinator");
	/* A coordinator without replication is allowed (and unused). */
	rc = load_text("[cluster]\ncoordinator = zk:2181\nreplicas = 1\n[memserver 0]\n"
		       "listen = a:1\n[memserver 1]\nlisten = a:2\n", &c, msg, sizeof(msg));
	CHECK(rc == 0 && config_replicas(&c) == 1 && config_partitions(&c) == 2, "replicas = 1");
}

/* Each bad file must fail with one line "lotus: PATH:LINE: ..." containing what. */
static void expect_error(const char *text, unsigned line, const char *what)
{
	struct lotus_config c;
	char msg[1024], prefix[300];
	int rc = load_text(text, &c, msg, sizeof(msg));
	if (line)
		snprintf(prefix, sizeof(prefix), "lotus: %s:%u: ", cfg_path, line);
	else
		snprintf(prefix, sizeof(prefix), "lotus: %s: ", cfg_path);
	char *nl = strchr(msg, '\n');
	CHECK(rc == LOTUS_ECONFIG, "[%s] rc %d", what, rc);
	CHECK(strncmp(msg, prefix, strlen(prefix)) == 0, "[%s] message '%s' lacks '%s'",
	      what, msg, prefix);
	CHECK(nl && nl[1] == 0, "[%s] not exactly one line: '%s'", what, msg);
	CHECK(strstr(msg, what) != NULL, "[%s] message '%s'", what, msg);
	printf("  %s", msg);
}

static void test_errors(void)
{
	expect_error("[cluster]\ntransport = tcp\ncolour = red\n[memserver 0]\nlisten = a:1\n",
		     3, "unknown key 'colour'");
	expect_error("[cluster]\n\n\ncc = sometimes\n", 4, "bad value 'sometimes' for 'cc'");
	expect_error("[cluster]\ntransport = carrier-pigeon\n", 2, "bad value");
	expect_error("[cluster]\nlease_ms = 10\n", 2, "for 'lease_ms'");
	expect_error("[cluster]\nmax_clients = -1\n", 2, "bad value");
	expect_error("[cluster]\nmax_clients = lots\n", 2, "bad value");
	expect_error("[memserver 0]\nlisten = a:1\nmemory = lots\n", 3, "for 'memory'");
	expect_error("[memserver 0]\nlisten = a:1\nthreads = -1\n", 3, "for 'threads'");
	expect_error("[memserver 0]\nlisten = nohost\n", 2, "for 'listen'");
	expect_error("[memserver 0]\nlisten = a:70000\n", 2, "for 'listen'");
	expect_error("[memserver 0]\nlisten = a:0\n", 2, "for 'listen'");
	expect_error("[memserver 0]\nlisten = a:1\n[memserver 0]\nlisten = b:1\n", 3,
		     "duplicate memory server id 0 (first at line 1)");
	expect_error("[memserver 0]\nlisten = a:1\n\n[memserver 1]\nthreads = 2\n", 4,
		     "[memserver 1] has no 'listen'");
	expect_error("[memserver 0]\nlisten = a:1\n[memserver 2]\nlisten = b:1\n", 3,
		     "[memserver 1] is missing");
	expect_error("[memserver 1]\nlisten = a:1\n", 1, "[memserver 0] is missing");
	expect_error("[memserver 0]\nlisten = a:1\n[memserver 1]\nlisten = a:1\n", 4,
		     "like [memserver 0]");
	expect_error("[memserver 0]\nlisten = a:1\nlisten = b:1\n", 3, "duplicate key 'listen'");
	expect_error("listen = a:1\n", 1, "outside a section");
	expect_error("[cluster]\njunk\n", 2, "expected 'key = value'");
	expect_error("[clusters]\n", 1, "unknown section [clusters]");
	expect_error("[memserver x]\n", 1, "bad memory server id 'x'");
	expect_error("[memserver 64]\n", 1, "too large");
	expect_error("[cluster\n", 1, "without ']'");
	expect_error("[cluster]\ncc =\n", 2, "empty value for 'cc'");
	expect_error("# nothing\n[cluster]\n", 0, "no [memserver ID] section");
	/* Replication (docs/replication.md). */
	expect_error("[cluster]\nreplicas = 0\n", 2, "for 'replicas'");
	expect_error("[cluster]\nreplicas = 17\n", 2, "for 'replicas'");
	expect_error("[cluster]\ncoordinator = zk\n", 2, "for 'coordinator'");
	expect_error("[cluster]\ncoordinator = zk:1,,zk:2\n", 2, "for 'coordinator'");
	expect_error("[cluster]\ncoordinator = zk:1,\n", 2, "for 'coordinator'");
	expect_error("[cluster]\ncoordinator = zk:0\n", 2, "for 'coordinator'");
	expect_error("[cluster]\ncoordinator = zk:1\nreplicas = 2\n[memserver 0]\nlisten = a:1\n"
		     "[memserver 1]\nlisten = a:2\n[memserver 2]\nlisten = a:3\n", 3,
		     "replicas = 2 does not divide the 3 memory servers");
	expect_error("[cluster]\n\nreplicas = 2\n[memserver 0]\nlisten = a:1\n"
		     "[memserver 1]\nlisten = a:2\n", 3, "replicas = 2 needs a coordinator");

	/* Unreadable file. */
	struct lotus_config c;
	char msg[1024], want[400];
	unlink(cfg_path);
	fflush(stderr);
	int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	dup2(fd, 2);
	close(fd);
	int rc = config_load(cfg_path, &c);
	fflush(stderr);
	dup2(saved_stderr, 2);
	FILE *f = fopen(err_path, "r");
	size_t n = f ? fread(msg, 1, sizeof(msg) - 1, f) : 0;
	msg[n] = 0;
	if (f)
		fclose(f);
	snprintf(want, sizeof(want), "lotus: %s: No such file or directory\n", cfg_path);
	CHECK(rc == LOTUS_ECONFIG && strcmp(msg, want) == 0, "missing file: '%s'", msg);
	printf("  %s", msg);
}

static void cleanup(void)
{
	if (saved_stderr >= 0)
		dup2(saved_stderr, 2);
	unlink(cfg_path);
	unlink(err_path);
	rmdir(dir);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 77;
	}
	snprintf(cfg_path, sizeof(cfg_path), "%s/cluster.ini", dir);
	snprintf(err_path, sizeof(err_path), "%s/stderr", dir);
	saved_stderr = dup(2);
	check_cleanup = cleanup;

	test_good();
	test_errors();

	cleanup();
	printf("test_config: ok\n");
	return 0;
}
