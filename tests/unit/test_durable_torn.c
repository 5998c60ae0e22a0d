/*
 * test_durable_torn.c - a torn log tail: after kill -9, the last record of
 * the last log segment is damaged (bytes flipped inside it, garbage written
 * past it, as a write cut short by a power loss would leave).  The server
 * still starts, logs the cut, and every commit acknowledged before the torn
 * record is intact; the torn one is gone.  The log then resumes at the cut:
 * commits after the restart survive another kill -9.
 */
#include <dirent.h>
#include "test_durable_util.h"

static uint32_t model[DT_KEYS];

static int put(lotus_session_t *s, lotus_table_t tb, uint64_t key, const void *v, uint32_t len)
{
	lotus_txn_t *t;
	unsigned char k[8];
	key_from_u64(key, k);
	CHECK_RC(lotus_txn_begin(s, &t));
	lotus_txn_write(t, tb, k, 8, v, len);
	int rc = lotus_txn_commit(t);
	lotus_txn_free(t);
	return rc;
}

static void put_version(lotus_session_t *s, lotus_table_t tb, uint64_t key, uint32_t ver)
{
	unsigned char v[DT_VMAX];
	CHECK_RC(put(s, tb, key, v, dt_value(key, ver, v)));
	model[key] = ver;
}

/* The newest segment of the log in dir. */
static void last_segment(const char *dir, char *path, size_t len)
{
	char best[256] = "";
	DIR *d = opendir(dir);
	struct dirent *e;
	CHECK(d);
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "redo-", 5) && strstr(e->d_name, ".log") &&
		    !strstr(e->d_name, ".cut") && strcmp(e->d_name, best) > 0)
			snprintf(best, sizeof(best), "%s", e->d_name);
	closedir(d);
	CHECK(best[0]);
	snprintf(path, len, "%s/%s", dir, best);
}

/* Flip the 16 bytes before the last non-zero byte (inside the last record,
 * whose value ends in non-zero bytes), and write garbage past the end. */
static void tear(const char *path)
{
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	off_t size = lseek(fd, 0, SEEK_END);
	unsigned char *buf = malloc((size_t)size + 1);
	CHECK(buf && pread(fd, buf, (size_t)size, 0) == size);
	off_t last = size - 1;
	while (last > 0 && buf[last] == 0)
		last--;
	CHECK(last > 64);
	for (off_t i = last - 15; i <= last; i++)
		buf[i] ^= 0x5a;
	CHECK(pwrite(fd, buf + last - 15, 16, last - 15) == 16);
	unsigned char junk[4096];
	for (unsigned i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)(i * 131 + 7);
	CHECK(pwrite(fd, junk, sizeof(junk), size) == (ssize_t)sizeof(junk));
	fsync(fd);
	close(fd);
	free(buf);
	fprintf(stderr, "tore %s at offset %lld (file was %lld bytes)\n", path,
		(long long)(last - 15), (long long)size);
}

static void verify(lotus_session_t *s, lotus_table_t tb)
{
	dt_scan_all(s, tb, dt_check_exact, model);
}

int main(void)
{
	const char *base = dt_setup();
	static struct dsrv sv;
	const char *args[] = { "--durability", "sync", NULL };
	lotus_session_t *s;
	lotus_table_t tb;
	char seg[1024];
	unsigned char sentinel[200];
	snprintf(sv.dir, sizeof(sv.dir), "%s/ms0", base);
	CHECK(dsrv_start(&sv, args, NULL) == 0);
	lotus_cluster_t *c = dt_connect(&sv, 1);
	CHECK_RC(lotus_session_open(c, &s));
	CHECK_RC(lotus_table_create(s, "durable", DT_VMAX, &tb));
	for (uint32_t i = 1; i <= 300; i++)
		put_version(s, tb, i % 120, i);
	memset(sentinel, 0xab, sizeof(sentinel));      /* the last record: torn below */
	CHECK_RC(put(s, tb, 3000, sentinel, sizeof(sentinel)));
	lotus_session_close(s);
	lotus_disconnect(c);
	dsrv_stop(&sv, SIGKILL);

	last_segment(sv.dir, seg, sizeof(seg));
	tear(seg);
	CHECK(dsrv_start(&sv, args, NULL) == 0);
	fprintf(stderr, "restart: %s", sv.ready);
	CHECK(dsrv_log_has(&sv, "torn or corrupt log tail"));
	CHECK(dsrv_ready_u64(&sv, "cut_bytes") > 0);
	c = dt_connect(&sv, 1);
	CHECK_RC(lotus_session_open(c, &s));
	CHECK_RC(lotus_table_create(s, "durable", DT_VMAX, &tb));
	verify(s, tb);      /* everything before the tear; key 3000 absent */
	for (uint32_t i = 301; i <= 400; i++)
		put_version(s, tb, i % 150, i);
	lotus_session_close(s);
	lotus_disconnect(c);
	dsrv_stop(&sv, SIGKILL);

	CHECK(dsrv_start(&sv, args, NULL) == 0);
	fprintf(stderr, "second restart: %s", sv.ready);
	CHECK(dsrv_ready_u64(&sv, "cut_bytes") == 0);
	c = dt_connect(&sv, 1);
	CHECK_RC(lotus_session_open(c, &s));
	CHECK_RC(lotus_table_create(s, "durable", DT_VMAX, &tb));
	verify(s, tb);
	lotus_session_close(s);
	lotus_disconnect(c);
	dsrv_stop(&sv, SIGTERM);
	printf("ok\n");
	return 0;
}
