/*
 * serve_data.c - jobs: the commands on keys of one connection, run as ONE
 * lotus transaction on the worker's session, with no thread waiting for it.
 *
 * A job holds consecutive data commands of one connection: the commands a
 * client pipelined (up to --pipeline-max that have already arrived), or the
 * commands queued between MULTI and EXEC.  Its arguments are copied into the
 * job, so the connection's input buffer may move meanwhile.
 *
 * Steps (each an asynchronous liblotus call; the callback runs from
 * lotus_session_poll on the worker thread):
 *
 *   job_stage: one read per distinct key whose value some command needs
 *     (read_for_update if some command also writes it)
 *       |--no reads--> job_compute
 *       '--execute_async--> cb_exec --error--> job_retry
 *   job_compute: run the commands IN ORDER against the job's overlay
 *     (struct jkey: the value each key has at that point of the job, loaded
 *     from the read and changed by the commands), building the replies;
 *     then stage each changed key's final value once
 *       |--an insert (the key was missing)--> execute_async --> cb_insert
 *       '--commit_async--> cb_commit --ok--> job_end (replies to the client)
 *                                    '--conflict--> job_retry
 *   job_retry: abort_async --> cb_abort --> lotus_txn_restart (the same
 *     priority, so WAIT_DIE/WOUND_WAIT let it win in the end) --> job_stage;
 *     after --retries attempts the commands get an error saying so.
 *
 * The overlay makes read-your-writes inside a job the server's own business
 * (SET k 1; INCR k in one MULTI answers 2), and lotus sees one read and one
 * write per key.  A write hangs on the key's read_for_update if the key
 * exists; a key the read found missing is inserted (a write hung on a read
 * that returned ENOTFOUND is not applied), and an insert that finds the key
 * present after all is treated as a conflict: the job is retried.
 *
 * Replies are only sent after the commit succeeded, so a client never sees
 * a result that was not committed.  A job that failed answers each of its
 * commands (or its EXEC) with one error: "-ERR ...; nothing was applied" when
 * lotus says nothing was (every failure but one), and "-UNKNOWN ..." when
 * the commit's outcome is in doubt (LOTUS_EINDOUBT), which a client must not
 * blindly retry.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "serve/serve_int.h"

struct jarg {
	size_t off, len;
	int key;               /* index in j->keys, or -1 */
};

struct jcmd {
	const struct cmd_def *d;
	unsigned argc, arg0;
	int pre;               /* fixed reply (an error, an immediate command) */
	size_t pre_off, pre_len;
};

struct jkey {
	size_t off;
	uint16_t klen;
	uint8_t rd, wr;
	int op;                /* this attempt's read op, or -1 */
	int ins;               /* this attempt's insert op, or -1 */
	uint8_t loaded, exists, dirty, found;
	uint8_t tab;           /* TB_MAIN or TB_SUB */
	uint8_t comp;          /* a computed key: its bytes are in j->karena */
	const char *vp;        /* the value now: in the read's result, the job's
				  arguments, or val */
	size_t vn;
	struct rbuf val;       /* a value the job computed (INCR, APPEND) */
};

/* A scan a command asked for (ov_scan): kept across passes and attempts. */
struct jscan {
	uint8_t tab;
	size_t off, slen;      /* start, in j->karena */
	unsigned count;
	int op;                /* this attempt's scan op, or -1 */
};

struct job {
	struct conn *c;
	struct worker *w;
	struct server *sv;
	int is_exec;
	struct rbuf arena;
	struct jarg *args;
	unsigned nargs, capargs;
	struct jcmd *cmds;
	unsigned ncmds, capcmds;
	struct jkey *keys;
	unsigned nkeys, capkeys;
	unsigned *hash, hcap;  /* key index + 1; open addressing */
	lotus_txn_t *t;
	unsigned attempts;
	int ndata;
	int fail_rc;
	struct rbuf reply;
	/* SCAN and DBSIZE */
	int solo;
	int scan_op;
	unsigned scan_count;   /* rows asked of lotus */
	int skip_first;        /* the first row is the cursor's key: skip it */
	uint16_t start_len;
	unsigned char start[KEY_MAX];
	long long dbsize;
	/* computed keys and scans (ov_*), passes */
	struct rbuf karena;
	struct jscan *scans;
	unsigned nscans, capscans;
	int writes;            /* some command writes: read computed keys for update */
	int need;              /* this pass asked for reads */
	unsigned passes;
	unsigned watch_ci1;    /* EXEC with WATCH: the check command's index + 1 */
	int watch_fail;        /* a watched key changed: EXEC answers nil */
	/* KEYS and FLUSHDB */
	struct rbuf keysbuf;
	long long nkeysout;
	int flush_tab, flush_more;
	int scan_type;         /* SCAN TYPE: the type asked for, or -1 */
	uint64_t due;          /* a delayed retry starts then */
	struct job *delay_next;
};

static void job_stage(struct job *j);
static void job_retry(struct job *j, int rc);
static void job_fail(struct job *j, int rc);
/* A step failed with rc: conflicts are retried, anything else fails the job. */
static void job_error(struct job *j, int rc)
{
	if (lotus_err_retryable(rc))
		job_retry(j, rc);
	else
		job_fail(j, rc);
}

/* ---- building ------------------------------------------------------------- */

#define JOB_POOL_MAX 64
#define JOB_KEEP_BYTES (1u << 20)

/* Jobs are recycled per worker with their buffers, so a steady load does not
 * allocate: a recycled job is empty but keeps its capacity. */
struct job *job_new(struct conn *c, int is_exec)
{
	struct worker *w = c->w;
	struct job *j = w->job_pool;
	if (j) {
		w->job_pool = j->delay_next;
		w->njob_pool--;
		j->delay_next = NULL;
	} else if (!(j = calloc(1, sizeof(*j)))) {
		return NULL;
	}
	j->c = c;
	j->w = c->w;
	j->sv = c->w->sv;
	j->is_exec = is_exec;
	return j;
}

static void job_recycle(struct worker *w, struct job *j)
{
	j->arena.len = j->reply.len = j->karena.len = j->keysbuf.len = 0;
	j->arena.oom = j->reply.oom = j->karena.oom = j->keysbuf.oom = 0;
	j->nscans = 0;
	j->writes = j->need = j->watch_fail = j->flush_tab = j->flush_more = 0;
	j->passes = j->watch_ci1 = 0;
	j->nkeysout = 0;
	j->nargs = j->ncmds = 0;
	if (j->nkeys)
		memset(j->hash, 0, j->hcap * sizeof(*j->hash));
	j->nkeys = 0;
	j->t = NULL;
	j->attempts = 0;
	j->ndata = j->fail_rc = j->solo = j->is_exec = 0;
	j->skip_first = 0;
	j->delay_next = w->job_pool;
	w->job_pool = j;
	w->njob_pool++;
}

void job_free(struct job *j)
{
	if (!j)
		return;
	struct worker *w = j->w;
	if (w && w->njob_pool < JOB_POOL_MAX && j->arena.cap <= JOB_KEEP_BYTES &&
	    j->reply.cap <= JOB_KEEP_BYTES && j->capkeys <= 4096 && !w->sv->stop) {
		job_recycle(w, j);
		return;
	}
	for (unsigned i = 0; i < j->capkeys; i++)
		rbuf_free(&j->keys[i].val);
	free(j->keys);
	free(j->hash);
	free(j->args);
	free(j->cmds);
	free(j->scans);
	rbuf_free(&j->karena);
	rbuf_free(&j->keysbuf);
	rbuf_free(&j->arena);
	rbuf_free(&j->reply);
	free(j);
}

void worker_jobs_free(struct worker *w)
{
	while (w->job_pool) {
		struct job *j = w->job_pool;
		w->job_pool = j->delay_next;
		j->w = NULL;
		job_free(j);
	}
	w->njob_pool = 0;
}

unsigned job_ncmds(const struct job *j)
{
	return j->ncmds;
}

int job_has_data(const struct job *j)
{
	return j->ndata > 0;
}

static lotus_table_t tab_tb(const struct job *j, int tab)
{
	return tab == TB_SUB ? j->sv->tb_sub : tab == TB_EXP ? j->sv->tb_exp : j->sv->tb;
}

static const char *jk_bytes(const struct job *j, const struct jkey *k)
{
	return (k->comp ? j->karena.data : j->arena.data) + k->off;
}

/* The job's key index hash (in memory only): eight bytes a step. */
static uint64_t key_hash(int tab, const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)tab ^ ((uint64_t)n << 48), w;
	for (; n >= 8; n -= 8, s += 8) {
		memcpy(&w, s, 8);
		h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
		h ^= h >> 29;
	}
	w = 0;
	for (size_t i = 0; i < n; i++)
		w |= (uint64_t)s[i] << (8 * i);
	h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
	return h ^ (h >> 32);
}

static int hash_grow(struct job *j)
{
	unsigned cap = j->hcap ? j->hcap * 2 : 64;
	unsigned *h = calloc(cap, sizeof(*h));
	if (!h)
		return -ENOMEM;
	for (unsigned i = 0; i < j->nkeys; i++) {
		struct jkey *k = &j->keys[i];
		unsigned at = (unsigned)key_hash(k->tab, jk_bytes(j, k), k->klen) & (cap - 1);
		while (h[at])
			at = (at + 1) & (cap - 1);
		h[at] = i + 1;
	}
	free(j->hash);
	j->hash = h;
	j->hcap = cap;
	return 0;
}

/* The key index of key p (an argument at arena offset off, or with comp a
 * computed key, copied into karena if new), added if new. */
static int key_intern2(struct job *j, int tab, int comp, const char *p, size_t off,
		       size_t len, int rd, int wr)
{
	if ((j->nkeys + 1) * 2 > j->hcap && hash_grow(j))
		return -ENOMEM;
	if (!comp)
		p = j->arena.data + off;
	unsigned at = (unsigned)key_hash(tab, p, len) & (j->hcap - 1);
	for (; j->hash[at]; at = (at + 1) & (j->hcap - 1)) {
		struct jkey *k = &j->keys[j->hash[at] - 1];
		if (k->klen == len && k->tab == tab && !memcmp(jk_bytes(j, k), p, len)) {
			k->rd |= (uint8_t)rd;
			k->wr |= (uint8_t)wr;
			return (int)(j->hash[at] - 1);
		}
	}
	if (j->nkeys == j->capkeys) {
		unsigned cap = j->capkeys ? j->capkeys * 2 : 16;
		struct jkey *nk = realloc(j->keys, cap * sizeof(*nk));
		if (!nk)
			return -ENOMEM;
		memset(nk + j->capkeys, 0, (cap - j->capkeys) * sizeof(*nk));
		j->keys = nk;
		j->capkeys = cap;
	}
	if (comp) {
		off = j->karena.len;
		rbuf_put(&j->karena, p, len);
		if (j->karena.oom)
			return -ENOMEM;
	}
	struct jkey *k = &j->keys[j->nkeys];
	struct rbuf keep = k->val;   /* a pooled job keeps its value buffers */
	memset(k, 0, sizeof(*k));
	k->val = keep;
	k->val.len = 0;
	k->val.oom = 0;
	k->tab = (uint8_t)tab;
	k->comp = (uint8_t)comp;
	k->op = k->ins = -1;
	k->off = off;
	k->klen = (uint16_t)len;
	k->rd = (uint8_t)rd;
	k->wr = (uint8_t)wr;
	j->hash[at] = ++j->nkeys;
	return (int)(j->nkeys - 1);
}

static int key_intern(struct job *j, size_t off, size_t len, int rd, int wr)
{
	return key_intern2(j, TB_MAIN, 0, NULL, off, len, rd, wr);
}

/* Is argument i of cmd a key, and is it read / written? */
static int arg_key_role(const struct cmd_def *d, const struct resp_cmd *cmd, unsigned i,
			int *rd, int *wr)
{
	*rd = *wr = 0;
	if (i == 0)
		return 0;
	switch (d->keys) {
	case KS_R1:
		*rd = 1;
		return i == 1;
	case KS_RW1:
		*rd = *wr = 1;
		return i == 1;
	case KS_SET:
		*wr = 1;
		for (unsigned a = 3; a < cmd->argc; a++)
			if (resp_arg_is(&cmd->argv[a], "NX") || resp_arg_is(&cmd->argv[a], "XX") ||
			    resp_arg_is(&cmd->argv[a], "GET") || resp_arg_is(&cmd->argv[a], "KEEPTTL"))
				*rd = 1;
		return i == 1;
	case KS_R_ALL:
		*rd = 1;
		return 1;
	case KS_RW_ALL:
		*rd = *wr = 1;
		return 1;
	case KS_W_PAIRS:
		*wr = 1;
		return i % 2 == 1;
	case KS_W1:
		*wr = 1;
		return i == 1;
	case KS_RW12:
		*rd = *wr = 1;
		return i == 1 || i == 2;
	case KS_R_PAIRS:
		*rd = 1;
		return i % 2 == 1;
	default:
		return 0;
	}
}

int job_add(struct job *j, const struct cmd_def *d, const struct resp_cmd *cmd,
	    const struct rbuf *prebuilt)
{
	if (j->ncmds == j->capcmds) {
		unsigned cap = j->capcmds ? j->capcmds * 2 : 16;
		struct jcmd *nc = realloc(j->cmds, cap * sizeof(*nc));
		if (!nc)
			return -ENOMEM;
		j->cmds = nc;
		j->capcmds = cap;
	}
	struct jcmd *jc = &j->cmds[j->ncmds];
	memset(jc, 0, sizeof(*jc));
	jc->d = d;
	if (prebuilt) {
		jc->pre = 1;
		jc->pre_off = j->arena.len;
		jc->pre_len = prebuilt->len;
		rbuf_put(&j->arena, prebuilt->data, prebuilt->len);
		if (j->arena.oom)
			return -ENOMEM;
		j->ncmds++;
		return 0;
	}
	if (j->nargs + cmd->argc > j->capargs) {
		unsigned cap = j->capargs ? j->capargs : 16;
		while (cap < j->nargs + cmd->argc)
			cap *= 2;
		struct jarg *na = realloc(j->args, cap * sizeof(*na));
		if (!na)
			return -ENOMEM;
		j->args = na;
		j->capargs = cap;
	}
	jc->argc = cmd->argc;
	jc->arg0 = j->nargs;
	for (unsigned i = 0; i < cmd->argc; i++) {
		struct jarg *a = &j->args[j->nargs + i];
		int rd, wr;
		a->off = j->arena.len;
		a->len = cmd->argv[i].len;
		a->key = -1;
		rbuf_put(&j->arena, cmd->argv[i].p, cmd->argv[i].len);
		if (j->arena.oom)
			return -ENOMEM;
		if (d->kind == CK_DATA && arg_key_role(d, cmd, i, &rd, &wr)) {
			a->key = key_intern(j, a->off, a->len, rd, wr);
			if (a->key < 0)
				return -ENOMEM;
			j->writes |= wr;
		}
	}
	j->nargs += cmd->argc;
	j->ncmds++;
	if (d->kind == CK_DATA || d->kind == CK_SOLO)
		j->ndata++;
	return 0;
}

/* ---- what the commands see -------------------------------------------------- */

struct resp_arg job_arg(const struct job *j, unsigned ci, unsigned i)
{
	const struct jarg *a = &j->args[j->cmds[ci].arg0 + i];
	struct resp_arg r = { j->arena.data + a->off, a->len };
	return r;
}

unsigned job_argc(const struct job *j, unsigned ci)
{
	return j->cmds[ci].argc;
}

struct server *job_server(const struct job *j)
{
	return j->sv;
}

static struct jkey *job_key(struct job *j, unsigned ci, unsigned i)
{
	return &j->keys[j->args[j->cmds[ci].arg0 + i].key];
}

static void kv_load(struct job *j, struct jkey *k)
{
	const void *v;
	size_t n;
	if (k->loaded)
		return;
	k->loaded = 1;
	k->vp = "";
	k->vn = 0;
	k->exists = 0;
	if (k->op < 0)
		return;   /* never read (write-only keys are never asked for) */
	int st = lotus_txn_result(j->t, k->op, &v, &n);
	if (st == 0) {   /* valid until the transaction restarts: no copy */
		k->exists = 1;
		k->vp = v ? v : "";
		k->vn = n;
	}
}

/* The value argument i (a key) of command ci has at this point of the job:
 * 1 and the value, or 0 if the key does not exist. */
int kv_get(struct job *j, unsigned ci, unsigned i, const char **v, size_t *n)
{
	struct jkey *k = job_key(j, ci, i);
	kv_load(j, k);
	*v = k->vp;
	*n = k->vn;
	return k->exists;
}

/* The lotus record version of the row argument i (a key) of command ci was
 * read at (lotus_txn_result_version): 0 and *ver, or -1 if there is none:
 * the key is missing or was not read, or this job has changed it (the
 * version it gets at the commit is not known yet), or the library answered
 * the read itself. */
int kv_version(struct job *j, unsigned ci, unsigned i, uint64_t *ver)
{
	struct jkey *k = job_key(j, ci, i);
	if (k->dirty || k->op < 0)
		return -1;
	return lotus_txn_result_version(j->t, k->op, ver) == 0 ? 0 : -1;
}

static int overlaps(const struct rbuf *b, const void *p, size_t n)
{
	const char *c = p;
	return n && b->data && c < b->data + b->cap && c + n > b->data;
}

int kv_set2(struct job *j, unsigned ci, unsigned i, const void *a, size_t an, const void *b,
	    size_t bn)
{
	struct jkey *k = job_key(j, ci, i);
	if (overlaps(&k->val, a, an) || overlaps(&k->val, b, bn)) {
		struct rbuf nv;     /* a or b is in k->val: build the value aside */
		rbuf_init(&nv);
		rbuf_put(&nv, a, an);
		rbuf_put(&nv, b, bn);
		if (nv.oom || rbuf_reserve(&nv, 1)) {
			rbuf_free(&nv);
			return -ENOMEM;
		}
		rbuf_free(&k->val);
		k->val = nv;
	} else {                /* reuse the key's buffer (a pooled job keeps it) */
		k->val.len = 0;
		k->val.oom = 0;
		if (rbuf_reserve(&k->val, an + bn + 1))
			return -ENOMEM;
		if (an)
			memcpy(k->val.data, a, an);
		if (bn)
			memcpy(k->val.data + an, b, bn);
		k->val.len = an + bn;
	}
	k->vp = k->val.data;
	k->vn = an + bn;
	k->loaded = k->exists = k->dirty = 1;
	return 0;
}

int kv_set(struct job *j, unsigned ci, unsigned i, const void *v, size_t n)
{
	const char *p = v;
	if (p >= j->arena.data && p + n <= j->arena.data + j->arena.len) {
		struct jkey *k = job_key(j, ci, i);
		k->vp = p;          /* an argument: the arena does not change now */
		k->vn = n;
		k->loaded = k->exists = k->dirty = 1;
		return 0;
	}
	return kv_set2(j, ci, i, v, n, NULL, 0);
}

/* Delete; 1 if the key existed. */
int kv_del(struct job *j, unsigned ci, unsigned i)
{
	struct jkey *k = job_key(j, ci, i);
	kv_load(j, k);
	int had = k->exists;
	if (had) {
		k->exists = 0;
		k->vp = "";
		k->vn = 0;
		k->dirty = 1;
	}
	return had;
}

/* ---- computed keys and scans (the types' members) ------------------------------ */

int job_pending(const struct job *j)
{
	return j->need;
}

struct conn *job_conn(const struct job *j)
{
	return j->c;
}

int job_add_watchcheck(struct job *j, const struct resp_cmd *cmd)
{
	int rc = job_add(j, &cmd_watchcheck, cmd, NULL);
	if (rc == 0)
		j->watch_ci1 = j->ncmds;
	return rc;
}

void job_set_watch_fail(struct job *j)
{
	j->watch_fail = 1;
}

int ov_get(struct job *j, int tab, const void *key, size_t klen, int fresh,
	   const char **v, size_t *n)
{
	int ki = key_intern2(j, tab, 1, key, 0, klen, 0, 0);
	if (ki < 0)
		return ki;
	struct jkey *k = &j->keys[ki];
	if (!k->loaded && k->op < 0) {
		if (!fresh) {
			k->rd = 1;          /* read it in the next pass */
			j->need = 1;
			return OV_PENDING;
		}
		k->loaded = 1;          /* a new container's row: missing */
		k->exists = 0;
		k->vp = "";
		k->vn = 0;
	}
	kv_load(j, k);
	*v = k->vp;
	*n = k->vn;
	return k->exists;
}

static int ov_key(struct job *j, int tab, const void *key, size_t klen)
{
	int ki = key_intern2(j, tab, 1, key, 0, klen, 0, 0);
	if (ki < 0)
		return ki;
	struct jkey *k = &j->keys[ki];
	if (!k->loaded && k->op < 0) {   /* blind: written without a read */
		k->loaded = 1;
		k->exists = 0;
	}
	kv_load(j, k);
	return ki;
}

int ov_put(struct job *j, int tab, const void *key, size_t klen, const void *v, size_t n)
{
	int ki = ov_key(j, tab, key, klen);
	if (ki < 0)
		return ki;
	struct jkey *k = &j->keys[ki];
	struct rbuf nv;     /* v may point into k->val */
	rbuf_init(&nv);
	rbuf_put(&nv, v, n);
	if (nv.oom || rbuf_reserve(&nv, 1))
		return -ENOMEM;
	rbuf_free(&k->val);
	k->val = nv;
	k->vp = k->val.data;
	k->vn = n;
	k->exists = k->dirty = 1;
	return 0;
}

int ov_del(struct job *j, int tab, const void *key, size_t klen)
{
	int ki = ov_key(j, tab, key, klen);
	if (ki < 0)
		return ki;
	struct jkey *k = &j->keys[ki];
	int had = k->exists;
	k->exists = 0;
	k->vp = "";
	k->vn = 0;
	k->dirty = 1;
	return had;
}

static int row_cmp(const void *a, const void *b)
{
	const struct ov_row *x = a, *y = b;
	size_t n = x->kn < y->kn ? x->kn : y->kn;
	int c = memcmp(x->k, y->k, n);
	return c ? c : (x->kn > y->kn) - (x->kn < y->kn);
}

static int key_in(const char *k, size_t kn, const char *start, size_t slen, size_t plen)
{
	if (kn < plen || memcmp(k, start, plen))
		return 0;
	struct ov_row a = { k, NULL, kn, 0 }, b = { start, NULL, slen, 0 };
	return row_cmp(&a, &b) >= 0;
}

int ov_scan(struct job *j, int tab, const void *start, size_t slen, size_t plen,
	    unsigned want, struct ov_row **rows)
{
	unsigned deleted = 0, si;
	*rows = NULL;
	for (unsigned i = 0; i < j->nkeys; i++) {
		struct jkey *k = &j->keys[i];
		if (k->tab == tab && k->dirty && !k->exists &&
		    key_in(jk_bytes(j, k), k->klen, start, slen, plen))
			deleted++;
	}
	unsigned count = want ? want + deleted : 0;
	for (si = 0; si < j->nscans; si++) {
		struct jscan *sc = &j->scans[si];
		if (sc->tab == tab && sc->slen == slen && sc->count >= count &&
		    !memcmp(j->karena.data + sc->off, start, slen))
			break;
	}
	if (count && si == j->nscans) {
		if (j->nscans == j->capscans) {
			unsigned cap = j->capscans ? j->capscans * 2 : 8;
			struct jscan *ns = realloc(j->scans, cap * sizeof(*ns));
			if (!ns)
				return -ENOMEM;
			j->scans = ns;
			j->capscans = cap;
		}
		struct jscan *sc = &j->scans[j->nscans];
		sc->tab = (uint8_t)tab;
		sc->off = j->karena.len;
		sc->slen = slen;
		sc->count = count;
		sc->op = -1;
		rbuf_put(&j->karena, start, slen);
		if (j->karena.oom)
			return -ENOMEM;
		j->nscans++;
	}
	if (count && j->scans[si].op < 0) {
		j->need = 1;
		return OV_PENDING;
	}
	int n = count ? lotus_txn_scan_rows(j->t, j->scans[si].op) : 0;
	if (n < 0)
		n = 0;
	struct ov_row *r = malloc(((size_t)n + j->nkeys + 1) * sizeof(*r));
	if (!r)
		return -ENOMEM;
	unsigned nr = 0;
	const void *lastk = NULL;
	size_t lastn = 0;
	for (int i = 0; i < n; i++) {
		const void *k, *v;
		size_t kl, vl;
		if (lotus_txn_scan_row(j->t, j->scans[si].op, (unsigned)i, &k, &kl, &v, &vl))
			continue;
		lastk = k;
		lastn = kl;
		if (!key_in(k, kl, start, slen, plen))
			continue;
		r[nr++] = (struct ov_row){ k, v ? v : "", kl, vl };
	}
	/* this job's changes: a changed row replaces its scanned one; a new one
	 * counts only up to the last row scanned if the scan may have stopped short */
	int full = (unsigned)n < j->scans[si].count;
	for (unsigned i = 0; i < j->nkeys; i++) {
		struct jkey *k = &j->keys[i];
		const char *kb = jk_bytes(j, k);
		if (k->tab != tab || !k->loaded || !k->dirty || !key_in(kb, k->klen, start, slen, plen))
			continue;
		unsigned at;
		for (at = 0; at < nr; at++)
			if (r[at].kn == k->klen && !memcmp(r[at].k, kb, k->klen))
				break;
		if (at < nr) {
			if (k->exists) {
				r[at].v = k->vp;
				r[at].vn = k->vn;
			} else {
				r[at] = r[--nr];
			}
			continue;
		}
		struct ov_row me = { kb, k->vp, k->klen, k->vn }, last = { lastk, NULL, lastn, 0 };
		if (k->exists && (full || !lastk || row_cmp(&me, &last) < 0))
			r[nr++] = me;
	}
	qsort(r, nr, sizeof(*r), row_cmp);
	*rows = r;
	return (int)nr;
}

/* ---- the transaction -------------------------------------------------------- */

lotus_txn_t *worker_txn_get(struct worker *w)
{
	lotus_txn_t *t = NULL;
	while (w->npool) {
		t = w->txn_pool[--w->npool];
		if (lotus_txn_recycle(t) == 0)
			return t;
		lotus_txn_free(t);
		t = NULL;
	}
	if (lotus_txn_begin(w->s, &t))
		return NULL;
	return t;
}

void worker_txn_put(struct worker *w, lotus_txn_t *t)
{
	if (w->npool == w->cappool) {
		unsigned cap = w->cappool ? w->cappool * 2 : 16;
		lotus_txn_t **p = realloc(w->txn_pool, cap * sizeof(*p));
		if (!p) {
			lotus_txn_free(t);
			return;
		}
		w->txn_pool = p;
		w->cappool = cap;
	}
	w->txn_pool[w->npool++] = t;
}

static void put_reply_fixed(struct job *j, unsigned ci, struct rbuf *b)
{
	rbuf_put(b, j->arena.data + j->cmds[ci].pre_off, j->cmds[ci].pre_len);
}

/* The job's replies onto out: moved (buffers swapped) when out holds
 * nothing, else copied.  j->reply is empty after. */
static void reply_hand(struct job *j, struct rbuf *out)
{
	if (out->len == 0 && !out->oom) {
		struct rbuf t = *out;
		*out = j->reply;
		j->reply = t;
	} else {
		rbuf_put(out, j->reply.data, j->reply.len);
	}
	j->reply.len = 0;
}

static void job_exec_header(struct job *j, struct rbuf *out)
{
	if (j->watch_fail)
		resp_null_array(out);
	else
		resp_array(out, j->ncmds - (j->watch_ci1 != 0));
}

static void job_end(struct job *j)
{
	struct conn *c = j->c;
	struct rbuf scratch;
	rbuf_init(&scratch);
	struct rbuf *out = c ? &c->out : &scratch;   /* no client: the sweeps */
	if (j->t) {
		worker_txn_put(j->w, j->t);
		j->t = NULL;
	}
	j->w->inflight--;
	if (j->fail_rc == LOTUS_ELEASE || j->fail_rc == LOTUS_EUNAVAIL ||
	    j->fail_rc == LOTUS_EINDOUBT)
		j->w->renew = 1;   /* that connection is gone for the session */
	if (j->fail_rc) {
		char why[240];
		if (j->fail_rc == LOTUS_EABORTED || j->fail_rc == LOTUS_EPREEMPTED)
			snprintf(why, sizeof(why), "ERR transaction aborted by lock conflicts %u times "
				 "(the retry limit, --retries); nothing was applied", j->attempts);
		else if (j->fail_rc == LOTUS_EINDOUBT)   /* the commit may have landed */
			snprintf(why, sizeof(why), "UNKNOWN lotus transaction outcome unknown (a "
				 "memory server was lost or silent during the commit): it may "
				 "have been applied; read the keys before retrying");
		else
			snprintf(why, sizeof(why), "ERR lotus transaction failed (%s); nothing was "
				 "applied", lotus_strerror(j->fail_rc));
		if (j->is_exec) {
			resp_error(out, "%s", why);
		} else {
			for (unsigned ci = 0; ci < j->ncmds; ci++) {
				if (j->cmds[ci].pre)
					put_reply_fixed(j, ci, out);
				else
					resp_error(out, "%s", why);
			}
		}
		atomic_fetch_add(&j->sv->ctr.txn_fail, 1);
	} else {
		if (j->is_exec)
			job_exec_header(j, out);
		if (!j->watch_fail)
			reply_hand(j, out);
		atomic_fetch_add(&j->sv->ctr.txn_commit, 1);
	}
	rbuf_free(&scratch);
	if (j->solo == SOLO_COUNT)
		j->sv->ks_running = 0;
	if (j->solo == SOLO_SWEEP)
		j->sv->sweep_running = 0;
	job_free(j);
	if (c) {
		c->job = NULL;
		conn_job_done(c);
	}
}

void job_reply_now(struct job *j)
{
	struct conn *c = j->c;
	if (j->is_exec)
		resp_array(&c->out, j->ncmds);
	for (unsigned ci = 0; ci < j->ncmds; ci++)
		put_reply_fixed(j, ci, &c->out);
	job_free(j);
}

static void cb_commit(lotus_txn_t *t, int rc, void *arg)
{
	struct job *j = arg;
	if (rc == 0)
		job_end(j);
	else
		job_error(j, rc);
}

static void cb_insert(lotus_txn_t *t, int rc, void *arg)
{
	struct job *j = arg;
	if (rc) {
		job_error(j, rc);
		return;
	}
	for (unsigned i = 0; i < j->nkeys; i++)
		if (j->keys[i].ins >= 0 && lotus_txn_result(t, j->keys[i].ins, NULL, NULL) != 0) {
			job_retry(j, LOTUS_EABORTED);   /* it appeared meanwhile */
			return;
		}
	rc = lotus_txn_commit_async(t, cb_commit, j);
	if (rc)
		job_fail(j, rc);
}

/* Stage the final value of every key the commands changed. */
static int stage_writes(struct job *j, int *inserts)
{
	*inserts = 0;
	for (unsigned i = 0; i < j->nkeys; i++) {
		struct jkey *k = &j->keys[i];
		const char *key = jk_bytes(j, k);
		int rc = 0;
		if (!k->dirty)
			continue;
		lotus_table_t tb = tab_tb(j, k->tab);
		int found = k->op >= 0 && lotus_txn_result(j->t, k->op, NULL, NULL) == 0;
		if (k->op >= 0 && !found) {        /* missing when read */
			if (k->exists) {
				rc = k->ins = lotus_txn_insert(j->t, tb, key, k->klen, k->vp, k->vn);
				(*inserts)++;
			}
		} else if (k->exists) {
			rc = lotus_txn_write(j->t, tb, key, k->klen, k->vp, k->vn);
		} else {
			rc = lotus_txn_delete(j->t, tb, key, k->klen);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

void scan_run(struct job *j, unsigned ci, struct rbuf *b);

/*
 * A read-only job may answer before its commit (which only releases its S
 * locks) returns: every lock was granted, and none released, when the reads
 * were answered, so the values are those of one moment.  Not under
 * WOUND_WAIT with two or more memory servers involved: there a server may
 * wound the job, releasing its locks, while another server's lock is still
 * being granted, and the job only learns it from the commit.  The release is
 * queued before anything the client sends next, and to the same servers.
 */
static int reply_before_release(struct job *j)
{
	unsigned reads = 0;
	for (unsigned i = 0; i < j->nkeys; i++) {
		if (j->keys[i].dirty)
			return 0;
		reads += j->keys[i].op >= 0;
	}
	if (j->solo)
		reads = 2;   /* a scan reads on every server */
	return j->sv->o.lo.cc != LOTUS_WOUND_WAIT || reads <= 1 ||
	       lotus_cluster_servers(j->sv->cl) == 1;
}

static void cb_released(lotus_txn_t *t, int rc, void *arg)
{
	struct job *j = arg;
	worker_txn_put(j->w, t);
	j->t = NULL;
	j->w->inflight--;
	atomic_fetch_add(&j->sv->ctr.txn_commit, 1);
	job_free(j);
}

static void cb_release(lotus_txn_t *t, int rc, void *arg)
{
	/* a failed release wrote nothing: abort (drops what is left) and go on */
	if (rc && lotus_txn_abort_async(t, cb_released, arg) == 0)
		return;
	cb_released(t, 0, arg);
}

/* Hand the replies to the connection now; the job lives on until cb_release. */
static void job_detach(struct job *j)
{
	struct conn *c = j->c;
	if (!c)
		return;
	if (j->is_exec)
		job_exec_header(j, &c->out);
	if (!j->watch_fail)
		reply_hand(j, &c->out);
	c->job = NULL;
	j->c = NULL;
	conn_job_done(c);
}

void keys_run(struct job *j, unsigned ci, struct rbuf *b);
static void cb_exec(lotus_txn_t *t, int rc, void *arg);

#define PASSES_MAX 64

/* A pass asked for reads: forget what it computed, read, and run again. */
static void job_next_pass(struct job *j)
{
	int rc = 0;
	if (++j->passes > PASSES_MAX) {
		job_fail(j, -E2BIG);
		return;
	}
	for (unsigned i = 0; i < j->nkeys && rc >= 0; i++) {
		struct jkey *k = &j->keys[i];
		k->loaded = k->dirty = k->exists = 0;
		if (k->rd && k->op < 0) {
			lotus_table_t tb = tab_tb(j, k->tab);
			rc = j->writes ? lotus_txn_read_for_update(j->t, tb, jk_bytes(j, k), k->klen)
				       : lotus_txn_read(j->t, tb, jk_bytes(j, k), k->klen);
			if (rc >= 0)
				k->op = rc;
		}
	}
	for (unsigned i = 0; i < j->nscans && rc >= 0; i++) {
		struct jscan *sc = &j->scans[i];
		if (sc->op >= 0)
			continue;
		rc = lotus_txn_scan(j->t, tab_tb(j, sc->tab),
				    j->karena.data + sc->off, sc->slen, sc->count);
		if (rc >= 0)
			sc->op = rc;
	}
	if (rc >= 0)
		rc = lotus_txn_execute_async(j->t, cb_exec, j);
	if (rc < 0)
		job_fail(j, rc);
}

static void job_compute(struct job *j)
{
	int inserts, rc;
	j->reply.len = 0;
	j->reply.oom = 0;
	j->need = j->watch_fail = 0;
	if (j->watch_ci1)   /* EXEC after WATCH: are the watched keys as they were? */
		j->cmds[j->watch_ci1 - 1].d->run(j, j->watch_ci1 - 1, &j->reply);
	for (unsigned ci = 0; ci < j->ncmds && !j->watch_fail; ci++) {
		struct jcmd *jc = &j->cmds[ci];
		if (ci + 1 == j->watch_ci1)
			continue;
		if (jc->pre)
			put_reply_fixed(j, ci, &j->reply);
		else if (j->solo == SOLO_DBSIZE)
			resp_int(&j->reply, j->dbsize);
		else if (j->solo == SOLO_SCAN)
			scan_run(j, ci, &j->reply);
		else if (j->solo >= SOLO_KEYS)
			keys_run(j, ci, &j->reply);
		else
			jc->d->run(j, ci, &j->reply);
	}
	if (j->need) {
		job_next_pass(j);
		return;
	}
	if (j->reply.oom) {
		job_fail(j, -ENOMEM);
		return;
	}
	if (j->watch_fail) {   /* EXEC answers nil and writes nothing */
		for (unsigned i = 0; i < j->nkeys; i++)
			j->keys[i].dirty = 0;
	}
	rc = stage_writes(j, &inserts);
	if (rc == 0 && !inserts && reply_before_release(j)) {
		rc = lotus_txn_commit_async(j->t, cb_release, j);
		if (rc == 0) {
			job_detach(j);
			return;
		}
	} else if (rc == 0) {
		rc = inserts ? lotus_txn_execute_async(j->t, cb_insert, j)
			     : lotus_txn_commit_async(j->t, cb_commit, j);
	}
	if (rc)
		job_fail(j, rc);
}

static int dbsize_more(struct job *j);

static void cb_exec(lotus_txn_t *t, int rc, void *arg)
{
	struct job *j = arg;
	if (rc) {
		job_error(j, rc);
		return;
	}
	if (j->solo == SOLO_DBSIZE) {
		rc = dbsize_more(j);
		if (rc == 1)
			return;
		if (rc < 0) {
			job_fail(j, rc);
			return;
		}
	}
	job_compute(j);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void job_restart(struct job *j)
{
	int rc = lotus_txn_restart(j->t);   /* keeps the priority */
	if (rc) {
		j->fail_rc = rc;
		job_end(j);
		return;
	}
	job_stage(j);
}

/* Retries after the first wait a random time that doubles with each attempt
 * (up to 2 ms): under NO_WAIT, jobs that keep colliding would otherwise
 * collide again at once. */
static void cb_abort(lotus_txn_t *t, int rc, void *arg)
{
	struct job *j = arg;
	struct worker *w = j->w;
	j->attempts++;
	if (j->attempts >= j->sv->o.retries) {
		j->fail_rc = LOTUS_EABORTED;
		job_end(j);
		return;
	}
	atomic_fetch_add(&j->sv->ctr.txn_retry, 1);
	if (j->attempts == 1) {
		job_restart(j);
		return;
	}
	uint64_t cap = 20000ULL << (j->attempts < 8 ? j->attempts : 7);   /* ns */
	w->rnd = w->rnd * 6364136223846793005ULL + 1442695040888963407ULL;
	j->due = mono_ns() + (w->rnd >> 33) % (cap < 2000000 ? cap : 2000000);
	j->delay_next = w->delayed;
	w->delayed = j;
}

int worker_run_delayed(struct worker *w)
{
	if (!w->delayed)
		return 0;
	uint64_t now = mono_ns();
	struct job **pp = &w->delayed, *ready = NULL;
	while (*pp) {
		struct job *j = *pp;
		if (j->due <= now) {
			*pp = j->delay_next;
			j->delay_next = ready;
			ready = j;
		} else {
			pp = &j->delay_next;
		}
	}
	while (ready) {
		struct job *j = ready;
		ready = j->delay_next;
		job_restart(j);
	}
	return 1;
}

static void job_retry(struct job *j, int rc)
{
	(void)rc;
	rc = lotus_txn_abort_async(j->t, cb_abort, j);
	if (rc) {
		j->fail_rc = rc;
		job_end(j);
	}
}

static void cb_fail_abort(lotus_txn_t *t, int rc, void *arg)
{
	job_end(arg);
}

static void job_fail(struct job *j, int rc)
{
	j->fail_rc = rc ? rc : LOTUS_ESTATE;
	if (!j->t || lotus_txn_abort_async(j->t, cb_fail_abort, j) != 0)
		job_end(j);
}

static int scan_stage(struct job *j)
{
	int op = lotus_txn_scan(j->t, j->sv->tb, j->start, j->start_len,
				j->scan_count + (unsigned)j->skip_first);
	if (op >= 0)
		j->scan_op = op;
	return op;
}

static void job_stage(struct job *j)
{
	int nreads = 0, rc = 0;
	for (unsigned i = 0; i < j->nkeys; i++) {
		struct jkey *k = &j->keys[i];
		k->op = k->ins = -1;
		k->loaded = k->dirty = k->exists = 0;
		k->vp = "";
		k->vn = 0;
		if (!k->rd)
			continue;
		const char *key = jk_bytes(j, k);
		lotus_table_t tb = tab_tb(j, k->tab);
		rc = k->wr || (k->comp && j->writes)
			     ? lotus_txn_read_for_update(j->t, tb, key, k->klen)
			     : lotus_txn_read(j->t, tb, key, k->klen);
		if (rc < 0)
			break;
		k->op = rc;
		nreads++;
	}
	for (unsigned i = 0; i < j->nscans && rc >= 0; i++) {
		struct jscan *sc = &j->scans[i];
		sc->op = rc = lotus_txn_scan(j->t, tab_tb(j, sc->tab),
					     j->karena.data + sc->off, sc->slen, sc->count);
		nreads++;
	}
	j->passes = 0;
	if (rc >= 0 && (j->solo == SOLO_SCAN || j->solo == SOLO_DBSIZE)) {
		j->dbsize = 0;
		if (j->solo == SOLO_DBSIZE) {
			j->start[0] = 0;
			j->start_len = 1;
			j->skip_first = 0;
		}
		rc = scan_stage(j);
		nreads++;
	}
	if (rc < 0) {
		job_fail(j, rc);
		return;
	}
	if (nreads == 0) {
		job_compute(j);
		return;
	}
	rc = lotus_txn_execute_async(j->t, cb_exec, j);
	if (rc)
		job_fail(j, rc);
}

void job_start(struct job *j)
{
	struct conn *c = j->c;
	if (c)
		c->job = j;
	j->w->inflight++;
	j->t = worker_txn_get(j->w);
	if (!j->t) {
		j->fail_rc = -ENOMEM;
		job_end(j);
		return;
	}
	job_stage(j);
}

/* ---- SCAN and DBSIZE ------------------------------------------------------ */

#define DBSIZE_CHUNK 1024
#define SCAN_COUNT_MAX 100000

/* Redis's glob: * ? [set] [^set] [a-z] and \ escapes. */
static int glob_match(const char *p, size_t pn, const char *s, size_t sn)
{
	while (pn) {
		switch (*p) {
		case '*':
			while (pn > 1 && p[1] == '*') {
				p++;
				pn--;
			}
			if (pn == 1)
				return 1;
			for (size_t i = 0; i <= sn; i++)
				if (glob_match(p + 1, pn - 1, s + i, sn - i))
					return 1;
			return 0;
		case '?':
			if (!sn)
				return 0;
			s++, sn--;
			break;
		case '[': {
			if (!sn)
				return 0;
			p++, pn--;
			int neg = pn && *p == '^', hit = 0;
			if (neg)
				p++, pn--;
			while (pn && *p != ']') {
				if (*p == '\\' && pn >= 2) {
					p++, pn--;
					hit |= *p == *s;
				} else if (pn >= 3 && p[1] == '-' && p[2] != ']') {
					unsigned char lo = (unsigned char)p[0], hi = (unsigned char)p[2];
					if (lo > hi) {
						unsigned char x = lo;
						lo = hi;
						hi = x;
					}
					hit |= (unsigned char)*s >= lo && (unsigned char)*s <= hi;
					p += 2, pn -= 2;
				} else {
					hit |= *p == *s;
				}
				p++, pn--;
			}
			if (neg)
				hit = !hit;
			if (!hit)
				return 0;
			s++, sn--;
			if (!pn)
				return sn == 0;   /* an unclosed set ends the pattern */
			break;
		}
		case '\\':
			if (pn >= 2) {
				p++, pn--;
			}
			/* fall through */
		default:
			if (!sn || *p != *s)
				return 0;
			s++, sn--;
			break;
		}
		p++, pn--;
	}
	return sn == 0;
}

int serve_glob(const char *p, size_t pn, const char *s, size_t sn)
{
	return glob_match(p, pn, s, sn);
}

static uint64_t cursor_save(struct server *sv, const void *key, size_t klen)
{
	pthread_mutex_lock(&sv->cursor_mu);
	uint64_t id = ++sv->cursor_seq;
	struct cursor_ent *e = &sv->cursors[id % CURSOR_SLOTS];
	e->id = id;
	e->klen = (uint16_t)klen;
	memcpy(e->key, key, klen);
	pthread_mutex_unlock(&sv->cursor_mu);
	return id;
}

static int cursor_load(struct server *sv, uint64_t id, unsigned char *key, uint16_t *klen)
{
	int ok = 0;
	pthread_mutex_lock(&sv->cursor_mu);
	struct cursor_ent *e = &sv->cursors[id % CURSOR_SLOTS];
	if (e->id == id) {
		memcpy(key, e->key, e->klen);
		*klen = e->klen;
		ok = 1;
	}
	pthread_mutex_unlock(&sv->cursor_mu);
	return ok;
}

/* Rows of the scan op, after the cursor's own key. */
static unsigned scan_rows(struct job *j, unsigned *first)
{
	int n = lotus_txn_scan_rows(j->t, j->scan_op);
	*first = 0;
	if (n <= 0)
		return 0;
	if (j->skip_first) {
		const void *k, *v;
		size_t kl, vl;
		if (lotus_txn_scan_row(j->t, j->scan_op, 0, &k, &kl, &v, &vl) == 0 &&
		    kl == j->start_len && !memcmp(k, j->start, kl))
			*first = 1;
	}
	return (unsigned)n;
}

/* DBSIZE: count every row, a chunk per step; 1 if another step was started. */
static int dbsize_more(struct job *j)
{
	unsigned first, n = scan_rows(j, &first);
	const void *k, *v;
	size_t kl, vl;
	j->dbsize += n - first;
	if (n < j->scan_count + (unsigned)j->skip_first)
		return 0;
	if (lotus_txn_scan_row(j->t, j->scan_op, n - 1, &k, &kl, &v, &vl))
		return 0;
	memcpy(j->start, k, kl);
	j->start_len = (uint16_t)kl;
	j->skip_first = 1;
	int rc = scan_stage(j);
	if (rc < 0)
		return rc;
	rc = lotus_txn_execute_async(j->t, cb_exec, j);
	return rc ? rc : 1;
}

void scan_run(struct job *j, unsigned ci, struct rbuf *b)
{
	unsigned first, n = scan_rows(j, &first);
	struct resp_arg pat = { NULL, 0 };
	const void *k, *v;
	size_t kl, vl;
	for (unsigned a = 2; a + 1 < job_argc(j, ci); a += 2)
		if (resp_arg_is((struct resp_arg[]){ job_arg(j, ci, a) }, "MATCH"))
			pat = job_arg(j, ci, a + 1);
	uint64_t next = 0;
	if (n >= j->scan_count + (unsigned)j->skip_first && n > first &&
	    lotus_txn_scan_row(j->t, j->scan_op, n - 1, &k, &kl, &v, &vl) == 0)
		next = cursor_save(j->sv, k, kl);
	unsigned hits = 0;
	int ty;
#define SCAN_HIT() (lotus_txn_scan_row(j->t, j->scan_op, i, &k, &kl, &v, &vl) == 0 && \
		    (!pat.p || glob_match(pat.p, pat.len, k, kl)) && \
		    types_row_live(j->sv, v, vl, &ty) && (j->scan_type < 0 || ty == j->scan_type))
	for (unsigned i = first; i < n; i++)
		if (SCAN_HIT())
			hits++;
	resp_array(b, 2);
	char cur[24];
	snprintf(cur, sizeof(cur), "%llu", (unsigned long long)next);
	resp_bulk_str(b, cur);
	resp_array(b, hits);
	for (unsigned i = first; i < n; i++)
		if (SCAN_HIT())
			resp_bulk(b, k, kl);
#undef SCAN_HIT
}

/* SCAN cursor [MATCH pattern] [COUNT n]: the arguments were checked. */
static int scan_setup(struct job *j, const struct resp_cmd *cmd, struct rbuf *err)
{
	long long cur = 0, count = 10;
	if (resp_arg_ll(&cmd->argv[1], &cur) || cur < 0) {
		resp_error(err, "ERR invalid cursor");
		return -1;
	}
	for (unsigned a = 2; a < cmd->argc; a += 2) {
		if (a + 1 >= cmd->argc) {
			resp_error(err, "ERR syntax error");
			return -1;
		}
		if (resp_arg_is(&cmd->argv[a], "COUNT")) {
			if (resp_arg_ll(&cmd->argv[a + 1], &count) || count < 1) {
				resp_error(err, count < 1 ? "ERR syntax error"
							  : "ERR value is not an integer or out of range");
				return -1;
			}
		} else if (resp_arg_is(&cmd->argv[a], "TYPE")) {
			j->scan_type = types_type_of(&cmd->argv[a + 1]);
			if (j->scan_type < 0)
				j->scan_type = 99;   /* Redis: an unknown type matches nothing */
		} else if (!resp_arg_is(&cmd->argv[a], "MATCH")) {
			resp_error(err, "ERR syntax error");
			return -1;
		}
	}
	j->scan_count = (unsigned)(count > SCAN_COUNT_MAX ? SCAN_COUNT_MAX : count);
	if (cur == 0) {
		j->start[0] = 0;           /* below every key (keys are 1..128 bytes) */
		j->start_len = 1;
		j->skip_first = 0;
	} else if (cursor_load(j->sv, (uint64_t)cur, j->start, &j->start_len)) {
		j->skip_first = 1;
	} else {
		resp_error(err, "ERR invalid or expired cursor (lotus serve keeps the last %u)",
			   CURSOR_SLOTS);
		return -1;
	}
	return 0;
}

void job_start_bg(struct worker *w, int solo)
{
	static const struct cmd_def count_def = { .name = "KEYSPACE", .arity = 1, .kind = CK_SOLO,
						  .solo = SOLO_COUNT };
	static const struct cmd_def sweep_def = { .name = "EXPIRESWEEP", .arity = 1,
						  .kind = CK_SOLO, .solo = SOLO_SWEEP };
	_Atomic int *running = solo == SOLO_SWEEP ? &w->sv->sweep_running : &w->sv->ks_running;
	struct resp_arg a = { solo == SOLO_SWEEP ? "EXPIRESWEEP" : "KEYSPACE",
			      solo == SOLO_SWEEP ? 11u : 8u };
	struct resp_cmd cmd = { &a, 1, 1 };
	struct job *j = w->job_pool;
	if (j) {
		w->job_pool = j->delay_next;
		w->njob_pool--;
		j->delay_next = NULL;
	} else if (!(j = calloc(1, sizeof(*j)))) {
		*running = 0;
		return;
	}
	j->c = NULL;           /* no client: job_end answers nobody */
	j->w = w;
	j->sv = w->sv;
	j->solo = solo;
	j->writes = solo == SOLO_SWEEP;
	if (job_add(j, solo == SOLO_SWEEP ? &sweep_def : &count_def, &cmd, NULL)) {
		job_free(j);
		*running = 0;
		return;
	}
	job_start(j);
}

void job_start_solo(struct conn *c, const struct cmd_def *d, const struct resp_cmd *cmd)
{
	struct job *j = job_new(c, 0);
	struct rbuf err;
	rbuf_init(&err);
	if (!j) {
		resp_error(&c->out, "ERR out of memory");
		return;
	}
	j->solo = d->solo;
	j->scan_count = DBSIZE_CHUNK;
	j->writes = d->solo == SOLO_FLUSH;
	j->scan_type = -1;
	if (d->solo == SOLO_SCAN && scan_setup(j, cmd, &err)) {
		rbuf_put(&c->out, err.data, err.len);
		rbuf_free(&err);
		job_free(j);
		return;
	}
	if (job_add(j, d, cmd, NULL)) {
		resp_error(&c->out, "ERR out of memory");
		job_free(j);
		return;
	}
	job_start(j);
}
