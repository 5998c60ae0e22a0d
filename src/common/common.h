/*
 * common.h - small helpers every lotus module uses.
 *
 * Return-code convention (STYLE.md §3): 0 is success, -errno is a system
 * failure, and lotus's own errors are the LOTUS_E* values of include/lotus.h,
 * which sit in a reserved negative range below -errno's.  lotus_strerror()
 * names both kinds.
 */
#ifndef LOTUS_COMMON_H
#define LOTUS_COMMON_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "lotus.h"

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define CACHELINE 64
#define ALIGN_UP(x, a) (((x) + (a) - 1) & ~((__typeof__(x))(a) - 1))
#define container_of(p, type, member) \
	((type *)((char *)(p) - offsetof(type, member)))

/* FNV-1a 64 over bytes: the routing hash and YCSB's key scrambler. */
static inline uint64_t fnv1a64(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* Integer keys are stored big-endian so that byte order is numeric order. */
static inline void key_from_u64(uint64_t v, unsigned char out[8])
{
	for (int i = 7; i >= 0; i--) {
		out[i] = (unsigned char)v;
		v >>= 8;
	}
}

static inline uint64_t key_to_u64(const unsigned char in[8])
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | in[i];
	return v;
}

/* Parsers used by the CLI and the config file.  Return 0 or -EINVAL/-ERANGE. */
int parse_u64(const char *s, uint64_t *out);
int parse_double(const char *s, double *out);
/* "64K", "1M", "2G", "512" (bytes); suffixes are powers of 1024. */
int parse_size(const char *s, uint64_t *out);
/* "10-100" or "10" (MIN==MAX). */
int parse_range(const char *s, uint64_t *lo, uint64_t *hi);
/* "host:port" -> host (copied, NUL-terminated) and port (0 allowed). */
int parse_hostport(const char *s, char *host, size_t hostlen, uint16_t *port);

/* fsync a directory (after creating, renaming or removing files in it). */
int fsync_dir(const char *dir);

/* Number of online CPUs, at least 1. */
int cpu_count(void);

#endif
