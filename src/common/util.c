/*
 * util.c - number, size and address parsers shared by the CLI and the config.
 * Each returns 0 or -EINVAL (not a number / bad syntax) or -ERANGE.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <unistd.h>
#include "common/common.h"

int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	if (!s || !*s || *s == '-' || isspace((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno == ERANGE)
		return -ERANGE;
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

int parse_double(const char *s, double *out)
{
	char *end;
	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno == ERANGE)
		return -ERANGE;
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

int parse_size(const char *s, uint64_t *out)
{
	char *end;
	if (!s || !*s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	unsigned shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: break;
	}
	if ((*end == 'i' || *end == 'I') && shift)
		end++;
	if (*end == 'b' || *end == 'B')
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

int parse_range(const char *s, uint64_t *lo, uint64_t *hi)
{
	char buf[64];
	if (!s || strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	char *dash = strchr(buf, '-');
	if (!dash) {
		int rc = parse_u64(buf, lo);
		*hi = *lo;
		return rc;
	}
	*dash = 0;
	int rc = parse_u64(buf, lo);
	if (rc == 0)
		rc = parse_u64(dash + 1, hi);
	if (rc == 0 && *hi < *lo)
		rc = -EINVAL;
	return rc;
}

int parse_hostport(const char *s, char *host, size_t hostlen, uint16_t *port)
{
	const char *colon = s ? strrchr(s, ':') : NULL;
	uint64_t p;
	if (!colon || colon == s || (size_t)(colon - s) >= hostlen)
		return -EINVAL;
	if (parse_u64(colon + 1, &p) || p > 65535)
		return -EINVAL;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = 0;
	*port = (uint16_t)p;
	return 0;
}

int cpu_count(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = fsync(fd) ? -errno : 0;
	close(fd);
	return rc;
}
