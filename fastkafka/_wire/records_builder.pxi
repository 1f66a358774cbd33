# records_builder.pxi: BatchBuilder, one partition's RecordBatch v2 encoded in place, and its
# close and stamp in C (builder_close_plain_c, builder_stamp_c, callable without the GIL).
# Included by records.pyx (one compiled unit: the byte writers and field readers stay inline);
# the contract is in records.pxd, the explanation in docs/internals.md ("Record batches").

cdef inline void _record_appended(BatchBuilder b, int64_t timestamp, Py_ssize_t total) noexcept:
    """Bookkeeping after a record of ``total`` encoded bytes was written at the end of ``b``."""
    b.c.len += total
    if total > b.c.max_record:
        b.c.max_record = total
    if not b.c.has_base_ts:
        b.c.base_ts = timestamp
        b.c.has_base_ts = True
    if b.c.count == 0 or timestamp > b.c.max_ts:
        b.c.max_ts = timestamp
    b.c.count += 1


# thread: any · lock: none · gil: any
cdef int builder_close_plain_c(BuilderCore *c) noexcept nogil:
    if c.closed:
        return 0
    if c.compression != 0 or c.buf == NULL:
        return -1
    c.final_len = c.len
    c.closed = True
    return 0


# thread: any · lock: none · gil: any
cdef inline Py_ssize_t _compress_records_c(BuilderCore *c, const char **out) noexcept nogil:
    # the records section compressed in C into this thread's scratch buffer (ccodecs): its length
    # and out[0], or -1
    return codec_compress_c(c.compression, c.level, c.buf + BATCH_HEADER_SIZE,
                            c.len - BATCH_HEADER_SIZE, out)


# thread: any · lock: none · gil: any
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


# thread: any · lock: none · gil: any
cdef int builder_close_c(BuilderCore *c) noexcept nogil:
    cdef const char *out = NULL
    cdef Py_ssize_t clen
    if c.closed:
        return 0
    if c.buf == NULL or not (c.compression == 0 or c.c_codec):
        return -1
    if c.compression == 0:
        return builder_close_plain_c(c)
    # two statements: C leaves the order of a call's arguments open, and ``out`` is set by the
    # compression (clang, zig cc's, read it first: NULL, and the records were sent uncompressed)
    clen = _compress_records_c(c, &out)
    _close_with_c(c, out, clen)
    return 0


# thread: any · lock: none · gil: any
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


cdef inline char *_record_start(BatchBuilder self, int64_t timestamp, const char *key,
                                Py_ssize_t klen, const char *value, Py_ssize_t vlen,
                                Py_ssize_t hsize, Py_ssize_t *total_out) except? NULL:
    """Write a record's length, attributes, deltas, key and value at the end of the records
    for a headers section of ``hsize`` bytes; return where the headers go (the caller writes
    them, then _record_appended), or NULL when the batch has no room (nothing written)."""
    cdef Py_ssize_t body, total
    cdef int64_t delta
    cdef char *p
    if self.c.closed:
        raise RuntimeError("BatchBuilder is closed; no more appends")
    if klen < -1 or vlen < -1:
        raise ValueError("key/value length must be >= -1 (-1 means null)")
    if not self.c.has_base_ts:
        # first record fixes the base; not committed until it is written
        delta = 0
    else:
        delta = <int64_t>(<uint64_t>timestamp - <uint64_t>self.c.base_ts)
    body = (1 + size_uvarint(zigzag64(delta)) + size_uvarint(zigzag64(self.c.count))
            + _len_field_size(klen) + _len_field_size(vlen) + hsize)
    total = size_uvarint(zigzag64(body)) + body
    if self.c.count > 0 and self.c.len + total > self.c.batch_size:
        return NULL
    if self.c.len + total > self.c.cap and not self._grow(self.c.len + total):
        if self.c.count > 0:
            return NULL         # the pool has not the bytes free at once: this batch is full
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
    total_out[0] = total
    return p


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
        self.c.max_record = 0
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

    cdef int append_encoded(self, int64_t timestamp, const char *key, Py_ssize_t klen,
                            const char *value, Py_ssize_t vlen, const char *hdr,
                            Py_ssize_t hsize) except -1:
        cdef Py_ssize_t total
        cdef char *p = _record_start(self, timestamp, key, klen, value, vlen, hsize, &total)
        if p == NULL:
            return 0
        memcpy(p, hdr, hsize)
        _record_appended(self, timestamp, total)
        return 1

    def append(self, int64_t timestamp_ms, key, value, headers=None):
        """append(timestamp_ms, key, value, headers=None) -> bool

        Append one record. ``key``/``value``: bytes-like, str (its UTF-8) or None;
        ``headers``: list/tuple of (str|bytes, bytes-like|str|None) pairs, or a dict.
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
        bytes-like, str or None). Stops at the first record that does not fit and
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
