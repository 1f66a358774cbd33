# records_view.pxi: BatchView, a batch in two pieces exported as one buffer, and the module's
# size functions (record_size, headers_size).
# Included by records.pyx; the contract is in records.pxd, the explanation in docs/internals.md
# ("Record batches").

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
