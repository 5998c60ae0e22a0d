/* crc32c.h - CRC32C (Castagnoli, the iSCSI polynomial) over a byte range.
 * The one checksum of everything lotus writes to disk: redo records and
 * segment headers, checkpoint images and their MANIFEST, tier pages.
 * crc32c(0, p, n) starts a checksum; crc32c(c, q, m) continues one, so
 * crc32c(crc32c(0, p, n), q, m) is the checksum of p then q.  Any thread. */
#ifndef LOTUS_CRC32C_H
#define LOTUS_CRC32C_H
#include <stddef.h>
#include <stdint.h>

uint32_t crc32c(uint32_t crc, const void *data, size_t len);

#endif
