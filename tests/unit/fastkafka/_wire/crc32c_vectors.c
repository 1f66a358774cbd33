/* C-level check of fastkafka/_wire/crc32c_impl.c on whatever CPU runs it: built by
 * test_crc32c_c.py with gcc and zig cc (x86_64, and aarch64 run under qemu), with
 * -I fastkafka/_wire.
 *
 *   crc32c_vectors [seed]   check; prints "impl=<name> hw=<0|1>" then "ok <checks>"
 *   crc32c_vectors bench    MB/s of the hardware and the table path, 1 KiB and 1 MiB
 *
 * Every entry point (fk_crc32c, fk_crc32c_hw, fk_crc32c_table) against the RFC 3720
 * vectors, a bit-at-a-time reference, each other on random lengths (0..100k) at random
 * alignments, and the continuation property crc(a||b) == crc(b, crc(a)).
 * Exit status 1 and a line on stderr at the first mismatch.
 */
#include "crc32c_impl.c"

#include <stdio.h>
#include <time.h>

typedef uint32_t (*crc_fn)(uint32_t, const unsigned char *, size_t);

static const struct {
    const char *name;
    crc_fn fn;
} FNS[] = {
    {"fk_crc32c", fk_crc32c},
    {"fk_crc32c_hw", fk_crc32c_hw},
    {"fk_crc32c_table", fk_crc32c_table},
};
#define NFNS (sizeof(FNS) / sizeof(FNS[0]))

static unsigned long checks = 0;

static uint64_t rng_state;

static uint64_t rng(void)    /* xorshift64* */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

/* One bit at a time, straight from the definition: shares nothing with the impl. */
static uint32_t crc_bitwise(uint32_t crc, const unsigned char *p, size_t n)
{
    crc = ~crc;
    while (n--) {
        int k;
        crc ^= *p++;
        for (k = 0; k < 8; k++) {
            crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
        }
    }
    return ~crc;
}

static void expect(const char *what, uint32_t got, uint32_t want, size_t len, size_t off)
{
    checks++;
    if (got != want) {
        fprintf(stderr, "FAIL %s: len=%zu offset=%zu got 0x%08X want 0x%08X (impl=%s)\n",
                what, len, off, (unsigned)got, (unsigned)want, fk_crc32c_impl());
        exit(1);
    }
}

static void check_vectors(void)
{
    static const unsigned char iscsi_read[48] = {
        0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
        0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    };
    unsigned char zeros[32], ones[32], inc[32], dec[32];
    size_t i, f;
    for (i = 0; i < 32; i++) {
        zeros[i] = 0;
        ones[i] = 0xff;
        inc[i] = (unsigned char)i;
        dec[i] = (unsigned char)(31 - i);
    }
    for (f = 0; f < NFNS; f++) {
        crc_fn fn = FNS[f].fn;
        expect(FNS[f].name, fn(0, (const unsigned char *)"", 0), 0x00000000u, 0, 0);
        expect(FNS[f].name, fn(0, (const unsigned char *)"123456789", 9), 0xE3069283u, 9, 0);
        expect(FNS[f].name, fn(0, zeros, 32), 0x8A9136AAu, 32, 0);
        expect(FNS[f].name, fn(0, ones, 32), 0x62A8AB43u, 32, 0);
        expect(FNS[f].name, fn(0, inc, 32), 0x46DD794Eu, 32, 0);
        expect(FNS[f].name, fn(0, dec, 32), 0x113FDB5Cu, 32, 0);
        expect(FNS[f].name, fn(0, iscsi_read, 48), 0xD9963A56u, 48, 0);
    }
}

static void check_all(const unsigned char *p, size_t n, size_t off, uint32_t want)
{
    size_t f;
    for (f = 0; f < NFNS; f++) {
        expect(FNS[f].name, FNS[f].fn(0, p, n), want, n, off);
    }
}

static void check_buffers(unsigned char *buf, size_t cap)
{
    /* every length up to 1100 (past one 3 x 256 block) at every alignment, against the bitwise reference */
    size_t n, off, i;
    size_t edges[] = {3 * FK_SHORT - 1, 3 * FK_SHORT, 3 * FK_SHORT + 1, 3 * FK_SHORT + 7,
                      3 * FK_LONG - 1, 3 * FK_LONG, 3 * FK_LONG + 1, 3 * FK_LONG + 3 * FK_SHORT + 9,
                      6 * FK_LONG + 5, 100000};
    for (off = 0; off < 8; off++) {
        for (n = 0; n <= 1100; n++) {
            check_all(buf + off, n, off, crc_bitwise(0, buf + off, n));
        }
    }
    /* the block boundaries of the interleaved loop */
    for (i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
        for (off = 0; off < 8; off += 3) {
            check_all(buf + off, edges[i], off, crc_bitwise(0, buf + off, edges[i]));
        }
    }
    /* random lengths 0..100k at random alignments, against the table path */
    for (i = 0; i < 400; i++) {
        off = (size_t)(rng() % 64);
        n = (size_t)(rng() % 100001);
        if (off + n > cap) {
            n = cap - off;
        }
        check_all(buf + off, n, off, fk_crc32c_table(0, buf + off, n));
    }
}

static void check_continuation(const unsigned char *buf)
{
    size_t i, f;
    for (i = 0; i < 300; i++) {
        size_t off = (size_t)(rng() % 64);
        size_t n = (size_t)(rng() % 100001);
        size_t cut = n ? (size_t)(rng() % (n + 1)) : 0;
        uint32_t seed = (uint32_t)rng();
        uint32_t whole = fk_crc32c_table(0, buf + off, n);
        uint32_t seeded = fk_crc32c_table(seed, buf + off, n);
        for (f = 0; f < NFNS; f++) {
            crc_fn fn = FNS[f].fn;
            expect(FNS[f].name, fn(fn(0, buf + off, cut), buf + off + cut, n - cut), whole, n, off);
            expect(FNS[f].name, fn(seed, buf + off, n), seeded, n, off);
        }
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void bench(const unsigned char *buf)
{
    size_t sizes[] = {1024, 1 << 20};
    size_t s, f, k;
    for (s = 0; s < 2; s++) {
        for (f = 1; f < NFNS; f++) {
            double best = 1e30;
            volatile uint32_t sink = 0;
            size_t reps = (size_t)(64 << 20) / sizes[s] / 8;
            for (k = 0; k < 5; k++) {
                size_t r;
                double t = now_s();
                for (r = 0; r < reps; r++) {
                    sink ^= FNS[f].fn(0, buf, sizes[s]);
                }
                t = now_s() - t;
                if (t < best) {
                    best = t;
                }
            }
            printf("%-16s %8zu B  %9.1f MB/s\n", FNS[f].name, sizes[s],
                   (double)sizes[s] * reps / best / 1e6);
        }
    }
}

int main(int argc, char **argv)
{
    size_t cap = (1 << 20) + 256, i;
    unsigned char *buf = malloc(cap);
    if (!buf) {
        return 2;
    }
    rng_state = 0x9E3779B97F4A7C15ULL;
    if (argc > 1 && strcmp(argv[1], "bench") != 0) {
        rng_state = strtoull(argv[1], NULL, 0);
    }
    if (!rng_state) {
        rng_state = 1;
    }
    for (i = 0; i < cap; i++) {
        buf[i] = (unsigned char)(rng() >> 56);
    }
    printf("impl=%s hw=%d\n", fk_crc32c_impl(), fk_crc32c_hw_available());
    if (argc > 1 && strcmp(argv[1], "bench") == 0) {
        bench(buf);
        return 0;
    }
    if (strcmp(fk_crc32c_impl(), "table") == 0 && fk_crc32c_hw_available()) {
        const char *env = getenv("FASTKAFKA_CRC32C");
        if (!env || strcmp(env, "table") != 0) {
            fprintf(stderr, "FAIL hardware available but the table path is used\n");
            return 1;
        }
    }
    check_vectors();
    check_buffers(buf, cap);
    check_continuation(buf);
    printf("ok %lu\n", checks);
    free(buf);
    return 0;
}
