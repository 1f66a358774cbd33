/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78).
 *
 * fk_crc32c(crc, buf, len) continues from a previous CRC value exactly like
 * the `crc32c` PyPI package: fk_crc32c(fk_crc32c(0, a), b) == fk_crc32c(0, a||b).
 *
 * The implementation is chosen once, when the shared object is loaded: the
 * CPU's CRC-32C instruction in three interleaved streams when it has one, else
 * a portable slicing-by-8 table. FASTKAFKA_CRC32C=table in the environment
 * forces the table path.
 *
 *   fk_crc32c_impl()   CPU (detection)                           compiled on
 *   "sse4.2"           x86_64 with SSE4.2 (cpuid 1, ECX bit 20)   x86_64, gcc or clang
 *   "armv8-crc"        aarch64 with CRC32 (getauxval(AT_HWCAP)    aarch64 little-endian
 *                      & HWCAP_CRC32)                             Linux, gcc or clang
 *   "table"            anything else, or FASTKAFKA_CRC32C=table
 *
 * Detection needs nothing from the compiler's runtime library (no
 * __builtin_cpu_supports: its __cpu_model must come from libgcc or
 * compiler-rt at link time, else the shared object fails at dlopen) and
 * nothing newer than glibc 2.17 (getauxval: 2.16),
 * so the same source builds the gcc host build and the zig cc manylinux2014
 * wheels (x86_64-linux-gnu.2.17, aarch64-linux-gnu.2.17). Every path gives the
 * same results: tests/unit/fastkafka/_wire/crc32c_vectors.c checks them in C
 * on each compiler and, under qemu, on aarch64 (test_crc32c_c.py).
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

/* "sse4.2", "armv8-crc" or "table": the implementation fk_crc32c uses. */
FK_CRC_HIDDEN const char *fk_crc32c_impl(void);

/* The portable table implementation, always available (for tests). */
FK_CRC_HIDDEN uint32_t fk_crc32c_table(uint32_t crc, const unsigned char *buf, size_t length);

/* The hardware implementation ("sse4.2" or "armv8-crc"), whatever
 * FASTKAFKA_CRC32C says; falls back to the table one when the CPU lacks the
 * instruction or the build has no hardware path (fk_crc32c_hw_available()
 * says which). */
FK_CRC_HIDDEN uint32_t fk_crc32c_hw(uint32_t crc, const unsigned char *buf, size_t length);
FK_CRC_HIDDEN int fk_crc32c_hw_available(void);

#ifdef __cplusplus
}
#endif

#endif /* FK_CRC32C_IMPL_H */
