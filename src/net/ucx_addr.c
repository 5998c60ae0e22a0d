/*
 * ucx_addr.c - the walk over a packed UCX worker address (ucx_addr.h).
 *
 * The layout, as UCX 1.13 packs a worker address (ucp_worker_get_address:
 * interface and device addresses, no endpoint addresses) in non-unified mode:
 *
 *   header      version 1: 1 byte, low nibble 0, flags in the high nibble
 *               version 2: 2 bytes, low nibble 1 (high nibble: UCX's release),
 *                          then a flags byte
 *               flags: 1 debug info, 2 worker uuid, 4 client id, 8 AM only
 *   [uuid]      8 bytes, if flag 2
 *   [client id] 8 bytes, if flag 4
 *   [name]      length byte + bytes, if flag 1
 *   0xff        alone: no devices; otherwise, per device:
 *     md byte     0x80 device without transports; md index in the rest
 *                 (version 1: low 5 bits; version 2: 7 bits, 0x7f = in the
 *                 next byte)
 *     len byte    0x80 last device, 0x40 a paths byte follows, 0x20 a system
 *                 device byte follows; device address length in the low 5
 *                 bits (version 2: 0x1f = in the next byte)
 *     [paths] [sysdev] device address
 *     per transport on the device (unless 0x80 above):
 *       name checksum (2 bytes), interface attributes (version 1: 16 bytes,
 *       three floats and flags; version 2: 8 bytes), len byte (0x80 last
 *       transport, 0x40 endpoint addresses follow; interface address length
 *       in the low 6 bits, version 2: 0x3f = in the next byte), interface
 *       address
 *
 * Every step checks that its bytes are there; the walk must end exactly at
 * the last byte received.  Counts are bounded like UCX's own (64 devices,
 * 64 transports in all).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "common/common.h"
#include "net/ucx_addr.h"

#define HF_DEBUG     0x01
#define HF_UUID      0x02
#define HF_CLIENT_ID 0x04
#define HF_AM_ONLY   0x08

#define MAX_ENTRIES  64

struct walk {
	const uint8_t *p, *end;
	unsigned version;          /* 1 or 2 */
	unsigned attr_len;
	uint64_t uuid;
	int has_uuid;
};

struct entry {
	uint16_t csum;
	size_t dev_len, iface_len;
	int has_sysdev;
	uint8_t sysdev;
	const uint8_t *attr;
};

typedef const char *(*entry_fn)(void *arg, const struct walk *w, const struct entry *e);

static int take(struct walk *w, size_t n, const uint8_t **out)
{
	if ((size_t)(w->end - w->p) < n)
		return -1;
	if (out)
		*out = w->p;
	w->p += n;
	return 0;
}

static int take_byte(struct walk *w, uint8_t *b)
{
	const uint8_t *p;
	if (take(w, 1, &p))
		return -1;
	*b = *p;
	return 0;
}

/* A value in the low bits of b (mask); in version 2 a full mask means the
 * value is the next byte. */
static int take_ext(struct walk *w, uint8_t b, uint8_t mask, size_t *v)
{
	*v = b & mask;
	if (w->version == 2 && *v == mask) {
		uint8_t x;
		if (take_byte(w, &x))
			return -1;
		*v = x;
	}
	return 0;
}

#define TRUNC "truncated or malformed"

/* Walk addr; fn (may be NULL) sees each transport entry. */
static const char *walk_addr(struct walk *w, const uint8_t *a, size_t len, entry_fn fn,
			     void *arg)
{
	w->p = a;
	w->end = a + len;
	w->has_uuid = 0;
	uint8_t h0, flags;
	if (take_byte(w, &h0))
		return "empty";
	if ((h0 & 0x0f) == 0) {
		w->version = 1;
		flags = h0 >> 4;
	} else if ((h0 & 0x0f) == 1) {
		w->version = 2;
		if (take_byte(w, &flags))
			return TRUNC " header";
		if (flags & ~0x0f)
			return "unknown header flags";
	} else {
		return "unknown UCX address version";
	}
	const uint8_t *p;
	if (flags & HF_UUID) {
		if (take(w, 8, &p))
			return TRUNC " worker id";
		memcpy(&w->uuid, p, 8);
		w->has_uuid = 1;
	}
	if ((flags & HF_CLIENT_ID) && take(w, 8, NULL))
		return TRUNC " client id";
	if (flags & HF_DEBUG) {
		uint8_t n;
		if (take_byte(w, &n) || take(w, n, NULL))
			return TRUNC " worker name";
	}
	if (w->p < w->end && *w->p == 0xff)   /* no devices */
		return w->p + 1 == w->end ? NULL : "bytes after an empty device list";
	unsigned ndev = 0, nent = 0;
	for (int last_dev = 0; !last_dev;) {
		uint8_t b;
		size_t md, dlen;
		if (++ndev > MAX_ENTRIES)
			return "too many devices";
		if (take_byte(w, &b))
			return TRUNC " device";
		int empty = b & 0x80;
		if (take_ext(w, b, w->version == 1 ? 0x1f : 0x7f, &md))
			return TRUNC " device";
		if (md > 31)
			return "memory domain index out of range";
		uint8_t lb;
		if (take_byte(w, &lb) || take_ext(w, lb, 0x1f, &dlen))
			return TRUNC " device";
		last_dev = lb & 0x80;
		struct entry e = { .has_sysdev = 0 };
		if (lb & 0x40) {
			uint8_t paths;
			if (take_byte(w, &paths))
				return TRUNC " device";
			if (paths == 0)
				return "a device with 0 paths";
		}
		if (lb & 0x20) {
			if (take_byte(w, &e.sysdev))
				return TRUNC " device";
			e.has_sysdev = 1;
		}
		if (take(w, dlen, NULL))
			return TRUNC " device address";
		e.dev_len = dlen;
		for (int last_tl = !!empty; !last_tl;) {
			if (++nent > MAX_ENTRIES)
				return "too many transports";
			if (take(w, 2, &p))
				return TRUNC " transport";
			memcpy(&e.csum, p, 2);
			if (take(w, w->attr_len, &e.attr))
				return TRUNC " transport attributes";
			uint8_t tb;
			if (take_byte(w, &tb) || take_ext(w, tb, 0x3f, &e.iface_len))
				return TRUNC " transport";
			last_tl = tb & 0x80;
			if (tb & 0x40)
				return "endpoint addresses in a worker address";
			if (take(w, e.iface_len, NULL))
				return TRUNC " interface address";
			if (fn) {
				const char *why = fn(arg, w, &e);
				if (why) {   /* a static string, never into e */
					// cppcheck-suppress returnDanglingLifetime
					return why;
				}
			}
		}
	}
	if (w->p != w->end)
		return "bytes after the last device";
	return NULL;
}

/* ---- learning the shape of our own address -------------------------------------- */

/* An entry's capability flags (version 1: bytes 13..15 of the attributes;
 * version 2: 6, 7).  The priority (12; 3) is the device's: not compared. */
static void attr_flags(const struct walk *w, const struct entry *e, uint8_t f[3])
{
	if (w->version == 1) {
		memcpy(f, e->attr + 13, 3);
	} else {
		f[0] = e->attr[6];
		f[1] = e->attr[7];
		f[2] = 0;
	}
}

static const char *learn_entry(void *arg, const struct walk *w, const struct entry *e)
{
	struct ucx_addr_shape *s = arg;
	if (e->has_sysdev)
		s->sysdev[e->sysdev / 64] |= 1ULL << (e->sysdev % 64);
	unsigned i;
	for (i = 0; i < s->ntl && s->tl[i].csum != e->csum; i++)
		;
	if (i == s->ntl) {
		if (s->ntl == UCX_ADDR_MAX_TL)
			return "too many transports to remember";
		s->tl[i].csum = e->csum;
		s->tl[i].iface_len = (uint8_t)e->iface_len;
		s->tl[i].ndev = 0;
		s->tl[i].nflags = 0;
		s->ntl++;
	} else if (s->tl[i].iface_len != e->iface_len) {
		return "one transport with two interface address lengths";
	}
	uint8_t f[3];
	attr_flags(w, e, f);
	unsigned k;
	for (k = 0; k < s->tl[i].nflags && memcmp(s->tl[i].flags[k], f, 3) != 0; k++)
		;
	if (k == s->tl[i].nflags) {
		if (k == ARRAY_SIZE(s->tl[i].flags))
			return "too many capability sets to remember";
		memcpy(s->tl[i].flags[k], f, 3);
		s->tl[i].nflags++;
	}
	for (unsigned d = 0; d < s->tl[i].ndev; d++)
		if (s->tl[i].dev_len[d] == e->dev_len)
			return NULL;
	if (s->tl[i].ndev == ARRAY_SIZE(s->tl[i].dev_len))
		return "too many device address lengths to remember";
	s->tl[i].dev_len[s->tl[i].ndev++] = (uint8_t)e->dev_len;
	return NULL;
}

int ucx_addr_learn(struct ucx_addr_shape *s, const void *addr, size_t len, char *why,
		   size_t whylen)
{
	const uint8_t *a = addr;
	struct walk w;
	const char *err = NULL;
	if (len < 2) {
		snprintf(why, whylen, "own worker address of %zu bytes", len);
		return LOTUS_EUNSUPPORTED;
	}
	unsigned version = (a[0] & 0x0f) == 0 ? 1 : 2;
	unsigned hdr_len = version == 1 ? 1 : 2;
	if (s->hdr_len && (s->hdr_len != hdr_len || memcmp(s->hdr, a, hdr_len) != 0)) {
		snprintf(why, whylen, "own workers' addresses differ in their header");
		return LOTUS_EUNSUPPORTED;
	}
	/* Version 2 may carry a resource index after the attributes. */
	static const unsigned try1[] = { 16 }, try2[] = { 8, 9 };
	const unsigned *tries = version == 1 ? try1 : try2;
	unsigned ntries = version == 1 ? 1 : 2;
	unsigned attr = 0;
	for (unsigned t = 0; t < ntries && !attr; t++) {
		if (s->attr_len && s->attr_len != tries[t])
			continue;
		w.attr_len = tries[t];
		err = walk_addr(&w, a, len, NULL, NULL);
		if (!err)
			attr = tries[t];
	}
	if (!attr) {
		snprintf(why, whylen, "own worker address does not parse (%s)",
			 err ? err : "unknown layout");
		return LOTUS_EUNSUPPORTED;
	}
	struct ucx_addr_shape t = *s;
	t.hdr_len = hdr_len;
	memcpy(t.hdr, a, hdr_len);
	t.attr_len = attr;
	w.attr_len = attr;
	err = walk_addr(&w, a, len, learn_entry, &t);
	if (err) {
		snprintf(why, whylen, "own worker address: %s", err);
		return LOTUS_EUNSUPPORTED;
	}
	if (w.has_uuid && t.nuuid < UCX_ADDR_MAX_UUID)
		t.uuid[t.nuuid++] = w.uuid;
	*s = t;
	return 0;
}

/* ---- checking a peer's ---------------------------------------------------------- */

static const char *check_entry(void *arg, const struct walk *w, const struct entry *e)
{
	const struct ucx_addr_shape *s = arg;
	if (e->has_sysdev && !(s->sysdev[e->sysdev / 64] & (1ULL << (e->sysdev % 64))))
		return "unknown system device";
	if (w->version == 1) {
		/* overhead (s), bandwidth (B/s; negative from UCX <= 1.11: the
		 * shared part), latency (s), as floats UCX scores lanes with */
		float f[3];
		memcpy(f, e->attr, sizeof(f));
		if (!isfinite(f[0]) || !isfinite(f[1]) || !isfinite(f[2]))
			return "transport figures not finite";
		if (f[0] < 0 || f[0] > 1 || f[2] < 0 || f[2] > 1)
			return "transport overhead or latency out of range";
		if (fabsf(f[1]) < 1 || fabsf(f[1]) > 1e15f)
			return "transport bandwidth out of range";
	}
	for (unsigned i = 0; i < s->ntl; i++) {
		if (s->tl[i].csum != e->csum)
			continue;
		if (s->tl[i].iface_len != e->iface_len)
			return "interface address of the wrong length";
		uint8_t f[3];
		unsigned k;
		attr_flags(w, e, f);
		for (k = 0; k < s->tl[i].nflags && memcmp(s->tl[i].flags[k], f, 3) != 0; k++)
			;
		if (k == s->tl[i].nflags)
			return "transport capabilities differ from this server's";
		for (unsigned d = 0; d < s->tl[i].ndev; d++)
			if (s->tl[i].dev_len[d] == e->dev_len)
				return NULL;
		return "device address of the wrong length";
	}
	return NULL;   /* a transport this server lacks: UCX skips it */
}

int ucx_addr_check(const struct ucx_addr_shape *s, const void *addr, size_t len, char *why,
		   size_t whylen)
{
	const uint8_t *a = addr;
	const char *err = NULL;
	struct walk w = { .attr_len = s->attr_len };
	if (!s->hdr_len)
		err = "no shape to check against";
	else if (len < s->hdr_len || memcmp(a, s->hdr, s->hdr_len) != 0)
		err = len && (a[0] & 0x0f) != (s->hdr[0] & 0x0f)
			      ? "another UCX address version"
			      : "another UCX address header (UCX version or address options differ)";
	else
		err = walk_addr(&w, a, len, check_entry, (void *)s);
	if (!err && w.has_uuid)
		for (unsigned i = 0; i < s->nuuid; i++)
			if (s->uuid[i] == w.uuid)
				err = "the worker id of this server's own worker";
	if (err) {
		snprintf(why, whylen, "%s", err);
		return LOTUS_EPROTO;
	}
	return 0;
}
