# records_split.pxi: a batch split for a broker that refused it as too large: its records
# re-encoded into new open builders balanced by size (BatchBuilder.split).
# Included by records.pyx (one compiled unit with the builder it re-encodes into); the contract
# is in records.pxd, the explanation in docs/internals.md ("A batch refused as too large").

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
