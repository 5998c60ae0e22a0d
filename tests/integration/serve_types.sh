#!/usr/bin/env bash
# timeout: 150
# `lotus serve`'s data types through redis-cli, as a Redis user meets them:
# hashes, lists (across several chunks), sets, sorted sets, TYPE, KEYS,
# SCAN TYPE, RENAME, DEL and FLUSHDB of containers, WRONGTYPE worded as Redis
# does, and expiry (SET EX, EXPIRE/TTL/PTTL/PERSIST, SETEX) that a key really
# loses, also unread (the active sweep); `redis-cli --bigkeys` completes; INFO keyspace and memory.
. "$(dirname "$0")/lib.sh"
command -v redis-cli >/dev/null || { echo "SKIP: redis-cli (redis-tools) not installed"; exit 77; }
dir=$T
. "$(dirname "$0")/../../scripts/lib-serve.sh"
at_exit 'serve_stop'

serve_start "$dir" --local 2 --threads 2 || fail "serve did not start"
R() { timeout 20 redis-cli -p "$SERVE_PORT" "$@"; }
want() {  # want EXPECTED redis-cli args...
  local exp=$1; shift
  local got; got=$(R "$@" 2>&1)
  [ "$got" = "$exp" ] || fail "redis-cli $*: got [$got], want [$exp]"
  echo "ok: $* -> $(echo "$got" | head -c 80 | tr '\n' ' ')"
}
lines() { printf '%s\n' "$@"; }

# hashes
want 2 HSET h f1 v1 f2 v2
want 0 HSET h f1 w1
want w1 HGET h f1
want "" HGET h nope
want "$(lines w1 '' v2)" HMGET h f1 nope f2
want "$(lines f1 w1 f2 v2)" HGETALL h
want "$(lines f1 f2)" HKEYS h
want "$(lines w1 v2)" HVALS h
want 2 HLEN h
want 1 HEXISTS h f2
want 5 HINCRBY h n 5
want 3 HINCRBY h n -2
want "$(lines 0 f1 w1)" HSCAN h 0 MATCH 'f1'
want 2 HDEL h f2 n nope
want hash TYPE h

# lists: 500 items of 20 bytes fill several chunks
want 3 RPUSH l b c d
want 4 LPUSH l a
want "$(lines a b c d)" LRANGE l 0 -1
want c LINDEX l -2
want a LPOP l
want d RPOP l
want "$(lines b c)" LPOP l 5
want "" LPOP l
want 0 LLEN l
want none TYPE l
item=$(head -c 20 /dev/zero | tr '\0' i)
for i in $(seq 500); do echo "RPUSH big $item$i"; done | R >/dev/null
want 500 LLEN big
want "$item"300 LINDEX big 299
[ "$(R LRANGE big 0 -1 | wc -l)" = 500 ] || fail "LRANGE big 0 -1"
want "$(lines "$item"499 "$item"500)" LRANGE big -2 -1
want list TYPE big

# sets
want 3 SADD s x y z
want 0 SADD s x
want 1 SISMEMBER s y
want 0 SISMEMBER s w
want 3 SCARD s
want "$(lines x y z)" SMEMBERS s
want 1 SREM s y
R SPOP s 1 >/dev/null
want 1 SCARD s
want set TYPE s

# sorted sets: the index orders by score, then member
want 3 ZADD z 2 b 1 a 3 c
want 1 ZADD z -1.5 neg
want 0 ZADD z 10 a
want 10 ZSCORE z a
want "$(lines neg b c a)" ZRANGE z 0 -1
want "$(lines b 2 c 3)" ZRANGEBYSCORE z 2 '(10' WITHSCORES
want "$(lines neg -1.5)" ZPOPMIN z
want 1 ZREM z b
want 2 ZCARD z
want zset TYPE z

# any type: WRONGTYPE, KEYS, SCAN TYPE, RENAME, DEL, EXISTS
want OK SET str v
wt="WRONGTYPE Operation against a key holding the wrong kind of value"
want "$wt" GET h
want "$wt" LPUSH h x
want "$wt" HGET str f
want "$wt" ZADD s 1 m
want "$(lines big h s str z)" KEYS '*'
want "$(lines big)" KEYS 'b?g'
want "$(lines 0 h)" SCAN 0 TYPE hash
want OK RENAME h h2
want w1 HGET h2 f1
want 0 EXISTS h
want "ERR no such key" RENAME nope x
want 3 DEL h2 s z
want 0 HLEN h2
want 1 HSET h2 fresh 1
want "$(lines fresh 1)" HGETALL h2

# expiry
want OK SET e v EX 1
t=$(R TTL e); case $t in 1|0|-2) ;; *) fail "TTL e: $t" ;; esac  # -2: a slow machine
want OK SET keep v PX 100000
want 1 EXPIRE h2 100
t=$(R TTL h2); [ "$t" -ge 95 ] && [ "$t" -le 100 ] || fail "TTL h2: $t"
want 1 PERSIST h2
want -1 TTL h2
want -2 TTL nope
want OK SETEX ex2 1 v
want OK SET kt v2 KEEPTTL
want 0 EXPIRE nope 10
want 1 PEXPIRE big 800
ok=
for i in $(seq 40); do  # a second is enough; allow for a slow machine
  [ "$(R GET e)" = "" ] && [ "$(R EXISTS big ex2)" = 0 ] && { ok=1; break; }
  sleep 0.25
done
[ -n "$ok" ] || fail "SET EX 1 / PEXPIRE / SETEX: keys did not expire"
want "" GET e
want 0 LLEN big
want -2 TTL e
t=$(R PTTL keep); [ "$t" -gt 90000 ] || fail "PTTL keep: $t"
want v GET keep
echo "ok: keys expire"
# the active sweep deletes expired keys nobody reads (DBSIZE counts rows)
n0=$(R DBSIZE)
for i in $(seq 20); do echo "SET sw$i v PX 200"; done | R >/dev/null
want 1 HSET swh f v
want 1 PEXPIRE swh 200
ok=
for i in $(seq 60); do
  [ "$(R DBSIZE)" -le "$n0" ] && { ok=1; break; }
  sleep 0.25
done
[ -n "$ok" ] || fail "active expiry: DBSIZE $(R DBSIZE), was $n0 before 21 keys with PX 200"
echo "ok: the expiry sweep deleted 21 unread keys"

# redis-cli --bigkeys walks every type
out=$(R --bigkeys 2>&1) || fail "--bigkeys failed: $out"
echo "$out" | grep -q "Biggest   hash found" || fail "--bigkeys: $out"
echo "ok: --bigkeys"

# INFO in Redis's field names: keyspace (counted in the background, so ask
# until it shows), memory from the memory servers' pools
ks=
for i in $(seq 40); do
  ks=$(R INFO keyspace | tr -d '\r' | grep '^db0:')
  [ -n "$ks" ] && break
  sleep 0.25
done
echo "$ks" | grep -Eq '^db0:keys=[0-9]+,expires=[1-9][0-9]*,' || fail "INFO keyspace: [$ks]"
mem=$(R INFO memory | tr -d '\r' | sed -n 's/^used_memory://p')
[ "${mem:-0}" -gt 0 ] || fail "INFO memory: used_memory [$mem]"
R INFO | tr -d '\r' | grep -q '^connected_clients:' || fail "INFO clients"
echo "ok: INFO $ks, used_memory:$mem"

want OK FLUSHDB
want 0 DBSIZE
want "" KEYS '*'
want 0 HLEN h2
echo "serve_types: all ok"
