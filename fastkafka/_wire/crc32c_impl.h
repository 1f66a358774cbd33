/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78).
 *
 * fk_crc32c(crc, buf, len) continues from a previous CRC value exactly like
 * the `crc32c` PyPI package: fk_crc32c(fk_crc32c(0, a), b) == fk_crc32c(0, a||b).
 *
 * The implementation is chosen once, when the shared object is loaded: an
 * SSE4.2 path (three interleaved streams of the crc32 instruction) when the CPU
 * supports it, else a portable slicing-by-8 table. FASTKAFKA_CRC32C=table in
 * the environment forces the table path.
 *
 * All symbols have hidden visibility: an extension that needs the CRC either
 * links crc32c_impl.c (fastkafka._wire.crc32c, via setup.py) or includes it
 * textually (fastkafka._wire.records does `cdef extern from "crc32c_impl.c"`).
 */
#ifndef FK_CRC32C_IMPL_H
#define FK_CRC32C_IMPL_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define FK_CRC_HIDDEN __attribute__((visibility("hidden")))
#else
#define FK_CRC_HIDDEN
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* CRC-32C of buf[0:length], continuing from `crc` (0 to start). */
FK_CRC_HIDDEN uint32_t fk_crc32c(uint32_t crc, const unsigned char *buf, size_t length);

/* "sse4.2" or "table": the implementation fk_crc32c uses. */
FK_CRC_HIDDEN const char *fk_crc32c_impl(void);

/* The portable table implementation, always available (for tests). */
FK_CRC_HIDDEN uint32_t fk_crc32c_table(uint32_t crc, const unsigned char *buf, size_t length);

/* The SSE4.2 implementation; falls back to the table one when the CPU lacks
 * SSE4.2 (fk_crc32c_hw_available() says which). */
FK_CRC_HIDDEN uint32_t fk_crc32c_hw(uint32_t crc, const unsigned char *buf, size_t length);
FK_CRC_HIDDEN int fk_crc32c_hw_available(void);

#ifdef __cplusplus
}
#endif

#endif /* FK_CRC32C_IMPL_H */
