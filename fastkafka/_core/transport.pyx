# cython: language_level=3
"""Socket-level framing for one connection.

``SendQueue`` holds the requests queued on a connection as a list of buffers (the request header and
each record batch are separate buffers; nothing is joined) and writes them with ``writev``, taking up
a partial write where it stopped. Only the request at the head can be partially written; a token
pushed with a request is returned once its last byte is on the socket.

The file descriptors must be non-blocking. ``writev`` and ``read`` then never wait, so they run with
the GIL held: releasing it for a call of a few microseconds would let a busy ``send()`` thread take
it, and the I/O thread would wait up to the interpreter's switch interval (5 ms) to get it back,
once per call.

``FrameReader`` turns a byte stream into size-prefixed frames. It keeps its state across reads (half a
size prefix, half a body, several frames per read) and rejects a negative size or one above
``max_frame_size`` with ``CorruptFrameError`` before allocating anything for it.
Both can be driven without a socket (``feed``, ``pop_bytes``) so tests use plain bytes.
"""

cimport cython
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.errno cimport errno, EAGAIN, EINTR
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memmove
from posix.uio cimport iovec, writev
from posix.unistd cimport read as c_read, write as c_write

from collections import deque

cdef enum:
    MAX_IOV = 128
    READ_CHUNK = 65536


def drain(int fd):
    """drain(fd) -> int: read and discard what the non-blocking ``fd`` holds (a wake-up pipe);
    returns the bytes read. Keeps the GIL (see the module notes)."""
    cdef char buf[4096]
    cdef ssize_t r
    cdef Py_ssize_t total = 0
    while True:
        r = c_read(fd, buf, sizeof(buf))
        if r > 0:
            total += r
            continue
        if r < 0 and errno == EINTR:
            continue
        return total


def fd_send(int fd, data, Py_ssize_t offset=0):
    """fd_send(fd, data, offset=0) -> int: write ``data[offset:]`` to the non-blocking ``fd`` with
    one ``write``; returns the bytes written (0 when the socket takes nothing now). Keeps the GIL
    (see the module notes): the TLS layer writes its ciphertext with it."""
    cdef Py_buffer pb
    cdef ssize_t r
    PyObject_GetBuffer(data, &pb, PyBUF_SIMPLE)
    try:
        if offset < 0 or offset > pb.len:
            raise ValueError("offset out of range")
        while True:
            r = c_write(fd, <char *>pb.buf + offset, pb.len - offset)
            if r >= 0:
                return r
            if errno == EINTR:
                continue
            if errno == EAGAIN:
                return 0
            raise OSError(errno, "write failed")
    finally:
        PyBuffer_Release(&pb)


def fd_recv_into(int fd, buffer):
    """fd_recv_into(fd, buffer) -> int: one ``read`` from the non-blocking ``fd`` into the writable
    ``buffer``; returns the bytes read, 0 at end of stream, -1 when nothing is there now. Keeps
    the GIL (see the module notes): the TLS layer reads its ciphertext with it."""
    cdef Py_buffer pb
    cdef ssize_t r
    PyObject_GetBuffer(buffer, &pb, PyBUF_WRITABLE)
    try:
        while True:
            r = c_read(fd, pb.buf, pb.len)
            if r >= 0:
                return r
            if errno == EINTR:
                continue
            if errno == EAGAIN:
                return -1
            raise OSError(errno, "read failed")
    finally:
        PyBuffer_Release(&pb)


cdef object _corrupt(str msg):
    from fastkafka.errors import CorruptFrameError
    return CorruptFrameError(msg)


@cython.final
cdef class SendQueue:
    """Buffers waiting to be written on one socket, in order."""

    cdef Py_buffer *_bufs
    cdef Py_ssize_t _cap
    cdef Py_ssize_t _head       # index of the first unwritten buffer
    cdef Py_ssize_t _tail       # one past the last buffer
    cdef Py_ssize_t _head_off   # bytes of _bufs[_head] already written
    cdef readonly long long queued_bytes   # total bytes ever pushed
    cdef readonly long long written_bytes  # total bytes ever written
    cdef object _tokens         # deque of (end position, token)

    def __cinit__(self):
        self._cap = 64
        self._bufs = <Py_buffer *>malloc(self._cap * sizeof(Py_buffer))
        if self._bufs == NULL:
            raise MemoryError()
        self._head = self._tail = self._head_off = 0
        self.queued_bytes = self.written_bytes = 0
        self._tokens = deque()

    def __dealloc__(self):
        cdef Py_ssize_t i
        if self._bufs != NULL:
            for i in range(self._head, self._tail):
                PyBuffer_Release(&self._bufs[i])
            free(self._bufs)
            self._bufs = NULL

    cdef int _reserve(self) except -1:
        cdef Py_ssize_t live = self._tail - self._head
        cdef Py_buffer *nb
        if self._tail < self._cap:
            return 0
        if self._head > 0:
            memmove(self._bufs, self._bufs + self._head, live * sizeof(Py_buffer))
            self._head = 0
            self._tail = live
            if self._tail < self._cap:
                return 0
        nb = <Py_buffer *>realloc(self._bufs, self._cap * 2 * sizeof(Py_buffer))
        if nb == NULL:
            raise MemoryError()
        self._bufs = nb
        self._cap *= 2
        return 0

    def push(self, buffers, token=None):
        """Queue ``buffers`` (any buffer-protocol objects) as one request; ``token`` comes back
        from :meth:`write_to` / :meth:`pop_bytes` once the last of them is fully written."""
        cdef Py_buffer *pb
        for b in buffers:
            self._reserve()
            pb = &self._bufs[self._tail]
            PyObject_GetBuffer(b, pb, PyBUF_SIMPLE)
            if pb.len == 0:
                PyBuffer_Release(pb)
                continue
            self._tail += 1
            self.queued_bytes += pb.len
        self._tokens.append((self.queued_bytes, token))

    @property
    def pending_bytes(self):
        return self.queued_bytes - self.written_bytes

    def has_pending(self):
        return self.queued_bytes != self.written_bytes or bool(self._tokens)

    cdef list _advance(self, Py_ssize_t n):
        cdef Py_buffer *pb
        cdef Py_ssize_t left
        self.written_bytes += n
        while n > 0 and self._head < self._tail:
            pb = &self._bufs[self._head]
            left = pb.len - self._head_off
            if n >= left:
                n -= left
                PyBuffer_Release(pb)
                self._head += 1
                self._head_off = 0
            else:
                self._head_off += n
                n = 0
        if self._head == self._tail:
            self._head = self._tail = 0
        done = []
        while self._tokens and self._tokens[0][0] <= self.written_bytes:
            done.append(self._tokens.popleft()[1])
        return done

    def write_to(self, int fd):
        """Write as much as the socket takes. Returns the tokens of requests now fully written.
        Raises OSError for a socket error other than EAGAIN."""
        cdef iovec iov[MAX_IOV]
        cdef int n, i
        cdef ssize_t r
        cdef Py_ssize_t want
        done = []
        while self._head < self._tail:
            n = <int>min(self._tail - self._head, MAX_IOV)
            want = 0
            for i in range(n):
                if i == 0:
                    iov[0].iov_base = <char *>self._bufs[self._head].buf + self._head_off
                    iov[0].iov_len = self._bufs[self._head].len - self._head_off
                else:
                    iov[i].iov_base = self._bufs[self._head + i].buf
                    iov[i].iov_len = self._bufs[self._head + i].len
                want += iov[i].iov_len
            r = writev(fd, iov, n)  # non-blocking fd: never waits, so the GIL stays held
            if r < 0:
                if errno == EINTR:
                    continue
                if errno == EAGAIN:  # EWOULDBLOCK is EAGAIN on Linux
                    break
                raise OSError(errno, "writev failed")
            done.extend(self._advance(r))
            if r < want:
                break
        else:
            # Nothing left to write: tokens of zero-length pushes complete too.
            done.extend(self._advance(0))
        return done

    def pop_bytes(self, Py_ssize_t limit=-1):
        """Take up to ``limit`` queued bytes (all when -1) as one bytes object, as if written.
        Returns (data, tokens completed). For tests and in-memory transports."""
        cdef Py_ssize_t total = 0, k, take, off = 0
        cdef Py_buffer *pb
        cdef char *dst
        cdef Py_ssize_t avail = self.queued_bytes - self.written_bytes
        if limit < 0 or limit > avail:
            limit = avail
        out = PyBytes_FromStringAndSize(NULL, limit)
        dst = <char *>out
        k = self._head
        while total < limit:
            pb = &self._bufs[k]
            off = self._head_off if k == self._head else 0
            take = min(pb.len - off, limit - total)
            memcpy(dst + total, <char *>pb.buf + off, take)
            total += take
            k += 1
        return out, self._advance(limit)

    def clear(self):
        """Drop everything queued; returns the tokens that were never fully written."""
        cdef Py_ssize_t i
        for i in range(self._head, self._tail):
            PyBuffer_Release(&self._bufs[i])
        self._head = self._tail = self._head_off = 0
        self.written_bytes = self.queued_bytes
        left = [t for _, t in self._tokens]
        self._tokens.clear()
        return left


@cython.final
cdef class FrameReader:
    """Reassembles 4-byte big-endian size-prefixed frames from a byte stream."""

    cdef char *_buf
    cdef Py_ssize_t _cap
    cdef Py_ssize_t _start   # first unconsumed byte
    cdef Py_ssize_t _end     # one past the last received byte
    cdef readonly Py_ssize_t max_frame_size
    cdef readonly long long bytes_read

    def __cinit__(self, Py_ssize_t max_frame_size=100 * 1024 * 1024):
        self._cap = READ_CHUNK * 2
        self._buf = <char *>malloc(self._cap)
        if self._buf == NULL:
            raise MemoryError()
        self._start = self._end = 0
        self.max_frame_size = max_frame_size
        self.bytes_read = 0

    def __dealloc__(self):
        free(self._buf)
        self._buf = NULL

    @property
    def buffered(self):
        """Bytes received but not yet returned as part of a frame."""
        return self._end - self._start

    cdef int _ensure_space(self, Py_ssize_t need) except -1:
        """Make room for ``need`` more bytes after _end, compacting or growing the buffer."""
        cdef Py_ssize_t live = self._end - self._start
        cdef char *nb
        cdef Py_ssize_t ncap
        if self._cap - self._end >= need:
            return 0
        if self._start > 0:
            memmove(self._buf, self._buf + self._start, live)
            self._start = 0
            self._end = live
            if self._cap - self._end >= need:
                return 0
        ncap = self._cap
        while ncap - live < need:
            ncap *= 2
        nb = <char *>realloc(self._buf, ncap)
        if nb == NULL:
            raise MemoryError()
        self._buf = nb
        self._cap = ncap
        return 0

    cdef Py_ssize_t _pending_frame_size(self) except -2:
        """Size of the frame at _start (-1 when the prefix is incomplete); validates it."""
        cdef const unsigned char *p
        cdef long long size
        if self._end - self._start < 4:
            return -1
        p = <const unsigned char *>self._buf + self._start
        size = (<long long>p[0] << 24) | (<long long>p[1] << 16) | (<long long>p[2] << 8) | p[3]
        if size >= 0x80000000:
            raise _corrupt(f"negative frame size {size - 0x100000000}")
        if size > self.max_frame_size:
            if (p[0] == 0x15 or p[0] == 0x16) and p[1] == 0x03 and p[2] <= 0x04:
                # A TLS alert (21) or handshake (22) record header, version 3.x: the peer speaks TLS.
                raise _corrupt(f"frame size {size} exceeds the maximum of {self.max_frame_size}; "
                               f"the bytes are a TLS record header: is this a TLS port? "
                               f"(use security_protocol=SSL for a TLS listener)")
            raise _corrupt(f"frame size {size} exceeds the maximum of {self.max_frame_size}")
        return <Py_ssize_t>size

    cdef list _extract(self):
        cdef Py_ssize_t size
        frames = []
        while True:
            size = self._pending_frame_size()
            if size < 0 or self._end - self._start - 4 < size:
                break
            frames.append(PyBytes_FromStringAndSize(self._buf + self._start + 4, size))
            self._start += 4 + size
        if self._start == self._end:
            self._start = self._end = 0
        return frames

    def feed(self, data):
        """Append bytes received from elsewhere; returns the complete frames (bodies only)."""
        cdef Py_buffer pb
        PyObject_GetBuffer(data, &pb, PyBUF_SIMPLE)
        try:
            self._ensure_space(pb.len)
            memcpy(self._buf + self._end, pb.buf, pb.len)
            self._end += pb.len
            self.bytes_read += pb.len
        finally:
            PyBuffer_Release(&pb)
        return self._extract()

    def read_from(self, int fd):
        """Read what the non-blocking socket has. Returns (frames, eof).
        Raises OSError for socket errors, CorruptFrameError for a bad size prefix."""
        cdef ssize_t r
        cdef Py_ssize_t size, want
        cdef bint eof = False
        while True:
            size = self._pending_frame_size()
            want = READ_CHUNK
            if size >= 0 and size + 4 - (self._end - self._start) > want:
                want = size + 4 - (self._end - self._start)
            self._ensure_space(want)
            r = c_read(fd, self._buf + self._end, self._cap - self._end)  # non-blocking fd
            if r < 0:
                if errno == EINTR:
                    continue
                if errno == EAGAIN:  # EWOULDBLOCK is EAGAIN on Linux
                    break
                raise OSError(errno, "read failed")
            if r == 0:
                eof = True
                break
            self._end += r
            self.bytes_read += r
            if r < self._cap - self._end + r:
                # Short read: the socket is drained for now.
                break
        return self._extract(), eof
