/*
 * serve_types.h - the commands of serve_types.c (Redis's types, expiry,
 * WATCH) for the command table, and the string helpers serve_cmds.c uses so
 * that strings carry a type, an expiry and a stamp (serve_types.c's essay).
 */
#ifndef LOTUS_SERVE_TYPES_H
#define LOTUS_SERVE_TYPES_H
#include <stdint.h>
#include "serve/serve_int.h"

enum { T_NONE = -1, T_STRING = 0, T_HASH, T_LIST, T_SET, T_ZSET };

int64_t types_now_ms(void);                 /* CLOCK_REALTIME, ms: expiry's clock */
/* Argument i as a string: 1 and its bytes, 0 missing or expired, -1 another
 * type.  *expire (may be NULL): its expiry (0: none). */
int str_get(struct job *j, unsigned ci, unsigned i, const char **v, size_t *n, int64_t *expire);
/* Make argument i the string v with expiry expire (0: none); 0 or -ENOMEM. */
int str_set(struct job *j, unsigned ci, unsigned i, const void *v, size_t n, int64_t expire);
void put_wrongtype(struct rbuf *b);
int job_add_watchcheck(struct job *j, const struct resp_cmd *cmd);

#define TYPES_RUN(x) void run_##x(struct job *j, unsigned ci, struct rbuf *b)
TYPES_RUN(hset); TYPES_RUN(hmset); TYPES_RUN(hsetnx); TYPES_RUN(hget); TYPES_RUN(hmget);
TYPES_RUN(hdel); TYPES_RUN(hlen); TYPES_RUN(hexists); TYPES_RUN(hincrby);
TYPES_RUN(hgetall); TYPES_RUN(hkeys); TYPES_RUN(hvals); TYPES_RUN(hscan);
TYPES_RUN(sadd); TYPES_RUN(srem); TYPES_RUN(sismember); TYPES_RUN(scard);
TYPES_RUN(smembers); TYPES_RUN(spop);
TYPES_RUN(zadd); TYPES_RUN(zscore); TYPES_RUN(zcard); TYPES_RUN(zrem); TYPES_RUN(zrange);
TYPES_RUN(zrangebyscore); TYPES_RUN(zpopmin);
TYPES_RUN(lpush); TYPES_RUN(rpush); TYPES_RUN(lpop); TYPES_RUN(rpop); TYPES_RUN(llen);
TYPES_RUN(lrange); TYPES_RUN(lindex);
TYPES_RUN(type); TYPES_RUN(exists); TYPES_RUN(del); TYPES_RUN(rename);
TYPES_RUN(expire); TYPES_RUN(pexpire); TYPES_RUN(expireat); TYPES_RUN(pexpireat);
TYPES_RUN(ttl); TYPES_RUN(pttl); TYPES_RUN(persist); TYPES_RUN(setex); TYPES_RUN(psetex);
TYPES_RUN(watch);
#undef TYPES_RUN

#endif
