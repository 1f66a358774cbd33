# transport_sendqueue.pxi: the connection's send queue: its C core (sq_*_c, with or without the
# GIL) and SendQueue, gathered writev writes taken up where a partial write stopped.
# Included by transport.pyx (one compiled unit with the frame reader and the TLS pipe, which use
# it); the contract is in transport.pxd, the explanation in docs/internals.md ("Transport").

# -- the send queue's C core: the same functions with the GIL (SendQueue's methods) and without it
# (the I/O thread's GIL-free turn, fastkafka/_net/connection.pyx). They touch C memory only; the
# one thing that needs the GIL, releasing a Python buffer export, is left to sq_release_c.

# thread: io · lock: none · gil: any
cdef int sq_reserve_c(SendQueueCore *q, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t live, ncap
    cdef Py_buffer *nb
    if q.tail + n <= q.cap:
        return 0
    live = q.tail - q.done
    if q.done > 0:
        memmove(q.bufs, q.bufs + q.done, live * sizeof(Py_buffer))
        q.head -= q.done
        q.tail = live
        q.done = 0
        if q.tail + n <= q.cap:
            return 0
    ncap = q.cap * 2
    while ncap < live + n:
        ncap *= 2
    nb = <Py_buffer *>realloc(q.bufs, ncap * sizeof(Py_buffer))
    if nb == NULL:
        return -1
    q.bufs = nb
    q.cap = ncap
    return 0


# thread: io · lock: none · gil: any
cdef int sq_push_raw_c(SendQueueCore *q, const char *p, Py_ssize_t n) noexcept nogil:
    cdef Py_buffer *pb
    if n <= 0:
        return 0
    if sq_reserve_c(q, 1) < 0:
        return -1
    pb = &q.bufs[q.tail]
    memset(pb, 0, sizeof(Py_buffer))   # obj = NULL: no owner, nothing to release
    pb.buf = <void *>p
    pb.len = n
    q.tail += 1
    q.queued_bytes += n
    return 0


# thread: io · lock: none · gil: any
cdef void sq_consume_c(SendQueueCore *q, Py_ssize_t n) noexcept nogil:
    cdef Py_buffer *pb
    cdef Py_ssize_t left
    q.written_bytes += n
    while n > 0 and q.head < q.tail:
        pb = &q.bufs[q.head]
        left = pb.len - q.head_off
        if n >= left:
            n -= left
            q.head += 1
            q.head_off = 0
        else:
            q.head_off += n
            n = 0
    if q.done == q.head and q.head == q.tail:
        q.done = q.head = q.tail = 0


# thread: io · lock: none · gil: any
cdef Py_ssize_t sq_write_c(SendQueueCore *q, int fd) noexcept nogil:
    cdef iovec iov[MAX_IOV]
    cdef int n, i
    cdef ssize_t r
    cdef Py_ssize_t want, total = 0
    while q.head < q.tail:
        n = <int>(q.tail - q.head if q.tail - q.head < MAX_IOV else MAX_IOV)
        want = 0
        for i in range(n):
            if i == 0:
                iov[0].iov_base = <char *>q.bufs[q.head].buf + q.head_off
                iov[0].iov_len = q.bufs[q.head].len - q.head_off
            else:
                iov[i].iov_base = q.bufs[q.head + i].buf
                iov[i].iov_len = q.bufs[q.head + i].len
            want += iov[i].iov_len
        r = writev(fd, iov, n)  # non-blocking fd: never waits (see the module notes)
        if r < 0:
            if errno == EINTR:
                continue
            if errno == EAGAIN:  # EWOULDBLOCK is EAGAIN on Linux
                break
            return -errno
        sq_consume_c(q, r)
        total += r
        if r < want:
            break
    return total


cdef void sq_release_c(SendQueueCore *q) noexcept:
    cdef Py_ssize_t i
    for i in range(q.done, q.head):
        if fk_buf_owned(&q.bufs[i]):
            PyBuffer_Release(&q.bufs[i])
            q.exports -= 1
    q.done = q.head
    if q.head == q.tail:
        q.done = q.head = q.tail = 0


cdef void sq_clear_c(SendQueueCore *q) noexcept:
    cdef Py_ssize_t i
    for i in range(q.done, q.tail):
        if fk_buf_owned(&q.bufs[i]):
            PyBuffer_Release(&q.bufs[i])
    q.done = q.head = q.tail = q.head_off = 0
    q.exports = 0
    q.written_bytes = q.queued_bytes


@cython.final
cdef class SendQueue:
    """Buffers waiting to be written on one socket, in order.

    Its state is a C struct (``core``, see transport.pxd) so that the I/O thread can queue raw
    segments (``sq_push_raw_c``: memory the caller keeps alive, no token) and write them
    (``sq_write_c``) without the GIL; :meth:`write_to` is the same ``sq_write_c`` followed by the
    GIL's part (releasing written buffers, returning the tokens)."""


    def __cinit__(self):
        self.core.cap = 64
        self.core.bufs = <Py_buffer *>malloc(self.core.cap * sizeof(Py_buffer))
        if self.core.bufs == NULL:
            raise MemoryError()
        self.core.done = self.core.head = self.core.tail = self.core.head_off = 0
        self.core.queued_bytes = self.core.written_bytes = 0
        self.core.exports = 0
        self._tokens = deque()
        self._raw_keep = []

    def __dealloc__(self):
        if self.core.bufs != NULL:
            sq_clear_c(&self.core)
            free(self.core.bufs)
            self.core.bufs = NULL

    @property
    def queued_bytes(self):
        """Total bytes ever pushed."""
        return self.core.queued_bytes

    @property
    def written_bytes(self):
        """Total bytes ever written."""
        return self.core.written_bytes

    @property
    def held_exports(self):
        """Segments still holding a Python buffer export (written ones included until released)."""
        return self.core.exports

    @property
    def segments(self):
        """Segments queued and not fully written."""
        return self.core.tail - self.core.head

    def push(self, buffers, token=None):
        """Queue ``buffers`` (any buffer-protocol objects) as one request; ``token`` comes back
        from :meth:`write_to` / :meth:`pop_bytes` once the last of them is fully written."""
        cdef Py_buffer *pb
        for b in buffers:
            if sq_reserve_c(&self.core, 1) < 0:
                raise MemoryError()
            pb = &self.core.bufs[self.core.tail]
            PyObject_GetBuffer(b, pb, PyBUF_SIMPLE)
            if pb.len == 0:
                PyBuffer_Release(pb)
                continue
            self.core.tail += 1
            self.core.exports += 1
            self.core.queued_bytes += pb.len
        self._tokens.append((self.core.queued_bytes, token))

    def push_raw_copy(self, data):
        """Queue a copy of ``data`` as a raw segment (no owner object, no token), the way the
        GIL-free turn queues its segments; the copy lives as long as the queue. For tests."""
        keep = bytes(data)
        if sq_push_raw_c(&self.core, PyBytes_AS_STRING(keep), PyBytes_GET_SIZE(keep)) < 0:
            raise MemoryError()
        self._raw_keep.append(keep)

    @property
    def pending_bytes(self):
        return self.core.queued_bytes - self.core.written_bytes

    def has_pending(self):
        return self.has_pending_c()

    cdef list _finished(self):
        """The GIL's part after bytes were written: release written buffers; the tokens of
        requests now fully written."""
        sq_release_c(&self.core)
        done = []
        while self._tokens and self._tokens[0][0] <= self.core.written_bytes:
            done.append(self._tokens.popleft()[1])
        return done

    cdef list _advance(self, Py_ssize_t n):
        sq_consume_c(&self.core, n)
        return self._finished()

    def write_to(self, int fd):
        """Write as much as the socket takes. Returns the tokens of requests now fully written
        (those of zero-length pushes once everything before them is). Raises OSError for a
        socket error other than EAGAIN."""
        cdef Py_ssize_t r = sq_write_c(&self.core, fd)
        done = self._finished()
        if r < 0:
            raise OSError(-r, "writev failed")
        return done

    def pop_bytes(self, Py_ssize_t limit=-1):
        """Take up to ``limit`` queued bytes (all when -1) as one bytes object, as if written.
        Returns (data, tokens completed). For tests and in-memory transports."""
        cdef Py_ssize_t total = 0, k, take, off = 0
        cdef Py_buffer *pb
        cdef char *dst
        cdef Py_ssize_t avail = self.core.queued_bytes - self.core.written_bytes
        if limit < 0 or limit > avail:
            limit = avail
        out = PyBytes_FromStringAndSize(NULL, limit)
        dst = <char *>out
        k = self.core.head
        while total < limit:
            pb = &self.core.bufs[k]
            off = self.core.head_off if k == self.core.head else 0
            take = min(pb.len - off, limit - total)
            memcpy(dst + total, <char *>pb.buf + off, take)
            total += take
            k += 1
        return out, self._advance(limit)

    def clear(self):
        """Drop everything queued; returns the tokens that were never fully written. Raw
        segments are forgotten (their memory is their owner's): free it only after this."""
        return self.clear_c()

    cdef list clear_c(self):
        sq_clear_c(&self.core)
        left = [t for _, t in self._tokens]
        self._tokens.clear()
        self._raw_keep.clear()
        return left
