/* CRC-32C (Castagnoli) for fastkafka: SSE4.2 with three interleaved streams,
 * and a portable slicing-by-8 fallback. See crc32c_impl.h for the contract.
 *
 * Internally every routine works on the "raw" register value (no pre/post
 * inversion); fk_crc32c() applies the inversion once at each end. The raw CRC
 * is linear over GF(2), which is what lets three streams be computed
 * independently and combined: raw(c, A||B) = Z_|B|(raw(c, A)) ^ raw(0, B),
 * where Z_n is "append n zero bytes", a 32x32 bit matrix we keep as four
 * 256-entry lookup tables per block length.
 */
#include "crc32c_impl.h"

#include <stdlib.h>
#include <string.h>

#define FK_POLY 0x82F63B78u

#if defined(__x86_64__) && defined(__GNUC__)
#define FK_HAVE_X86_CRC 1
#include <nmmintrin.h>
#else
#define FK_HAVE_X86_CRC 0
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

/* ---- SSE4.2 path ---------------------------------------------------- */

#if FK_HAVE_X86_CRC
__attribute__((target("sse4.2")))
static uint32_t fk_raw_hw(uint32_t crc32, const unsigned char *p, size_t n)
{
    uint64_t crc = crc32;
    while (n && ((uintptr_t)p & 7)) {
        crc = _mm_crc32_u8((uint32_t)crc, *p++);
        n--;
    }
    /* Three independent streams hide the 3-cycle latency of crc32. */
    while (n >= 3 * FK_LONG) {
        uint64_t c0 = crc, c1 = 0, c2 = 0;
        const unsigned char *end = p + FK_LONG;
        do {
            c0 = _mm_crc32_u64(c0, fk_load64(p));
            c1 = _mm_crc32_u64(c1, fk_load64(p + FK_LONG));
            c2 = _mm_crc32_u64(c2, fk_load64(p + 2 * FK_LONG));
            p += 8;
        } while (p < end);
        crc = fk_shift(fk_shift_long, (uint32_t)c0) ^ (uint32_t)c1;
        crc = fk_shift(fk_shift_long, (uint32_t)crc) ^ (uint32_t)c2;
        p += 2 * FK_LONG;
        n -= 3 * FK_LONG;
    }
    while (n >= 3 * FK_SHORT) {
        uint64_t c0 = crc, c1 = 0, c2 = 0;
        const unsigned char *end = p + FK_SHORT;
        do {
            c0 = _mm_crc32_u64(c0, fk_load64(p));
            c1 = _mm_crc32_u64(c1, fk_load64(p + FK_SHORT));
            c2 = _mm_crc32_u64(c2, fk_load64(p + 2 * FK_SHORT));
            p += 8;
        } while (p < end);
        crc = fk_shift(fk_shift_short, (uint32_t)c0) ^ (uint32_t)c1;
        crc = fk_shift(fk_shift_short, (uint32_t)crc) ^ (uint32_t)c2;
        p += 2 * FK_SHORT;
        n -= 3 * FK_SHORT;
    }
    while (n >= 8) {
        crc = _mm_crc32_u64(crc, fk_load64(p));
        p += 8;
        n -= 8;
    }
    while (n--) {
        crc = _mm_crc32_u8((uint32_t)crc, *p++);
    }
    return (uint32_t)crc;
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
#if FK_HAVE_X86_CRC
    __builtin_cpu_init();
    fk_hw_ok = __builtin_cpu_supports("sse4.2") ? 1 : 0;
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
#if FK_HAVE_X86_CRC
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
#if FK_HAVE_X86_CRC
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
    return fk_use_hw ? "sse4.2" : "table";
}
