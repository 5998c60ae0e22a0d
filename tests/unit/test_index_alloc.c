/*
 * test_index_alloc.c - a commit whose inserts need new index nodes while
 * memory runs out is never torn (issue 20, "index-node malloc during apply is
 * not reserved").
 *
 * A durable memory server runs with an LD_PRELOAD shim (written and compiled
 * here with cc) whose calloc fails for blocks of an index leaf's or inner
 * node's size (1120 / 8656 bytes, src/store/index.c) while a trigger file
 * exists, and counts each failure into that file.  A client fills a table
 * with 100 keys, then stages 64 new keys (they need at least one leaf split)
 * and executes (the server takes the X locks and reserves their space); the
 * file is created, the client commits, the file is removed.  The commit must
 * be all or nothing: 0 and every key there, or an error and none of them.
 * Before the fix the index insert failed after the commit record was logged:
 * the commit returned an error with part of its keys applied.
 * Skipped without cc, or in a sanitizer build (the shim cannot come first).
 */
#include "test_durable_util.h"

#define NEW 64

static struct dsrv sv[1];

static void start_server(void)
{
	const char *args[] = { "--durability", "sync", NULL };
	CHECK(dsrv_start(&sv[0], args, NULL) == 0);
}

static const char shim_src[] =
	"#include <stddef.h>\n"
	"#include <stdlib.h>\n"
	"#include <fcntl.h>\n"
	"#include <unistd.h>\n"
	"extern void *__libc_calloc(size_t, size_t);\n"
	"void *calloc(size_t n, size_t sz)\n"
	"{\n"
	"	size_t b = n * sz;\n"
	"	if (b == 1120 || b == 8656) {\n"
	"		const char *f = getenv(\"LOTUS_TEST_FAILALLOC\");\n"
	"		int fd = f ? open(f, O_WRONLY | O_APPEND) : -1;\n"
	"		if (fd >= 0) {\n"
	"			(void)!write(fd, \"x\", 1);\n"
	"			close(fd);\n"
	"			return NULL;\n"
	"		}\n"
	"	}\n"
	"	return __libc_calloc(n, sz);\n"
	"}\n";

int main(void)
{
	const char *base = dt_setup();
	const char *build = getenv("LOTUS_BUILD");
	if (build && strstr(build, "san")) {
		printf("skip: a sanitizer build (an LD_PRELOAD shim cannot come first)\n");
		return 77;
	}
	char src[600], so[600], trig[600], cmd[2048];
	snprintf(src, sizeof(src), "%s/failalloc.c", base);
	snprintf(so, sizeof(so), "%s/failalloc.so", base);
	snprintf(trig, sizeof(trig), "%s/failalloc.on", base);
	FILE *f = fopen(src, "w");
	CHECK(f);
	fputs(shim_src, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cc -shared -fPIC -O1 -o '%s' '%s' 2>/dev/null", so, src);
	if (system(cmd) != 0) {
		printf("skip: cannot build the calloc shim with cc\n");
		return 77;
	}
	sv[0].id = 0;
	snprintf(sv[0].dir, sizeof(sv[0].dir), "%s/ms0", base);
	dt_servers[0] = &sv[0];
	setenv("LD_PRELOAD", so, 1);
	setenv("LOTUS_TEST_FAILALLOC", trig, 1);
	start_server();
	unsetenv("LD_PRELOAD");
	unsetenv("LOTUS_TEST_FAILALLOC");

	lotus_cluster_t *c = dt_connect(sv, 1);
	lotus_session_t *s;
	lotus_table_t tb;
	lotus_txn_t *t;
	CHECK_RC(lotus_session_open(c, &s));
	CHECK_RC(lotus_table_create(s, "ix", 64, &tb));
	CHECK_RC(lotus_txn_begin(s, &t));
	for (unsigned i = 0; i < 100; i++) {
		unsigned char k[8];
		key_from_u64(i, k);
		CHECK_RC(lotus_txn_write(t, tb, k, 8, "old", 3));
	}
	CHECK_RC(lotus_txn_commit(t));

	CHECK_RC(lotus_txn_restart(t));
	for (unsigned i = 0; i < NEW; i++) {
		unsigned char k[8];
		key_from_u64(1000 + i, k);
		CHECK_RC(lotus_txn_write(t, tb, k, 8, "new", 3));
	}
	CHECK_RC(lotus_txn_execute(t));
	int fd = open(trig, O_WRONLY | O_CREAT | O_TRUNC, 0644);   /* memory runs out */
	CHECK(fd >= 0);
	close(fd);
	int rc = lotus_txn_commit(t);
	struct stat stt;
	CHECK(stat(trig, &stt) == 0);
	unlink(trig);
	if (rc)
		lotus_txn_abort(t);

	CHECK_RC(lotus_txn_restart(t));
	int ops[NEW], have = 0;
	for (unsigned i = 0; i < NEW; i++) {
		unsigned char k[8];
		key_from_u64(1000 + i, k);
		ops[i] = lotus_txn_read(t, tb, k, 8);
	}
	CHECK_RC(lotus_txn_execute(t));
	for (unsigned i = 0; i < NEW; i++)
		have += lotus_txn_result(t, ops[i], NULL, NULL) == 0;
	CHECK_RC(lotus_txn_commit(t));
	fprintf(stderr, "commit of %d inserts while index nodes could not be allocated (%lld "
		"allocations failed): %s; %d of %d keys there afterwards; server: %s\n", NEW,
		(long long)stt.st_size, lotus_strerror(rc), have, NEW,
		dsrv_log_has(&sv[0], "applied partially") ? "\"applied partially\"" : "no error");
	CHECK(stt.st_size > 0);   /* the fault was met: the test tested something */
	CHECK(have == 0 || have == NEW);
	CHECK(rc != 0 || have == NEW);
	lotus_txn_free(t);
	lotus_session_close(s);
	lotus_disconnect(c);
	dsrv_stop(&sv[0], SIGTERM);
	printf("ok\n");
	return 0;
}
