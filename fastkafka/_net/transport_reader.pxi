# transport_reader.pxi: the frame reader: FrameReader and its C core (rd_*_c, with or without
# the GIL), size-prefixed Kafka frames read in place.
# Included by transport.pyx (one compiled unit with the send queue and the TLS pipe, which use
# it); the contract is in transport.pxd, the explanation in docs/internals.md ("Transport").

@cython.final
cdef class FrameReader:
    """Reassembles 4-byte big-endian size-prefixed frames from a byte stream."""


    def __cinit__(self, Py_ssize_t max_frame_size=100 * 1024 * 1024):
        self.c.cap = READ_CHUNK * 2
        self.c.buf = <char *>malloc(self.c.cap)
        if self.c.buf == NULL:
            raise MemoryError()
        self.c.start = self.c.end = 0
        self.c.max_frame_size = max_frame_size
        self.c.bytes_read = 0

    def __dealloc__(self):
        free(self.c.buf)
        self.c.buf = NULL

    @property
    def max_frame_size(self):
        return self.c.max_frame_size

    @property
    def bytes_read(self):
        return self.c.bytes_read

    @property
    def buffered(self):
        """Bytes received but not yet returned as part of a frame."""
        return self.c.end - self.c.start

    cdef int _ensure_space(self, Py_ssize_t need) except -1:
        """Make room for ``need`` more bytes after the received ones, compacting or growing the
        buffer."""
        if rd_reserve_c(&self.c, need) < 0:
            raise MemoryError()
        return 0

    cdef Py_ssize_t _pending_frame_size(self) except -2:
        """Size of the frame at the start (-1 when the prefix is incomplete); validates it."""
        cdef const unsigned char *p
        cdef long long size
        cdef Py_ssize_t n = rd_frame_size_c(&self.c)
        if n >= -1:
            return n
        p = <const unsigned char *>self.c.buf + self.c.start
        size = (<long long>p[0] << 24) | (<long long>p[1] << 16) | (<long long>p[2] << 8) | p[3]
        if size >= 0x80000000:
            raise _corrupt(f"negative frame size {size - 0x100000000}")
        if (p[0] == 0x15 or p[0] == 0x16) and p[1] == 0x03 and p[2] <= 0x04:
            # A TLS alert (21) or handshake (22) record header, version 3.x: the peer speaks TLS.
            raise _corrupt(f"frame size {size} exceeds the maximum of {self.c.max_frame_size}; "
                           f"the bytes are a TLS record header: is this a TLS port? "
                           f"(use security_protocol=SSL for a TLS listener)")
        raise _corrupt(f"frame size {size} exceeds the maximum of {self.c.max_frame_size}")

    cdef list _extract(self):
        cdef Py_ssize_t size
        frames = []
        while True:
            size = self._pending_frame_size()
            if size < 0 or self.c.end - self.c.start - 4 < size:
                break
            frames.append(PyBytes_FromStringAndSize(self.c.buf + self.c.start + 4, size))
            self.c.start += 4 + size
        if self.c.start == self.c.end:
            self.c.start = self.c.end = 0
        return frames

    def feed(self, data):
        """Append bytes received from elsewhere; returns the complete frames (bodies only)."""
        cdef Py_buffer pb
        PyObject_GetBuffer(data, &pb, PyBUF_SIMPLE)
        try:
            self._ensure_space(pb.len)
            memcpy(self.c.buf + self.c.end, pb.buf, pb.len)
            self.c.end += pb.len
            self.c.bytes_read += pb.len
        finally:
            PyBuffer_Release(&pb)
        return self._extract()

    def read_from(self, int fd):
        """Read what the non-blocking socket has. Returns (frames, eof).
        Raises OSError for socket errors, CorruptFrameError for a bad size prefix."""
        cdef bint eof = self.fill_c(fd)
        return self._extract(), eof

    cdef bint fill_c(self, int fd) except -1:
        """Read what the non-blocking socket has into the buffer; True at end of stream. The
        frames are then taken in place with :meth:`next_frame_c` (no copy)."""
        cdef Py_ssize_t r = rd_fill_c(&self.c, fd)
        if r == RD_CORRUPT:
            self._pending_frame_size()          # raises the size prefix's error
        if r == RD_NO_MEMORY:
            raise MemoryError()
        if r < 0:
            raise OSError(-r, "read failed")
        return r == RD_EOF

    cdef bint next_frame_c(self, const char **frame, Py_ssize_t *size) except -1:
        """The next complete frame (its body, after the size prefix) in place: ``frame[0]`` and
        ``size[0]`` point into the reader's buffer, valid until the next fill. False when no
        complete frame is buffered."""
        cdef Py_ssize_t n = rd_peek_c(&self.c, frame)
        if n == RD_CORRUPT:
            self._pending_frame_size()          # raises the size prefix's error
        if n < 0:
            return False
        size[0] = n
        rd_consume_c(&self.c, n)
        return True


# -- the reader's state without the GIL ------------------------------------------------------------

# thread: io · lock: none · gil: any
cdef int rd_reserve_c(ReaderCore *c, Py_ssize_t need) noexcept nogil:
    cdef Py_ssize_t live = c.end - c.start
    cdef char *nb
    cdef Py_ssize_t ncap
    if c.cap - c.end >= need:
        return 0
    if c.start > 0:
        memmove(c.buf, c.buf + c.start, live)
        c.start = 0
        c.end = live
        if c.cap - c.end >= need:
            return 0
    ncap = c.cap
    while ncap - live < need:
        ncap *= 2
    nb = <char *>realloc(c.buf, ncap)
    if nb == NULL:
        return -1
    c.buf = nb
    c.cap = ncap
    return 0


# thread: io · lock: none · gil: any
cdef Py_ssize_t rd_frame_size_c(const ReaderCore *c) noexcept nogil:
    cdef const unsigned char *p
    cdef long long size
    if c.end - c.start < 4:
        return -1
    p = <const unsigned char *>c.buf + c.start
    size = (<long long>p[0] << 24) | (<long long>p[1] << 16) | (<long long>p[2] << 8) | p[3]
    if (size >> 31) != 0 or size > c.max_frame_size:
        return RD_CORRUPT
    return <Py_ssize_t>size


# thread: io · lock: none · gil: any
cdef Py_ssize_t rd_fill_c(ReaderCore *c, int fd) noexcept nogil:
    cdef ssize_t r
    cdef Py_ssize_t size, want
    while True:
        size = rd_frame_size_c(c)
        if size == RD_CORRUPT:
            return RD_CORRUPT
        want = READ_CHUNK
        if size >= 0 and size + 4 - (c.end - c.start) > want:
            want = size + 4 - (c.end - c.start)
        if rd_reserve_c(c, want) < 0:
            return RD_NO_MEMORY
        r = c_read(fd, c.buf + c.end, c.cap - c.end)  # non-blocking fd
        if r < 0:
            if errno == EINTR:
                continue
            if errno == EAGAIN:  # EWOULDBLOCK is EAGAIN on Linux
                return 0
            return -errno
        if r == 0:
            return RD_EOF
        c.end += r
        c.bytes_read += r
        if r < c.cap - c.end + r:
            return 0                     # short read: the socket is drained for now


# thread: io · lock: none · gil: any
cdef Py_ssize_t rd_peek_c(ReaderCore *c, const char **frame) noexcept nogil:
    cdef Py_ssize_t n = rd_frame_size_c(c)
    if n == RD_CORRUPT:
        return RD_CORRUPT
    if n < 0 or c.end - c.start - 4 < n:
        if c.start == c.end:
            c.start = c.end = 0
        return -1
    frame[0] = c.buf + c.start + 4
    return n
