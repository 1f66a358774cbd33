# path:
#   record:    pooled_builder -> append_raw -> close / builder_close_plain_c
#              -> stamp / builder_stamp_c -> pieces_c
#   too large: split -> _split_records -> append_raw (new open builders)

# Contract of fastkafka._wire.records: the RecordBatch v2 builder.
# Other compiled modules (accumulator, Arrow sink) cimport BatchBuilder and call
# append_raw / close / stamp directly, and use record_size_c for size checks. How and why:
# docs/internals.md#record-batches.
cimport cython
from libc.stdint cimport int16_t, int32_t, int64_t

from fastkafka._wire.varint cimport size_uvarint, zigzag64

cdef enum:
    BATCH_HEADER_SIZE = 61        # baseOffset .. recordCount
    BATCH_CRC_OFFSET = 17         # u32 CRC-32C
    BATCH_ATTRIBUTES_OFFSET = 21  # CRC covers [21, end)


# thread: any · lock: none · gil: any
cdef inline Py_ssize_t _len_field_size(Py_ssize_t n) noexcept nogil:
    # length varint plus the bytes themselves; n == -1 means null
    if n < 0:
        return 1
    return size_uvarint(zigzag64(n)) + n


# thread: any · lock: none · gil: any
cdef inline Py_ssize_t record_size_c(int64_t timestamp_delta, int32_t offset_delta,
                                     Py_ssize_t klen, Py_ssize_t vlen,
                                     Py_ssize_t headers_size) noexcept nogil:
    """Encoded size of one record (length prefix included).

    klen/vlen of -1 mean null; headers_size is the size of the encoded headers
    section including its count varint (1 for no headers; see headers_encoded_size).
    """
    cdef Py_ssize_t body = (1 + size_uvarint(zigzag64(timestamp_delta))
                            + size_uvarint(zigzag64(offset_delta))
                            + _len_field_size(klen) + _len_field_size(vlen)
                            + headers_size)
    return size_uvarint(zigzag64(body)) + body


# Pointer/length of a bytes-like or str record field (None -> NULL, -1; bytes first, a str as its
# UTF-8 through str_utf8); InvalidRecordError naming ``name`` for anything else
# (MalformedRecordError for a buffer that is released or not C-contiguous, or a str that is not
# valid Unicode). Returns 1 when ``view`` was filled and must be released.
cdef int get_view(object obj, str name, Py_buffer *view, const char **p, Py_ssize_t *n) except -1

# Pointer/length of the UTF-8 of str ``s`` (kept in the str by CPython: no copy, valid while ``s``
# is alive); MalformedRecordError naming ``name`` (``name[index]`` for index >= 0) for a str that
# is not valid Unicode (a lone surrogate). Returns 0.
cdef int str_utf8(object s, str name, Py_ssize_t index, const char **p, Py_ssize_t *n) except -1

# The MalformedRecordError (naming ``name``) for a buffer-protocol object whose buffer could not be
# had as one C-contiguous block (``exc``: what PyObject_GetBuffer raised), e.g. a released memoryview.
cdef object unusable_buffer(object obj, str name, object exc)


# Size of the encoded headers section (count varint included) of headers (a list or tuple of
# pairs, or a dict); validates them like append() does (TypeError naming the index; a str key or
# value that is not valid Unicode: UnicodeEncodeError).
cdef Py_ssize_t headers_encoded_size(object headers) except -1


cdef class EncodedHeaders:
    cdef readonly bytes data      # the headers section, count varint included


# Where a pooled BatchBuilder's buffer comes from and goes back to: the producer's buffer pool
# (fastkafka._producer.bufferpool.BufferPool implements it; this module knows only this contract).
# A pooled builder owns `cap` bytes reserved in its source and a buffer of that size; it gives both
# back exactly once, when it is freed (or earlier when split() hands them over to its pieces).
cdef class BufferSource:
    # Give back `cap` bytes reserved for a buffer and the buffer `buf` of that size (NULL: the
    # reservation alone, no buffer was made). Any thread, GIL held; never raises.
    cdef void give_back(self, char *buf, Py_ssize_t cap) noexcept
    # Reserve `size` more bytes for a buffer at once, without waiting: 1, or 0 (nothing taken).
    cdef int try_reserve(self, Py_ssize_t size) except -1
    # Change a buffer reservation from `old` to `new` bytes in one step, without waiting: 1 done,
    # 0 not (nothing changed; only an increase can be refused, when the bytes are not free; it does
    # not queue behind waiting threads). The buffers are the caller's.
    cdef int resize_reservation(self, Py_ssize_t old, Py_ssize_t new) except -1
    # Grow a pooled buffer `buf[0]` of `old_cap` reserved bytes whose first `used` bytes matter to
    # at least `needed` bytes, without waiting: 1 done (buf[0] is the new buffer holding those
    # bytes, new_cap[0] its size and reservation: the source's size class for `needed`; the old
    # buffer is freed), 0 refused (nothing changed: the bytes are not free at once,
    # or threads wait for memory). GIL held; MemoryError when no buffer can be made.
    cdef int grow_buffer(self, char **buf, Py_ssize_t used, Py_ssize_t old_cap, Py_ssize_t needed,
                         Py_ssize_t *new_cap) except -1


# The BatchBuilder fields closing and stamping need, in one C struct so that code without the GIL
# can close and stamp a batch through a pointer to it (&builder.c, taken with the GIL while the
# builder is known alive): builder_close_plain_c, builder_stamp_c.
cdef struct BuilderCore:
    # Buffer holding the 61-byte batch header followed by the records section.
    char *buf
    Py_ssize_t cap                # allocated bytes
    Py_ssize_t len                # bytes used (header + uncompressed records) while open
    Py_ssize_t batch_size         # soft limit for the uncompressed size
    int compression
    int64_t base_ts
    int64_t max_ts
    int32_t count
    Py_ssize_t max_record         # the largest record's encoded bytes (for the metrics)
    bint has_base_ts              # base timestamp fixed (first record or constructor)
    bint closed
    bint stamped
    Py_ssize_t final_len          # total length of the finished batch after close()
    # The compressed records section when kept apart from buf (BatchBuilder._payload's bytes,
    # valid while it is kept), else NULL / 0.
    const char *payload
    Py_ssize_t payload_len
    int level                     # the codec's level (compression.validate_level), 0 without one
    bint c_codec                  # the codec needs no Python (none, or compressed in C: ccodecs)


# Close an uncompressed builder (codec 0, with its buffer): 0, also when it is closed already; -1
# with nothing changed when it cannot here (a codec is set and it is not closed yet; or no buffer).
# What BatchBuilder.close() does for codec 0.
# thread: any · lock: none · gil: any
cdef int builder_close_plain_c(BuilderCore *c) noexcept nogil

# Close a builder with its buffer whose codec needs no Python (c.c_codec: none, or compressed in C
# by ccodecs): 0, also when closed already; -1 with nothing changed when it cannot here (its codec
# needs the Python codecs, or no buffer). The compressed records go after the header in the
# buffer; when they do not fit there (records that did not compress) or the library fails, the
# batch is closed uncompressed (codec 0: the same records, no larger on the wire).
# thread: any · lock: none · gil: any
cdef int builder_close_c(BuilderCore *c) noexcept nogil

# Write the header and the CRC-32C of a closed builder with its buffer (the CRC over the header
# after its field, then the records in buf or the payload apart): 0, or -1 with nothing written
# when it is not closed or has no buffer. What BatchBuilder.stamp() does.
# thread: any · lock: none · gil: any
cdef int builder_stamp_c(BuilderCore *c, int64_t producer_id, int16_t producer_epoch,
                         int32_t base_sequence, bint transactional) noexcept nogil


@cython.final
@cython.no_gc_clear
cdef class BatchBuilder:
    cdef BuilderCore c
    cdef object _level            # validated codec level (None: no level)
    # The buffer pool the buffer came from and goes back to (None: malloc'ed by the builder, freed
    # by it). Kept through a garbage collection of a cycle (no_gc_clear) so __dealloc__ can give
    # the buffer back.
    cdef BufferSource _source
    cdef int _exports             # buffer views handed out and not released (BatchView pins count)
    # The compressed records section after close(), kept as the compressor returned it (None: the
    # records, compressed or not, are in _buf after the header). _pview is a view of it held while
    # it is kept (_pview.buf/_pview.len: its bytes); _payload_reserved is what the buffer pool
    # reserved for it (0 for a builder without one), given back with it. c.payload / c.payload_len
    # mirror _pview while it is kept.
    cdef object _payload
    cdef Py_buffer _pview
    cdef Py_ssize_t _payload_reserved

    cdef int append_raw(self, int64_t timestamp, const char *key, Py_ssize_t klen,
                        const char *value, Py_ssize_t vlen, object headers) except -1
    # append_raw with the headers section already encoded (``hsize`` bytes at ``hdr``, count
    # varint included): copied as is. 1 appended, 0 no room (nothing written).
    cdef int append_encoded(self, int64_t timestamp, const char *key, Py_ssize_t klen,
                            const char *value, Py_ssize_t vlen, const char *hdr,
                            Py_ssize_t hsize) except -1
    cpdef close(self)
    cpdef stamp(self, int64_t producer_id, int16_t producer_epoch, int32_t base_sequence,
                bint transactional=*)
    cdef int _reserve(self, Py_ssize_t needed) except -1
    cdef int _grow(self, Py_ssize_t needed) except -1
    # The batch on the wire as buffers sent by reference: (builder,) with the whole batch in its
    # buffer, or (builder, payload) with the header in its buffer and the compressed records apart.
    cdef tuple pieces_c(self)

    # Uncompressed size while open (header + records); exact size after close().
    cdef inline Py_ssize_t estimated_size_c(self) noexcept:
        return self.c.final_len if self.c.closed else self.c.len

    # True when a record of `size` bytes (record_size_c) still fits under batch_size;
    # the first record always fits.
    cdef inline bint has_room_for_c(self, Py_ssize_t size) noexcept:
        return self.c.count == 0 or self.c.len + size <= self.c.batch_size

    # Records appended so far.
    cdef inline int32_t count_c(self) noexcept:
        return self.c.count

    # Closed, or filled up to batch_size: no append will be taken.
    cdef inline bint at_limit_c(self) noexcept:
        return self.c.closed or self.c.len >= self.c.batch_size


# A builder taking over `cap` bytes reserved in `source` and the buffer `buf` of `cap` bytes taken
# from it (NULL: one is malloc'ed here). Owns both from the call on: on failure they are given back
# before this raises. `codec` is a codec code, `level` a level checked by compression.validate_level.
cdef BatchBuilder pooled_builder(BufferSource source, char *buf, Py_ssize_t cap,
                                 Py_ssize_t batch_size, int codec, object level)


# What BatchBuilder.buffer() returns for a batch sent in two pieces (header in the builder's buffer,
# compressed records apart): a read-only buffer of the whole batch, joined on demand when exported;
# the Produce encoder sends its pieces by reference instead (pieces_c). Pins the builder's buffer
# like a view of it until released.
@cython.final
cdef class BatchView:
    cdef BatchBuilder _builder
    cdef char *_joined            # the joined batch, made on the first export
    cdef Py_ssize_t _len
    cdef int _exports
    cdef bint _released
    cdef tuple pieces_c(self)
