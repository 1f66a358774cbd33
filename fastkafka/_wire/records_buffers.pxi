# records_buffers.pxi: a batch's buffer: where a pooled builder's buffer comes from and goes back
# to (BufferSource, pooled_builder), and the live-buffer counters.
# Included by records.pyx (one compiled unit with the builder); the contract is in records.pxd,
# the explanation in docs/internals.md ("Record batches").

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
