/*
 * door.h - lotus's front door: the TCP socket a server listens on, and the
 * authenticated handshake every connection passes before UCX sees a byte.
 *
 * A client connects to the door, both sides prove they know the cluster
 * secret (HMAC-SHA-256 over fresh nonces of both sides, libsodium), and only
 * then do they swap UCX worker addresses over the socket; net_conn.c connects
 * the endpoints by those addresses.  The socket is closed after the swap.
 *
 *   client                                   server (door thread)
 *   HELLO     magic "lotus-d2", Nc   ----->
 *                                   <-----  CHALLENGE  Ns, C, Ms = H(K, "server" Nc Ns C)
 *   (check Ms: the server knows K)
 *   AUTH      Mc = H(K, "client" Nc Ns A), A ->
 *                                            (check Mc; max_clients)
 *                                   <-----  WELCOME  B   or  ERROR code, text
 *
 * K is SHA-256 of the secret file's bytes (trailing white space removed); with
 * no secret on either side K is all zero, so two unsecured ends still meet, and
 * a secured end never meets an unsecured one.  The labels bind the direction:
 * a client's MAC reflected as a server's does not verify.  A is the client's
 * worker address, B the address of the server worker chosen for it.  C is the
 * server's cluster id (8 bytes, little-endian; 0: it has none), which the
 * client checks against the cluster it means (net_connect).  The magic's last
 * digit is the handshake version: a server answers a version-1 HELLO with an
 * ERROR that names both versions.
 *
 * Frames: 8-byte header (type, 3 zero bytes, little-endian u32 payload
 * length), then the payload.  Every type has a fixed or bounded length; a frame
 * of the wrong type for the state, a bad length, or any byte beyond the
 * handshake closes the connection.  A handshake not done within
 * DOOR_TIMEOUT_MS is closed.  A (MAC-checked) address that check_addr refuses
 * gets ERROR "worker address refused", before anything else sees it.
 *
 * At most DOOR_MAX_PENDING handshakes run at once, and at most
 * DOOR_MAX_PENDING_PER_IP from one peer address.  A new connection beyond
 * either cap does not push the door shut: it takes the place of the pending
 * handshake that has got least far, oldest first (silent ones first, then
 * ones that sent HELLO; from its own address when that address is at its
 * cap).  A client that speaks at once is thus only closed after
 * DOOR_MAX_PENDING later connections did so too, not by every idle one.
 * Failures are logged once per peer address per minute, and at most
 * DOOR_LOG_LINES lines per DOOR_LOG_WINDOW_S seconds whatever the number of
 * addresses; the rest are counted in one line per window.
 *
 * Threads: door_open starts one thread that accepts and runs every handshake
 * (non-blocking sockets, one poll loop); on_client runs in that thread.
 * door_dial blocks the calling thread (bounded by its timeout).
 */
#ifndef LOTUS_DOOR_H
#define LOTUS_DOOR_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define DOOR_KEY_BYTES   32
#define DOOR_MAX_ADDR    16384   /* largest worker address accepted */
#define DOOR_TIMEOUT_MS  2000
#define DOOR_MAX_PENDING 128
#define DOOR_MAX_PENDING_PER_IP 16   /* one address cannot fill the table */
#define DOOR_LOG_LINES    20
#define DOOR_LOG_WINDOW_S 10

struct door_key {
	int set;                       /* 0: no secret (K is zero) */
	uint8_t k[DOOR_KEY_BYTES];
};

/* Read the secret file: readable, regular (or a memfd), non-empty, at most
 * 64 KiB.  0, or -errno / LOTUS_ECONFIG with one error line logged. */
int door_key_load(const char *path, struct door_key *out);
/* The cluster id derived from the secret: a keyed hash (BLAKE2b keyed with
 * K), so it tells nothing of K.  Never 0; 0 if key is unset. */
uint64_t door_cluster_id_of_key(const struct door_key *key);
struct lotus_config;
/* The cluster id a config names: [cluster] cluster_id; else derived from the
 * secret (secret_file: the file to read instead of the config's, or NULL);
 * else from the server list (config_servers_cluster_id).  0, or an error of
 * door_key_load (logged). */
int door_config_cluster_id(const struct lotus_config *cfg, const char *secret_file,
			   uint64_t *out);
/* n random bytes (libsodium). */
void door_random(void *buf, size_t n);
/* A fresh random secret in a sealed memfd (close-on-exec: clear the flag in
 * a child that should inherit it); path gets "/proc/self/fd/N".  The fd, or
 * -errno (logged). */
int door_secret_memfd(char *path, size_t len);

struct door;

struct door_opts {
	const char *host;
	uint16_t port;
	const struct door_key *key;
	unsigned max_clients;          /* 0: no limit */
	uint64_t cluster_id;           /* sent in CHALLENGE (0: none) */
	atomic_uint *nclients;         /* live connections; net decrements on close */
	unsigned ntargets;
	const void *const *taddr;      /* worker address of each target */
	const size_t *tlen;
	/* An authenticated client was welcomed on target t; addr (len bytes,
	 * malloc'd) is its worker address and now belongs to the callee. */
	void (*on_client)(void *arg, unsigned t, void *addr, size_t len, const char *peer);
	/* May an authenticated client's address (len bytes) be used?  0, or
	 * non-zero with why (one phrase) filled in: the client is refused.
	 * NULL: every address may. */
	int (*check_addr)(void *arg, const void *addr, size_t len, char *why, size_t whylen);
	void *arg;
};

struct door_stats {
	uint64_t accepted;        /* TCP connections accepted */
	uint64_t welcomed;        /* handshakes passed */
	uint64_t auth_failed;     /* wrong MAC (wrong or missing secret) */
	uint64_t bad_frames;      /* malformed, truncated or unexpected bytes */
	uint64_t timed_out;       /* silent or slow handshakes closed */
	uint64_t refused_full;    /* authenticated, but max_clients was reached */
	uint64_t dropped;         /* closed at accept: too many handshakes at once */
	uint64_t bad_addr;        /* authenticated, but the worker address was refused */
	uint64_t evicted;         /* pending handshakes closed to make room for newer */
};

/* Bind host:port (port 0: any free one), listen, start the thread.
 * 0, -EADDRINUSE, -EINVAL or -errno (logged). */
int door_open(const struct door_opts *o, struct door **out);
uint16_t door_port(const struct door *d);
void door_stats(struct door *d, struct door_stats *out);
void door_close(struct door *d);

/* Client side: handshake with the door at host:port within timeout_ms
 * (a handshake the door accepts and then closes unanswered, as a door under
 * a flood does to make room, is tried again a few times within it).
 * *cluster_id: in, the cluster the caller means (0: any); out, once the
 * server proved the secret, the server's cluster id (0: none).  On success
 * *peer_addr (malloc'd, *peer_len bytes) is the server worker's address.
 * Errors: LOTUS_EUNAVAIL (unreachable, closed), LOTUS_ETIMEOUT, -EACCES
 * (authentication failed, logged), -EUSERS (server full, logged),
 * LOTUS_EPROTO (not a lotus door, another handshake version, or our worker
 * address refused; logged), LOTUS_ECONFIG (a server of another cluster than
 * the one meant: the handshake stopped before AUTH, so the server admitted
 * nothing; not logged). */
int door_dial(const char *host, uint16_t port, int timeout_ms, const struct door_key *key,
	      const void *addr, size_t len, void **peer_addr, size_t *peer_len,
	      uint64_t *cluster_id);

#endif
