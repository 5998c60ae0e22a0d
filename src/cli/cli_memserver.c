/*
 * cli_memserver.c - `lotus memserver`: run one memory server until SIGINT or
 * SIGTERM.  Settings come from the cluster config (--config, --id) and are
 * overridden by flags.
 *
 * Durability: --durability (else [cluster] durability) and --data-dir (else
 * the server's data_dir).  async or sync needs a data directory; a data
 * directory without a durability setting (or with the config's default none)
 * means sync; --durability none runs in memory and ignores the directory.
 *
 * Identity (memserver/identity.h): a durable server creates a database only
 * with --init, and refuses a data directory of another server or cluster.
 * Its cluster id: with --config, the config's (door_config_cluster_id:
 * cluster_id, else from the secret, else from the server list); without,
 * --cluster-id, else none: --init makes a random one and a restart adopts
 * the directory's.
 *
 * Tiering: --capacity above --memory (needs the data directory) makes the
 * buffer pool a cache of a larger page space; --page-writers threads evict.
 */
#include <errno.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "cli/cli.h"
#include "cli/opts.h"
#include "store/store.h"
#include "common/common.h"
#include "common/config.h"
#include "common/log.h"
#include "memserver/memserver.h"
#include "net/door.h"
#include "net/wire.h"

static const char *const transports[] = { "tcp", "sm", "rc", "ud", "dc", NULL };
/* index == enum lotus_durability */
static const char *const durabilities[] = { "none", "async", "sync", NULL };
/* index == enum redo_recovery */
static const char *const recovery_modes[] = { "strict", "tolerate-tail", "point-in-time", NULL };

/* Fill o's durability fields from flags and config (see the top comment).
 * 0, or 2 after a one-line usage error. */
static int memserver_durability(struct cli_opt *opts, const struct lotus_config *cfg, int si,
				const char *data_dir, int durability, uint64_t ckpt_log,
				uint64_t ckpt_ms, struct memserver_opts *o)
{
	int dur_seen = cli_find(opts, "durability")->seen;
	if (!data_dir && si >= 0 && cfg->servers[si].data_dir[0])
		data_dir = cfg->servers[si].data_dir;
	if (!dur_seen)
		durability = cfg->durability != LOTUS_DUR_NONE ? cfg->durability
			     : data_dir ? LOTUS_DUR_SYNC : LOTUS_DUR_NONE;
	if (durability != LOTUS_DUR_NONE && !data_dir)
		return cli_fail("memserver", "durability %s needs a data directory (--data-dir DIR, "
				"or data_dir in the config)", durabilities[durability]);
	if (durability == LOTUS_DUR_NONE && data_dir)
		log_warn("durability none: the data directory %s is not used", data_dir);
	o->durability = durability;
	o->data_dir = durability != LOTUS_DUR_NONE ? data_dir : NULL;
	o->checkpoint_log = ckpt_log;
	o->checkpoint_interval_ms = (unsigned)ckpt_ms;
	return 0;
}

/* --capacity and --page-writers (or capacity / page_writers in the config).
 * 0, or 2 after a one-line usage error. */
static int memserver_tiering(struct cli_opt *opts, uint64_t memory, uint64_t capacity,
			     uint64_t pwriters, struct memserver_opts *o)
{
	const char *cap = cli_find(opts, "capacity")->seen ? "--capacity" : "capacity =";
	char cs[32], ms[32];
	config_format_size(capacity, cs, sizeof(cs));
	config_format_size(memory, ms, sizeof(ms));
	if (capacity && capacity < memory)
		return cli_fail("memserver", "%s %s is less than the memory %s: the capacity is "
				"what the server holds, memory its part in DRAM (leave capacity "
				"out for a server all in memory)", cap, cs, ms);
	if (capacity > memory && !o->data_dir)
		return cli_fail("memserver", "%s %s is more than the memory %s: pages that do not "
				"fit are evicted to the data directory, so it needs --data-dir DIR "
				"(and durability async or sync)", cap, cs, ms);
	if (capacity > memory && memory < 3 * STORE_DEFAULT_PAGE)
		return cli_fail("memserver", "%s needs a memory of at least %uK (two frames for "
				"pages, one reserved), not %s", cap, 3 * STORE_DEFAULT_PAGE / 1024, ms);
	if (capacity > memory && capacity / STORE_DEFAULT_PAGE >= (1ULL << 40))
		return cli_fail("memserver", "%s %s is too large (at most %lluT)", cap, cs,
				((1ULL << 40) * STORE_DEFAULT_PAGE) >> 40);
	if (cli_find(opts, "page-writers")->seen && capacity <= memory)
		log_warn("--page-writers: no effect without a --capacity above --memory");
	o->capacity = capacity > memory ? capacity : 0;
	o->page_writers = (unsigned)pwriters;
	return 0;
}

/* Bind the listen address once ourselves before UCX does, so the common
 * mistakes (a port in use, an address of another host: usually the wrong
 * --id) get a lotus message that names them instead of UCX's log lines.
 * 0, or 1 after the message.  UCX binds again moments later; the probe only
 * explains, it reserves nothing. */
static int listen_probe(const char *host, uint16_t port, const char *config, unsigned id)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV | AI_PASSIVE }, *ai = NULL;
	char ports[8];
	int one = 1, err = 0;
	snprintf(ports, sizeof(ports), "%u", port);
	int gai = getaddrinfo(host, ports, &hints, &ai);
	if (gai) {
		fprintf(stderr, "lotus memserver: cannot resolve the listen host '%s': %s\n", host,
			gai_strerror(gai));
		return 1;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)); /* as UCX */
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0)
			err = errno;
		close(fd);
	}
	freeaddrinfo(ai);
	if (err == EADDRINUSE) {
		fprintf(stderr, "lotus memserver: %s:%u is already in use (another memory server, "
			"or another program, listens there)%s\n", host, port,
			config ? "; is --id the right server?" : "; pick another port, or 0 for any");
		return 1;
	}
	if (err == EADDRNOTAVAIL) {
		if (config)
			fprintf(stderr, "lotus memserver: [memserver %u] of %s listens on %s, which is "
				"not an address of this host: is --id %u this host's server?\n", id,
				config, host, id);
		else
			fprintf(stderr, "lotus memserver: --listen %s: not an address of this host\n",
				host);
		return 1;
	}
	if (err == EACCES) {
		fprintf(stderr, "lotus memserver: %s:%u: permission denied (ports below 1024 need "
			"privileges)\n", host, port);
		return 1;
	}
	return 0;
}

int cmd_memserver(int argc, char **argv)
{
	const char *listen = NULL, *config = NULL, *peers = NULL, *secret = NULL;
	uint64_t max_clients = 0;
	bool insecure = false;
	uint64_t id = 0, threads = 0, memory = CONFIG_DEFAULT_MEMORY, capacity = 0, pwriters = 0;
	uint64_t miss_depth = 0;
	const char *data_dir = NULL, *cluster_id = NULL, *log_file = NULL;
	bool init = false, join = false;
	uint64_t ckpt_log = 256ULL << 20, ckpt_ms = 0, lease_ms = 0;
	uint64_t max_parked = MS_DEFAULT_MAX_PARKED, max_conn_bytes = MS_DEFAULT_MAX_CONN_BYTES;
	int transport = 0, durability = 0, si = -1, recovery_mode = 0;
	bool ready_json = false;
	struct cli_opt opts[] = {
		{ "listen", OPT_STR, &listen, "HOST:PORT", "address to listen on (port 0: any free port)" },
		{ "id", OPT_U64, &id, "N", "memory server id, 0..N-1 (default 0)", .min = 0, .max = 63 },
		{ "threads", OPT_U64, &threads, "W", "worker threads (default: the core count)", .min = 0, .max = 1024 },
		{ "memory", OPT_SIZE, &memory, "SIZE", "buffer pool size, e.g. 4G (default 1G)" },
		{ "capacity", OPT_SIZE, &capacity, "SIZE", "data the server may hold, e.g. 64G (default: = --memory); more than --memory needs --data-dir: cold pages are evicted to DIR/pages.swap and read back on a miss" },
		{ "page-writers", OPT_U64, &pwriters, "N", "page-writer threads that write evicted pages, each with its own io_uring ring (default: min(2, cores); with --capacity only)", .min = 1, .max = 64 },
		{ "miss-depth", OPT_U64, &miss_depth, "N", "with --capacity: a request whose page is not resident parks while its worker reads the page on its own io_uring ring and serves others; at most N such reads in flight per worker (default 32; 0: every miss is a blocking pread)", .min = 0, .max = 1024 },
		{ "config", OPT_STR, &config, "FILE", "cluster config; this server is [memserver ID]" },
		{ "peers", OPT_STR, &peers, "FILE", "without --config: a cluster config naming the other servers, read only to settle prepared transactions with them (may be written after the start; a memfd once sealed)" },
		{ "transport", OPT_CHOICE, &transport, "T", "transport (default tcp, or the config's)", transports },
		{ "lease-ms", OPT_U64, &lease_ms, "MS", "a client silent this long (partitioned, stopped, killed) is lost: its unprepared transactions abort and their locks are freed (default 3000, or the config's lease_ms)", .min = 100, .max = 3600000 },
		{ "secret-file", OPT_STR, &secret, "FILE", "the cluster secret every client and peer must prove (default: the config's secret_file); required off loopback" },
		{ "insecure", OPT_FLAG, &insecure, NULL, "listen off loopback without a secret (anyone who reaches the port can read and write everything)" },
		{ "max-clients", OPT_U64, &max_clients, "N", "most connections served at once (default: the config's max_clients, else 0: no limit)", .min = 0, .max = 1000000 },
		{ "ready-json", OPT_FLAG, &ready_json, NULL, "print {\"ready\":true,\"port\":P} on stdout once listening" },
		{ "data-dir", OPT_STR, &data_dir, "DIR", "keep the data durable in DIR: redo log and checkpoints, recovered at start (a new database needs --init; relative to the working directory, while a config's data_dir is relative to the config file)" },
		{ "init", OPT_FLAG, &init, NULL, "create a new database if the data directory is missing or empty (without it such a directory is refused); on this server's own database a no-op, so scripts may always give it" },
		{ "join", OPT_FLAG, &join, NULL, "replicas > 1: replace a server whose data was lost: copy its partition's data from the primary into the empty data directory, then follow the primary as a backup (unlike --init, which makes a new database)" },
		{ "cluster-id", OPT_STR, &cluster_id, "ID", "without --config: the cluster this server belongs to, 16 hex digits or a name (with --config: cluster_id in [cluster]); default: the data directory's, or a new random one at --init" },
		{ "durability", OPT_CHOICE, &durability, "D", "none, async or sync (default: sync with a data dir, else none)", durabilities },
		{ "checkpoint-log", OPT_SIZE, &ckpt_log, "SIZE", "log growth that triggers a checkpoint (default 256M)" },
		{ "checkpoint-interval", OPT_U64, &ckpt_ms, "MS", "also checkpoint at least this often (default 0: no timer)", .min = 0, .max = 86400000 },
		{ "max-parked", OPT_U64, &max_parked, "N", "requests one connection may have waiting in lock queues; more are refused with a 'limit' error that aborts their transaction (default 1024)", .min = 1, .max = 1000000 },
		{ "max-conn-bytes", OPT_SIZE, &max_conn_bytes, "SIZE", "bytes in flight per connection (messages held, replies queued): above it the server fetches no more large messages and refuses reads with a 'limit' error; a step whose replies exceed it gets 'limit' errors for the rest (default 256M, at least 32M)" },
		{ "log-file", OPT_STR, &log_file, "FILE", "append the log lines (and all else on stderr) to FILE once the arguments are checked; SIGHUP reopens it (logrotate: rename, then SIGHUP)" },
		{ "recovery-mode", OPT_CHOICE, &recovery_mode, "M", "damage in the middle of the redo log: strict (default) refuses to start; tolerate-tail cuts it if it lies in the last segment; point-in-time recovers up to it and drops the rest (a torn tail is always cut)", recovery_modes },
		{ 0 },
	};
	int rc = cli_parse("memserver", "Run a memory server: tables, indexes and locks, served to compute servers.",
			   opts, argc, argv, NULL, NULL);
	if (rc)
		return rc == 1 ? 0 : rc;

	struct lotus_config cfg;
	struct memserver_opts o = { .id = (unsigned)id };
	char host[256] = "127.0.0.1";
	uint16_t port = 7000;
	config_defaults(&cfg);
	if (config) {
		if (config_load(config, &cfg))
			return 2;
		int i = si = config_find_server(&cfg, (unsigned)id);
		if (i < 0)
			return cli_fail("memserver", "--id %llu: %s has no [memserver %llu] section "
					"(its servers are 0..%u)", (unsigned long long)id, config,
					(unsigned long long)id, cfg.nservers - 1);
		snprintf(host, sizeof(host), "%s", cfg.servers[i].host);
		port = cfg.servers[i].port;
		if (!cli_find(opts, "threads")->seen)
			threads = cfg.servers[i].threads;
		if (!cli_find(opts, "memory")->seen)
			memory = cfg.servers[i].memory;
		if (!cli_find(opts, "capacity")->seen)
			capacity = cfg.servers[i].capacity;
		if (!cli_find(opts, "page-writers")->seen)
			pwriters = cfg.servers[i].page_writers;
	}
	if (listen && parse_hostport(listen, host, sizeof(host), &port))
		return cli_fail("memserver", "--listen: '%s' is not HOST:PORT", listen);
	if (!listen && !config)
		return cli_fail("memserver", "give --listen HOST:PORT or --config FILE");
	if (config && peers)
		return cli_fail("memserver", "--peers is for servers without --config (the config names the peers)");
	if (config && cluster_id)
		return cli_fail("memserver", "--cluster-id is for servers without --config (set "
				"cluster_id in the config's [cluster] section)");
	if (cluster_id && config_parse_cluster_id(cluster_id, &o.cluster_id))
		return cli_fail("memserver", "--cluster-id '%s': expected 16 hex digits (not all "
				"zero) or a name of 1..64 characters A-Z a-z 0-9 . _ -", cluster_id);
	if (config && door_config_cluster_id(&cfg, secret, &o.cluster_id))
		return 2;
	o.init = init;
	/* The store needs two pages; less would fail later as "Invalid argument". */
	if (memory < 2 * STORE_DEFAULT_PAGE)
		return cli_fail("memserver", "%s %llu bytes is too small: a memory server needs at "
				"least %uK", cli_find(opts, "memory")->seen ? "--memory" : "memory =",
				(unsigned long long)memory, 2 * STORE_DEFAULT_PAGE / 1024);
	o.host = host;
	o.port = port;
	o.threads = (unsigned)threads;
	o.memory = memory;
	o.transport = cli_find(opts, "transport")->seen ? transports[transport]
		      : config ? cfg.transport : NULL;
	o.lease_ms = cli_find(opts, "lease-ms")->seen ? (unsigned)lease_ms : cfg.lease_ms;
	o.json_ready = ready_json;
	o.config_path = config;
	o.peers_path = peers;
	o.recovery_mode = recovery_mode;
	o.replicas = config_replicas(&cfg);
	o.coordinator = cfg.coordinator[0] ? cfg.coordinator : NULL;
	/* two messages of the largest size must fit, or a client could stall */
	if (max_conn_bytes < 2ULL * WIRE_MAX_MSG)
		return cli_fail("memserver", "--max-conn-bytes %llu is below %uM (two messages of "
				"the largest size)", (unsigned long long)max_conn_bytes,
				2 * WIRE_MAX_MSG >> 20);
	o.max_parked = (unsigned)max_parked;
	o.max_conn_bytes = max_conn_bytes;
	o.secret_file = secret ? secret : config && cfg.secret_file[0] ? cfg.secret_file : NULL;
	o.insecure = insecure;
	o.max_clients = cli_find(opts, "max-clients")->seen ? (unsigned)max_clients
			: config ? cfg.max_clients : 0;
	if (capacity > memory && cli_find(opts, "durability")->seen && durability == LOTUS_DUR_NONE)
		return cli_fail("memserver", "%s above the memory needs durability async or sync: "
				"evicted pages live in the data directory, which --durability none "
				"does not use", cli_find(opts, "capacity")->seen ? "--capacity"
				: "capacity =");
	if (memserver_durability(opts, &cfg, si, data_dir, durability, ckpt_log, ckpt_ms, &o))
		return 2;
	if (memserver_tiering(opts, memory, capacity, pwriters, &o))
		return 2;
	o.miss_depth = !cli_find(opts, "miss-depth")->seen ? 0 : miss_depth ? (unsigned)miss_depth
		       : UINT32_MAX;
	if (init && !o.data_dir)
		log_warn("--init: no effect without a data directory (the server keeps "
			 "everything in memory)");
	if (join && (init || !config || o.replicas < 2 || !o.data_dir))
		return cli_fail("memserver", "--join %s", init ? "and --init exclude each other (--join "
				"takes the partition's data, --init makes a new database)"
				: "needs --config of a cluster with replicas > 1 and a data directory: "
				  "it copies the partition's data from its primary");
	/* Before any bind: off loopback, the port must not be open to anyone. */
	struct in_addr la;
	int loopback = strcmp(host, "localhost") == 0 ||
		       (inet_pton(AF_INET, host, &la) == 1 && (ntohl(la.s_addr) >> 24) == 127);
	if (!o.secret_file && !loopback && !insecure)
		return cli_fail("memserver", "refusing to listen on %s:%u without a cluster secret "
				"(anyone reaching the port could read and write everything): set "
				"secret_file in [cluster] or --secret-file FILE, or give --insecure "
				"on a trusted network", host, port);
	if (listen_probe(host, port, config, o.id))
		return 1;
	if (log_file && (rc = log_file_open(log_file)) != 0)
		return cli_fail("memserver", "--log-file %s: %s", log_file, strerror(-rc));
	char tag[32];
	snprintf(tag, sizeof(tag), "memserver %u", o.id);
	log_set_tag(tag);
	if (join) {
		if (backup_join(config, o.secret_file, o.id, o.replicas, o.data_dir) != 0)
			return 1;
		o.init = 1;   /* the copy has no IDENTITY: the server stamps its own */
	}
	return memserver_run(&o) == 0 ? 0 : 1;
}
