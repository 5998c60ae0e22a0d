/*
 * door.c - the front door (door.h): the listening socket, the server's
 * handshake state machine, and the client's dial.
 *
 * Server states of one accepted socket (struct dconn.state):
 *
 *   D_HELLO   reading HELLO           -> write CHALLENGE -> D_AUTH
 *   D_AUTH    reading AUTH            -> check MAC, the address, max_clients
 *                                        ok:   write WELCOME -> D_DONE
 *                                        else: write ERROR   -> D_FAIL
 *   D_DONE/D_FAIL  writing the last frame; then on_client (D_DONE) and close
 *
 * Any read while writing, an early EOF, a bad frame, or the deadline closes
 * the socket.  Nothing the peer sends is used before its MAC is checked except
 * the nonce and the address bytes, which are only hashed and copied, within
 * bounds checked against the header; after the MAC, check_addr vets the
 * address before on_client may hand it on.
 *
 * The table of pending handshakes is full or the peer's address is at its
 * share: door_accept closes the one that has got least far (door_victim) to
 * make room, rather than the newcomer.  It accepts at most DOOR_ACCEPT_BATCH
 * connections per poll round, so the handshakes already in the table get
 * their turn between batches however fast connections arrive.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sodium.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/config.h"
#include "common/log.h"
#include "net/door.h"

enum { F_HELLO = 1, F_CHALLENGE = 2, F_AUTH = 3, F_WELCOME = 4, F_ERROR = 5 };
enum { E_AUTH = 1, E_FULL = 2, E_ADDR = 3, E_VERSION = 4 };

/* The handshake version is the magic's last digit.  2 added the cluster id
 * to CHALLENGE; a version-1 client gets an ERROR naming both versions. */
#define DOOR_MAGIC     "lotus-d2"
#define DOOR_MAGIC_V1  "lotus-d1"
#define DOOR_CID       8
#define DOOR_NONCE     32
#define DOOR_MAC       32
#define DOOR_HDR       8
#define DOOR_MAX_FRAME (DOOR_MAC + DOOR_MAX_ADDR)
#define DOOR_MAX_ERR   256
#define DOOR_LOG_SLOTS 64
#define DOOR_LOG_NS    (60ULL * 1000000000ULL)
#define DOOR_WINDOW_NS ((uint64_t)DOOR_LOG_WINDOW_S * 1000000000ULL)
#define DOOR_ACCEPT_BATCH 32
#define DOOR_DIAL_TRIES   6    /* handshakes closed by a busy door: 5 .. 160 ms apart */

static const char label_server[] = "lotus door server";
static const char label_client[] = "lotus door client";

static pthread_once_t sodium_once = PTHREAD_ONCE_INIT;
static int sodium_ok;

static void door_sodium_init(void)
{
	sodium_ok = sodium_init() >= 0;
	if (!sodium_ok)
		log_error("door: libsodium failed to initialise");
}

static int door_crypto(void)
{
	pthread_once(&sodium_once, door_sodium_init);
	return sodium_ok ? 0 : -EIO;
}

static void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

void door_random(void *buf, size_t n)
{
	door_crypto();
	randombytes_buf(buf, n);
}

uint64_t door_cluster_id_of_key(const struct door_key *key)
{
	static const char msg[] = "lotus cluster id v1";
	uint8_t h[16];
	if (!key || !key->set || door_crypto())
		return 0;
	crypto_generichash(h, sizeof(h), (const uint8_t *)msg, sizeof(msg) - 1, key->k,
			   DOOR_KEY_BYTES);
	uint64_t v = get_u64(h);
	return v ? v : 1;
}

int door_config_cluster_id(const struct lotus_config *cfg, const char *secret_file,
			   uint64_t *out)
{
	struct door_key key;
	if (!secret_file || !*secret_file)
		secret_file = cfg->secret_file[0] ? cfg->secret_file : NULL;
	if (cfg->cluster_id) {
		*out = cfg->cluster_id;
		return 0;
	}
	if (!secret_file) {
		*out = config_servers_cluster_id(cfg);
		return 0;
	}
	int rc = door_key_load(secret_file, &key);
	if (rc)
		return rc;
	*out = door_cluster_id_of_key(&key);
	sodium_memzero(&key, sizeof(key));
	return 0;
}

/* ---- the secret ----------------------------------------------------------------- */

int door_secret_memfd(char *path, size_t len)
{
	unsigned char raw[32];
	char hex[65];
	int fd = memfd_create("lotus-secret", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		int e = errno;
		log_error("cannot hold a secret (memfd_create: %s)", strerror(e));
		return -e;
	}
	door_random(raw, sizeof(raw));
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	int rc = write(fd, hex, 64) == 64 ? 0 : -EIO;
	if (rc == 0 && fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK |
					      F_SEAL_SEAL) != 0)
		rc = -errno;
	sodium_memzero(raw, sizeof(raw));
	sodium_memzero(hex, sizeof(hex));
	if (rc) {
		close(fd);
		log_error("cannot write a secret: %s", strerror(-rc));
		return rc;
	}
	snprintf(path, len, "/proc/self/fd/%d", fd);
	return fd;
}

int door_key_load(const char *path, struct door_key *out)
{
	memset(out, 0, sizeof(*out));
	if (door_crypto())
		return -EIO;
	if (!path || !*path) {
		log_error("secret file: empty path");
		return LOTUS_ECONFIG;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		log_error("secret file %s: %s", path, strerror(e));
		return LOTUS_ECONFIG;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		log_error("secret file %s: not a regular file", path);
		close(fd);
		return LOTUS_ECONFIG;
	}
	if (st.st_size > 65536) {
		log_error("secret file %s: %lld bytes; at most 64 KiB", path, (long long)st.st_size);
		close(fd);
		return LOTUS_ECONFIG;
	}
	if ((st.st_mode & 0077) && st.st_nlink > 0)   /* (a memfd has no name: nlink 0) */
		log_warn("secret file %s is readable by group or others (mode %04o)", path,
			 (unsigned)(st.st_mode & 07777));
	unsigned char *buf = malloc(65537);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, 65537 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			log_error("secret file %s: %s", path, strerror(e));
			sodium_memzero(buf, 65537);
			free(buf);
			close(fd);
			return LOTUS_ECONFIG;
		}
		if (r == 0 || (n += (size_t)r) == 65537)
			break;
	}
	close(fd);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' ||
			 buf[n - 1] == '\t'))
		n--;
	int rc = 0;
	if (n == 0) {
		log_error("secret file %s is empty", path);
		rc = LOTUS_ECONFIG;
	} else if (n > 65536) {
		log_error("secret file %s: more than 64 KiB", path);
		rc = LOTUS_ECONFIG;
	} else {
		crypto_hash_sha256(out->k, buf, n);
		out->set = 1;
	}
	sodium_memzero(buf, 65537);
	free(buf);
	return rc;
}

static void door_mac(const struct door_key *key, const char *label, const uint8_t *nc,
		     const uint8_t *ns, const void *addr, size_t len, uint8_t mac[DOOR_MAC])
{
	static const uint8_t zero[DOOR_KEY_BYTES];
	crypto_auth_hmacsha256_state st;
	crypto_auth_hmacsha256_init(&st, key && key->set ? key->k : zero, DOOR_KEY_BYTES);
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)label, strlen(label) + 1);
	crypto_auth_hmacsha256_update(&st, nc, DOOR_NONCE);
	crypto_auth_hmacsha256_update(&st, ns, DOOR_NONCE);
	if (len)
		crypto_auth_hmacsha256_update(&st, addr, len);
	crypto_auth_hmacsha256_final(&st, mac);
	sodium_memzero(&st, sizeof(st));
}

static void put_hdr(uint8_t *h, int type, uint32_t len)
{
	h[0] = (uint8_t)type;
	h[1] = h[2] = h[3] = 0;
	h[4] = (uint8_t)len;
	h[5] = (uint8_t)(len >> 8);
	h[6] = (uint8_t)(len >> 16);
	h[7] = (uint8_t)(len >> 24);
}

/* Payload length of header h if it is a well-formed frame of type want, else -1. */
static long frame_len(const uint8_t *h, int want)
{
	if (h[0] != want || h[1] || h[2] || h[3])
		return -1;
	uint32_t len = h[4] | (uint32_t)h[5] << 8 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 24;
	switch (want) {
	case F_HELLO:     return len == 8 + DOOR_NONCE ? (long)len : -1;
	case F_CHALLENGE: return len == DOOR_NONCE + DOOR_CID + DOOR_MAC ? (long)len : -1;
	case F_AUTH:      return len > DOOR_MAC && len <= DOOR_MAX_FRAME ? (long)len : -1;
	case F_WELCOME:   return len > 0 && len <= DOOR_MAX_ADDR ? (long)len : -1;
	case F_ERROR:     return len >= 1 && len <= DOOR_MAX_ERR ? (long)len : -1;
	}
	return -1;
}

static void sock_peer(int fd, char *out, size_t len, uint32_t *ip)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	*ip = 0;
	snprintf(out, len, "?");
	if (getpeername(fd, (struct sockaddr *)&sa, &sl) == 0 && sa.sin_family == AF_INET) {
		char s[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &sa.sin_addr, s, sizeof(s));
		snprintf(out, len, "%s:%u", s, ntohs(sa.sin_port));
		*ip = sa.sin_addr.s_addr;
	}
}

/* ---- server ------------------------------------------------------------------- */

enum dstate { D_HELLO, D_AUTH, D_DONE, D_FAIL };

struct dconn {
	int fd;
	enum dstate state;
	uint64_t born, deadline;
	uint32_t ip;
	unsigned target;
	int slot;                      /* holds a max_clients slot */
	uint8_t nc[DOOR_NONCE], ns[DOOR_NONCE];
	uint8_t hdr[DOOR_HDR];
	uint8_t *in;                   /* payload buffer (frame_len bytes) */
	size_t in_have, in_need;       /* in_need 0: reading the header */
	uint8_t *out;
	size_t out_len, out_off;
	void *addr;                    /* client's worker address (D_DONE) */
	size_t addr_len;
	char peer[64];
};

struct door {
	struct door_opts o;
	const void **taddr;
	size_t *tlen;
	int lfd, efd;
	uint16_t port;
	unsigned rr;
	pthread_t thread;
	int running;
	struct dconn *conns[DOOR_MAX_PENDING];
	unsigned nconns;
	struct { uint32_t ip; uint64_t at; } logged[DOOR_LOG_SLOTS];
	uint64_t win_start;            /* this log window's start */
	unsigned win_lines;            /* lines logged in it */
	uint64_t unlogged, unlogged_since;   /* failures not logged, since */
	uint64_t evictions;            /* pending closed for room, since then */
	pthread_mutex_t st_lock;
	struct door_stats st;
};

#define STAT_INC(d, f) do { pthread_mutex_lock(&(d)->st_lock); (d)->st.f++; \
			    pthread_mutex_unlock(&(d)->st_lock); } while (0)

static void door_unlogged(struct door *d, uint64_t now, int evicted)
{
	if (d->unlogged + d->evictions == 0)
		d->unlogged_since = now;
	if (evicted)
		d->evictions++;
	else
		d->unlogged++;
}

/* The count of failures not logged, once per window (or now, if force). */
static void door_log_summary(struct door *d, int force)
{
	uint64_t now = clock_now_ns();
	if (!(d->unlogged + d->evictions) || (!force && now - d->unlogged_since < DOOR_WINDOW_NS))
		return;
	log_warn("door: in the last %llu s, %llu more failed or refused handshakes not logged, "
		 "%llu pending ones closed to make room for newer (the door counters in the "
		 "server's stats count them all)",
		 (unsigned long long)((now - d->unlogged_since) / 1000000000ULL + 1),
		 (unsigned long long)d->unlogged, (unsigned long long)d->evictions);
	d->unlogged = d->evictions = 0;
}

/* Log a failed handshake at most once a minute per peer address, and at most
 * DOOR_LOG_LINES lines a window in all; the rest are counted. */
static void door_log_fail(struct door *d, const struct dconn *c, const char *why)
{
	uint64_t now = clock_now_ns();
	unsigned oldest = 0;
	for (unsigned i = 0; i < DOOR_LOG_SLOTS; i++) {
		if (d->logged[i].at && d->logged[i].ip == c->ip) {
			if (now - d->logged[i].at < DOOR_LOG_NS) {
				door_unlogged(d, now, 0);
				return;
			}
			oldest = i;
			break;
		}
		if (d->logged[i].at < d->logged[oldest].at)
			oldest = i;
	}
	if (now - d->win_start >= DOOR_WINDOW_NS) {
		d->win_start = now;
		d->win_lines = 0;
	}
	if (d->win_lines >= DOOR_LOG_LINES) {
		door_unlogged(d, now, 0);
		return;
	}
	d->win_lines++;
	d->logged[oldest].ip = c->ip;
	d->logged[oldest].at = now;
	log_warn("door: connection from %s closed: %s (further failures from this address "
		 "are not logged for 60 s)", c->peer, why);
}

static void dconn_free(struct door *d, struct dconn *c)
{
	if (c->slot)
		atomic_fetch_sub(d->o.nclients, 1);
	close(c->fd);
	free(c->in);
	free(c->out);
	free(c->addr);
	free(c);
}

static int dconn_queue(struct dconn *c, int type, const void *a, size_t alen, const void *b,
		       size_t blen)
{
	c->out = malloc(DOOR_HDR + alen + blen);
	if (!c->out)
		return -ENOMEM;
	put_hdr(c->out, type, (uint32_t)(alen + blen));
	if (alen)
		memcpy(c->out + DOOR_HDR, a, alen);
	if (blen)
		memcpy(c->out + DOOR_HDR + alen, b, blen);
	c->out_len = DOOR_HDR + alen + blen;
	c->out_off = 0;
	return 0;
}

static int dconn_error(struct dconn *c, int code, const char *text)
{
	uint8_t cb = (uint8_t)code;
	c->state = D_FAIL;
	return dconn_queue(c, F_ERROR, &cb, 1, text, strlen(text));
}

/* A whole frame arrived: act on it.  0 to go on, or a reason to close. */
static const char *dconn_frame(struct door *d, struct dconn *c)
{
	if (c->state == D_HELLO) {
		if (memcmp(c->in, DOOR_MAGIC_V1, 8) == 0) {
			STAT_INC(d, bad_frames);
			door_log_fail(d, c, "a client of handshake version 1 (an older lotus)");
			if (dconn_error(c, E_VERSION, "this server speaks handshake version 2, the "
					"client version 1: upgrade the client"))
				return "out of memory";
			return NULL;
		}
		if (memcmp(c->in, DOOR_MAGIC, 8) != 0)
			return "not a lotus handshake (bad magic)";
		memcpy(c->nc, c->in + 8, DOOR_NONCE);
		door_random(c->ns, DOOR_NONCE);
		/* Ns, the cluster id, and the MAC over both */
		uint8_t ch[DOOR_NONCE + DOOR_CID + DOOR_MAC];
		memcpy(ch, c->ns, DOOR_NONCE);
		put_u64(ch + DOOR_NONCE, d->o.cluster_id);
		door_mac(d->o.key, label_server, c->nc, c->ns, ch + DOOR_NONCE, DOOR_CID,
			 ch + DOOR_NONCE + DOOR_CID);
		if (dconn_queue(c, F_CHALLENGE, ch, sizeof(ch), NULL, 0))
			return "out of memory";
		c->state = D_AUTH;
		return NULL;
	}
	/* D_AUTH */
	uint8_t mac[DOOR_MAC];
	const uint8_t *addr = c->in + DOOR_MAC;
	size_t alen = c->in_need - DOOR_MAC;
	door_mac(d->o.key, label_client, c->nc, c->ns, addr, alen, mac);
	if (crypto_verify_32(mac, c->in) != 0) {
		STAT_INC(d, auth_failed);
		door_log_fail(d, c, "authentication failed (wrong or missing secret)");
		if (dconn_error(c, E_AUTH, "authentication failed"))
			return "out of memory";
		return NULL;
	}
	char bad[160];
	if (d->o.check_addr && d->o.check_addr(d->o.arg, addr, alen, bad, sizeof(bad)) != 0) {
		/* never handed on: UCX would walk it unchecked */
		STAT_INC(d, bad_addr);
		char text[200];
		snprintf(text, sizeof(text), "worker address refused: %s", bad);
		door_log_fail(d, c, text);
		if (dconn_error(c, E_ADDR, text))
			return "out of memory";
		return NULL;
	}
	unsigned max = d->o.max_clients;
	unsigned now = atomic_fetch_add(d->o.nclients, 1);
	c->slot = 1;
	if (max && now >= max) {
		atomic_fetch_sub(d->o.nclients, 1);
		c->slot = 0;
		STAT_INC(d, refused_full);
		char text[64];
		snprintf(text, sizeof(text), "server full: max_clients %u", max);
		door_log_fail(d, c, text);
		if (dconn_error(c, E_FULL, text))
			return "out of memory";
		return NULL;
	}
	c->target = d->rr++ % d->o.ntargets;
	c->addr = malloc(alen);
	if (!c->addr)
		return "out of memory";
	memcpy(c->addr, addr, alen);
	c->addr_len = alen;
	if (dconn_queue(c, F_WELCOME, d->taddr[c->target], d->tlen[c->target], NULL, 0))
		return "out of memory";
	c->state = D_DONE;
	return NULL;
}

/* Socket readable/writable: move bytes.  1: keep, 0: finished (close). */
static int dconn_io(struct door *d, struct dconn *c, short revents)
{
	const char *why = NULL;
	if (c->out) {
		/* Writing our frame; the peer must wait for it, so input is wrong. */
		while (c->out_off < c->out_len) {
			ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
					 MSG_NOSIGNAL);
			if (w < 0 && (errno == EAGAIN || errno == EINTR))
				return 1;
			if (w <= 0) {
				why = "closed by the peer";
				goto fail;
			}
			c->out_off += (size_t)w;
		}
		free(c->out);
		c->out = NULL;
		if (c->state == D_DONE) {
			STAT_INC(d, welcomed);
			d->o.on_client(d->o.arg, c->target, c->addr, c->addr_len, c->peer);
			c->addr = NULL;
			c->slot = 0;   /* the connection holds it now */
			return 0;
		}
		if (c->state == D_FAIL)
			return 0;
		return 1;
	}
	(void)revents;
	for (;;) {
		uint8_t *dst;
		size_t want;
		if (c->in_need == 0) {
			dst = c->hdr + c->in_have;
			want = DOOR_HDR - c->in_have;
		} else {
			dst = c->in + c->in_have;
			want = c->in_need - c->in_have;
		}
		ssize_t r = recv(c->fd, dst, want, 0);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return 1;
		if (r < 0) {
			why = "receive error";
			goto fail;
		}
		if (r == 0) {
			if (c->in_have || c->in_need) {
				STAT_INC(d, bad_frames);
				why = "truncated frame";
			} else if (c->state == D_AUTH) {
				/* a client that cannot verify our MAC hangs up here */
				STAT_INC(d, auth_failed);
				why = "the peer left after the challenge (wrong or missing secret, or a "
				      "client of another cluster?)";
			} else {
				why = "closed by the peer";
			}
			goto fail;
		}
		c->in_have += (size_t)r;
		if (c->in_need == 0 && c->in_have == DOOR_HDR) {
			long len = frame_len(c->hdr, c->state == D_HELLO ? F_HELLO : F_AUTH);
			if (len <= 0) {
				STAT_INC(d, bad_frames);
				why = "malformed frame";
				goto fail;
			}
			c->in = malloc((size_t)len);
			if (!c->in) {
				why = "out of memory";
				goto fail;
			}
			c->in_need = (size_t)len;
			c->in_have = 0;
		} else if (c->in_need && c->in_have == c->in_need) {
			why = dconn_frame(d, c);
			free(c->in);
			c->in = NULL;
			c->in_have = c->in_need = 0;
			if (why)
				goto fail;
			/* The peer sends nothing until it has read our reply. */
			return dconn_io(d, c, 0);
		}
	}
fail:
	door_log_fail(d, c, why);
	return 0;
}

/* How far a pending handshake has got: the lower, the sooner it makes room.
 * 3: writing its last frame (about to finish), never closed for room. */
static int dconn_rank(const struct dconn *c)
{
	if (c->state == D_HELLO)
		return c->in_have || c->in_need ? 1 : 0;
	return c->state == D_AUTH ? 2 : 3;
}

/* The pending handshake to close for a newcomer: the least advanced, the
 * oldest among equals; only among ip's own when own.  -1: none may go. */
static int door_victim(struct door *d, uint32_t ip, int own)
{
	int best = -1, best_rank = 3;
	for (unsigned i = 0; i < d->nconns; i++) {
		const struct dconn *c = d->conns[i];
		int r = dconn_rank(c);
		if ((own && c->ip != ip) || r == 3)
			continue;
		if (best < 0 || r < best_rank || (r == best_rank && c->born < d->conns[best]->born)) {
			best = (int)i;
			best_rank = r;
		}
	}
	return best;
}

/* 1: more connections may be waiting (the batch ran out), 0: drained. */
static int door_accept(struct door *d)
{
	for (unsigned n = 0; n < DOOR_ACCEPT_BATCH; n++) {
		int fd = accept4(d->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE)
				log_warn("door: accept: %s", strerror(errno));
			return 0;
		}
		STAT_INC(d, accepted);
		struct dconn tmp = { .fd = fd };
		sock_peer(fd, tmp.peer, sizeof(tmp.peer), &tmp.ip);
		unsigned same = 0;
		for (unsigned i = 0; i < d->nconns; i++)
			same += d->conns[i]->ip == tmp.ip;
		int own = same >= DOOR_MAX_PENDING_PER_IP;
		int room = !own && d->nconns < DOOR_MAX_PENDING;
		if (!room) {
			int v = door_victim(d, tmp.ip, own);
			if (v >= 0) {
				/* closed without a line of its own: counted */
				STAT_INC(d, evicted);
				door_unlogged(d, clock_now_ns(), 1);
				dconn_free(d, d->conns[v]);
				d->conns[v] = d->conns[--d->nconns];
				room = 1;
			}
		}
		struct dconn *c = room ? calloc(1, sizeof(*c)) : NULL;
		if (!c) {
			STAT_INC(d, dropped);
			door_log_fail(d, &tmp, own ? "too many handshakes from this address at once"
						   : "too many handshakes at once");
			close(fd);
			continue;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		*c = tmp;
		c->state = D_HELLO;
		c->born = clock_now_ns();
		c->deadline = c->born + DOOR_TIMEOUT_MS * 1000000ULL;
		d->conns[d->nconns++] = c;
	}
	return 1;
}

static void *door_main(void *arg)
{
	struct door *d = arg;
	struct pollfd pfd[DOOR_MAX_PENDING + 2];
	for (;;) {
		pfd[0] = (struct pollfd){ .fd = d->efd, .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = d->lfd, .events = POLLIN };
		uint64_t now = clock_now_ns(), next = now + 1000000000ULL;
		for (unsigned i = 0; i < d->nconns; i++) {
			struct dconn *c = d->conns[i];
			pfd[i + 2] = (struct pollfd){ .fd = c->fd,
						      .events = c->out ? POLLOUT : POLLIN };
			next = MIN(next, c->deadline);
		}
		int ms = next > now ? (int)((next - now) / 1000000) + 1 : 0;
		int n = poll(pfd, d->nconns + 2, ms);
		if (n < 0 && errno != EINTR) {
			log_error("door: poll: %s", strerror(errno));
			break;
		}
		if (pfd[0].revents)
			break;
		door_log_summary(d, 0);
		now = clock_now_ns();
		unsigned keep = 0, nc = d->nconns;
		for (unsigned i = 0; i < nc; i++) {
			struct dconn *c = d->conns[i];
			int alive = 1;
			if (n > 0 && pfd[i + 2].revents)
				alive = dconn_io(d, c, pfd[i + 2].revents);
			if (alive && now >= c->deadline) {
				STAT_INC(d, timed_out);
				door_log_fail(d, c, "handshake timed out");
				alive = 0;
			}
			if (alive)
				d->conns[keep++] = c;
			else
				dconn_free(d, c);
		}
		d->nconns = keep;
		if (n > 0 && pfd[1].revents)
			door_accept(d);
	}
	return NULL;
}

int door_open(const struct door_opts *o, struct door **out)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(o->port) };
	*out = NULL;
	if (door_crypto())
		return -EIO;
	if (!o->host || !*o->host || strcmp(o->host, "*") == 0)
		sa.sin_addr.s_addr = htonl(INADDR_ANY);
	else if (inet_pton(AF_INET, strcmp(o->host, "localhost") == 0 ? "127.0.0.1" : o->host,
			   &sa.sin_addr) != 1) {
		log_error("door: listen address '%s' is not an IPv4 address", o->host);
		return -EINVAL;
	}
	struct door *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->o = *o;
	d->lfd = d->efd = -1;
	pthread_mutex_init(&d->st_lock, NULL);
	d->taddr = calloc(o->ntargets, sizeof(*d->taddr));
	d->tlen = calloc(o->ntargets, sizeof(*d->tlen));
	int rc = d->taddr && d->tlen ? 0 : -ENOMEM;
	for (unsigned i = 0; rc == 0 && i < o->ntargets; i++) {
		d->tlen[i] = o->tlen[i];
		void *a = malloc(o->tlen[i]);
		if (!a) {
			rc = -ENOMEM;
			break;
		}
		memcpy(a, o->taddr[i], o->tlen[i]);
		d->taddr[i] = a;
	}
	if (rc == 0) {
		d->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		d->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (d->lfd < 0 || d->efd < 0)
			rc = -errno;
	}
	if (rc == 0) {
		int one = 1;
		setsockopt(d->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(d->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
		    listen(d->lfd, 256) != 0) {
			rc = -errno;
			log_error("door: listen on %s:%u: %s", o->host ? o->host : "*", o->port,
				  strerror(errno));
		}
	}
	if (rc == 0) {
		socklen_t sl = sizeof(sa);
		getsockname(d->lfd, (struct sockaddr *)&sa, &sl);
		d->port = ntohs(sa.sin_port);
		/* Signals go to the process's own threads, not to the door's. */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		rc = -pthread_create(&d->thread, NULL, door_main, d);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		d->running = rc == 0;
	}
	if (rc) {
		door_close(d);
		return rc;
	}
	*out = d;
	return 0;
}

uint16_t door_port(const struct door *d)
{
	return d->port;
}

void door_stats(struct door *d, struct door_stats *out)
{
	pthread_mutex_lock(&d->st_lock);
	*out = d->st;
	pthread_mutex_unlock(&d->st_lock);
}

void door_close(struct door *d)
{
	if (!d)
		return;
	if (d->running) {
		uint64_t one = 1;
		ssize_t w = write(d->efd, &one, sizeof(one));
		(void)w;
		pthread_join(d->thread, NULL);
		door_log_summary(d, 1);
	}
	for (unsigned i = 0; i < d->nconns; i++)
		dconn_free(d, d->conns[i]);
	if (d->lfd >= 0)
		close(d->lfd);
	if (d->efd >= 0)
		close(d->efd);
	for (unsigned i = 0; d->taddr && i < d->o.ntargets; i++)
		free((void *)d->taddr[i]);
	free(d->taddr);
	free(d->tlen);
	pthread_mutex_destroy(&d->st_lock);
	free(d);
}

/* ---- client ------------------------------------------------------------------- */

static int ms_left(uint64_t deadline)
{
	uint64_t now = clock_now_ns();
	return now >= deadline ? 0 : (int)((deadline - now) / 1000000) + 1;
}

static int dial_wait(int fd, short ev, uint64_t deadline)
{
	for (;;) {
		int ms = ms_left(deadline);
		if (ms == 0)
			return LOTUS_ETIMEOUT;
		struct pollfd p = { .fd = fd, .events = ev };
		int n = poll(&p, 1, ms);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

static int dial_write(int fd, const void *buf, size_t len, uint64_t deadline)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
		if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			int rc = dial_wait(fd, POLLOUT, deadline);
			if (rc)
				return rc;
			continue;
		}
		if (w <= 0)
			return LOTUS_EUNAVAIL;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

static int dial_read(int fd, void *buf, size_t len, uint64_t deadline)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t r = recv(fd, p, len, 0);
		if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
			int rc = dial_wait(fd, POLLIN, deadline);
			if (rc)
				return rc;
			continue;
		}
		if (r <= 0)
			return LOTUS_EUNAVAIL;
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

/* Read the next frame's header; an ERROR frame is reported (logged) here. */
static int dial_frame(int fd, int want, const char *who, uint64_t deadline, long *len)
{
	uint8_t h[DOOR_HDR];
	int rc = dial_read(fd, h, sizeof(h), deadline);
	if (rc)
		return rc;   /* a close is logged by door_dial, if it does not retry */
	*len = frame_len(h, want);
	if (*len > 0)
		return 0;
	long elen = frame_len(h, F_ERROR);
	if (elen <= 0) {
		log_error("memory server %s: not a lotus handshake reply (another service on "
			  "that port, or another lotus version?)", who);
		return LOTUS_EPROTO;
	}
	char text[DOOR_MAX_ERR + 1];
	rc = dial_read(fd, text, (size_t)elen, deadline);
	if (rc)
		return rc;
	int code = (uint8_t)text[0];
	text[elen] = 0;
	for (long i = 1; i < elen; i++)   /* printable only */
		if (text[i] < 0x20 || text[i] > 0x7e)
			text[i] = '?';
	log_error("memory server %s refused the connection: %s%s", who, text + 1,
		  code == E_AUTH ? " (check the cluster secret: secret_file / --secret-file)" :
		  code == E_ADDR ? " (does this client run the UCX version and UCX_ options "
				   "the server does?)" : "");
	return code == E_FULL ? -EUSERS : code == E_ADDR || code == E_VERSION ? LOTUS_EPROTO : -EACCES;
}

/* One handshake; -ECONNRESET: the door accepted and then closed it before
 * answering (a busy door making room, or its handshake timeout). */
static int door_dial_once(const char *host, uint16_t port, uint64_t deadline,
			  const struct door_key *key, const void *addr, size_t len,
			  void **peer_addr, size_t *peer_len, uint64_t *cluster_id)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	char who[300];
	uint64_t want = *cluster_id;
	*peer_addr = NULL;
	*peer_len = 0;
	if (door_crypto())
		return -EIO;
	if (len == 0 || len > DOOR_MAX_ADDR)
		return -EINVAL;
	if (!host || inet_pton(AF_INET, strcmp(host, "localhost") == 0 ? "127.0.0.1" : host,
			       &sa.sin_addr) != 1)
		return -EINVAL;
	snprintf(who, sizeof(who), "%s:%u", host, port);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int one = 1, rc = 0, connected = 0;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		if (errno != EINPROGRESS) {
			rc = LOTUS_EUNAVAIL;
			goto out;
		}
		if ((rc = dial_wait(fd, POLLOUT, deadline)))
			goto out;
		int err = 0;
		socklen_t el = sizeof(err);
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
		if (err) {
			rc = LOTUS_EUNAVAIL;
			goto out;
		}
	}
	connected = 1;
	uint8_t hello[DOOR_HDR + 8 + DOOR_NONCE], nc[DOOR_NONCE];
	uint8_t ch[DOOR_NONCE + DOOR_CID + DOOR_MAC];
	door_random(nc, DOOR_NONCE);
	put_hdr(hello, F_HELLO, 8 + DOOR_NONCE);
	memcpy(hello + DOOR_HDR, DOOR_MAGIC, 8);
	memcpy(hello + DOOR_HDR + 8, nc, DOOR_NONCE);
	long flen;
	if ((rc = dial_write(fd, hello, sizeof(hello), deadline)) ||
	    (rc = dial_frame(fd, F_CHALLENGE, who, deadline, &flen)) ||
	    (rc = dial_read(fd, ch, sizeof(ch), deadline)))
		goto out;
	uint8_t mac[DOOR_MAC];
	door_mac(key, label_server, nc, ch, ch + DOOR_NONCE, DOOR_CID, mac);
	if (crypto_verify_32(mac, ch + DOOR_NONCE + DOOR_CID) != 0) {
		log_error("memory server %s failed to prove the cluster secret: the secret files "
			  "differ, or only one side has one (secret_file / --secret-file)", who);
		rc = -EACCES;
		goto out;
	}
	/* Another cluster's server: leave before AUTH, so it never admits us. */
	*cluster_id = get_u64(ch + DOOR_NONCE);
	if (want && *cluster_id && *cluster_id != want) {
		rc = LOTUS_ECONFIG;
		goto out;
	}
	uint8_t *auth = malloc(DOOR_HDR + DOOR_MAC + len);
	if (!auth) {
		rc = -ENOMEM;
		goto out;
	}
	put_hdr(auth, F_AUTH, (uint32_t)(DOOR_MAC + len));
	door_mac(key, label_client, nc, ch, addr, len, auth + DOOR_HDR);
	memcpy(auth + DOOR_HDR + DOOR_MAC, addr, len);
	rc = dial_write(fd, auth, DOOR_HDR + DOOR_MAC + len, deadline);
	free(auth);
	if (rc || (rc = dial_frame(fd, F_WELCOME, who, deadline, &flen)))
		goto out;
	void *pa = malloc((size_t)flen);
	if (!pa) {
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = dial_read(fd, pa, (size_t)flen, deadline))) {
		free(pa);
		goto out;
	}
	*peer_addr = pa;
	*peer_len = (size_t)flen;
out:
	close(fd);
	if (rc == LOTUS_EUNAVAIL && connected)
		rc = -ECONNRESET;
	return rc;
}

int door_dial(const char *host, uint16_t port, int timeout_ms, const struct door_key *key,
	      const void *addr, size_t len, void **peer_addr, size_t *peer_len,
	      uint64_t *cluster_id)
{
	uint64_t deadline = clock_now_ns() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * 1000000ULL;
	/* A door under a flood closes pending handshakes to make room (door.h):
	 * try again, a few times, while the time lasts. */
	int rc = 0;
	for (unsigned i = 0; i < DOOR_DIAL_TRIES; i++) {
		rc = door_dial_once(host, port, deadline, key, addr, len, peer_addr, peer_len,
				    cluster_id);
		if (rc != -ECONNRESET || ms_left(deadline) <= (5 << i))
			break;
		struct timespec ts = { 0, (long)(5 << i) * 1000000L };
		nanosleep(&ts, NULL);
	}
	if (rc == -ECONNRESET) {
		log_error("memory server %s:%u closed the connection during the handshake (a "
			  "busy server, or one of a lotus older than this client's handshake "
			  "version 2)", host, port);
		rc = LOTUS_EUNAVAIL;
	}
	return rc;
}
