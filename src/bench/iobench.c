/*
 * iobench.c - the harness of `lotus iobench` (see iobench.h for the file map).
 *
 * Output: every measured cell becomes one struct iob_row (config key/values,
 * metric key/values, optional status + note).  iob_emit() prints it three ways:
 *   human table  -> stdout, or stderr when --json/--csv own stdout
 *   --json       -> one JSON document: an array of {"experiment","config","metrics"}
 *                   objects, one per line, closed by iobench_run()
 *   --csv        -> a header line whenever the column set changes, then rows
 *
 * Data files: created lazily in the chosen directory (which must take
 * O_DIRECT: tmpfs does not, so the default falls back from $TMPDIR or /tmp to
 * the current directory and says so).  Files are written in full, because an
 * O_DIRECT read of a hole or an unwritten extent never reaches the device.
 * Every path is recorded in a fixed table before creation, so the atexit
 * hook and the SIGINT/SIGTERM handler (async-signal-safe unlink only) remove
 * them whatever happens.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "common/json.h"
#include "bench/iobench.h"
#include "common/clock.h"
#include "common/common.h"

const struct iob_cfg *iob_cfg;

/* ---- output ------------------------------------------------------------ */

static char last_header[1024];   /* column set of the last human header */
static char last_csv_header[1024];

static FILE *human_out(void)
{
	return (iob_cfg && (iob_cfg->json || iob_cfg->csv)) ? stderr : stdout;
}

void row_init(struct iob_row *r, const char *experiment)
{
	memset(r, 0, sizeof(*r));
	r->experiment = experiment;
}

void row_cfg_s(struct iob_row *r, const char *key, const char *val)
{
	if (r->ncfg >= IOB_MAX_KV)
		return;
	struct iob_kv *kv = &r->cfg[r->ncfg++];
	kv->key = key;
	snprintf(kv->sval, sizeof(kv->sval), "%s", val);
	kv->is_num = false;
}

void row_cfg_n(struct iob_row *r, const char *key, double val)
{
	if (r->ncfg >= IOB_MAX_KV)
		return;
	struct iob_kv *kv = &r->cfg[r->ncfg++];
	kv->key = key;
	kv->num = val;
	kv->is_num = true;
}

void row_met(struct iob_row *r, const char *key, double val)
{
	if (r->nmet >= IOB_MAX_KV)
		return;
	struct iob_kv *kv = &r->met[r->nmet++];
	kv->key = key;
	kv->num = val;
	kv->is_num = true;
}

/* JSON/CSV number: integers exactly, others with 4 decimals; NaN -> null. */
static void fmt_num(char *buf, size_t len, double v)
{
	if (!isfinite(v))
		snprintf(buf, len, "null");
	else if (v == floor(v) && fabs(v) < 1e15)
		snprintf(buf, len, "%.0f", v);
	else
		snprintf(buf, len, "%.4f", v);
}

/* Human number: 3 significant-ish digits, thousands as integers. */
static void fmt_human(char *buf, size_t len, double v)
{
	if (!isfinite(v))
		snprintf(buf, len, "-");
	else if (fabs(v) >= 1000 || v == floor(v))
		snprintf(buf, len, "%.0f", v);
	else if (fabs(v) >= 10)
		snprintf(buf, len, "%.1f", v);
	else
		snprintf(buf, len, "%.2f", v);
}

static void kv_text(const struct iob_kv *kv, char *buf, size_t len)
{
	if (kv->is_num)
		fmt_human(buf, len, kv->num);
	else
		snprintf(buf, len, "%s", kv->sval);
}

static int col_width(const struct iob_kv *kv)
{
	int w = (int)strlen(kv->key), min = kv->is_num ? 8 : !strcmp(kv->key, "config") ? 22 : 12;
	return w < min ? min : w;
}

static void emit_human(const struct iob_row *r)
{
	FILE *f = human_out();
	char hdr[1024] = "";
	size_t off = 0;
	for (int i = 0; i < r->ncfg; i++)
		off += snprintf(hdr + off, sizeof(hdr) - off, "%-*s ", col_width(&r->cfg[i]),
				r->cfg[i].key);
	off += snprintf(hdr + off, sizeof(hdr) - off, "| ");
	for (int i = 0; i < r->nmet && off < sizeof(hdr); i++)
		off += snprintf(hdr + off, sizeof(hdr) - off, "%*s ", col_width(&r->met[i]),
				r->met[i].key);
	if (r->nmet && strcmp(hdr, last_header) != 0) {
		fprintf(f, "  %s\n", hdr);
		snprintf(last_header, sizeof(last_header), "%s", hdr);
	}
	char v[64];
	fprintf(f, "  ");
	for (int i = 0; i < r->ncfg; i++) {
		kv_text(&r->cfg[i], v, sizeof(v));
		fprintf(f, "%-*s ", col_width(&r->cfg[i]), v);
	}
	fprintf(f, "| ");
	for (int i = 0; i < r->nmet; i++) {
		kv_text(&r->met[i], v, sizeof(v));
		fprintf(f, "%*s ", col_width(&r->met[i]), v);
	}
	if (r->status)
		fprintf(f, "[%s] ", r->status);
	if (r->note[0])
		fprintf(f, "%s", r->note);
	fprintf(f, "\n");
	fflush(f);
}


static void json_kvs(FILE *f, const struct iob_kv *kv, int n)
{
	char v[64];
	fputc('{', f);
	for (int i = 0; i < n; i++) {
		if (i)
			fputc(',', f);
		json_write_str(f, kv[i].key);
		fputc(':', f);
		if (kv[i].is_num) {
			fmt_num(v, sizeof(v), kv[i].num);
			fputs(v, f);
		} else {
			json_write_str(f, kv[i].sval);
		}
	}
	fputc('}', f);
}

static unsigned json_rows;   /* rows in the --json array so far */

static void emit_json(const struct iob_row *r)
{
	FILE *f = stdout;
	fputs(json_rows++ ? ",\n" : "[", f);
	fprintf(f, "{\"experiment\":");
	json_write_str(f, r->experiment);
	fprintf(f, ",\"config\":");
	json_kvs(f, r->cfg, r->ncfg);
	fprintf(f, ",\"metrics\":");
	json_kvs(f, r->met, r->nmet);
	if (r->status) {
		fprintf(f, ",\"status\":");
		json_write_str(f, r->status);
	}
	if (r->note[0]) {
		fprintf(f, ",\"note\":");
		json_write_str(f, r->note);
	}
	fputc('}', f);
	fflush(f);
}

static void csv_field(FILE *f, const char *s)
{
	if (strpbrk(s, ",\"\n")) {
		fputc('"', f);
		for (; *s; s++) {
			if (*s == '"')
				fputc('"', f);
			fputc(*s, f);
		}
		fputc('"', f);
	} else {
		fputs(s, f);
	}
}

static void emit_csv(const struct iob_row *r)
{
	char hdr[1024];
	size_t off = snprintf(hdr, sizeof(hdr), "experiment");
	for (int i = 0; i < r->ncfg && off < sizeof(hdr); i++)
		off += snprintf(hdr + off, sizeof(hdr) - off, ",%s", r->cfg[i].key);
	for (int i = 0; i < r->nmet && off < sizeof(hdr); i++)
		off += snprintf(hdr + off, sizeof(hdr) - off, ",%s", r->met[i].key);
	if (off < sizeof(hdr))
		snprintf(hdr + off, sizeof(hdr) - off, ",status,note");
	if (strcmp(hdr, last_csv_header) != 0) {
		printf("%s\n", hdr);
		snprintf(last_csv_header, sizeof(last_csv_header), "%s", hdr);
	}
	char v[64];
	csv_field(stdout, r->experiment);
	for (int i = 0; i < r->ncfg; i++) {
		putchar(',');
		if (r->cfg[i].is_num) {
			fmt_num(v, sizeof(v), r->cfg[i].num);
			fputs(v, stdout);
		} else {
			csv_field(stdout, r->cfg[i].sval);
		}
	}
	for (int i = 0; i < r->nmet; i++) {
		fmt_num(v, sizeof(v), r->met[i].num);
		printf(",%s", v);
	}
	putchar(',');
	csv_field(stdout, r->status ? r->status : "ok");
	putchar(',');
	csv_field(stdout, r->note);
	putchar('\n');
	fflush(stdout);
}

void iob_emit(const struct iob_row *r)
{
	emit_human(r);
	if (iob_cfg->json)
		emit_json(r);
	else if (iob_cfg->csv)
		emit_csv(r);
}

void iob_title(const char *fmt, ...)
{
	FILE *f = human_out();
	va_list ap;
	fprintf(f, "\n");
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fprintf(f, "\n");
	last_header[0] = 0;
	fflush(f);
}

void iob_note(const char *fmt, ...)
{
	FILE *f = human_out();
	va_list ap;
	fprintf(f, "  note: ");
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fprintf(f, "\n");
	fflush(f);
}

void iob_progress(const char *fmt, ...)
{
	if (iob_cfg->quiet)
		return;
	va_list ap;
	fprintf(stderr, "iobench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
}

/* ---- histogram ----------------------------------------------------------- */

/* Bucket: 32 linear sub-buckets per power of two (about 3% wide). */
static unsigned hist_bucket(uint64_t v)
{
	if (v < 32)
		return (unsigned)v;
	unsigned msb = 63 - (unsigned)__builtin_clzll(v);
	unsigned sub = (unsigned)(v >> (msb - 5)) & 31;
	unsigned b = (msb - 4) * 32 + sub;
	return b < IOB_HIST_BUCKETS ? b : IOB_HIST_BUCKETS - 1;
}

static double hist_value(unsigned b)
{
	if (b < 32)
		return b;
	unsigned msb = b / 32 + 4, sub = b % 32;
	double lo = (double)((32ULL + sub) << (msb - 5));
	return lo + (double)(1ULL << (msb - 5)) / 2;
}

void iob_hist_add(struct iob_hist *h, uint64_t ns, uint64_t n)
{
	h->count += n;
	h->sum += ns * n;
	h->b[hist_bucket(ns)] += (uint32_t)n;
}

void iob_hist_merge(struct iob_hist *d, const struct iob_hist *s)
{
	d->count += s->count;
	d->sum += s->sum;
	for (unsigned i = 0; i < IOB_HIST_BUCKETS; i++)
		d->b[i] += s->b[i];
}

double iob_hist_pct(const struct iob_hist *h, double p)
{
	if (!h->count)
		return NAN;
	uint64_t want = (uint64_t)ceil(p / 100.0 * (double)h->count), seen = 0;
	if (want == 0)
		want = 1;
	for (unsigned i = 0; i < IOB_HIST_BUCKETS; i++) {
		seen += h->b[i];
		if (seen >= want)
			return hist_value(i);
	}
	return hist_value(IOB_HIST_BUCKETS - 1);
}

/* ---- small helpers --------------------------------------------------------- */

void iob_spin_ns(uint64_t ns)
{
	if (!ns)
		return;
	uint64_t end = clock_now_ns() + ns;
	while (clock_now_ns() < end)
		__asm__ volatile("" ::: "memory");
}

void *iob_alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	memset(p, 0x5a, len);
	return p;
}

void iob_free(void *p, size_t len)
{
	if (p)
		munmap(p, len);
}

const char *iob_fmt_size(uint64_t v, char *buf, size_t len)
{
	if (v >= (1ULL << 30) && !(v & ((1ULL << 30) - 1)))
		snprintf(buf, len, "%lluG", (unsigned long long)(v >> 30));
	else if (v >= (1ULL << 20) && !(v & ((1ULL << 20) - 1)))
		snprintf(buf, len, "%lluM", (unsigned long long)(v >> 20));
	else if (v >= 1024 && !(v & 1023))
		snprintf(buf, len, "%lluk", (unsigned long long)(v >> 10));
	else
		snprintf(buf, len, "%llu", (unsigned long long)v);
	return buf;
}

int iob_list_or(const struct iob_list *l, const uint64_t *def, int ndef, uint64_t *out)
{
	if (l->n) {
		memcpy(out, l->v, sizeof(uint64_t) * l->n);
		return l->n;
	}
	memcpy(out, def, sizeof(uint64_t) * ndef);
	return ndef;
}

int iob_dev_poll(const char *path, char *dev, size_t devlen)
{
	struct stat st;
	char sys[PATH_MAX], real[PATH_MAX], buf[16];
	if (stat(path, &st))
		return -errno;
	snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
	if (!realpath(sys, real))
		return -errno;
	char part[PATH_MAX + 16];
	snprintf(part, sizeof(part), "%s/partition", real);
	if (access(part, F_OK) == 0)
		*strrchr(real, '/') = 0;     /* a partition: the queue is the parent's */
	snprintf(dev, devlen, "%s", strrchr(real, '/') + 1);
	snprintf(part, sizeof(part), "%s/queue/io_poll", real);
	FILE *f = fopen(part, "r");
	if (!f)
		return -errno;
	int on = fgets(buf, sizeof(buf), f) && buf[0] == '1';
	fclose(f);
	return on;
}

/* ---- data files ---------------------------------------------------------- */

#define IOB_MAX_PATHS 64
static char paths[IOB_MAX_PATHS][PATH_MAX];
static volatile sig_atomic_t npaths;
static bool data_ready[IOB_MAX_FILES];
static char dir_in_use[PATH_MAX];

static void remove_files(void)
{
	for (int i = 0; i < npaths; i++)
		if (paths[i][0])
			unlink(paths[i]);
}

static void on_signal(int sig)
{
	remove_files();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void install_cleanup(void)
{
	static bool done;
	if (done)
		return;
	done = true;
	atexit(remove_files);
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

static const char *track_path(const char *name)
{
	if (npaths >= IOB_MAX_PATHS)
		return NULL;
	snprintf(paths[npaths], PATH_MAX, "%.3900s/lotus-iobench.%d.%.40s", dir_in_use, (int)getpid(),
		 name);
	return paths[npaths++];
}

/* 0 if an aligned O_DIRECT write works in dir, else -errno. */
static int probe_direct(const char *dir)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/lotus-iobench.%d.probe", dir, (int)getpid());
	int fd = open(p, O_CREAT | O_RDWR | O_DIRECT | O_TRUNC, 0600);
	if (fd < 0)
		return -errno;
	unlink(p);
	void *buf = NULL;
	int rc = 0;
	if (posix_memalign(&buf, 4096, 4096))
		rc = -ENOMEM;
	else {
		memset(buf, 0, 4096);
		if (pwrite(fd, buf, 4096, 0) != 4096)
			rc = -errno ? -errno : -EIO;
	}
	free(buf);
	close(fd);
	return rc;
}

/* Pick the data directory once: --dir must work; the defaults may fall back. */
static int choose_dir(void)
{
	if (dir_in_use[0])
		return 0;
	install_cleanup();
	if (iob_cfg->dir) {
		int rc = probe_direct(iob_cfg->dir);
		if (rc) {
			fprintf(stderr, "lotus iobench: --dir %s does not take O_DIRECT writes (%s); "
				"use a directory on a real disk\n", iob_cfg->dir, strerror(-rc));
			return rc;
		}
		snprintf(dir_in_use, sizeof(dir_in_use), "%s", iob_cfg->dir);
		return 0;
	}
	const char *tmp = getenv("TMPDIR");
	const char *cands[] = { tmp && *tmp ? tmp : "/tmp", "/tmp", "." };
	for (size_t i = 0; i < ARRAY_SIZE(cands); i++) {
		int rc = probe_direct(cands[i]);
		if (rc == 0) {
			if (!realpath(cands[i], dir_in_use))
				snprintf(dir_in_use, sizeof(dir_in_use), "%s", cands[i]);
			if (i > 0)
				fprintf(stderr, "iobench: %s has no O_DIRECT (%s, tmpfs?); "
					"using %s instead\n", cands[0], strerror(-probe_direct(cands[0])),
					dir_in_use);
			return 0;
		}
	}
	fprintf(stderr, "lotus iobench: no directory with O_DIRECT found; pass --dir\n");
	return -EINVAL;
}

const char *iob_dir(void)
{
	return choose_dir() ? NULL : dir_in_use;
}

/* Write size bytes of non-zero data with large O_DIRECT writes, then fsync. */
static int fill_file(const char *path, uint64_t size)
{
	const size_t chunk = 1 << 20;
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_DIRECT, 0600);
	if (fd < 0)
		return -errno;
	void *buf = iob_alloc(chunk);
	int rc = buf ? 0 : -ENOMEM;
	for (uint64_t off = 0; !rc && off < size; off += chunk) {
		size_t n = size - off < chunk ? (size_t)(size - off) : chunk;
		n = ALIGN_UP(n, 4096);
		((uint64_t *)buf)[0] = off;
		ssize_t w = pwrite(fd, buf, n, (off_t)off);
		if (w != (ssize_t)n)
			rc = w < 0 ? -errno : -ENOSPC;
	}
	if (!rc && fsync(fd))
		rc = -errno;
	iob_free(buf, chunk);
	close(fd);
	return rc;
}

static const char *make_file(int idx, const char *kind, uint64_t size, bool *ready)
{
	static char name_buf[IOB_MAX_FILES * 2][PATH_MAX];
	if (idx < 0 || idx >= IOB_MAX_FILES)
		return NULL;
	char *name = name_buf[idx + (kind[0] == 's' ? IOB_MAX_FILES : 0)];
	if (ready && *ready)
		return name;
	if (choose_dir())
		return NULL;
	char tag[32];
	snprintf(tag, sizeof(tag), "%s%d", kind, idx);
	const char *p = track_path(tag);
	if (!p)
		return NULL;
	char sz[16];
	iob_progress("creating %s (%s)", p, iob_fmt_size(size, sz, sizeof(sz)));
	int rc = fill_file(p, size);
	if (rc) {
		fprintf(stderr, "lotus iobench: cannot create %s: %s\n", p, strerror(-rc));
		unlink(p);
		return NULL;
	}
	snprintf(name, PATH_MAX, "%s", p);
	if (ready)
		*ready = true;
	return name;
}

const char *iob_data_file(int i)
{
	if (i < 0 || i >= IOB_MAX_FILES)
		return NULL;
	if (i == 0 && iob_cfg->data_file)
		return iob_cfg->data_file;   /* the caller's file: never removed */
	return make_file(i, "data", iob_cfg->file_size, &data_ready[i]);
}

const char *iob_scratch_file(int i, uint64_t size)
{
	static bool scratch_ready[IOB_MAX_FILES];
	if (i < 0 || i >= IOB_MAX_FILES)
		return NULL;
	return make_file(i, "scratch", size, &scratch_ready[i]);
}

/* ---- experiments ----------------------------------------------------------- */

static const struct {
	const char *name;
	int (*fn)(void);
	bool in_all;
} experiments[] = {
	{ "table3", exp_table3, true },   { "fig2", exp_fig2, true },
	{ "table4", exp_table4, true },   { "table5", exp_table5, true },
	{ "table6", exp_table6, true },   { "table7", exp_table7, true },
	{ "table8", exp_table8, true },   { "fig3", exp_fig3, true },
	{ "poll", exp_poll, true },       { "randread", exp_randread, false },
};

const char *const iobench_experiments[] = { "table3", "fig2", "table4", "table5", "table6",
					    "table7", "table8", "fig3", "poll", "randread",
					    "all", NULL };

int iobench_run(const struct iob_cfg *cfg, const char *name)
{
	iob_cfg = cfg;
	if (choose_dir())
		return 1;
	int failed = 0;
	bool all = !strcmp(name, "all");
	uint64_t t0 = clock_now_ns();
	for (size_t i = 0; i < ARRAY_SIZE(experiments); i++) {
		if (all ? !experiments[i].in_all : strcmp(name, experiments[i].name) != 0)
			continue;
		if (all)
			iob_progress("=== %s ===", experiments[i].name);
		if (experiments[i].fn())
			failed++;
	}
	if (all)
		iob_progress("all done in %.1f s, %d experiment(s) failed",
			     (double)(clock_now_ns() - t0) / 1e9, failed);
	if (cfg->json) {
		fputs(json_rows ? "]\n" : "[]\n", stdout);
		fflush(stdout);
	}
	remove_files();
	return failed ? 1 : 0;
}
