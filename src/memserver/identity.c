/*
 * identity.c - the identity file of a data directory (identity.h).
 *
 * A memory server on an empty data directory would start as an empty server
 * and join its cluster: clients would see half a database.  So a durable
 * server creates a database only when told to (--init, as initdb), and the
 * directory says whose data it holds:
 *
 *   DIR/IDENTITY (text, one "key value" per line, in this order):
 *     lotus-identity 1                  format version
 *     cluster_id 0123456789abcdef       16 hex digits, never 0
 *     server_id 1                       the --id it was created for
 *     created 1764624000                seconds since the epoch
 *     check 89abcdef01234567            FNV-1a 64 of every byte above
 *
 * It is written once, crash-safely: IDENTITY.tmp, fsync, rename over
 * IDENTITY, fsync of the directory.  A crash leaves either no IDENTITY (the
 * directory still counts as empty when nothing else is in it, so --init runs
 * again) or the whole file.  A file that does not parse, or whose check does
 * not match, is damage: refused, never rewritten.
 *
 * At start (identity_settle):
 *
 *   IDENTITY present  server id differs             -> refused (another server's)
 *                     cluster id differs from want  -> refused (another cluster's)
 *                     else                          -> in force (--init: no-op)
 *   no IDENTITY       directory empty   --init      -> written: a new database
 *                                       no --init   -> refused: "give --init"
 *                     data present      --init      -> written (data from a lotus
 *                                                      before identity files)
 *                                       no --init   -> refused
 *
 * "Empty" ignores LOCK (the flock file the caller has just created) and a
 * left-over IDENTITY.tmp.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include "common/common.h"
#include "common/log.h"
#include "memserver/identity.h"

#define IDENTITY_MAX 512   /* the file is about 110 bytes */

/* 1 if dir holds nothing but LOCK and IDENTITY.tmp, 0 if it holds more,
 * -errno if it cannot be read. */
static int dir_empty(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	struct dirent *e;
	int empty = 1;
	while (empty && (e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    strcmp(e->d_name, "LOCK") && strcmp(e->d_name, IDENTITY_FILE ".tmp"))
			empty = 0;
	closedir(d);
	return empty;
}

static int identity_format(const struct ms_identity *id, char *buf, size_t len)
{
	int n = snprintf(buf, len, "lotus-identity %d\ncluster_id %016" PRIx64 "\nserver_id %u\n"
			 "created %" PRIu64 "\n", IDENTITY_VERSION, id->cluster_id, id->server_id,
			 id->created);
	if (n < 0 || (size_t)n >= len)
		return -EOVERFLOW;
	int m = snprintf(buf + n, len - (size_t)n, "check %016" PRIx64 "\n",
			 fnv1a64(buf, (size_t)n));
	if (m < 0 || (size_t)(n + m) >= len)
		return -EOVERFLOW;
	return n + m;
}

/* Parse the file's bytes.  0, or a static reason. */
static const char *identity_parse(char *buf, size_t len, struct ms_identity *id)
{
	char *chk = strstr(buf, "check ");
	if (strlen(buf) != len)
		return "it holds a NUL byte";
	if (!chk || (chk != buf && chk[-1] != '\n'))
		return "no check line";
	uint64_t want = fnv1a64(buf, (size_t)(chk - buf)), got;
	int version, pos = -1;
	if (sscanf(chk, "check %16" SCNx64 "\n%n", &got, &pos) != 1 || pos < 0 ||
	    chk + pos != buf + len)
		return "a damaged check line";
	if (got != want)
		return "its check does not match its contents";
	if (sscanf(buf, "lotus-identity %d\n", &version) != 1)
		return "not a lotus identity file";
	if (version != IDENTITY_VERSION)
		return "an identity format this lotus does not know (a newer lotus?)";
	pos = -1;
	if (sscanf(buf, "lotus-identity %*d\ncluster_id %16" SCNx64 "\nserver_id %u\n"
		   "created %" SCNu64 "\n%n", &id->cluster_id, &id->server_id, &id->created,
		   &pos) != 3 || pos < 0 || buf + pos != chk)
		return "a damaged field";
	if (id->cluster_id == 0)
		return "cluster id 0";
	return NULL;
}

/* Read dir/IDENTITY.  1 and *id, 0 if there is none, LOTUS_ECONFIG if it is
 * damaged (logged), -errno. */
static int identity_read(const char *dir, struct ms_identity *id)
{
	char path[4200], buf[IDENTITY_MAX + 1];
	snprintf(path, sizeof(path), "%s/%s", dir, IDENTITY_FILE);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		int rc = -errno;
		log_error("cannot read %s: %s", path, strerror(errno));
		return rc;
	}
	ssize_t n = read(fd, buf, sizeof(buf));
	int e = errno;
	close(fd);
	if (n < 0) {
		log_error("cannot read %s: %s", path, strerror(e));
		return -e;
	}
	const char *why = (size_t)n > IDENTITY_MAX ? "too long" : NULL;
	if (!why) {
		buf[n] = 0;
		why = identity_parse(buf, (size_t)n, id);
	}
	if (why) {
		log_error("%s is damaged (%s): this lotus cannot tell whose data %s holds; restore "
			  "the file from a backup of the directory", path, why, dir);
		return LOTUS_ECONFIG;
	}
	return 1;
}

/* Write dir/IDENTITY crash-safely (see the top comment).  0 or -errno (logged). */
static int identity_write(const char *dir, const struct ms_identity *id)
{
	char tmp[4200], path[4200], buf[IDENTITY_MAX];
	int len = identity_format(id, buf, sizeof(buf)), rc = 0;
	if (len < 0)
		return len;
	snprintf(tmp, sizeof(tmp), "%s/%s.tmp", dir, IDENTITY_FILE);
	snprintf(path, sizeof(path), "%s/%s", dir, IDENTITY_FILE);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		goto fail;
	ssize_t w = write(fd, buf, (size_t)len);
	if (w != len) {
		if (w >= 0)   /* short: the disk is full */
			errno = ENOSPC;
		goto fail;
	}
	if (fsync(fd) != 0)
		goto fail;
	if (close(fd) != 0) {
		fd = -1;
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path) != 0)
		goto fail;
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || fsync(fd) != 0)
		goto fail;
	close(fd);
	return 0;
fail:
	rc = -errno;
	log_error("cannot write the identity file %s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return rc;
}

static uint64_t random_cluster_id(void)
{
	uint64_t v = 0;
	while (v == 0)
		if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
			v = fnv1a64(&v, sizeof(v)) ^ (uint64_t)time(NULL) ^ (uint64_t)getpid();
	return v;
}

int identity_settle(const char *dir, unsigned server_id, uint64_t want, int init,
		    struct ms_identity *out)
{
	struct ms_identity id = { 0 };
	int rc = identity_read(dir, &id);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		if (id.server_id != server_id) {
			log_error("the data directory %s holds the data of memory server %u, not of "
				  "server %u: give each server its own directory (is --id or "
				  "--data-dir wrong?)", dir, id.server_id, server_id);
			return LOTUS_ECONFIG;
		}
		if (want && id.cluster_id != want) {
			log_error("the data directory %s belongs to cluster %016" PRIx64 ", not to "
				  "this server's cluster %016" PRIx64 ": another cluster's data, or "
				  "the cluster's cluster_id, secret or server list changed (to keep "
				  "the data, set cluster_id = %016" PRIx64 " in [cluster], or "
				  "--cluster-id)", dir, id.cluster_id, want, id.cluster_id);
			return LOTUS_ECONFIG;
		}
		*out = id;
		return 0;
	}
	int empty = dir_empty(dir);
	if (empty < 0) {
		log_error("cannot read the data directory %s: %s", dir, strerror(-empty));
		return empty;
	}
	if (!init) {
		if (empty)
			log_error("the data directory %s holds no database: give --init to create "
				  "a new one there, or point --data-dir / data_dir at this server's "
				  "data", dir);
		else
			log_error("the data directory %s holds data but no %s file (written by a "
				  "lotus before identity files?): start once with --init to stamp "
				  "it as server %u's", dir, IDENTITY_FILE, server_id);
		return LOTUS_ECONFIG;
	}
	id.cluster_id = want ? want : random_cluster_id();
	id.server_id = server_id;
	id.created = (uint64_t)time(NULL);
	if ((rc = identity_write(dir, &id)) != 0)
		return rc;
	log_info("%s %s: memory server %u of cluster %016" PRIx64, empty ? "created a new "
		 "database in" : "stamped the identity of", dir, server_id, id.cluster_id);
	*out = id;
	return 0;
}
