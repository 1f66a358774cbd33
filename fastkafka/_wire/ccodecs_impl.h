/* Record-batch compression in C, without the GIL (fastkafka._wire.ccodecs).
 *
 * The codecs' shared libraries (zlib, liblz4, libzstd, libsnappy) are loaded at run time with
 * dlopen, and only the few functions used here are looked up: an extension built from this file
 * links nothing but libc, and a library missing on the machine only means that codec is not
 * compressed here (the Python codecs of fastkafka._wire.compression do it, with the GIL).
 *
 * Formats, as Kafka reads them and as fastkafka._wire.compression writes them:
 *   1 gzip    deflate in a gzip wrapper (zlib, windowBits 31, memLevel 8)
 *   2 snappy  xerial framing: "\x82SNAPPY\x00", int32 version 1, int32 compat 1, then per 32 KiB of
 *             input [int32 big-endian length][raw snappy block]
 *   3 lz4     LZ4 frame: 64 KiB independent blocks, no checksums, no content size
 *   4 zstd    one zstd frame
 */
#ifndef FK_CCODECS_IMPL_H
#define FK_CCODECS_IMPL_H

#include <stddef.h>
#include <stdint.h>

#define FK_NCODECS 5

/* Load the libraries of the codecs named in ``only`` (comma-separated: gzip,snappy,lz4,zstd;
 * NULL: all of them). Once per process, with the GIL held; later calls do nothing. Returns how
 * many codecs can be compressed here. */
int fk_codecs_load(const char *only);

/* 1 when ``code`` (1-4) is compressed here, else 0. Any thread. */
int fk_codec_in_c(int code);

/* Use (``on`` 1) or stop using (0) the C library of ``code`` for compressions from now on (a
 * builder decides when it is made); only a loaded library can be used. Returns fk_codec_in_c. With
 * the GIL held. */
int fk_codec_use(int code, int on);

/* The file name of the library loaded for ``code``, or NULL. */
const char *fk_codec_library(int code);

/* The version of the library loaded for ``code`` as the library numbers it (major * 10000 +
 * minor * 100 + release: ZSTD_versionNumber, LZ4_versionNumber), or 0 (not loaded, or a library
 * that gives no such number: zlib, snappy). */
unsigned fk_codec_version(int code);

/* Compress ``n`` bytes at ``src`` with ``code`` at ``level`` (ignored by snappy; checked by the
 * caller against compression.CODEC_SPECS) into this thread's scratch buffer: the length of the
 * output, *out pointing at it (valid until this thread's next call), or -1 (codec not loaded, no
 * memory, or the library failed). Any thread, no GIL; each thread keeps its own compression
 * contexts and scratch buffer (freed when the thread ends). */
ptrdiff_t fk_codec_compress(int code, int level, const char *src, size_t n, const char **out);

/* Counters per codec since the process started: calls compressed here, bytes in, bytes out,
 * failures (-1 answers). */
void fk_codec_counters(int code, uint64_t *calls, uint64_t *bytes_in, uint64_t *bytes_out,
                       uint64_t *failures);

#endif
