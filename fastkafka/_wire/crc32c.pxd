# path:
#   stamp: builder_stamp_c -> fk_crc32c -> the hardware (SSE4.2, ARMv8 CRC32) or the table path (picked once)

from libc.stdint cimport uint32_t

cdef extern from "crc32c_impl.h":
    uint32_t fk_crc32c(uint32_t crc, const unsigned char *buf, size_t length) nogil
    const char *fk_crc32c_impl() nogil
