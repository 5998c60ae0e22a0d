/*
 * io_direct.c - O_DIRECT helpers: the alignment a file needs, a checker that
 * says which of buffer / length / offset is wrong, and an open that names the
 * file system when it has no O_DIRECT (never a silent buffered fallback).
 *
 * Alignment, best source first:
 *   block device          ioctl(BLKSSZGET), the logical block size
 *   regular file          statx(STATX_DIOALIGN): dio_mem_align, dio_offset_align
 *                         (Linux 6.1+); else the logical block size of the
 *                         device under the file (/sys/dev/block/M:m/...)
 *   nothing known         4096 for both (safe on every device we know of)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <linux/fs.h>
#include "common/log.h"
#include "io/io_int.h"

#define IO_ALIGN_FALLBACK 4096u

static unsigned sysfs_lbs(dev_t dev)
{
	char path[128];
	unsigned v = 0;
	const char *fmt[] = { "/sys/dev/block/%u:%u/queue/logical_block_size",
			      "/sys/dev/block/%u:%u/../queue/logical_block_size" };
	for (int i = 0; i < 2 && !v; i++) {
		snprintf(path, sizeof(path), fmt[i], major(dev), minor(dev));
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		if (fscanf(f, "%u", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

/* 0, or -EOPNOTSUPP if the file system reports no direct I/O for fd. */
int io_direct_align(int fd, unsigned *mem_align, unsigned *off_align)
{
	struct stat sb;
	*mem_align = *off_align = IO_ALIGN_FALLBACK;
	if (fstat(fd, &sb) < 0)
		return -errno;
	if (S_ISBLK(sb.st_mode)) {
		int lbs = 0;
		if (ioctl(fd, BLKSSZGET, &lbs) == 0 && lbs > 0)
			*mem_align = *off_align = (unsigned)lbs;
		return 0;
	}
#ifdef STATX_DIOALIGN
	struct statx sx;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
	    (sx.stx_mask & STATX_DIOALIGN)) {
		if (!sx.stx_dio_offset_align)
			return -EOPNOTSUPP;
		*mem_align = sx.stx_dio_mem_align ? sx.stx_dio_mem_align : 1;
		*off_align = sx.stx_dio_offset_align;
		return 0;
	}
#endif
	unsigned lbs = sysfs_lbs(sb.st_dev);
	if (lbs)
		*mem_align = *off_align = lbs;
	return 0;
}

int io_check_direct(int fd, const void *buf, size_t len, off_t off)
{
	unsigned ma, oa;
	const char *what = NULL;
	unsigned need = 0;
	int ret = fd < 0 || fcntl(fd, F_GETFD) < 0 ? -EBADF : io_direct_align(fd, &ma, &oa);
	if (ret == -EBADF) {
		log_error("io: O_DIRECT check: %d is not an open file descriptor", fd);
		return ret;
	}
	if (ret == -EOPNOTSUPP) {
		log_error("io: O_DIRECT check: the file system of fd %d does not support O_DIRECT",
			  fd);
		return -EINVAL;
	}
	if (ret < 0)
		return ret;
	if ((uintptr_t)buf % ma)
		what = "buffer address", need = ma;
	else if (len % oa)
		what = "length", need = oa;
	else if (off < 0 || (uint64_t)off % oa)
		what = "offset", need = oa;
	if (!what)
		return 0;
	log_error("io: O_DIRECT I/O on fd %d: %s is not a multiple of %u "
		  "(buf %p len %zu off %lld; logical block size)", fd, what, need, buf, len,
		  (long long)off);
	return -EINVAL;
}

static const char *fs_name(long type)
{
	switch ((unsigned long)type) {
	case 0x01021994: return "tmpfs";
	case 0x858458f6: return "ramfs";
	case 0x794c7630: return "overlayfs";
	case 0x65735546: return "fuse";
	case 0x6969: return "nfs";
	case 0x9fa0: return "proc";
	case 0x62656572: return "sysfs";
	case 0x2fc12fc1: return "zfs";
	case 0xef53: return "ext2/3/4";
	case 0x58465342: return "xfs";
	case 0x9123683e: return "btrfs";
	default: return "unknown";
	}
}

/* statfs of path, or of its directory when path does not exist yet. */
static const char *fs_of(const char *path, long *type)
{
	struct statfs sf;
	char dir[PATH_MAX];
	*type = 0;
	if (statfs(path, &sf) == 0) {
		*type = (long)sf.f_type;
		return fs_name(*type);
	}
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash)
		*(slash == dir ? slash + 1 : slash) = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
	if (statfs(dir, &sf) == 0)
		*type = (long)sf.f_type;
	return fs_name(*type);
}

int io_open_direct(const char *path, int flags, mode_t mode)
{
	long type;
	if (!path)
		return -EINVAL;
	int fd = open(path, flags | O_DIRECT | O_CLOEXEC, mode);
	if (fd >= 0)
		return fd;
	int err = -errno;
	if (err == -EINVAL) {
		const char *fs = fs_of(path, &type);
		log_error("io: %s: the file system (%s, magic 0x%lx) does not support O_DIRECT "
			  "(open returned EINVAL); use a disk file system such as ext4 or xfs",
			  path, fs, (unsigned long)type);
	} else {
		log_error("io: open(%s, O_DIRECT): %s", path, strerror(-err));
	}
	return err;
}
