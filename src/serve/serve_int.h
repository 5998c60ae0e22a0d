/*
 * serve_int.h - internals of `lotus serve`, shared by serve.c (threads, event
 * loops, connections), serve_conncmds.c (the commands that change a
 * connection) and serve_data.c (jobs: commands on keys run as lotus
 * transactions).
 *
 * Ownership: a worker thread owns its lotus session, its epoll set, its
 * connections and their jobs; nothing of those is touched by another thread.
 * Shared between threads: struct server (read-only after start), the inbox of
 * each worker (accepted sockets handed over, under inbox_mu), the SCAN cursor
 * table (cursor_mu), the counters (atomics), each worker's snapshot of its
 * session counters (stats_mu) and the AUTH failures per address (auth_mu).
 */
#ifndef LOTUS_SERVE_INT_H
#define LOTUS_SERVE_INT_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "lotus.h"
#include "serve/resp.h"
#include "serve/serve.h"

#define KEY_MAX 128           /* lotus's key limit */
#define SERVE_ROW_EXTRA 64    /* a row: the value and serve_types.c's header */

struct server;
struct worker;
struct conn;
struct job;

/* What a command needs (struct cmd_def.kind). */
enum cmd_kind {
	CK_IMMEDIATE,   /* answered at once, no data (PING, ECHO, COMMAND, ...) */
	CK_DATA,        /* reads/writes keys: part of a job (GET, SET, ...) */
	CK_SOLO,        /* a job of its own (SCAN, DBSIZE) */
	CK_STATE,       /* changes the connection (AUTH, MULTI, EXEC, ...) */
};

/* Which arguments of a data command are keys, and whether the command needs
 * their value (read) and/or changes them (write). */
enum keyspec {
	KS_NONE,
	KS_R1,        /* argument 1 read (GET, STRLEN) */
	KS_RW1,       /* argument 1 read and written (INCR, APPEND, GETSET, SETNX) */
	KS_SET,       /* SET: argument 1 written; read too with NX, XX or GET */
	KS_R_ALL,     /* arguments 1.. read (MGET, EXISTS) */
	KS_RW_ALL,    /* arguments 1.. read and written (DEL) */
	KS_W_PAIRS,   /* arguments 1, 3, 5.. written (MSET) */
	KS_W1,        /* argument 1 written, not read (SETEX, PSETEX) */
	KS_RW12,      /* arguments 1 and 2 read and written (RENAME) */
	KS_R_PAIRS,   /* arguments 1, 3, 5.. read (EXEC's WATCH check) */
};
enum { SOLO_NONE, SOLO_SCAN, SOLO_DBSIZE, SOLO_KEYS, SOLO_FLUSH, SOLO_COUNT, SOLO_SWEEP };

struct cmd_def {
	const char *name;
	int arity;               /* Redis style: n exact, -n at least n (name included) */
	enum cmd_kind kind;
	int noauth;              /* allowed before AUTH */
	int first_key, last_key, step;  /* for COMMAND (last -1: all) */
	/* CK_IMMEDIATE / CK_STATE: handle now, reply into c->out (or b) */
	void (*now)(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b);
	/* CK_DATA: check arguments at queue time; 0 or write an error into b and
	 * return -1 */
	int (*check)(struct server *sv, const struct resp_cmd *cmd, struct rbuf *b);
	/* CK_DATA: compute the reply from the job's overlay */
	void (*run)(struct job *j, unsigned ci, struct rbuf *b);
	enum keyspec keys;       /* CK_DATA: which arguments are keys, read or written */
	int solo;                /* CK_SOLO: SOLO_SCAN or SOLO_DBSIZE */
};

const struct cmd_def *cmd_lookup(const struct resp_arg *name);
extern const struct cmd_def cmd_table[];
extern const unsigned cmd_count;

struct counters {
	_Atomic uint64_t commands, conns_total, txn_commit, txn_retry, txn_fail, proto_errors;
	_Atomic uint64_t rejected;       /* refused: --max-clients, or out of descriptors */
	_Atomic int64_t conns_now;       /* accepted and not yet closed */
};

struct cursor_ent {
	uint64_t id;
	uint16_t klen;
	unsigned char key[KEY_MAX];
};
#define CURSOR_SLOTS 1024

/* Recent AUTH failures of one client address (serve.c's AUTH throttle). */
struct auth_ent {
	unsigned char addr[16];       /* IPv6, or IPv4 mapped into it */
	unsigned fails;               /* 0: a free slot */
	uint64_t last_ns;             /* the last failure */
};
#define AUTH_SLOTS 1024
#define AUTH_PROBE 8       /* slots an address may take, from its hash on */

struct server {
	struct serve_opts o;
	lotus_cluster_t *cl;
	lotus_table_t tb;
	lotus_table_t tb_sub;            /* members of hashes, lists, sets, zsets */
	lotus_table_t tb_exp;            /* the expiry index */
	uint32_t max_value;
	_Atomic uint64_t stamp_seq;      /* serve_types.c: write stamps, container ids */
	/* INFO keyspace: counted by a background scan (serve_types.c), at most
	 * once a second, when INFO asks */
	_Atomic long long ks_keys, ks_expires;
	_Atomic uint64_t ks_at_ns;       /* the last count (0: none yet) */
	_Atomic int ks_running;
	/* the active expiry sweep (serve_types.c), started by worker 0 */
	_Atomic int sweep_running;
	uint64_t sweep_next_ns;
	struct resp_limits lim;
	int lfd, stop_efd;
	_Atomic int stop;
	uint16_t port;
	uint64_t start_ns;
	unsigned nworkers;
	struct worker *workers;
	_Atomic unsigned next_worker;
	_Atomic uint64_t next_conn_id;
	struct counters ctr;
	pthread_mutex_t ready_mu;        /* workers report their session open */
	pthread_cond_t ready_cv;
	unsigned ready;
	int ready_err;
	pthread_mutex_t cursor_mu;
	uint64_t cursor_seq;
	struct cursor_ent cursors[CURSOR_SLOTS];
	pthread_mutex_t auth_mu;
	uint64_t auth_seed;
	struct auth_ent auth[AUTH_SLOTS];
	/* accepting, worker 0 only: */
	int reserve_fd;                  /* spent to refuse a client when out of fds */
	uint64_t listen_resume_ns;       /* listener disarmed until then (0: armed) */
	uint64_t accept_log_ns;          /* no accept-error line before then */
	uint64_t accept_refused;         /* refused since the last such line */
};

struct worker {
	struct server *sv;
	unsigned id;
	pthread_t th;
	lotus_session_t *s;
	int ep, efd;
	pthread_mutex_t inbox_mu;
	int *inbox;
	unsigned ninbox, capinbox;
	struct conn *conns;          /* every connection of this worker */
	struct conn *runnable;       /* connections to process after a poll */
	lotus_txn_t **txn_pool;      /* finished transactions to recycle */
	unsigned npool, cappool;
	unsigned inflight;           /* jobs with a transaction in flight */
	struct job *delayed;         /* jobs waiting to retry (serve_data.c) */
	struct job *job_pool;        /* finished jobs kept for reuse */
	unsigned njob_pool;
	uint64_t rnd;
	pthread_mutex_t stats_mu;
	struct lotus_net_counters net;   /* snapshot of the session's counters */
	struct lotus_net_counters net_old;   /* the sum of the sessions it replaced */
	int renew;                   /* a memory server's connection was lost
					(LOTUS_ELEASE, LOTUS_EUNAVAIL): open a
					new session once nothing is in flight */
	uint64_t renew_after_ns;     /* no new try before (after a failed one) */
	unsigned nheld;              /* connections held by the AUTH throttle */
	uint64_t idle_check_ns;      /* next look for idle clients (--timeout) */
};

struct conn {
	struct worker *w;
	struct conn *next, *prev;     /* w->conns */
	struct conn *run_next;
	int on_run;
	int fd;
	uint64_t id;
	struct rbuf in, out;
	size_t in_off, out_off;
	struct resp_cmd cmd;
	int authed;
	int close_after;              /* close once out is written */
	int dead;                     /* socket gone: free when the job ends */
	int reading;                  /* EPOLLIN registered */
	int writing;                  /* EPOLLOUT registered */
	int blocked;                  /* the last send hit EAGAIN */
	int multi;                    /* inside MULTI */
	int multi_err;                /* a queued command was refused: EXEC aborts */
	struct job *mq;               /* commands queued by MULTI */
	struct job *job;              /* the job in flight, if any */
	uint64_t last_ns;             /* the last byte read or written (--timeout) */
	uint64_t hold_until_ns;       /* AUTH throttle: not read nor written before */
	struct rbuf watch;            /* WATCHed keys with their versions (serve_types.c) */
	unsigned nwatch;
	unsigned auth_fails;          /* failed AUTHs on this connection */
	char name[64];
};

/* ---- serve.c ---- */
void conn_job_done(struct conn *c);
void conn_events(struct conn *c);  /* re-arm c's epoll interest from its state */
uint64_t serve_now_ns(void);       /* CLOCK_MONOTONIC */
/* ---- serve_data.c ---- */
struct job *job_new(struct conn *c, int is_exec);
void job_free(struct job *j);      /* back to the worker's pool, or freed */
void worker_jobs_free(struct worker *w);
unsigned job_ncmds(const struct job *j);
int job_has_data(const struct job *j);
/* Add a command (arguments copied); prebuilt != NULL: its reply is fixed. */
int job_add(struct job *j, const struct cmd_def *d, const struct resp_cmd *cmd,
	    const struct rbuf *prebuilt);
/* Start the job's transaction; its replies go to c->out when it ends, then
 * conn_job_done(c). */
void job_start(struct job *j);
/* Append the fixed replies of a job without data commands, and free it. */
void job_reply_now(struct job *j);
/* CK_SOLO commands */
void job_start_solo(struct conn *c, const struct cmd_def *d, const struct resp_cmd *cmd);
/* Background jobs with no client on worker w: SOLO_COUNT counts the keys
 * for INFO keyspace, SOLO_SWEEP deletes expired keys (serve_types.c). */
void job_start_bg(struct worker *w, int solo);
lotus_txn_t *worker_txn_get(struct worker *w);
/* Start the delayed retries that are due; 1 if some are still waiting. */
int worker_run_delayed(struct worker *w);
void worker_txn_put(struct worker *w, lotus_txn_t *t);
/* What a data command's run sees: its arguments and the job's overlay. */
struct resp_arg job_arg(const struct job *j, unsigned ci, unsigned i);
unsigned job_argc(const struct job *j, unsigned ci);
struct server *job_server(const struct job *j);
/* 1 and the value argument i (a key) has at this point of the job, or 0. */
int kv_get(struct job *j, unsigned ci, unsigned i, const char **v, size_t *n);
int kv_version(struct job *j, unsigned ci, unsigned i, uint64_t *ver);
int kv_set(struct job *j, unsigned ci, unsigned i, const void *v, size_t n);
int kv_set2(struct job *j, unsigned ci, unsigned i, const void *a, size_t an, const void *b,
	    size_t bn);   /* the value a then b, as kv_set */
int kv_del(struct job *j, unsigned ci, unsigned i);   /* 1 if it existed */
/* Keys a command computes (the rows of a type's members, in table TB_SUB,
 * TB_EXP or TB_MAIN), read in a further pass of the job: ov_get answers OV_PENDING for
 * a key not read yet and asks for it; once every command of a pass has run,
 * a pass with pending reads is thrown away, the reads are executed, and
 * every command runs again from the start (its replies and changes are
 * rebuilt).  fresh: the key cannot exist (a container id made in this pass):
 * no read.  ov_put / ov_del of a key never read write it blind. */
enum { TB_MAIN = 0, TB_SUB = 1, TB_EXP = 2 };
#define OV_PENDING (-2)
int ov_get(struct job *j, int tab, const void *key, size_t klen, int fresh,
	   const char **v, size_t *n);
int ov_put(struct job *j, int tab, const void *key, size_t klen, const void *v, size_t n);
int ov_del(struct job *j, int tab, const void *key, size_t klen);
struct ov_row {
	const char *k, *v;
	size_t kn, vn;
};
/* Rows with key >= start and the first plen bytes of start, in key order,
 * at least min(want, such rows) of them, with this job's changes applied;
 * *rows is malloc'd (free it).  The count, OV_PENDING or -ENOMEM. */
int ov_scan(struct job *j, int tab, const void *start, size_t slen, size_t plen,
	    unsigned want, struct ov_row **rows);
int job_pending(const struct job *j);          /* this pass has asked for reads */
struct conn *job_conn(const struct job *j);    /* NULL: no client */
void job_set_watch_fail(struct job *j);
int serve_glob(const char *p, size_t pn, const char *s, size_t sn);   /* Redis's glob */
/* ---- serve_types.c ---- */
extern const struct cmd_def cmd_watchcheck;
int types_row_live(struct server *sv, const void *v, size_t n, int *type);
const char *types_name(int type);
int types_type_of(const struct resp_arg *name);   /* SCAN TYPE: -1 unknown */

/* ---- serve_cmds.c: the command table ---- */
/* Connection commands, in serve.c */
void cmd_auth(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b);
void cmd_hello(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b);
void cmd_select(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b);
void cmd_quit(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b);
void cmd_client(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b);
void cmd_info(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b);
void cmd_multi(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b);
void cmd_exec(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b);
void cmd_discard(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b);
void cmd_watch(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b);
void cmd_reset(struct conn *c, const struct resp_cmd *cmd, struct rbuf *b);

#endif
