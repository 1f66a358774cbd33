"""RecordBatch v2 (magic 2) builder: one partition's records, encoded in place.

The 61-byte batch header is reserved up front and filled in by :meth:`stamp`;
records are written with zigzag varints straight into one buffer, so each
key/value is copied exactly once, from the caller's buffer into the batch. The
buffer is the builder's own (malloc'ed, grown geometrically) or, for the
producer's batches, one from its buffer pool of exactly the bytes the pool
reserved for the batch (``pooled_builder``; see ``BufferSource``). A compressed
records section is kept as the compressor returned it, apart from the buffer:
such a batch goes out as two pieces, header and payload, both by reference
(``BatchBuilder.buffers()``, ``BatchView``; see ``BatchBuilder.close``).

>>> b = BatchBuilder(16384)
>>> b.append(1700000000000, b"k", b"v")
True
>>> b.close(); b.stamp(-1, -1, -1)
>>> bytes(b.buffer()[16:17])  # magic
b'\\x02'
"""
cimport cython
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyObject_CheckBuffer
from cpython.bytes cimport (PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_Check, PyBytes_CheckExact,
                            PyBytes_FromStringAndSize)
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLong
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_AsUTF8String
from libc.stdint cimport int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t, INT64_MIN
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy

from fastkafka._wire.ccodecs cimport codec_compress_c, codec_in_c
from fastkafka._wire.crc32c cimport fk_crc32c
from fastkafka._wire.varint cimport write_uvarint, zigzag64, size_uvarint

from fastkafka._wire.compression import compress_buffer as _compress_buffer
from fastkafka._wire.compression import codec_code as _codec_code
from fastkafka._wire.compression import validate_level as _validate_level
from fastkafka.errors import BufferExhaustedError, InvalidRecordError, MalformedRecordError

# fk_crc32c lives in crc32c_impl.c; this extension is built from records.pyx
# alone, so compile the implementation into it (symbols are hidden).
cdef extern from "crc32c_impl.c":
    pass

cdef extern from "Python.h":
    object PyMemoryView_FromMemory(char *mem, Py_ssize_t size, int flags)
    int PyBUF_READ
    PyObject *PySequence_Fast(object o, const char *m) except NULL
    Py_ssize_t PySequence_Fast_GET_SIZE(object o)
    PyObject *PySequence_Fast_GET_ITEM(object o, Py_ssize_t i)
    bint PyBytes_CheckExact(object o)
    bint PyLong_CheckExact(object o)


cdef char *_FORMAT_B = "B"

cdef enum:
    _MIN_CAPACITY = 256
    _MAX_INITIAL_CAPACITY = 1 << 20   # grow past this only when records need it
    _NOGIL_COPY = 1 << 18             # memcpy of at least this many bytes drops the GIL
    _NOGIL_CRC = 1 << 20              # so does the CRC of a batch of at least this size
    _NOGIL_COMPRESS = 1 << 14         # and compressing (in C) records of at least this size


# ---- batch buffers ------------------------------------------------------------
# A builder made by the producer's accumulator (``pooled_builder``) gets its buffer from the
# producer's buffer pool, sized to what the pool reserved for the batch, and gives it back to the
# pool when it is freed: the pool keeps buffers of the usual size for the next batch (no page
# faults on a fresh 64 KiB+ buffer) and counts them in ``buffer_memory``. A builder made directly
# (``BatchBuilder(...)``) mallocs its own buffer, grows it as records need, and frees it.

# Live-resource counters (touched with the GIL held): buffers owned by builders, pooled or not,
# and their bytes. Read by ``buffer_counters()``.
cdef int64_t _live_bufs = 0
cdef int64_t _live_buf_bytes = 0

# The first argument of ``BatchBuilder.__new__`` that makes an empty shell for pooled_builder.
cdef object _SHELL = object()


def buffer_counters():
    """buffer_counters() -> dict of the process's batch buffers: ``batch_buffers`` /
    ``batch_buffer_bytes``, the buffers owned by live ``BatchBuilder`` objects (pooled or not;
    given back when the builder is freed) and their capacity.

    >>> buffer_counters()["batch_buffers"] >= 0
    True
    """
    return {"batch_buffers": _live_bufs, "batch_buffer_bytes": _live_buf_bytes}


cdef class BufferSource:
    """The contract between a pooled ``BatchBuilder`` and the buffer pool it takes its buffer from
    (``fastkafka._producer.bufferpool.BufferPool``). This base class has no memory to give."""

    cdef void give_back(self, char *buf, Py_ssize_t cap) noexcept:
        if buf != NULL:
            free(buf)

    cdef int try_reserve(self, Py_ssize_t size) except -1:
        return 0

    cdef int resize_reservation(self, Py_ssize_t old, Py_ssize_t new) except -1:
        return 1 if new <= old else 0

    cdef int grow_buffer(self, char **buf, Py_ssize_t used, Py_ssize_t old_cap, Py_ssize_t needed,
                         Py_ssize_t *new_cap) except -1:
        return 0


cdef BatchBuilder pooled_builder(BufferSource source, char *buf, Py_ssize_t cap,
                                 Py_ssize_t batch_size, int codec, object level):
    global _live_bufs, _live_buf_bytes
    cdef BatchBuilder b
    try:
        if cap < BATCH_HEADER_SIZE or batch_size <= 0:
            raise ValueError(f"a pooled batch buffer of {cap} bytes (batch_size {batch_size})")
        b = BatchBuilder.__new__(BatchBuilder, _SHELL)
    except BaseException:
        source.give_back(buf, cap)
        raise
    if buf == NULL:
        buf = <char *>malloc(<size_t>cap)
        if buf == NULL:
            source.give_back(NULL, cap)
            raise MemoryError(f"cannot allocate a record batch buffer of {cap} bytes")
    b.c.buf = buf
    b.c.cap = cap
    b._source = source
    _live_bufs += 1
    _live_buf_bytes += cap
    b.c.batch_size = batch_size
    _set_codec(b, codec, level)
    return b


cdef inline void _set_codec(BatchBuilder b, int codec, object level) noexcept:
    # codec and level (checked by compression.validate_level) in the builder and its core
    b.c.compression = codec
    b._level = level
    b.c.level = 0 if level is None else <int>level
    b.c.c_codec = codec_in_c(codec) != 0


cdef void _drop_payload(BatchBuilder b, bint give_back) noexcept:
    """Let go of the builder's compressed payload (if any) and, with ``give_back``, of the bytes
    its buffer pool reserved for it; exactly once."""
    cdef Py_ssize_t reserved = b._payload_reserved
    if b._payload is None:
        return
    b.c.payload = NULL
    b.c.payload_len = 0
    PyBuffer_Release(&b._pview)
    b._payload = None
    b._payload_reserved = 0
    if give_back and reserved > 0 and b._source is not None:
        b._source.give_back(NULL, reserved)


cdef void _drop_buffer(BatchBuilder b) noexcept:
    """Give the builder's buffer and payload (and, pooled, their reservations) back; exactly once."""
    global _live_bufs, _live_buf_bytes
    cdef char *buf = b.c.buf
    cdef Py_ssize_t cap = b.c.cap
    _drop_payload(b, True)
    if buf == NULL:
        return
    b.c.buf = NULL
    b.c.cap = 0
    _live_bufs -= 1
    _live_buf_bytes -= cap
    if b._source is not None:
        b._source.give_back(buf, cap)
    else:
        free(buf)


cdef inline void _be16(char *p, uint16_t v) noexcept nogil:
    p[0] = <char>(v >> 8)
    p[1] = <char>v


cdef inline void _be32(char *p, uint32_t v) noexcept nogil:
    p[0] = <char>(v >> 24)
    p[1] = <char>(v >> 16)
    p[2] = <char>(v >> 8)
    p[3] = <char>v


cdef inline void _be64(char *p, uint64_t v) noexcept nogil:
    _be32(p, <uint32_t>(v >> 32))
    _be32(p + 4, <uint32_t>v)


cdef inline void _copy(char *dst, const char *src, Py_ssize_t n) noexcept:
    if n >= _NOGIL_COPY:
        with nogil:
            memcpy(dst, src, <size_t>n)
    elif n > 0:
        memcpy(dst, src, <size_t>n)


cdef inline Py_ssize_t _write_bytes_field(char *p, const char *data, Py_ssize_t n) noexcept:
    # varint length (-1: null) followed by the bytes
    cdef Py_ssize_t k = write_uvarint(p, zigzag64(n))
    if n > 0:
        _copy(p + k, data, n)
        return k + n
    return k


# ---- headers ------------------------------------------------------------

cdef list _prepare_headers(object headers, Py_ssize_t *size_out):
    """Validate headers; return [(key bytes, value bytes or None), ...] and the
    encoded size of the headers section (count varint included)."""
    cdef list out
    cdef Py_ssize_t size, i, n
    cdef object item, hk, hv
    if headers is None:
        size_out[0] = 1
        return None
    if not isinstance(headers, (list, tuple)):
        raise TypeError(
            f"headers must be a list or tuple of (key, value) pairs, got {type(headers).__name__}")
    n = len(headers)
    if n == 0:
        size_out[0] = 1
        return None
    out = []
    size = size_uvarint(zigzag64(n))
    for i in range(n):
        item = headers[i]
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise TypeError(
                f"header {i} must be a (key, value) pair, got {type(item).__name__}")
        hk, hv = item
        if isinstance(hk, str):
            hk = PyUnicode_AsUTF8String(hk)
        elif not PyBytes_Check(hk):
            raise TypeError(
                f"header {i}: key must be str or bytes, got {type(hk).__name__}")
        if hv is not None:
            if isinstance(hv, (bytearray, memoryview)):
                hv = bytes(hv)
            elif not PyBytes_Check(hv):
                raise TypeError(
                    f"header {i}: value must be bytes, bytearray, memoryview or None, "
                    f"got {type(hv).__name__}")
        size += _len_field_size(PyBytes_GET_SIZE(hk))
        size += _len_field_size(-1 if hv is None else PyBytes_GET_SIZE(hv))
        out.append((hk, hv))
    size_out[0] = size
    return out


cdef Py_ssize_t headers_encoded_size(object headers) except -1:
    cdef Py_ssize_t size = 0
    if type(headers) is EncodedHeaders:
        return PyBytes_GET_SIZE((<EncodedHeaders>headers).data)
    _prepare_headers(headers, &size)
    return size


cdef class EncodedHeaders:
    """EncodedHeaders(headers): a record headers section (a list or tuple of (str|bytes,
    bytes-like|None) pairs) encoded once, validated as ``send()`` validates headers.

    Accepted wherever headers are (``send``, ``produce``, ``send_batch``): each record then gets
    a copy of the encoded bytes instead of its headers being converted and encoded again (what
    ``send_batch`` does with its one headers list, and what the Spark sink does with its task
    headers)."""

    def __cinit__(self, headers):
        cdef Py_ssize_t size = 0
        cdef list prepared
        if type(headers) is EncodedHeaders:
            self.data = (<EncodedHeaders>headers).data
            return
        prepared = _prepare_headers(headers, &size)
        out = PyBytes_FromStringAndSize(NULL, size)
        _write_headers(PyBytes_AS_STRING(out), prepared)
        self.data = out

    def __len__(self):
        return PyBytes_GET_SIZE(self.data)

    def __repr__(self):
        return f"EncodedHeaders({PyBytes_GET_SIZE(self.data)} bytes)"


cdef Py_ssize_t _write_headers(char *p, list prepared) noexcept:
    cdef Py_ssize_t k
    cdef object hk, hv
    if prepared is None:
        p[0] = 0
        return 1
    k = write_uvarint(p, zigzag64(len(prepared)))
    for hk, hv in prepared:
        k += _write_bytes_field(p + k, PyBytes_AS_STRING(hk), PyBytes_GET_SIZE(hk))
        if hv is None:
            k += write_uvarint(p + k, 1)   # zigzag(-1)
        else:
            k += _write_bytes_field(p + k, PyBytes_AS_STRING(hv), PyBytes_GET_SIZE(hv))
    return k


# ---- key / value extraction ------------------------------------------------

#: What a key or value may be, as error messages say it.
BYTES_LIKE = "bytes-like (bytes, bytearray, memoryview or another C-contiguous buffer)"


cdef int get_view(object obj, str name, Py_buffer *view, const char **p,
                  Py_ssize_t *n) except -1:
    """Pointer/length of a bytes-like record field (None: NULL, -1); InvalidRecordError naming
    ``name`` for anything else, MalformedRecordError (also a ValueError) for a buffer that cannot be
    had as one C-contiguous block (released memoryview, strided view or array). Any C-contiguous
    buffer is taken as its raw bytes, whatever its item size or number of dimensions. Returns 1
    when ``view`` was filled and must be released."""
    if obj is None:
        p[0] = NULL
        n[0] = -1
        return 0
    if PyBytes_CheckExact(obj):
        p[0] = PyBytes_AS_STRING(obj)
        n[0] = PyBytes_GET_SIZE(obj)
        return 0
    if isinstance(obj, str) or not PyObject_CheckBuffer(obj):
        raise InvalidRecordError(f"{name} must be {BYTES_LIKE} or None, not {type(obj).__name__}")
    try:
        PyObject_GetBuffer(obj, view, PyBUF_SIMPLE)
    except (BufferError, ValueError, TypeError) as e:
        raise unusable_buffer(obj, name, e) from None
    p[0] = <const char *>view.buf
    n[0] = view.len
    return 1


cdef object unusable_buffer(object obj, str name, object exc):
    """The MalformedRecordError for a buffer-protocol object whose buffer cannot be read as one
    block of bytes (``exc`` is what asking for it raised): a released memoryview, a strided or
    Fortran-ordered view or array."""
    if isinstance(obj, memoryview) and isinstance(exc, ValueError):  # a strided one: BufferError
        return MalformedRecordError(f"{name}: the memoryview has been released; expected "
                                    f"{BYTES_LIKE} or None")
    return MalformedRecordError(
        f"{name}: {type(obj).__name__} is not one C-contiguous block of bytes ({exc}); expected "
        f"{BYTES_LIKE} or None: pass a contiguous copy, e.g. bytes(...)")


cdef inline void _fill_view(Py_buffer *view, object owner, char *buf, Py_ssize_t n,
                            int flags):
    """A read-only one-dimensional byte view of ``buf[:n]`` owned by ``owner``."""
    view.buf = buf
    view.obj = owner
    view.len = n
    view.readonly = 1
    view.itemsize = 1
    view.format = _FORMAT_B if (flags & 0x0004) else NULL   # PyBUF_FORMAT
    view.ndim = 1
    view.shape = &view.len if (flags & 0x0008) else NULL  # PyBUF_ND
    view.strides = &view.itemsize if (flags & 0x0010) == 0x0010 else NULL  # PyBUF_STRIDES
    view.suboffsets = NULL
    view.internal = NULL


cdef inline void _record_appended(BatchBuilder b, int64_t timestamp, Py_ssize_t total) noexcept:
    """Bookkeeping after a record of ``total`` encoded bytes was written at the end of ``b``."""
    b.c.len += total
    if not b.c.has_base_ts:
        b.c.base_ts = timestamp
        b.c.has_base_ts = True
    if b.c.count == 0 or timestamp > b.c.max_ts:
        b.c.max_ts = timestamp
    b.c.count += 1


cdef int builder_close_plain_c(BuilderCore *c) noexcept nogil:
    if c.closed:
        return 0
    if c.compression != 0 or c.buf == NULL:
        return -1
    c.final_len = c.len
    c.closed = True
    return 0


cdef inline Py_ssize_t _compress_records_c(BuilderCore *c, const char **out) noexcept nogil:
    # the records section compressed in C into this thread's scratch buffer (ccodecs): its length
    # and out[0], or -1
    return codec_compress_c(c.compression, c.level, c.buf + BATCH_HEADER_SIZE,
                            c.len - BATCH_HEADER_SIZE, out)


cdef inline void _close_with_c(BuilderCore *c, const char *out, Py_ssize_t clen) noexcept nogil:
    # close with the compressed section ``out`` (clen < 0: none) when it fits after the header;
    # else uncompressed (codec 0), the records as they are
    if clen >= 0 and BATCH_HEADER_SIZE + clen <= c.cap:
        memcpy(c.buf + BATCH_HEADER_SIZE, out, <size_t>clen)
        c.final_len = BATCH_HEADER_SIZE + clen
    else:
        c.compression = 0
        c.final_len = c.len
    c.closed = True


cdef int builder_close_c(BuilderCore *c) noexcept nogil:
    cdef const char *out = NULL
    if c.closed:
        return 0
    if c.buf == NULL or not (c.compression == 0 or c.c_codec):
        return -1
    if c.compression == 0:
        return builder_close_plain_c(c)
    _close_with_c(c, out, _compress_records_c(c, &out))
    return 0


cdef int builder_stamp_c(BuilderCore *c, int64_t producer_id, int16_t producer_epoch,
                         int32_t base_sequence, bint transactional) noexcept nogil:
    cdef char *b = c.buf
    cdef uint16_t attrs
    cdef int64_t base_ts, max_ts
    cdef Py_ssize_t n, m
    cdef const unsigned char *p
    cdef uint32_t crc
    if not c.closed or b == NULL:
        return -1
    attrs = <uint16_t>(c.compression & 0x07)
    if transactional:
        attrs |= 0x10
    if c.count > 0 or c.has_base_ts:
        base_ts = c.base_ts
    else:
        base_ts = -1
    max_ts = c.max_ts if c.count > 0 else base_ts
    n = c.final_len
    _be64(b, 0)                                    # baseOffset
    _be32(b + 8, <uint32_t>(n - 12))               # batchLength
    _be32(b + 12, <uint32_t>-1)                    # partitionLeaderEpoch
    b[16] = 2                                      # magic
    _be16(b + 21, attrs)
    _be32(b + 23, <uint32_t>(c.count - 1))         # lastOffsetDelta
    _be64(b + 27, <uint64_t>base_ts)
    _be64(b + 35, <uint64_t>max_ts)
    _be64(b + 43, <uint64_t>producer_id)
    _be16(b + 51, <uint16_t>producer_epoch)
    _be32(b + 53, <uint32_t>base_sequence)
    _be32(b + 57, <uint32_t>c.count)
    # the CRC runs over the header after its field, then the payload when it is apart
    crc = fk_crc32c(0, <const unsigned char *>(b + BATCH_ATTRIBUTES_OFFSET),
                    <size_t>(BATCH_HEADER_SIZE - BATCH_ATTRIBUTES_OFFSET))
    if c.payload != NULL:
        p = <const unsigned char *>c.payload
        m = c.payload_len
    else:
        p = <const unsigned char *>(b + BATCH_HEADER_SIZE)
        m = n - BATCH_HEADER_SIZE
    crc = fk_crc32c(crc, p, <size_t>m)
    _be32(b + BATCH_CRC_OFFSET, crc)
    c.stamped = True
    return 0


cdef int _check_stamped(BatchBuilder b, str what) except -1:
    if not b.c.closed:
        raise RuntimeError(f"{what} needs close() and stamp() first")
    if not b.c.stamped:
        raise RuntimeError(f"{what} needs stamp() first (the header and CRC are not written)")
    return 0


@cython.final
cdef class BatchBuilder:
    """BatchBuilder(batch_size, compression_type=0, compression_level=None, base_timestamp=None)

    Builds one RecordBatch v2 for one partition. ``batch_size`` bounds the
    uncompressed size (header included): :meth:`append` returns False once a
    record would not fit, except that the first record always fits.
    ``compression_type`` is a codec code (0 none, 1 gzip, 2 snappy, 3 lz4,
    4 zstd) or name. ``base_timestamp`` defaults to the first record's timestamp.

    >>> b = BatchBuilder(1024, "lz4")
    >>> b.append(5, None, b"x" * 10, [("h", None)])
    True
    >>> b.record_count, b.compression_type
    (1, 3)
    """

    def __cinit__(self, batch_size, compression_type=0, compression_level=None,
                  base_timestamp=None):
        global _live_bufs, _live_buf_bytes
        cdef Py_ssize_t cap
        self.c.len = BATCH_HEADER_SIZE
        self.c.count = 0
        self.c.max_ts = INT64_MIN
        self.c.closed = False
        self.c.stamped = False
        self.c.final_len = 0
        self.c.base_ts = -1
        self.c.has_base_ts = False
        if batch_size is _SHELL:
            return          # pooled_builder fills it in
        cap = batch_size
        if cap <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        code = _codec_code(compression_type)
        _set_codec(self, code, _validate_level(code, compression_level))
        self.c.batch_size = cap
        if cap > _MAX_INITIAL_CAPACITY:
            cap = _MAX_INITIAL_CAPACITY
        if cap < _MIN_CAPACITY:
            cap = _MIN_CAPACITY
        self.c.buf = <char *>malloc(<size_t>cap)
        if self.c.buf == NULL:
            raise MemoryError()
        self.c.cap = cap
        _live_bufs += 1
        _live_buf_bytes += cap
        if base_timestamp is not None:
            self.c.base_ts = base_timestamp
            self.c.has_base_ts = True

    def __dealloc__(self):
        _drop_buffer(self)

    cdef int _grow(self, Py_ssize_t needed) except -1:
        # make room for `needed` bytes in total: 1, or 0 when a pooled buffer's source refuses the
        # bytes at once (nothing changed). An own buffer grows geometrically; a pooled one moves to
        # the source's size class for `needed` (BufferSource.grow_buffer: reserved there first,
        # without waiting)
        global _live_buf_bytes
        cdef Py_ssize_t cap = self.c.cap
        cdef char *nb
        if needed <= cap:
            return 1
        if self.c.buf == NULL:
            raise RuntimeError("this batch's buffer was handed over to the batches split from it")
        if self._source is not None:
            nb = self.c.buf
            if not self._source.grow_buffer(&nb, self.c.len, self.c.cap, needed, &cap):
                return 0
        else:
            while cap < needed:
                cap = cap * 2
            nb = <char *>realloc(self.c.buf, <size_t>cap)
            if nb == NULL:
                raise MemoryError(f"cannot grow record batch buffer to {cap} bytes")
        _live_buf_bytes += cap - self.c.cap
        self.c.buf = nb
        self.c.cap = cap
        return 1

    cdef int _reserve(self, Py_ssize_t needed) except -1:
        # _grow, with MemoryError when the buffer pool has not the bytes free at once
        if not self._grow(needed):
            raise MemoryError(
                f"the buffer pool has no {needed - self.c.cap} bytes free to grow a batch buffer "
                f"of {self.c.cap} bytes")
        return 0

    cdef int append_raw(self, int64_t timestamp, const char *key, Py_ssize_t klen,
                        const char *value, Py_ssize_t vlen, object headers) except -1:
        cdef Py_ssize_t hsize = 1, body, total
        cdef list prepared = None
        cdef bytes encoded = None
        cdef int64_t delta
        cdef char *p
        if self.c.closed:
            raise RuntimeError("BatchBuilder is closed; no more appends")
        if klen < -1 or vlen < -1:
            raise ValueError("key/value length must be >= -1 (-1 means null)")
        if type(headers) is EncodedHeaders:
            encoded = (<EncodedHeaders>headers).data
            hsize = PyBytes_GET_SIZE(encoded)
        elif headers is not None:
            prepared = _prepare_headers(headers, &hsize)
        if not self.c.has_base_ts:
            # first record fixes the base; not committed until it is written
            delta = 0
        else:
            delta = <int64_t>(<uint64_t>timestamp - <uint64_t>self.c.base_ts)
        body = (1 + size_uvarint(zigzag64(delta)) + size_uvarint(zigzag64(self.c.count))
                + _len_field_size(klen) + _len_field_size(vlen) + hsize)
        total = size_uvarint(zigzag64(body)) + body
        if self.c.count > 0 and self.c.len + total > self.c.batch_size:
            return 0
        if self.c.len + total > self.c.cap and not self._grow(self.c.len + total):
            if self.c.count > 0:
                return 0            # the pool has not the bytes free at once: this batch is full
            raise MemoryError(f"the buffer pool has no {self.c.len + total - self.c.cap} bytes free "
                              f"for the first record of a batch buffer of {self.c.cap} bytes")
        p = self.c.buf + self.c.len
        p += write_uvarint(p, zigzag64(body))
        p[0] = 0                                    # record attributes
        p += 1
        p += write_uvarint(p, zigzag64(delta))
        p += write_uvarint(p, zigzag64(self.c.count))
        p += _write_bytes_field(p, key, klen)
        p += _write_bytes_field(p, value, vlen)
        if encoded is not None:
            memcpy(p, PyBytes_AS_STRING(encoded), hsize)
        else:
            _write_headers(p, prepared)
        _record_appended(self, timestamp, total)
        return 1

    def append(self, int64_t timestamp_ms, key, value, headers=None):
        """append(timestamp_ms, key, value, headers=None) -> bool

        Append one record. ``key``/``value``: bytes, bytearray, memoryview or
        None; ``headers``: list/tuple of (str|bytes, bytes-like|None) pairs.
        Returns False (appending nothing) when the batch is full.
        """
        cdef Py_buffer kview, vview
        cdef const char *kp
        cdef const char *vp
        cdef Py_ssize_t kn, vn
        cdef int krel = 0, vrel = 0
        krel = get_view(key, "key", &kview, &kp, &kn)
        try:
            vrel = get_view(value, "value", &vview, &vp, &vn)
            try:
                return self.append_raw(timestamp_ms, kp, kn, vp, vn, headers) == 1
            finally:
                if vrel:
                    PyBuffer_Release(&vview)
        finally:
            if krel:
                PyBuffer_Release(&kview)

    def append_many(self, timestamps, keys, values, Py_ssize_t start=0):
        """append_many(timestamps, keys, values, start=0) -> int

        Append records ``start..`` from parallel sequences without per-record
        Python calls. ``timestamps`` is one int for all records or a sequence;
        ``keys`` is None (all null) or a sequence; ``values`` a sequence (items
        bytes-like or None). Stops at the first record that does not fit and
        returns how many were appended (resume with ``start + result``).
        """
        cdef object vseq, kseq = None, tseq = None
        cdef Py_ssize_t n, i
        cdef int64_t ts = 0
        cdef object k, v
        cdef Py_buffer kview, vview
        cdef const char *kp = NULL
        cdef const char *vp = NULL
        cdef Py_ssize_t kn = -1, vn = -1
        cdef int krel, vrel, r
        vseq = <object>PySequence_Fast(values, "values must be a sequence")
        n = PySequence_Fast_GET_SIZE(vseq)
        if keys is not None:
            kseq = <object>PySequence_Fast(keys, "keys must be a sequence or None")
            if PySequence_Fast_GET_SIZE(kseq) != n:
                raise ValueError(
                    f"keys has {PySequence_Fast_GET_SIZE(kseq)} items but values has {n}")
        if isinstance(timestamps, int):
            ts = timestamps
        else:
            tseq = <object>PySequence_Fast(timestamps, "timestamps must be an int or a sequence")
            if PySequence_Fast_GET_SIZE(tseq) != n:
                raise ValueError(
                    f"timestamps has {PySequence_Fast_GET_SIZE(tseq)} items but values has {n}")
        if start < 0 or start > n:
            raise IndexError(f"start {start} outside 0..{n}")
        for i in range(start, n):
            v = <object>PySequence_Fast_GET_ITEM(vseq, i)
            if tseq is not None:
                ts = <object>PySequence_Fast_GET_ITEM(tseq, i)
            # fast path: bytes / None, no buffer to release
            krel = 0
            if kseq is not None:
                k = <object>PySequence_Fast_GET_ITEM(kseq, i)
                if PyBytes_CheckExact(k):
                    kp = PyBytes_AS_STRING(k)
                    kn = PyBytes_GET_SIZE(k)
                else:
                    krel = get_view(k, f"key (item {i})", &kview, &kp, &kn)
            if PyBytes_CheckExact(v):
                vp = PyBytes_AS_STRING(v)
                vn = PyBytes_GET_SIZE(v)
                vrel = 0
            else:
                try:
                    vrel = get_view(v, f"value (item {i})", &vview, &vp, &vn)
                except BaseException:
                    if krel:
                        PyBuffer_Release(&kview)
                    raise
            try:
                r = self.append_raw(ts, kp, kn, vp, vn, None)
            finally:
                if krel:
                    PyBuffer_Release(&kview)
                if vrel:
                    PyBuffer_Release(&vview)
            if r == 0:
                return i - start
        return n - start

    cpdef close(self):
        """Finish the records section: compress it if a codec is set. Idempotent.

        A codec whose C library is loaded (``fastkafka._wire.ccodecs``) is applied in C, the GIL
        released for sections of 16 KiB or more, and its output goes after the header in the
        buffer (grown like below when it did not compress; ``builder_close_c`` is the same close
        without the GIL). Otherwise the Python codec of ``compression`` runs, and a compressed
        section no larger than the records it replaces is kept as the compressor
        returned it, apart from the builder's buffer (no copy back): the batch goes out as two
        pieces, the 61-byte header in the buffer and that payload (``buffers()``). Its memory is
        counted: a pooled builder keeps it only when its buffer pool reserves its size at once,
        without waiting (given back with the builder, or passed to the batches split from it), so
        the pool's bytes still cover every byte live; a builder without a pool keeps it always (its
        memory is its own, like its buffer). Otherwise it goes after the header in the buffer as
        before: it fits there when it did compress; when it did not (larger than the records), a
        pooled buffer grows by bytes the pool has free at once, and without them the records go
        out uncompressed.
        """
        cdef object section, out
        cdef Py_ssize_t clen
        cdef const char *cout = NULL
        cdef int kept = 0
        if self.c.closed:
            return
        if self.c.buf == NULL:
            raise RuntimeError("this batch's buffer was handed over to the batches split from it")
        if self.c.compression == 0:
            builder_close_plain_c(&self.c)
            return
        if self.c.c_codec:
            # in C (ccodecs), into this thread's scratch buffer; the GIL let go for all but small
            # sections (a hand-over costs more than compressing those)
            if self.c.len - BATCH_HEADER_SIZE >= _NOGIL_COMPRESS:
                with nogil:
                    clen = _compress_records_c(&self.c, &cout)
            else:
                clen = _compress_records_c(&self.c, &cout)
            if clen >= 0:
                if BATCH_HEADER_SIZE + clen > self.c.cap:
                    # did not compress and does not fit: the buffer grows by bytes the pool has
                    # free at once (as below); without them the records go out uncompressed
                    try:
                        if not self._grow(BATCH_HEADER_SIZE + clen):
                            clen = -1
                    except MemoryError:
                        clen = -1
                _close_with_c(&self.c, cout, clen)
                return
            # the library failed: the Python codec below (the scratch buffer is not used again)
        self.c.closed = True
        section = PyMemoryView_FromMemory(self.c.buf + BATCH_HEADER_SIZE,
                                          self.c.len - BATCH_HEADER_SIZE, PyBUF_READ)
        try:
            out = _compress_buffer(self.c.compression, section, self._level)
        except BaseException:
            self.c.closed = False
            raise
        finally:
            section.release()
        PyObject_GetBuffer(out, &self._pview, PyBUF_SIMPLE)
        clen = self._pview.len
        try:
            if clen > self.c.len - BATCH_HEADER_SIZE:
                pass                    # did not compress: as before (below)
            elif self._source is None:
                kept = 1
            elif self._source.try_reserve(clen):
                self._payload_reserved = clen
                kept = 1
        finally:
            if not kept:
                PyBuffer_Release(&self._pview)
        if kept:
            self._payload = out
            self.c.payload = <const char *>self._pview.buf
            self.c.payload_len = clen
            self.c.final_len = BATCH_HEADER_SIZE + clen
            return
        # the pool has not the payload's bytes free: into the buffer after the header, as before
        PyObject_GetBuffer(out, &self._pview, PyBUF_SIMPLE)
        try:
            if self._source is not None and BATCH_HEADER_SIZE + clen > self.c.cap:
                # A pooled buffer grows only by bytes the pool has free at once; without them,
                # records that did not compress go out uncompressed (and smaller).
                try:
                    self._reserve(BATCH_HEADER_SIZE + clen)
                except MemoryError:
                    self.c.compression = 0
                    self.c.final_len = self.c.len
                    return
            else:
                self._reserve(BATCH_HEADER_SIZE + clen)
            _copy(self.c.buf + BATCH_HEADER_SIZE, <const char *>self._pview.buf, clen)
        finally:
            PyBuffer_Release(&self._pview)
        self.c.final_len = BATCH_HEADER_SIZE + clen

    cpdef stamp(self, int64_t producer_id, int16_t producer_epoch, int32_t base_sequence,
                bint transactional=False):
        """stamp(producer_id, producer_epoch, base_sequence, transactional=False)

        Write the batch header and the CRC-32C (computed without the GIL).
        May be called again, e.g. after an epoch bump. Requires close().
        Non-idempotent producers stamp with (-1, -1, -1).
        """
        cdef int r
        if not self.c.closed:
            raise RuntimeError("stamp() needs close() first")
        if self.c.buf == NULL:
            raise RuntimeError("this batch's buffer was handed over to the batches split from it")
        if self.c.final_len >= _NOGIL_CRC:
            with nogil:
                r = builder_stamp_c(&self.c, producer_id, producer_epoch, base_sequence,
                                    transactional)
        else:  # ~30 us or less: cheaper than handing the GIL over and waiting to get it back
            r = builder_stamp_c(&self.c, producer_id, producer_epoch, base_sequence, transactional)
        if r != 0:
            raise RuntimeError("stamp() needs a closed batch with its buffer")

    def buffer(self):
        """buffer() -> the complete stamped batch as a read-only buffer.

        A memoryview of the builder's buffer; for a batch whose compressed records are apart
        (see ``close()``), a ``BatchView``: the batch joined on demand when its buffer is asked
        for, sent in its two pieces by the Produce encoder. Valid while the builder lives (it
        keeps it alive).
        """
        _check_stamped(self, "buffer()")
        if self._payload is not None:
            return BatchView(self)
        return memoryview(self)

    def buffers(self):
        """buffers() -> tuple of the buffers whose concatenation is the stamped batch: one, or the
        header and the compressed records when these are apart (see ``close()``)."""
        _check_stamped(self, "buffers()")
        return self.pieces_c()

    cdef tuple pieces_c(self):
        if self._payload is not None:
            return (memoryview(self), self._payload)
        return (memoryview(self),)

    def __getbuffer__(self, Py_buffer *view, int flags):
        if not self.c.stamped or self.c.buf == NULL:
            raise BufferError("BatchBuilder exposes its bytes only after close() and stamp()")
        self._exports += 1
        # the header alone when the compressed records are apart (buffers(), BatchView)
        _fill_view(view, self, self.c.buf,
                   BATCH_HEADER_SIZE if self._payload is not None else self.c.final_len, flags)

    def __releasebuffer__(self, Py_buffer *view):
        self._exports -= 1

    @property
    def record_count(self):
        """Number of records appended."""
        return self.c.count

    @property
    def size_in_bytes(self):
        """Batch size: uncompressed estimate (header included) while open, exact after close()."""
        return self.c.final_len if self.c.closed else self.c.len

    @property
    def estimated_size(self):
        """Uncompressed size (header + records) while open, to compare with batch_size;
        the final size after close()."""
        return self.c.final_len if self.c.closed else self.c.len

    @property
    def batch_size(self):
        return self.c.batch_size

    @property
    def capacity(self):
        """Bytes of the builder's buffer (what its buffer pool holds for it, for a pooled one)."""
        return self.c.cap

    @property
    def base_timestamp(self):
        """First record's timestamp (or the constructor's), None while unset."""
        return self.c.base_ts if self.c.has_base_ts else None

    @property
    def max_timestamp(self):
        """Largest record timestamp, None while empty."""
        return self.c.max_ts if self.c.count > 0 else None

    @property
    def last_offset_delta(self):
        """Offset delta of the last record (record_count - 1)."""
        return self.c.count - 1

    @property
    def is_closed(self):
        return self.c.closed

    @property
    def is_stamped(self):
        return self.c.stamped

    @property
    def compression_type(self):
        """Codec code: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.c.compression

    @property
    def compression_level(self):
        return self._level

    def has_room_for(self, Py_ssize_t record_size):
        """True when a record of ``record_size`` bytes would still be appended."""
        return self.has_room_for_c(record_size)

    def split(self, Py_ssize_t parts=2):
        """split(parts=2) -> list[BatchBuilder]

        The records again, re-encoded in order into ``min(parts, record_count)`` new open builders
        of the same batch_size, codec and level, balanced by encoded size (each gets at least one
        record). Keys, values, headers and timestamps are kept; offset deltas start again at 0. A
        closed, compressed batch is decompressed first; the new builders compress on their own
        ``close()``. For a batch the broker refused as too large.

        >>> b = BatchBuilder(1024)
        >>> b.append_many(7, None, [b"a", b"b", b"c"])
        3
        >>> [p.record_count for p in b.split()]
        [1, 2]
        """
        return _split_records(self, parts)

    def __repr__(self):
        return (f"<BatchBuilder records={self.c.count} size={self.size_in_bytes} "
                f"codec={self.c.compression} closed={self.c.closed} stamped={self.c.stamped}>")


@cython.final
cdef class BatchView:
    """BatchView(builder): a stamped batch whose compressed records are apart from its header
    (what ``BatchBuilder.buffer()`` returns for it), as one read-only buffer of the whole batch.

    The bytes are joined into a copy only when its buffer is asked for (``bytes(v)``,
    ``memoryview(v)``); the header is copied again at each such export, so a batch stamped again
    shows its new header. The Produce encoder does not ask: it sends the header and the payload by
    reference (``pieces``). Like a view of the builder's buffer, it keeps the builder alive and its
    buffer pinned (not handed over by ``split()``) until released or freed.
    """

    def __cinit__(self, BatchBuilder builder not None):
        _check_stamped(builder, "BatchView")
        if builder._payload is None or builder.c.buf == NULL:
            raise ValueError("BatchView is for a batch whose compressed records are apart")
        self._builder = builder
        self._len = builder.c.final_len
        builder._exports += 1

    def __dealloc__(self):
        if self._joined != NULL:
            free(self._joined)
            self._joined = NULL
        if not self._released and self._builder is not None:
            self._builder._exports -= 1
            self._released = True

    cdef tuple pieces_c(self):
        if self._released:
            raise ValueError("operation forbidden on a released BatchView")
        return self._builder.pieces_c()

    @property
    def pieces(self):
        """(header, payload): the buffers whose concatenation is the batch."""
        return self.pieces_c()

    @property
    def builder(self):
        return self._builder

    @property
    def readonly(self):
        return True

    @property
    def nbytes(self):
        return self._len

    def __len__(self):
        return self._len

    def __getitem__(self, key):
        return memoryview(self)[key]

    def tobytes(self):
        return bytes(memoryview(self))

    def release(self):
        """Let go of the builder's buffer (like ``memoryview.release``)."""
        if self._released:
            return
        if self._exports:
            raise BufferError(f"BatchView has {self._exports} exported buffers")
        self._released = True
        self._builder._exports -= 1
        if self._joined != NULL:
            free(self._joined)
            self._joined = NULL

    def __getbuffer__(self, Py_buffer *view, int flags):
        cdef BatchBuilder b = self._builder
        if self._released:
            raise BufferError("operation forbidden on a released BatchView")
        if b.c.buf == NULL or b._payload is None or not b.c.stamped:
            raise BufferError("the batch's bytes are no longer there")
        if self._joined == NULL:
            self._joined = <char *>malloc(<size_t>self._len)
            if self._joined == NULL:
                raise MemoryError()
            _copy(self._joined + BATCH_HEADER_SIZE, <const char *>b._pview.buf, b._pview.len)
        memcpy(self._joined, b.c.buf, BATCH_HEADER_SIZE)
        self._exports += 1
        _fill_view(view, self, self._joined, self._len, flags)

    def __releasebuffer__(self, Py_buffer *view):
        self._exports -= 1

    def __repr__(self):
        return f"<BatchView {self._len} bytes in 2 pieces{' released' if self._released else ''}>"


def record_size(int64_t timestamp_delta, int32_t offset_delta, Py_ssize_t key_len,
                Py_ssize_t value_len, headers=None):
    """record_size(timestamp_delta, offset_delta, key_len, value_len, headers) -> int

    Encoded size of one record; key_len/value_len of -1 mean null.

    >>> record_size(0, 0, -1, 3, None)
    10
    """
    if key_len < -1 or value_len < -1:
        raise ValueError("key_len/value_len must be >= -1 (-1 means null)")
    return record_size_c(timestamp_delta, offset_delta, key_len, value_len,
                         headers_encoded_size(headers))


def headers_size(headers):
    """headers_size(headers) -> int: encoded size of a headers section (count included)."""
    return headers_encoded_size(headers)


# ---- splitting a batch -------------------------------------------------------

from fastkafka._wire.varint cimport read_uvarint, unzigzag64
from fastkafka._wire.compression import decompress as _decompress


cdef int _record_head(const char *q, const char *rend, int64_t base_ts, char *attrs,
                      int64_t *ts) except -1:
    """Parse the head of the record at ``q`` (length, attributes, timestamp delta, offset delta):
    its attributes and timestamp, and the offset of its key (what follows the head)."""
    cdef const char *start = q
    cdef uint64_t u
    cdef int r
    q += read_uvarint(q, rend, 5, &u)              # length (checked by the caller)
    attrs[0] = q[0]
    q += 1
    r = read_uvarint(q, rend, 10, &u)              # timestamp delta
    if r <= 0:
        raise ValueError("malformed record in the batch being split")
    q += r
    ts[0] = <int64_t>(<uint64_t>base_ts + <uint64_t>unzigzag64(u))
    r = read_uvarint(q, rend, 5, &u)               # offset delta: renumbered
    if r <= 0:
        raise ValueError("malformed record in the batch being split")
    q += r
    return q - start


cdef inline Py_ssize_t _encoded_size(int64_t delta, int32_t offset_delta, Py_ssize_t rest_len) noexcept:
    # one record as _append_encoded writes it
    cdef Py_ssize_t body = 1 + size_uvarint(zigzag64(delta)) + size_uvarint(zigzag64(offset_delta)) + rest_len
    return size_uvarint(zigzag64(body)) + body


cdef list _split_records(BatchBuilder src, Py_ssize_t parts):
    """BatchBuilder.split: parse the (decompressed) records section once, choose the cuts by
    encoded size, re-encode each record's head (length, timestamp delta, offset delta) into the
    new builders and copy the rest of it (key, value, headers) as it is.

    A pooled ``src`` gives pooled pieces, each buffer sized to its piece exactly. Their memory is
    that of ``src`` when no view of its buffer is alive (the buffer is freed once the records are
    copied out, and its reservation, grown or shrunk without waiting, passes to the pieces; ``src``
    keeps its records' count but no bytes), else reserved anew, without waiting;
    ``BufferExhaustedError`` when the pool has not the bytes."""
    global _live_bufs, _live_buf_bytes
    cdef Py_ssize_t n = src.c.count, i, j, lo, hi, piece, total, target, length, need, k
    cdef Py_ssize_t *pos
    cdef Py_ssize_t *sizes = NULL
    cdef const char *base
    cdef const char *end
    cdef const char *q
    cdef const char *rend
    cdef uint64_t u
    cdef int r, h
    cdef char attrs
    cdef int64_t ts, first_ts
    cdef object section
    cdef list cuts, out
    cdef BatchBuilder nb
    cdef BufferSource source = src._source
    cdef char *old
    if n < 1:
        raise ValueError("an empty batch cannot be split")
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    if src.c.buf == NULL:
        raise RuntimeError("this batch's buffer was handed over to the batches split from it")
    if parts > n:
        parts = n
    if src.c.closed and src.c.compression != 0 and src._payload is not None:
        section = _decompress(src.c.compression, PyMemoryView_FromMemory(
            <char *>src._pview.buf, src._pview.len, PyBUF_READ))
    elif src.c.closed and src.c.compression != 0:
        section = _decompress(src.c.compression, PyMemoryView_FromMemory(
            src.c.buf + BATCH_HEADER_SIZE, src.c.final_len - BATCH_HEADER_SIZE, PyBUF_READ))
    else:
        section = PyMemoryView_FromMemory(src.c.buf + BATCH_HEADER_SIZE,
                                          src.c.len - BATCH_HEADER_SIZE, PyBUF_READ)
    if type(section) is not bytes:
        section = bytes(section)
    base = PyBytes_AS_STRING(section)
    end = base + PyBytes_GET_SIZE(section)
    pos = <Py_ssize_t *>malloc(<size_t>(n + 1 + parts) * sizeof(Py_ssize_t))
    if pos == NULL:
        raise MemoryError()
    sizes = pos + n + 1
    try:
        # where each record starts (pos[n]: the end of the last one)
        q = base
        for i in range(n):
            pos[i] = q - base
            r = read_uvarint(q, end, 5, &u)
            length = <Py_ssize_t>unzigzag64(u) if r > 0 else -1
            if r <= 0 or length < 3 or length > end - q - r:
                raise ValueError(f"malformed record {i} in the batch being split")
            q += r + length
        pos[n] = q - base
        if q != end:
            raise ValueError("the batch being split has bytes after its last record")
        # cuts: piece k holds records cuts[k]..cuts[k+1]-1, about total/parts bytes each
        total = pos[n]
        cuts = [0]
        for piece in range(parts - 1):
            lo = cuts[piece]
            hi = n - (parts - 1 - piece)        # leave a record for each piece still to come
            target = total * (piece + 1) // parts
            j = lo + 1
            while j < hi and pos[j + 1] <= target:
                j += 1
            cuts.append(j)
        cuts.append(n)
        if source is not None:
            # the exact size of each piece, and its memory
            need = 0
            for piece in range(parts):
                sizes[piece] = BATCH_HEADER_SIZE
                first_ts = 0
                for i in range(<Py_ssize_t>cuts[piece], <Py_ssize_t>cuts[piece + 1]):
                    rend = base + pos[i + 1]
                    h = _record_head(base + pos[i], rend, src.c.base_ts, &attrs, &ts)
                    if i == <Py_ssize_t>cuts[piece]:
                        first_ts = ts
                    sizes[piece] += _encoded_size(
                        <int64_t>(<uint64_t>ts - <uint64_t>first_ts),
                        <int32_t>(i - <Py_ssize_t>cuts[piece]), pos[i + 1] - pos[i] - h)
                need += sizes[piece]
            if src._exports == 0:
                # its memory: the buffer and, when apart, the compressed payload
                k = src.c.cap + src._payload_reserved
                if not source.resize_reservation(k, need):
                    raise BufferExhaustedError(
                        f"splitting a batch of {k} bytes needs {need - k} bytes more "
                        f"from the buffer pool, which has not them free")
                _drop_payload(src, False)   # its reservation passed to the pieces
                old = src.c.buf              # its records are in `section` now
                _live_bufs -= 1
                _live_buf_bytes -= src.c.cap
                src.c.buf = NULL
                src.c.cap = 0
                src.c.closed = True
                src.c.stamped = False
                free(old)
            elif not source.try_reserve(need):
                raise BufferExhaustedError(
                    f"splitting a batch needs {need} bytes from the buffer pool, which has not "
                    f"them free")
        out = []
        for piece in range(parts):
            if source is not None:
                try:
                    nb = pooled_builder(source, NULL, sizes[piece], src.c.batch_size,
                                        src.c.compression, src._level)
                except BaseException:
                    for k in range(piece + 1, parts):   # pooled_builder gave back its own
                        source.give_back(NULL, sizes[k])
                    raise
            else:
                nb = BatchBuilder(src.c.batch_size, src.c.compression, src._level)
            out.append(nb)
        for piece in range(parts):
            nb = <BatchBuilder>out[piece]
            for i in range(<Py_ssize_t>cuts[piece], <Py_ssize_t>cuts[piece + 1]):
                rend = base + pos[i + 1]
                h = _record_head(base + pos[i], rend, src.c.base_ts, &attrs, &ts)
                _append_encoded(nb, ts, attrs, base + pos[i] + h, rend - base - pos[i] - h)
        return out
    finally:
        free(pos)


cdef int _append_encoded(BatchBuilder b, int64_t timestamp, char attrs, const char *rest,
                         Py_ssize_t rest_len) except -1:
    """Append one record whose key, value and headers are already encoded (``rest``); the
    length, timestamp delta and offset delta are written for ``b`` (no batch_size check)."""
    cdef int64_t delta = 0
    cdef Py_ssize_t body, total
    cdef char *p
    if b.c.has_base_ts:
        delta = <int64_t>(<uint64_t>timestamp - <uint64_t>b.c.base_ts)
    body = 1 + size_uvarint(zigzag64(delta)) + size_uvarint(zigzag64(b.c.count)) + rest_len
    total = size_uvarint(zigzag64(body)) + body
    if b.c.len + total > b.c.cap:
        b._reserve(b.c.len + total)
    p = b.c.buf + b.c.len
    p += write_uvarint(p, zigzag64(body))
    p[0] = attrs
    p += 1
    p += write_uvarint(p, zigzag64(delta))
    p += write_uvarint(p, zigzag64(b.c.count))
    _copy(p, rest, rest_len)
    _record_appended(b, timestamp, total)
    return 0
