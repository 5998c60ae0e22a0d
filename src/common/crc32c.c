/*
 * crc32c.c - CRC32C (Castagnoli): SSE4.2 where the CPU has it, else
 * slicing-by-8.
 *
 * The software path keeps eight 256-entry tables: table 0 is the classic
 * byte-at-a-time table of the reflected polynomial 0x82f63b78, table t
 * advances a byte through t more zero bytes, so eight input bytes fold into
 * the CRC with eight lookups at once.  The hardware path feeds the crc32
 * instruction eight bytes at a time.  Both run byte-wise up to an 8-byte
 * boundary and over the last bytes, and give the same value: which one runs
 * is chosen once per process (pthread_once), from the CPU's feature bits.
 */
#include <pthread.h>
#include <string.h>
#include "common/crc32c.h"

static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static int crc_hw;

static void crc_init(void)
{
	for (unsigned i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_tab[0][i] = c;
	}
	for (unsigned i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_sw(uint32_t c, const unsigned char *p, size_t n)
{
	while (n && ((uintptr_t)p & 7)) {
		c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
		n--;
	}
	for (; n >= 8; n -= 8, p += 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		v ^= c;
		c = crc_tab[7][v & 0xff] ^ crc_tab[6][(v >> 8) & 0xff] ^
		    crc_tab[5][(v >> 16) & 0xff] ^ crc_tab[4][(v >> 24) & 0xff] ^
		    crc_tab[3][(v >> 32) & 0xff] ^ crc_tab[2][(v >> 40) & 0xff] ^
		    crc_tab[1][(v >> 48) & 0xff] ^ crc_tab[0][v >> 56];
	}
	while (n--)
		c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw_run(uint32_t c, const unsigned char *p,
							      size_t n)
{
	uint64_t c64 = c;
	while (n && ((uintptr_t)p & 7)) {
		c64 = __builtin_ia32_crc32qi((uint32_t)c64, *p++);
		n--;
	}
	for (; n >= 8; n -= 8, p += 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c64 = __builtin_ia32_crc32di(c64, v);
	}
	while (n--)
		c64 = __builtin_ia32_crc32qi((uint32_t)c64, *p++);
	return (uint32_t)c64;
}
#endif

uint32_t crc32c(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&crc_once, crc_init);
	uint32_t c = ~crc;
#if defined(__x86_64__)
	if (crc_hw)
		return ~crc_hw_run(c, data, len);
#endif
	return ~crc_sw(c, data, len);
}
