/* Record-batch compression in C, without the GIL: see ccodecs_impl.h for the contract.
 *
 * The prototypes and structures below are declared here from the libraries' documented, stable
 * C APIs (zlib.h, lz4frame.h, zstd.h, snappy-c.h), so that no development headers are needed to
 * build, and each library is found with dlopen when the module is imported. */
#include "ccodecs_impl.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- zlib ------------------------------------------------------------------------------------ */
typedef struct {                 /* z_stream, field for field */
    const unsigned char *next_in;
    unsigned avail_in;
    unsigned long total_in;
    unsigned char *next_out;
    unsigned avail_out;
    unsigned long total_out;
    const char *msg;
    void *state;
    void *zalloc;
    void *zfree;
    void *opaque;
    int data_type;
    unsigned long adler;
    unsigned long reserved;
} fk_zstream;

#define FK_Z_FINISH 4
#define FK_Z_OK 0
#define FK_Z_STREAM_END 1
#define FK_Z_DEFLATED 8
#define FK_Z_GZIP_WBITS 31
#define FK_Z_MEMLEVEL 8

static const char *(*z_version)(void);
static int (*z_deflate_init2)(fk_zstream *, int, int, int, int, int, const char *, int);
static int (*z_deflate)(fk_zstream *, int);
static int (*z_deflate_reset)(fk_zstream *);
static int (*z_deflate_end)(fk_zstream *);
static unsigned long (*z_deflate_bound)(fk_zstream *, unsigned long);

/* ---- lz4 frame --------------------------------------------------------------------------------- */
typedef struct {                 /* LZ4F_frameInfo_t */
    int block_size_id;           /* 0: default (64 KiB) */
    int block_mode;              /* 1: independent blocks */
    int content_checksum;
    int frame_type;
    unsigned long long content_size;
    unsigned dict_id;
    int block_checksum;
} fk_lz4f_frame_info;

typedef struct {                 /* LZ4F_preferences_t */
    fk_lz4f_frame_info frame_info;
    int compression_level;
    unsigned auto_flush;
    unsigned favor_dec_speed;
    unsigned reserved[3];
} fk_lz4f_prefs;

#define FK_LZ4F_VERSION 100

static unsigned (*lz4f_get_version)(void);
static int (*lz4_version_number)(void);
static size_t (*lz4f_create)(void **, unsigned);
static size_t (*lz4f_free)(void *);
static size_t (*lz4f_begin)(void *, void *, size_t, const fk_lz4f_prefs *);
static size_t (*lz4f_update)(void *, void *, size_t, const void *, size_t, const void *);
static size_t (*lz4f_end)(void *, void *, size_t, const void *);
static unsigned (*lz4f_is_error)(size_t);
static size_t (*lz4f_frame_bound)(size_t, const fk_lz4f_prefs *);

/* ---- zstd -------------------------------------------------------------------------------------- */
static unsigned (*zstd_version_number)(void);
static void *(*zstd_create)(void);
static size_t (*zstd_free)(void *);
static size_t (*zstd_compress_cctx)(void *, void *, size_t, const void *, size_t, int);
static size_t (*zstd_bound)(size_t);
static unsigned (*zstd_is_error)(size_t);

/* ---- snappy ------------------------------------------------------------------------------------ */
static int (*snappy_compress_fn)(const char *, size_t, char *, size_t *);
static size_t (*snappy_max_len)(size_t);

#define FK_XERIAL_HEADER 16
#define FK_XERIAL_BLOCK (32 * 1024)
static const unsigned char xerial_header[FK_XERIAL_HEADER] = {
    0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0x00, 0, 0, 0, 1, 0, 0, 0, 1};

/* ---- loading ----------------------------------------------------------------------------------- */
static int loaded_once;
static int loaded[FK_NCODECS];
static int in_c[FK_NCODECS];
static const char *library[FK_NCODECS];

static uint64_t c_calls[FK_NCODECS], c_in[FK_NCODECS], c_out[FK_NCODECS], c_fail[FK_NCODECS];

static void *open_first(const char *const *names, int code) {
    void *h;
    for (; *names != NULL; names++) {
        h = dlopen(*names, RTLD_NOW | RTLD_LOCAL);
        if (h != NULL) {
            library[code] = *names;
            return h;
        }
    }
    return NULL;
}

#define FK_SYM(h, var, name) (*(void **)(&(var)) = dlsym((h), (name)), (var) != NULL)

static int load_zlib(void) {
    static const char *const names[] = {"libz.so.1", "libz.so", NULL};
    void *h = open_first(names, 1);
    if (h == NULL)
        return 0;
    if (FK_SYM(h, z_version, "zlibVersion") && FK_SYM(h, z_deflate_init2, "deflateInit2_")
        && FK_SYM(h, z_deflate, "deflate") && FK_SYM(h, z_deflate_reset, "deflateReset")
        && FK_SYM(h, z_deflate_end, "deflateEnd") && FK_SYM(h, z_deflate_bound, "deflateBound")) {
        const char *v = z_version();
        if (v != NULL && v[0] == '1')
            return 1;
    }
    library[1] = NULL;
    return 0;
}

static int load_snappy(void) {
    static const char *const names[] = {"libsnappy.so.1", "libsnappy.so", NULL};
    void *h = open_first(names, 2);
    if (h == NULL)
        return 0;
    if (FK_SYM(h, snappy_compress_fn, "snappy_compress")
        && FK_SYM(h, snappy_max_len, "snappy_max_compressed_length"))
        return 1;
    library[2] = NULL;
    return 0;
}

static int load_lz4(void) {
    static const char *const names[] = {"liblz4.so.1", "liblz4.so", NULL};
    void *h = open_first(names, 3);
    if (h == NULL)
        return 0;
    if (FK_SYM(h, lz4f_get_version, "LZ4F_getVersion")
        && FK_SYM(h, lz4_version_number, "LZ4_versionNumber")
        && FK_SYM(h, lz4f_create, "LZ4F_createCompressionContext")
        && FK_SYM(h, lz4f_free, "LZ4F_freeCompressionContext")
        && FK_SYM(h, lz4f_begin, "LZ4F_compressBegin")
        && FK_SYM(h, lz4f_update, "LZ4F_compressUpdate")
        && FK_SYM(h, lz4f_end, "LZ4F_compressEnd") && FK_SYM(h, lz4f_is_error, "LZ4F_isError")
        && FK_SYM(h, lz4f_frame_bound, "LZ4F_compressFrameBound")
        /* the preferences layout above: frame API version 100, liblz4 1.8.0 or newer */
        && lz4f_get_version() == FK_LZ4F_VERSION && lz4_version_number() >= 10800)
        return 1;
    library[3] = NULL;
    return 0;
}

static int load_zstd(void) {
    static const char *const names[] = {"libzstd.so.1", "libzstd.so", NULL};
    void *h = open_first(names, 4);
    if (h == NULL)
        return 0;
    if (FK_SYM(h, zstd_version_number, "ZSTD_versionNumber")
        && FK_SYM(h, zstd_create, "ZSTD_createCCtx") && FK_SYM(h, zstd_free, "ZSTD_freeCCtx")
        && FK_SYM(h, zstd_compress_cctx, "ZSTD_compressCCtx")
        && FK_SYM(h, zstd_bound, "ZSTD_compressBound") && FK_SYM(h, zstd_is_error, "ZSTD_isError")
        /* negative (fast) levels: libzstd 1.4.0 or newer */
        && zstd_version_number() >= 10400)
        return 1;
    library[4] = NULL;
    return 0;
}

static int wanted(const char *only, const char *name) {
    size_t n = strlen(name);
    const char *p = only;
    if (only == NULL)
        return 1;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len > 0 && *p == ' ') {
            p++;
            len--;
        }
        while (len > 0 && p[len - 1] == ' ')
            len--;
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        if (end == NULL)
            break;
        p = end + 1;
    }
    return 0;
}

int fk_codecs_load(const char *only) {
    int k, total = 0;
    if (loaded_once) {
        for (k = 1; k < FK_NCODECS; k++)
            total += in_c[k];
        return total;
    }
    loaded_once = 1;
    if (wanted(only, "gzip"))
        in_c[1] = load_zlib();
    if (wanted(only, "snappy"))
        in_c[2] = load_snappy();
    if (wanted(only, "lz4"))
        in_c[3] = load_lz4();
    if (wanted(only, "zstd"))
        in_c[4] = load_zstd();
    for (k = 1; k < FK_NCODECS; k++) {
        loaded[k] = in_c[k];
        total += in_c[k];
    }
    return total;
}

int fk_codec_use(int code, int on) {
    if (code <= 0 || code >= FK_NCODECS)
        return 0;
    __atomic_store_n(&in_c[code], on && loaded[code], __ATOMIC_RELAXED);
    return in_c[code];
}

int fk_codec_in_c(int code) {
    return code > 0 && code < FK_NCODECS && __atomic_load_n(&in_c[code], __ATOMIC_RELAXED);
}

const char *fk_codec_library(int code) {
    return (code > 0 && code < FK_NCODECS && loaded[code]) ? library[code] : NULL;
}

unsigned fk_codec_version(int code) {
    if (code <= 0 || code >= FK_NCODECS || !loaded[code])
        return 0;
    if (code == 3)
        return (unsigned)lz4_version_number();
    if (code == 4)
        return zstd_version_number();
    return 0;
}

void fk_codec_counters(int code, uint64_t *calls, uint64_t *bytes_in, uint64_t *bytes_out,
                       uint64_t *failures) {
    if (code <= 0 || code >= FK_NCODECS) {
        *calls = *bytes_in = *bytes_out = *failures = 0;
        return;
    }
    *calls = __atomic_load_n(&c_calls[code], __ATOMIC_RELAXED);
    *bytes_in = __atomic_load_n(&c_in[code], __ATOMIC_RELAXED);
    *bytes_out = __atomic_load_n(&c_out[code], __ATOMIC_RELAXED);
    *failures = __atomic_load_n(&c_fail[code], __ATOMIC_RELAXED);
}

/* ---- per-thread state -------------------------------------------------------------------------- */
typedef struct {
    char *scratch;
    size_t scratch_cap;
    void *zstd;                  /* ZSTD_CCtx */
    void *lz4;                   /* LZ4F_cctx */
    fk_zstream z;
    int z_level;
    int z_ready;
} fk_thread_state;

static pthread_key_t state_key;
static pthread_once_t state_once = PTHREAD_ONCE_INIT;
static int state_key_ok;

static void state_free(void *p) {
    fk_thread_state *s = (fk_thread_state *)p;
    if (s == NULL)
        return;
    if (s->zstd != NULL)
        zstd_free(s->zstd);
    if (s->lz4 != NULL)
        lz4f_free(s->lz4);
    if (s->z_ready)
        z_deflate_end(&s->z);
    free(s->scratch);
    free(s);
}

static void state_key_make(void) {
    state_key_ok = pthread_key_create(&state_key, state_free) == 0;
}

static fk_thread_state *thread_state(void) {
    fk_thread_state *s;
    pthread_once(&state_once, state_key_make);
    if (!state_key_ok)
        return NULL;
    s = (fk_thread_state *)pthread_getspecific(state_key);
    if (s == NULL) {
        s = (fk_thread_state *)calloc(1, sizeof(*s));
        if (s == NULL)
            return NULL;
        if (pthread_setspecific(state_key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    return s;
}

static char *scratch(fk_thread_state *s, size_t need) {
    char *p;
    size_t cap;
    if (need <= s->scratch_cap)
        return s->scratch;
    cap = s->scratch_cap ? s->scratch_cap : 4096;
    while (cap < need)
        cap *= 2;
    p = (char *)malloc(cap);      /* nothing in it needs keeping: no realloc copy */
    if (p == NULL)
        return NULL;
    free(s->scratch);
    s->scratch = p;
    s->scratch_cap = cap;
    return p;
}

static inline void put_be32(char *p, uint32_t v) {
    p[0] = (char)(v >> 24);
    p[1] = (char)(v >> 16);
    p[2] = (char)(v >> 8);
    p[3] = (char)v;
}

/* ---- the codecs -------------------------------------------------------------------------------- */
static ptrdiff_t gzip_c(fk_thread_state *s, int level, const char *src, size_t n,
                        const char **out) {
    char *dst;
    unsigned long bound;
    if (n > UINT_MAX)
        return -1;
    if (s->z_ready && s->z_level != level) {
        z_deflate_end(&s->z);
        s->z_ready = 0;
    }
    if (!s->z_ready) {
        memset(&s->z, 0, sizeof(s->z));
        if (z_deflate_init2(&s->z, level, FK_Z_DEFLATED, FK_Z_GZIP_WBITS, FK_Z_MEMLEVEL, 0,
                            z_version(), (int)sizeof(fk_zstream)) != FK_Z_OK)
            return -1;
        s->z_ready = 1;
        s->z_level = level;
    }
    bound = z_deflate_bound(&s->z, (unsigned long)n);
    if (bound > UINT_MAX || (dst = scratch(s, bound)) == NULL)
        return -1;
    s->z.next_in = (const unsigned char *)src;
    s->z.avail_in = (unsigned)n;
    s->z.next_out = (unsigned char *)dst;
    s->z.avail_out = (unsigned)bound;
    if (z_deflate(&s->z, FK_Z_FINISH) != FK_Z_STREAM_END) {
        z_deflate_end(&s->z);
        s->z_ready = 0;
        return -1;
    }
    n = (size_t)s->z.total_out;
    if (z_deflate_reset(&s->z) != FK_Z_OK) {
        z_deflate_end(&s->z);
        s->z_ready = 0;
    }
    *out = dst;
    return (ptrdiff_t)n;
}

static ptrdiff_t snappy_c(fk_thread_state *s, const char *src, size_t n, const char **out) {
    size_t blocks = (n + FK_XERIAL_BLOCK - 1) / FK_XERIAL_BLOCK;
    size_t per = 4 + snappy_max_len(FK_XERIAL_BLOCK);
    size_t pos = FK_XERIAL_HEADER, off, len, clen;
    char *dst;
    if (blocks > (((size_t)PTRDIFF_MAX - FK_XERIAL_HEADER) / per))
        return -1;
    if ((dst = scratch(s, FK_XERIAL_HEADER + blocks * per)) == NULL)
        return -1;
    memcpy(dst, xerial_header, FK_XERIAL_HEADER);
    for (off = 0; off < n; off += len) {
        len = n - off < FK_XERIAL_BLOCK ? n - off : FK_XERIAL_BLOCK;
        clen = per - 4;
        if (snappy_compress_fn(src + off, len, dst + pos + 4, &clen) != 0 || clen > INT32_MAX)
            return -1;
        put_be32(dst + pos, (uint32_t)clen);
        pos += 4 + clen;
    }
    *out = dst;
    return (ptrdiff_t)pos;
}

static ptrdiff_t lz4_c(fk_thread_state *s, int level, const char *src, size_t n,
                       const char **out) {
    fk_lz4f_prefs prefs;
    size_t bound, pos, r;
    char *dst;
    memset(&prefs, 0, sizeof(prefs));
    prefs.frame_info.block_mode = 1;          /* independent blocks */
    prefs.compression_level = level;
    prefs.auto_flush = 1;
    if (s->lz4 == NULL && lz4f_is_error(lz4f_create(&s->lz4, FK_LZ4F_VERSION))) {
        s->lz4 = NULL;
        return -1;
    }
    bound = lz4f_frame_bound(n, &prefs);
    if (lz4f_is_error(bound) || (dst = scratch(s, bound)) == NULL)
        return -1;
    r = lz4f_begin(s->lz4, dst, bound, &prefs);
    if (lz4f_is_error(r))
        return -1;
    pos = r;
    r = lz4f_update(s->lz4, dst + pos, bound - pos, src, n, NULL);
    if (lz4f_is_error(r))
        return -1;
    pos += r;
    r = lz4f_end(s->lz4, dst + pos, bound - pos, NULL);
    if (lz4f_is_error(r))
        return -1;
    *out = dst;
    return (ptrdiff_t)(pos + r);
}

static ptrdiff_t zstd_c(fk_thread_state *s, int level, const char *src, size_t n,
                        const char **out) {
    size_t bound, r;
    char *dst;
    if (s->zstd == NULL && (s->zstd = zstd_create()) == NULL)
        return -1;
    bound = zstd_bound(n);
    if (zstd_is_error(bound) || (dst = scratch(s, bound)) == NULL)
        return -1;
    r = zstd_compress_cctx(s->zstd, dst, bound, src, n, level);
    if (zstd_is_error(r))
        return -1;
    *out = dst;
    return (ptrdiff_t)r;
}

ptrdiff_t fk_codec_compress(int code, int level, const char *src, size_t n, const char **out) {
    fk_thread_state *s;
    ptrdiff_t r = -1;
    if (!fk_codec_in_c(code))
        return -1;
    s = thread_state();
    if (s != NULL) {
        switch (code) {
        case 1: r = gzip_c(s, level, src, n, out); break;
        case 2: r = snappy_c(s, src, n, out); break;
        case 3: r = lz4_c(s, level, src, n, out); break;
        case 4: r = zstd_c(s, level, src, n, out); break;
        }
    }
    if (r < 0) {
        __atomic_fetch_add(&c_fail[code], 1, __ATOMIC_RELAXED);
        return -1;
    }
    __atomic_fetch_add(&c_calls[code], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&c_in[code], (uint64_t)n, __ATOMIC_RELAXED);
    __atomic_fetch_add(&c_out[code], (uint64_t)r, __ATOMIC_RELAXED);
    return r;
}
