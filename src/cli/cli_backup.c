/*
 * cli_backup.c - `lotus backup` and `lotus restore` (docs/operations.md,
 * "Backup and restore"; the servers' side is src/memserver/backup.c).
 *
 * backup: 1. the cut.  Send every memory server OP_BACKUP_HOLD(W): each
 * holds its commit decisions for W ms and then records its log's LSN.  The
 * cut counts only if every server answered within W of the first send (so
 * every hold began before any ended: docs/durability.md, "Backups: the
 * cut"); otherwise try again with twice W, up to --max-pause-ms, and give up
 * (nothing to release: a hold ends by itself).  OP_BACKUP_MARK collects each
 * cut LSN and how long decisions were held.  2. the copy.  Each server lists
 * its files (OP_BACKUP_BEGIN, all servers first); the client reads them in
 * WIRE_BACKUP_CHUNK pieces (OP_BACKUP_READ) into OUT/ms<id>/, one server
 * at a time, with an empty READ to each server still waiting every 5 s so
 * its checkpoints stay held, then OP_BACKUP_END(hold id).  OUT/BACKUP
 * is written last: a directory without it is no backup.
 *
 *   OUT/BACKUP:  lotus-backup 1
 *                servers N
 *                server ID cut LSN bytes B files K      (one line per server)
 *
 * restore: for the config's servers on this host (--id N: that one), copy
 * OUT/ms<id>/ into its data_dir, refusing a directory a server holds (its
 * LOCK) and a non-empty one unless --force, then cut the last log segment
 * at the server's cut (redo_restore_tail), so recovery replays exactly up to
 * it.  The copied IDENTITY lets the server start without --init.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>
#include "cli/cli.h"
#include "cli/opts.h"
#include "common/clock.h"
#include "common/common.h"
#include "common/config.h"
#include "common/log.h"
#include "compute/session.h"
#include "store/redo.h"

#define BACKUP_VERSION 1

struct bk_server {
	uint64_t hold_id, cut, held_ns, bytes;
	unsigned files;
	char *list;          /* BEGIN's file list ("name bytes\n"...) */
	char first[64];      /* its first name: the keep-alive reads it */
	bool done;
};

#define BK_KEEPALIVE_MS 5000u   /* well inside the servers' 60 s pin */

/* LOTUS_BACKUP_KEEPALIVE_MS and LOTUS_BACKUP_READ_DELAY_MS (a pause before
 * each read): the tests' way to copy slowly against a short pin */
static uint64_t env_ms(const char *name, uint64_t dflt)
{
	const char *e = getenv(name);
	return e && *e ? strtoull(e, NULL, 10) : dflt;
}

/* A file name a server may send: what a data directory holds, nothing with
 * a path in it. */
static int safe_name(const char *n)
{
	size_t len = strlen(n);
	if (!len || len > 63 || n[0] == '.')
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!(n[i] >= 'a' && n[i] <= 'z') && !(n[i] >= 'A' && n[i] <= 'Z') &&
		    !(n[i] >= '0' && n[i] <= '9') && n[i] != '-' && n[i] != '.' && n[i] != '_')
			return 0;
	return 1;
}

static int write_all(int fd, const void *p, size_t n)
{
	const unsigned char *b = p;
	while (n) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The cut: hold every server, check the spread, collect the LSNs. */
static int take_cut(lotus_session_t *s, unsigned n, struct bk_server *sv, unsigned pause_ms,
		    unsigned max_pause_ms, unsigned *used_ms)
{
	for (unsigned w = pause_ms;; w *= 2) {
		if (w > max_pause_ms)
			w = max_pause_ms;
		uint64_t t0 = clock_now_ns();
		int rc = 0;
		for (unsigned i = 0; i < n && rc == 0; i++) {
			struct wire_req r = { .op = OP_BACKUP_HOLD, .arg = w };
			rc = session_admin(s, i, &r, NULL, NULL, 10000);
			sv[i].hold_id = session_admin_arg(s, i);
			if (rc)
				log_error("backup: memory server %u refused the hold: %s", i,
					  lotus_strerror(rc));
		}
		uint64_t spread = clock_now_ns() - t0;
		if (rc)
			return rc;   /* the holds taken end by themselves */
		for (unsigned i = 0; i < n && rc == 0; i++) {
			struct wire_req r = { .op = OP_BACKUP_MARK, .arg = sv[i].hold_id };
			rc = session_admin(s, i, &r, NULL, NULL, 10000 + (int)w);
			sv[i].cut = session_admin_arg(s, i);
			const char *v = session_admin_value(s);
			sv[i].held_ns = rc == 0 && v ? strtoull(v, NULL, 10) : 0;
			if (rc)
				log_error("backup: memory server %u gave no cut: %s", i, lotus_strerror(rc));
		}
		if (rc)
			return rc;
		/* every hold began within w of the first: each began before any ended */
		if (spread < (uint64_t)w * 1000000u) {
			*used_ms = w;
			return 0;
		}
		log_warn("backup: holding all %u servers took %.1f ms, too long for a %u ms pause%s",
			 n, (double)spread / 1e6, w, w < max_pause_ms ? ": trying again, longer" : "");
		if (w >= max_pause_ms)
			return LOTUS_ETIMEOUT;
	}
}

/* Copy server i's files into dir. */
/* BEGIN at server i: it lists its files and renews its pin. */
static int begin_server(lotus_session_t *s, unsigned i, struct bk_server *sv)
{
	struct wire_req r = { .op = OP_BACKUP_BEGIN, .arg = sv->cut };
	int rc = session_admin(s, i, &r, NULL, NULL, 120000);
	if (rc) {
		log_error("backup: memory server %u cannot start the copy: %s", i, lotus_strerror(rc));
		return rc;
	}
	const char *v = session_admin_value(s);
	sv->list = strdup(v ? v : "");
	if (!sv->list)
		return -ENOMEM;
	if (sscanf(sv->list, "%63s", sv->first) != 1)
		sv->first[0] = 0;
	return 0;
}

/* An empty read at every server whose copy is still to come: each renews
 * that server's pin, so no checkpoint runs there while another server is
 * being copied (a copy of many GB takes minutes).  A server that refuses
 * (-ESTALE: a checkpoint ran anyway) fails the backup. */
static int keep_alive(lotus_session_t *s, unsigned n, struct bk_server *all, unsigned busy)
{
	for (unsigned j = 0; j < n; j++) {
		if (j == busy || all[j].done || !all[j].list || !all[j].first[0])
			continue;
		struct wire_req q = { .op = OP_BACKUP_READ, .arg = UINT64_MAX,
				      .key_len = (uint16_t)strlen(all[j].first) };
		int rc = session_admin(s, j, &q, all[j].first, NULL, 60000);
		if (rc) {
			log_error("backup: memory server %u: keeping its copy's files as they are "
				  "failed: %s", j, lotus_strerror(rc));
			return rc;
		}
	}
	return 0;
}

static int copy_server(lotus_session_t *s, unsigned i, struct bk_server *all, unsigned n,
		       const char *dir, bool quiet)
{
	struct bk_server *sv = &all[i];
	int rc = 0;
	char *list = sv->list;
	sv->list = NULL;
	if (!list)
		return -EINVAL;
	uint64_t alive = clock_now_ns();
	uint64_t keep_ns = env_ms("LOTUS_BACKUP_KEEPALIVE_MS", BK_KEEPALIVE_MS) * 1000000ull;
	uint64_t delay_ms = env_ms("LOTUS_BACKUP_READ_DELAY_MS", 0);
	if (mkdir(dir, 0700) && errno != EEXIST) {
		rc = -errno;
		goto out;
	}
	char *save = NULL;
	for (char *ln = strtok_r(list, "\n", &save); ln && rc == 0; ln = strtok_r(NULL, "\n", &save)) {
		char name[64], path[4400];
		unsigned long long bytes;
		if (sscanf(ln, "%63s %llu", name, &bytes) != 2 || !safe_name(name)) {
			log_error("backup: memory server %u sent a bad file list line", i);
			rc = LOTUS_EPROTO;
			break;
		}
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0) {
			rc = -errno;
			log_error("backup: cannot create %s: %s", path, strerror(errno));
			break;
		}
		uint64_t off = 0;
		while (off < bytes && rc == 0) {
			struct wire_req q = { .op = OP_BACKUP_READ, .arg = off,
					      .key_len = (uint16_t)strlen(name) };
			if (delay_ms)
				usleep((useconds_t)(delay_ms * 1000));
			rc = session_admin(s, i, &q, name, NULL, 60000);
			uint64_t got = session_admin_arg(s, i);
			if (rc == 0 && (got == 0 || got > WIRE_BACKUP_CHUNK || got > bytes - off))
				rc = LOTUS_EPROTO;
			if (rc == 0)
				rc = write_all(fd, session_admin_value(s), (size_t)got);
			off += got;
			if (rc == 0 && clock_now_ns() - alive > keep_ns) {
				rc = keep_alive(s, n, all, i);
				alive = clock_now_ns();
			}
			if (rc == 0 && !quiet && (off % (64u << 20)) < got)
				fprintf(stderr, "backup: server %u: %s %llu/%llu MB\n", i, name,
					(unsigned long long)(off >> 20), bytes >> 20);
		}
		if (rc == 0 && fsync(fd))
			rc = -errno;
		close(fd);
		if (rc)
			log_error("backup: copying %s of memory server %u failed: %s", name, i,
				  lotus_strerror(rc));
		sv->bytes += off;
		sv->files++;
	}
out:
	free(list);
	sv->done = true;
	struct wire_req e = { .op = OP_BACKUP_END, .arg = sv->hold_id };
	int erc = session_admin(s, i, &e, NULL, NULL, 10000);
	return rc ? rc : erc;
}

static int dir_is_empty(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 1 : -errno;
	int empty = 1;
	for (struct dirent *de; (de = readdir(d));)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			empty = 0;
	closedir(d);
	return empty;
}

int cmd_backup(int argc, char **argv)
{
	const char *config = NULL, *out = NULL, *secret = NULL;
	uint64_t pause_ms = 50, max_pause_ms = 2000;
	bool json = false, quiet = false;
	struct cli_opt opts[] = {
		{ "config", OPT_STR, &config, "FILE", "cluster config file (required)" },
		{ "out", OPT_STR, &out, "DIR", "where the backup goes: a new or empty directory (required)" },
		{ "pause-ms", OPT_U64, &pause_ms, "MS", "how long each server holds its commit decisions for the cut (default 50; below half the cluster's lease)", .min = 1, .max = 10000 },
		{ "max-pause-ms", OPT_U64, &max_pause_ms, "MS", "give up when a cut needs a longer pause (default 2000, or just below half the cluster's lease if that is less)", .min = 1, .max = 10000 },
		{ "secret-file", OPT_STR, &secret, "FILE", "the cluster secret file (default: the config's secret_file)" },
		{ "json", OPT_FLAG, &json, NULL, "print one JSON summary on stdout" },
		{ "quiet", OPT_FLAG, &quiet, NULL, "no progress lines on stderr" },
		{ 0 },
	};
	int rc = cli_parse("backup", "Copy a running durable cluster's data, consistent across "
			   "its memory servers, into a directory (restore it with lotus restore).",
			   opts, argc, argv, NULL, NULL);
	if (rc)
		return rc == 1 ? 0 : rc;
	if (!config || !out)
		return cli_fail("backup", "give --config FILE and --out DIR");
	/* A hold keeps a server's worker waiting for up to the pause (a
	 * two-phase decision that arrives during it, OP_BACKUP_MARK): the pause
	 * stays below half the lease, so that worker still answers in time for
	 * its clients' and peers' leases. */
	struct lotus_config cfg;
	if (config_load(config, &cfg))
		return 2;
	uint64_t lease = cfg.lease_ms ? cfg.lease_ms : LOTUS_DEFAULT_LEASE_MS, cap = (lease - 1) / 2;
	for (unsigned i = 0; i < 2; i++) {
		const char *name = i ? "max-pause-ms" : "pause-ms";
		uint64_t *v = i ? &max_pause_ms : &pause_ms;
		if (*v <= cap)
			continue;
		if (cli_find(opts, name)->seen)
			return cli_fail("backup", "--%s %llu: a pause must stay below half the cluster's "
					"lease (%llu ms in %s), as a server's worker may wait that long: "
					"at most %llu", name, (unsigned long long)*v,
					(unsigned long long)lease, config, (unsigned long long)cap);
		*v = cap;
	}
	if (max_pause_ms < pause_ms)
		max_pause_ms = pause_ms;
	int empty = dir_is_empty(out);
	if (empty <= 0)
		return cli_fail("backup", "--out %s: %s", out,
				empty < 0 ? strerror(-empty) : "not empty (give a new or empty directory)");
	if (mkdir(out, 0700) && errno != EEXIST)
		return cli_fail("backup", "--out %s: %s", out, strerror(errno));

	struct lotus_options o;
	lotus_options_init(&o);
	o.config_path = config;
	o.secret_file = secret;
	o.compute_id = 4001;
	lotus_cluster_t *cl = NULL;
	lotus_session_t *s = NULL;
	struct bk_server sv[LOTUS_MAX_SERVERS] = { 0 };
	unsigned used_ms = 0, n = 0;
	uint64_t t0 = clock_now_ns(), total = 0, max_held = 0;
	rc = lotus_connect(&o, &cl);
	if (rc == 0)
		rc = lotus_session_open(cl, &s);
	if (rc) {
		log_error("backup: %s", lotus_strerror(rc));
		goto out;
	}
	n = lotus_cluster_servers(cl);
	rc = take_cut(s, n, sv, (unsigned)pause_ms, (unsigned)max_pause_ms, &used_ms);
	if (rc) {   /* the holds end by themselves; let the checkpoints go on now */
		for (unsigned i = 0; i < n; i++) {
			struct wire_req e = { .op = OP_BACKUP_END, .arg = sv[i].hold_id };
			if (sv[i].hold_id)
				session_admin(s, i, &e, NULL, NULL, 2000);
		}
		log_error("backup: no consistent cut: %s (nothing was copied; every hold has ended)",
			  lotus_strerror(rc));
		goto out;
	}
	for (unsigned i = 0; i < n; i++)
		max_held = MAX(max_held, sv[i].held_ns);
	if (!quiet)
		fprintf(stderr, "backup: cut taken: commit decisions held for %.1f ms at most\n",
			(double)max_held / 1e6);
	/* every server lists its files now (and so renews its pin), then the
	 * copies go one server at a time, with keep-alives to the others */
	for (unsigned i = 0; i < n && rc == 0; i++)
		rc = begin_server(s, i, &sv[i]);
	for (unsigned i = 0; i < n && rc == 0; i++) {
		char dir[4200];
		snprintf(dir, sizeof(dir), "%s/ms%u", out, i);
		rc = copy_server(s, i, sv, n, dir, quiet);
		if (rc == 0)
			rc = fsync_dir(dir);
		total += sv[i].bytes;
		if (rc == 0 && !quiet)
			fprintf(stderr, "backup: server %u: %u files, %.1f MB up to LSN %" PRIu64 "\n", i,
				sv[i].files, (double)sv[i].bytes / 1e6, sv[i].cut);
	}
	if (rc == 0) {   /* last: a directory without BACKUP is no backup */
		char path[4200], tmp[4200];
		snprintf(path, sizeof(path), "%s/BACKUP", out);
		snprintf(tmp, sizeof(tmp), "%s/BACKUP.tmp", out);
		FILE *f = fopen(tmp, "we");
		if (!f) {
			rc = -errno;
		} else {
			fprintf(f, "lotus-backup %d\nservers %u\n", BACKUP_VERSION, n);
			for (unsigned i = 0; i < n; i++)
				fprintf(f, "server %u cut %" PRIu64 " bytes %" PRIu64 " files %u\n", i,
					sv[i].cut, sv[i].bytes, sv[i].files);
			rc = fflush(f) || fsync(fileno(f)) ? -errno : 0;
			if (fclose(f) && !rc)
				rc = -EIO;
			if (!rc && rename(tmp, path))
				rc = -errno;
			if (!rc)
				rc = fsync_dir(out);
		}
		if (rc)
			log_error("backup: writing %s failed: %s", path, lotus_strerror(rc));
	}
	if (rc == 0) {
		double secs = (double)(clock_now_ns() - t0) / 1e9;
		if (json) {
			printf("{\"servers\":[");
			for (unsigned i = 0; i < n; i++)
				printf("%s{\"id\":%u,\"cut_lsn\":%" PRIu64 ",\"bytes\":%" PRIu64
				       ",\"files\":%u,\"pause_ms\":%.3f}", i ? "," : "", i, sv[i].cut,
				       sv[i].bytes, sv[i].files, (double)sv[i].held_ns / 1e6);
			printf("],\"bytes\":%" PRIu64 ",\"pause_ms\":%.3f,\"pause_asked_ms\":%u,"
			       "\"seconds\":%.3f}\n", total, (double)max_held / 1e6, used_ms, secs);
		} else {
			printf("backup of %u servers in %s: %.1f MB in %.2f s; commit decisions "
			       "paused %.1f ms\n", n, out, (double)total / 1e6, secs,
			       (double)max_held / 1e6);
		}
	}
out:
	for (unsigned i = 0; i < n; i++) {   /* listed, never copied: let it checkpoint again */
		if (sv[i].list && s) {
			struct wire_req e = { .op = OP_BACKUP_END, .arg = sv[i].hold_id };
			session_admin(s, i, &e, NULL, NULL, 2000);
		}
		free(sv[i].list);
	}
	lotus_session_close(s);
	lotus_disconnect(cl);
	return rc ? 1 : 0;
}

/* ---- restore ---- */

static int host_is_local(const char *host)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai = NULL;
	if (getaddrinfo(host, NULL, &hints, &ai))
		return 0;
	struct ifaddrs *ifs = NULL;
	int local = 0;
	if (getifaddrs(&ifs))
		ifs = NULL;
	for (struct addrinfo *a = ai; a && !local; a = a->ai_next) {
		if (a->ai_family == AF_INET &&
		    (ntohl(((struct sockaddr_in *)a->ai_addr)->sin_addr.s_addr) >> 24) == 127)
			local = 1;
		for (struct ifaddrs *i = ifs; i && !local; i = i->ifa_next) {
			if (!i->ifa_addr || i->ifa_addr->sa_family != a->ai_family)
				continue;
			if (a->ai_family == AF_INET)
				local = ((struct sockaddr_in *)a->ai_addr)->sin_addr.s_addr ==
					((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
			else if (a->ai_family == AF_INET6)
				local = !memcmp(&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr,
						&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, 16);
		}
	}
	if (ifs)
		freeifaddrs(ifs);
	freeaddrinfo(ai);
	return local;
}

static int copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY | O_CLOEXEC), out = -1, rc = 0;
	if (in < 0)
		return -errno;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0) {
		rc = -errno;
		goto done;
	}
	static char buf[1 << 20];
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : 0;
			break;
		}
		if ((rc = write_all(out, buf, (size_t)n)) != 0)
			break;
	}
	if (rc == 0 && fsync(out))
		rc = -errno;
done:
	if (out >= 0)
		close(out);
	close(in);
	return rc;
}

/* The files of a data directory a restore replaces (--force). */
static int lotus_file(const char *n)
{
	return !strncmp(n, "redo-", 5) || !strncmp(n, "pages-", 6) || !strcmp(n, "pages.swap") ||
	       !strncmp(n, "MANIFEST", 8) || !strncmp(n, "IDENTITY", 8);
}

/* dir's parents, as --init makes them (the caller makes dir itself). */
static void mkdir_parents(const char *dir)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s", dir);
	for (char *p = path + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			if (mkdir(path, 0700) && errno != EEXIST)
				break;
			*p = '/';
		}
}

static int restore_one(const char *from, unsigned id, uint64_t cut, const char *dir, bool force)
{
	char src[4200], path[4600], dst[4600];
	snprintf(src, sizeof(src), "%s/ms%u", from, id);
	mkdir_parents(dir);
	if (mkdir(dir, 0700) && errno != EEXIST) {
		log_error("restore: cannot create %s: %s", dir, strerror(errno));
		return -errno;
	}
	/* a server that runs on it holds DIR/LOCK */
	snprintf(path, sizeof(path), "%s/LOCK", dir);
	int lfd = open(path, O_RDWR | O_CLOEXEC);
	if (lfd >= 0) {
		int busy = flock(lfd, LOCK_EX | LOCK_NB) != 0;
		if (busy) {
			close(lfd);
			log_error("restore: the data directory %s is in use by a running memory server "
				  "(it holds %s): stop it first", dir, path);
			return -EBUSY;
		}
	}
	DIR *d = opendir(dir);
	int rc = d ? 0 : -errno;
	for (struct dirent *de; d && rc == 0 && (de = readdir(d));) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || !strcmp(de->d_name, "LOCK"))
			continue;
		if (!force) {
			log_error("restore: the data directory %s is not empty (it holds %s): give "
				  "--force to replace what it holds", dir, de->d_name);
			rc = -EEXIST;
		} else if (lotus_file(de->d_name)) {
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			if (unlink(path))
				rc = -errno;
		}
	}
	if (d)
		closedir(d);
	DIR *s = rc ? NULL : opendir(src);
	if (!rc && !s) {
		rc = -errno;
		log_error("restore: %s: %s (not a backup of server %u?)", src, strerror(errno), id);
	}
	unsigned nfiles = 0;
	for (struct dirent *de; s && rc == 0 && (de = readdir(s));) {
		if (!safe_name(de->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", src, de->d_name);
		snprintf(dst, sizeof(dst), "%s/%s", dir, de->d_name);
		rc = copy_file(path, dst);
		if (rc)
			log_error("restore: copying %s to %s failed: %s", path, dst, lotus_strerror(rc));
		nfiles++;
	}
	if (s)
		closedir(s);
	if (rc == 0)   /* the log ends exactly at the cut */
		rc = redo_restore_tail(dir, cut);
	if (rc == 0)
		rc = fsync_dir(dir);
	if (lfd >= 0)
		close(lfd);
	if (rc == 0)
		fprintf(stderr, "restore: server %u: %u files into %s, log up to LSN %" PRIu64 "\n",
			id, nfiles, dir, cut);
	return rc;
}

int cmd_restore(int argc, char **argv)
{
	const char *config = NULL, *from = NULL;
	uint64_t only = UINT64_MAX;
	bool force = false;
	struct cli_opt opts[] = {
		{ "config", OPT_STR, &config, "FILE", "cluster config file: the servers and their data_dir (required)" },
		{ "from", OPT_STR, &from, "DIR", "the backup (lotus backup --out DIR) (required)" },
		{ "id", OPT_U64, &only, "N", "restore only memory server N (default: every server of the config on this host)", .min = 0, .max = LOTUS_MAX_SERVERS - 1 },
		{ "force", OPT_FLAG, &force, NULL, "replace the lotus files of a non-empty data directory" },
		{ 0 },
	};
	int rc = cli_parse("restore", "Write a backup into the data directories of the config's "
			   "memory servers on this host; the servers must be stopped.",
			   opts, argc, argv, NULL, NULL);
	if (rc)
		return rc == 1 ? 0 : rc;
	if (!config || !from)
		return cli_fail("restore", "give --config FILE and --from DIR");
	struct lotus_config cfg;
	if (config_load(config, &cfg))
		return 1;
	char path[4600], line[256];
	snprintf(path, sizeof(path), "%s/BACKUP", from);
	FILE *f = fopen(path, "re");
	if (!f) {
		log_error("restore: %s: %s (not a complete backup)", path, strerror(errno));
		return 1;
	}
	uint64_t cut[LOTUS_MAX_SERVERS] = { 0 };
	int have[LOTUS_MAX_SERVERS] = { 0 }, version = 0;
	unsigned nservers = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned id;
		unsigned long long c;
		if (sscanf(line, "lotus-backup %d", &version) == 1)
			continue;
		if (sscanf(line, "servers %u", &nservers) == 1)
			continue;
		if (sscanf(line, "server %u cut %llu", &id, &c) == 2 && id < LOTUS_MAX_SERVERS)
			cut[id] = c, have[id] = 1;
	}
	fclose(f);
	if (version != BACKUP_VERSION) {
		log_error("restore: %s has format version %d; this lotus reads version %d%s", path,
			  version, BACKUP_VERSION, version > BACKUP_VERSION ? ": use a newer lotus" : "");
		return 1;
	}
	if (nservers != cfg.nservers) {
		log_error("restore: the backup holds %u servers, the config %s has %u", nservers,
			  config, cfg.nservers);
		return 1;
	}
	unsigned done = 0;
	for (unsigned i = 0; i < cfg.nservers && rc == 0; i++) {
		const struct lotus_server_config *sc = &cfg.servers[i];
		if (only != UINT64_MAX && only != i)
			continue;
		if (only == UINT64_MAX && !host_is_local(sc->host))
			continue;
		if (!sc->data_dir[0]) {
			log_error("restore: memory server %u has no data_dir in %s", i, config);
			rc = LOTUS_ECONFIG;
			break;
		}
		if (!have[i]) {
			log_error("restore: %s has no server %u", path, i);
			rc = LOTUS_ECONFIG;
			break;
		}
		rc = restore_one(from, i, cut[i], sc->data_dir, force);
		done += rc == 0;
	}
	if (rc == 0 && !done) {
		log_error("restore: no server of %s is on this host (give --id N)", config);
		rc = LOTUS_ECONFIG;
	}
	return rc ? 1 : 0;
}

/* `lotus memserver --join` (docs/replication.md, "Replacing a server"): fill
 * the empty data directory dir of server id, a member of partition
 * id / replicas, with a copy of the partition's primary: the same cut and
 * copy as `lotus backup` takes of that one server, its log cut there (as
 * `lotus restore` cuts it), and no IDENTITY (the server stamps its own at
 * its first start).  The server then starts on it as a backup, and the
 * primary sends it the log from the cut on.  0 or an error (logged). */
int backup_join(const char *config, const char *secret, unsigned id, unsigned replicas,
		const char *dir)
{
	int empty = dir_is_empty(dir);
	if (empty <= 0) {
		log_error("--join: the data directory %s %s", dir, empty < 0 ? strerror(-empty)
			  : "is not empty: --join copies the partition's data from its primary into "
			    "an empty one (a server with its own data rejoins without --join)");
		return empty < 0 ? empty : LOTUS_ECONFIG;
	}
	char path[4200];
	mkdir_parents(dir);
	if (mkdir(dir, 0700) && errno != EEXIST) {
		log_error("--join: cannot create %s: %s", dir, strerror(errno));
		return -errno;
	}
	struct lotus_options o;
	lotus_options_init(&o);
	o.config_path = config;
	o.secret_file = secret;
	o.compute_id = 4002;
	lotus_cluster_t *cl = NULL;
	lotus_session_t *s = NULL;
	struct bk_server sv[LOTUS_MAX_SERVERS] = { 0 };
	unsigned p = id / (replicas ? replicas : 1);
	uint64_t t0 = clock_now_ns();
	int rc = lotus_connect(&o, &cl);
	if (rc == 0)
		rc = lotus_session_open(cl, &s);
	if (rc == 0 && p >= lotus_cluster_servers(cl))
		rc = LOTUS_ECONFIG;
	if (rc) {
		log_error("--join: cannot reach partition %u's primary: %s", p, lotus_strerror(rc));
		goto out;
	}
	/* the cut: one server, so any moment is consistent; the hold only
	 * pins its checkpoint files, as for a backup */
	struct wire_req h = { .op = OP_BACKUP_HOLD, .arg = 50 };
	rc = session_admin(s, p, &h, NULL, NULL, 10000);
	sv[p].hold_id = session_admin_arg(s, p);
	if (rc == 0) {
		struct wire_req m = { .op = OP_BACKUP_MARK, .arg = sv[p].hold_id };
		rc = session_admin(s, p, &m, NULL, NULL, 10050);
		sv[p].cut = session_admin_arg(s, p);
	}
	if (rc == 0)
		rc = begin_server(s, p, &sv[p]);
	if (rc == 0)
		rc = copy_server(s, p, sv, lotus_cluster_servers(cl), dir, false);
	else if (sv[p].hold_id) {
		struct wire_req e = { .op = OP_BACKUP_END, .arg = sv[p].hold_id };
		session_admin(s, p, &e, NULL, NULL, 2000);
	}
	if (rc == 0)   /* the log ends exactly at the cut */
		rc = redo_restore_tail(dir, sv[p].cut);
	snprintf(path, sizeof(path), "%s/IDENTITY", dir);
	if (rc == 0 && unlink(path) && errno != ENOENT)
		rc = -errno;
	if (rc == 0)
		rc = fsync_dir(dir);
	if (rc)
		log_error("--join: copying partition %u's data from its primary failed: %s", p,
			  lotus_strerror(rc));
	else
		log_info("--join: partition %u's primary copied into %s: %u files, %.1f MB, log up "
			 "to LSN %" PRIu64 ", in %.1f s; it follows the primary from there", p, dir,
			 sv[p].files, (double)sv[p].bytes / 1e6, sv[p].cut,
			 (double)(clock_now_ns() - t0) / 1e9);
out:
	free(sv[p].list);
	lotus_session_close(s);
	lotus_disconnect(cl);
	return rc;
}
