# path:
#   close: BatchBuilder.close / drain_c (GIL-free) -> builder_close_c (records.pyx) -> codec_compress_c

# Contract of fastkafka._wire.ccodecs: record-batch compression in C, without the GIL.
# The codecs' libraries are loaded with dlopen at import (ccodecs_impl.c); a codec whose library
# is missing is compressed by the Python codecs (fastkafka._wire.compression), with the GIL.

# 1 when codec ``code`` (0-4) needs no Python to be applied: 0 (none), or a codec whose C library
# was loaded.
# thread: any · lock: none · gil: any
cdef int codec_in_c(int code) noexcept nogil

# Compress ``n`` bytes at ``src`` into this thread's scratch buffer: the output's length with
# ``out[0]`` pointing at it (valid until this thread's next call), or -1 (not loaded here, no
# memory, the library failed). ``level`` as compression.validate_level gives it (0 for snappy).
# thread: any · lock: none · gil: any
cdef Py_ssize_t codec_compress_c(int code, int level, const char *src, Py_ssize_t n,
                                 const char **out) noexcept nogil
