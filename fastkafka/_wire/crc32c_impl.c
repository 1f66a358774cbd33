/* CRC-32C (Castagnoli) for fastkafka: the CPU's CRC-32C instruction (SSE4.2 on
 * x86_64, the ARMv8 CRC32 extension on aarch64) in three interleaved streams,
 * and a portable slicing-by-8 fallback. See crc32c_impl.h for the contract.
 *
 * Internally every routine works on the "raw" register value (no pre/post
 * inversion); fk_crc32c() applies the inversion once at each end. The raw CRC
 * is linear over GF(2), which is what lets three streams be computed
 * independently and combined: raw(c, A||B) = Z_|B|(raw(c, A)) ^ raw(0, B),
 * where Z_n is "append n zero bytes", a 32x32 bit matrix we keep as four
 * 256-entry lookup tables per block length.
 *
 * Both instruction sets compute the same function (reflected 0x82F63B78, no
 * inversion, bytes taken least significant first), so one loop, fk_raw_hw,
 * serves both; only the two step primitives (one byte, eight bytes) and the
 * detection differ.
 */
#include "crc32c_impl.h"

#include <stdlib.h>
#include <string.h>

#define FK_POLY 0x82F63B78u

#if defined(__x86_64__) && defined(__GNUC__)
/* gcc and clang (zig cc) alike. clang 14+ split the crc32 instruction off
 * SSE4.2 into its own target feature "crc32"; gcc accepts the name too. */
#define FK_HW 1
#define FK_HW_NAME "sse4.2"
#define FK_HW_TARGET __attribute__((target("sse4.2,crc32")))
#include <cpuid.h>
#include <nmmintrin.h>
#ifndef bit_SSE4_2
#define bit_SSE4_2 (1u << 20)
#endif
typedef uint64_t fk_hwcrc_t;    /* crc32q takes and gives a 64-bit register */
#define fk_hw_u8(c, v) ((fk_hwcrc_t)_mm_crc32_u8((uint32_t)(c), (v)))
#define fk_hw_u64(c, v) _mm_crc32_u64((c), (v))
#elif defined(__aarch64__) && defined(__AARCH64EL__) && defined(__GNUC__) && defined(__linux__)
/* The optional ARMv8.0 CRC32 extension (mandatory from ARMv8.1). The target
 * attribute spells the feature "crc" in clang and "+crc" in gcc. */
#define FK_HW 1
#define FK_HW_NAME "armv8-crc"
#if defined(__clang__)
#define FK_HW_TARGET __attribute__((target("crc")))
#else
#define FK_HW_TARGET __attribute__((target("+crc")))
#endif
#include <arm_acle.h>
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1ul << 7)
#endif
typedef uint32_t fk_hwcrc_t;
#define fk_hw_u8(c, v) __crc32cb((c), (v))
#define fk_hw_u64(c, v) __crc32cd((c), (v))
#else
#define FK_HW 0
#endif

/* Per-stream block lengths of the interleaved hardware loop. */
#define FK_LONG 8192
#define FK_SHORT 256

static uint32_t fk_tab[8][256];          /* slicing-by-8 tables */
static uint32_t fk_shift_long[4][256];   /* Z_FK_LONG  as byte tables */
static uint32_t fk_shift_short[4][256];  /* Z_FK_SHORT as byte tables */
static int fk_use_hw = 0;
static int fk_hw_ok = 0;
static volatile int fk_ready = 0;

static inline uint64_t fk_load64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);   /* compiles to one unaligned load */
    return v;
}

/* ---- portable path -------------------------------------------------- */

static uint32_t fk_raw_table(uint32_t crc, const unsigned char *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        crc = fk_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        n--;
    }
    while (n >= 8) {
        uint64_t w = fk_load64(p);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        w = __builtin_bswap64(w);
#endif
        w ^= crc;
        crc = fk_tab[7][w & 0xff] ^ fk_tab[6][(w >> 8) & 0xff] ^
              fk_tab[5][(w >> 16) & 0xff] ^ fk_tab[4][(w >> 24) & 0xff] ^
              fk_tab[3][(w >> 32) & 0xff] ^ fk_tab[2][(w >> 40) & 0xff] ^
              fk_tab[1][(w >> 48) & 0xff] ^ fk_tab[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) {
        crc = fk_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    }
    return crc;
}

static inline uint32_t fk_shift(uint32_t (*t)[256], uint32_t crc)
{
    return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^
           t[2][(crc >> 16) & 0xff] ^ t[3][crc >> 24];
}

/* ---- hardware path ------------------------------------------------ */

#if FK_HW
FK_HW_TARGET
static uint32_t fk_raw_hw(uint32_t crc32, const unsigned char *p, size_t n)
{
    fk_hwcrc_t crc = crc32;
    while (n && ((uintptr_t)p & 7)) {
        crc = fk_hw_u8(crc, *p++);
        n--;
    }
    /* Three independent streams hide the instruction's latency (3 cycles). */
    while (n >= 3 * FK_LONG) {
        fk_hwcrc_t c0 = crc, c1 = 0, c2 = 0;
        const unsigned char *end = p + FK_LONG;
        do {
            c0 = fk_hw_u64(c0, fk_load64(p));
            c1 = fk_hw_u64(c1, fk_load64(p + FK_LONG));
            c2 = fk_hw_u64(c2, fk_load64(p + 2 * FK_LONG));
            p += 8;
        } while (p < end);
        crc = fk_shift(fk_shift_long, (uint32_t)c0) ^ (uint32_t)c1;
        crc = fk_shift(fk_shift_long, (uint32_t)crc) ^ (uint32_t)c2;
        p += 2 * FK_LONG;
        n -= 3 * FK_LONG;
    }
    while (n >= 3 * FK_SHORT) {
        fk_hwcrc_t c0 = crc, c1 = 0, c2 = 0;
        const unsigned char *end = p + FK_SHORT;
        do {
            c0 = fk_hw_u64(c0, fk_load64(p));
            c1 = fk_hw_u64(c1, fk_load64(p + FK_SHORT));
            c2 = fk_hw_u64(c2, fk_load64(p + 2 * FK_SHORT));
            p += 8;
        } while (p < end);
        crc = fk_shift(fk_shift_short, (uint32_t)c0) ^ (uint32_t)c1;
        crc = fk_shift(fk_shift_short, (uint32_t)crc) ^ (uint32_t)c2;
        p += 2 * FK_SHORT;
        n -= 3 * FK_SHORT;
    }
    while (n >= 8) {
        crc = fk_hw_u64(crc, fk_load64(p));
        p += 8;
        n -= 8;
    }
    while (n--) {
        crc = fk_hw_u8(crc, *p++);
    }
    return (uint32_t)crc;
}

/* Whether this CPU has the instruction. cpuid rather than
 * __builtin_cpu_supports, which needs __cpu_model from the compiler's runtime
 * library (libgcc, compiler-rt): a toolchain that does not link it in leaves
 * an undefined symbol that fails at dlopen (see crc32c_impl.h). */
static int fk_detect_hw(void)
{
#if defined(__x86_64__)
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
        return 0;
    }
    return (ecx & bit_SSE4_2) ? 1 : 0;
#else
    return (getauxval(AT_HWCAP) & HWCAP_CRC32) ? 1 : 0;
#endif
}
#endif

/* ---- initialisation ------------------------------------------------- */

static void fk_build_shift(uint32_t (*t)[256], size_t zeros)
{
    static const unsigned char zero[FK_LONG];  /* all zero bytes */
    uint32_t basis[32];
    int bit, k, b;
    /* The image of each of the 32 unit vectors under Z_zeros. */
    for (bit = 0; bit < 32; bit++) {
        uint32_t c = 1u << bit;
        size_t left = zeros;
        while (left) {
            size_t chunk = left < FK_LONG ? left : FK_LONG;
            c = fk_raw_table(c, zero, chunk);
            left -= chunk;
        }
        basis[bit] = c;
    }
    for (k = 0; k < 4; k++) {
        for (b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (bit = 0; bit < 8; bit++) {
                if (b & (1 << bit)) {
                    v ^= basis[8 * k + bit];
                }
            }
            t[k][b] = v;
        }
    }
}

__attribute__((constructor))
static void fk_crc32c_init(void)
{
    uint32_t i, c;
    int j, k;
    const char *env;
    if (fk_ready) {
        return;
    }
    for (i = 0; i < 256; i++) {
        c = i;
        for (j = 0; j < 8; j++) {
            c = (c & 1) ? (c >> 1) ^ FK_POLY : c >> 1;
        }
        fk_tab[0][i] = c;
    }
    for (i = 0; i < 256; i++) {
        c = fk_tab[0][i];
        for (k = 1; k < 8; k++) {
            c = fk_tab[0][c & 0xff] ^ (c >> 8);
            fk_tab[k][i] = c;
        }
    }
    fk_build_shift(fk_shift_long, FK_LONG);
    fk_build_shift(fk_shift_short, FK_SHORT);
#if FK_HW
    fk_hw_ok = fk_detect_hw();
#endif
    env = getenv("FASTKAFKA_CRC32C");
    fk_use_hw = fk_hw_ok && !(env && strcmp(env, "table") == 0);
    fk_ready = 1;
}

/* ---- public entry points -------------------------------------------- */

uint32_t fk_crc32c_table(uint32_t crc, const unsigned char *buf, size_t length)
{
    if (!fk_ready) {
        fk_crc32c_init();
    }
    return ~fk_raw_table(~crc, buf, length);
}

uint32_t fk_crc32c_hw(uint32_t crc, const unsigned char *buf, size_t length)
{
    if (!fk_ready) {
        fk_crc32c_init();
    }
#if FK_HW
    if (fk_hw_ok) {
        return ~fk_raw_hw(~crc, buf, length);
    }
#endif
    return ~fk_raw_table(~crc, buf, length);
}

int fk_crc32c_hw_available(void)
{
    if (!fk_ready) {
        fk_crc32c_init();
    }
    return fk_hw_ok;
}

uint32_t fk_crc32c(uint32_t crc, const unsigned char *buf, size_t length)
{
    if (!fk_ready) {
        fk_crc32c_init();
    }
#if FK_HW
    if (fk_use_hw) {
        return ~fk_raw_hw(~crc, buf, length);
    }
#endif
    return ~fk_raw_table(~crc, buf, length);
}

const char *fk_crc32c_impl(void)
{
    if (!fk_ready) {
        fk_crc32c_init();
    }
    #if FK_HW
    if (fk_use_hw) {
        return FK_HW_NAME;
    }
#endif
    return "table";
}
