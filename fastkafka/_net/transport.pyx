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

``TlsPipe`` is the data phase of a TLS connection (``fastkafka._net.tls``): it encrypts a ``SendQueue``
and decrypts into a ``FrameReader`` with the GIL held, for the same reason.
"""

cimport cython
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.errno cimport errno, EAGAIN, EINTR
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memmove, memset
from posix.uio cimport iovec, writev
from posix.unistd cimport read as c_read, write as c_write

from collections import deque
import sys

cdef extern from *:
    """
    /* a segment holding a Python buffer export (Cython types Py_buffer.obj as an object) */
    static inline int fk_buf_owned(const Py_buffer *b) { return b->obj != NULL; }
    """
    int fk_buf_owned(const Py_buffer *b) noexcept nogil

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


# -- the send queue's C core: the same functions with the GIL (SendQueue's methods) and without it
# (the I/O thread's GIL-free turn, fastkafka/_net/connection.pyx). They touch C memory only; the
# one thing that needs the GIL, releasing a Python buffer export, is left to sq_release_c.

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


# ---------------------------------------------------------------------------------------------
# TLS records without giving up the GIL
#
# ssl.SSLObject releases the GIL inside every read / write / pending call. On the I/O thread that
# is a hand-off per call: the application thread, busy in send(), takes the GIL and the I/O thread
# waits up to the interpreter's switch interval (5 ms) to get it back, several times per turn of
# its loop. ``TlsPipe`` makes the same OpenSSL calls on the same SSL object (the one inside the
# SSLObject, after Python's ssl module did the handshake and checked the certificate) with the GIL
# held: encryption of a request costs well under a millisecond, far less than a hand-off. The
# OpenSSL functions come from the library Python's _ssl module is linked with (looked up at run
# time, nothing is linked here); ``TlsPipe.attach`` returns None when they or the SSL object
# cannot be found with certainty, and the caller keeps using the SSLObject.

cdef extern from "<dlfcn.h>" nogil:
    void *dlopen(const char *filename, int flags)
    void *dlsym(void *handle, const char *symbol)
    int RTLD_LAZY
    int RTLD_NOLOAD

from cpython.object cimport PyObject

ctypedef int (*f_ssl_rw_ex)(void *ssl, void *buf, size_t num, size_t *done) nogil
ctypedef int (*f_ssl_get_error)(void *ssl, int ret) nogil
ctypedef void *(*f_ssl_get_ex_data)(void *ssl, int idx) nogil
ctypedef void *(*f_ssl_get_bio)(void *ssl) nogil
ctypedef int (*f_bio_rw)(void *bio, void *buf, int n) nogil
ctypedef size_t (*f_bio_ctrl_pending)(void *bio) nogil
ctypedef unsigned long (*f_err_get)() nogil
ctypedef void (*f_err_clear)() nogil
ctypedef const char *(*f_err_string)(unsigned long e) nogil

cdef f_ssl_rw_ex p_SSL_write_ex = NULL
cdef f_ssl_rw_ex p_SSL_read_ex = NULL
cdef f_ssl_get_error p_SSL_get_error = NULL
cdef f_ssl_get_ex_data p_SSL_get_ex_data = NULL
cdef f_ssl_get_bio p_SSL_get_rbio = NULL
cdef f_ssl_get_bio p_SSL_get_wbio = NULL
cdef f_bio_rw p_BIO_read = NULL
cdef f_bio_rw p_BIO_write = NULL
cdef f_bio_ctrl_pending p_BIO_ctrl_pending = NULL
cdef f_err_get p_ERR_get_error = NULL
cdef f_err_clear p_ERR_clear_error = NULL
cdef f_err_string p_ERR_reason_error_string = NULL
cdef f_err_string p_ERR_lib_error_string = NULL
cdef int _openssl_state = 0    # 0: not looked up yet, 1: usable, -1: not usable
# Why the last TlsPipe.attach returned None ("" after one that succeeded): the TLS data path a
# connection took is reported in Producer.metrics() and a DEBUG log line (fastkafka/_net/tls.py).
cdef str _attach_failure = ""

cdef enum:
    SSL_ERROR_SSL = 1
    SSL_ERROR_WANT_READ = 2
    SSL_ERROR_WANT_WRITE = 3
    SSL_ERROR_SYSCALL = 5
    SSL_ERROR_ZERO_RETURN = 6
    TLS_STAGE = 65536          # small queued buffers are gathered up to this size per SSL_write
    TLS_DIRECT = 16384         # a buffer this large is encrypted where it lies
    TLS_READ = 262144          # ciphertext read from the socket per read()


cdef void *_sym(void *h, const char *name):
    return dlsym(h, name)


cdef int _load_openssl() except -1:
    global _openssl_state, p_SSL_write_ex, p_SSL_read_ex, p_SSL_get_error, p_SSL_get_ex_data
    global p_SSL_get_rbio, p_SSL_get_wbio, p_BIO_read, p_BIO_write, p_BIO_ctrl_pending
    global p_ERR_get_error, p_ERR_clear_error, p_ERR_reason_error_string, p_ERR_lib_error_string
    cdef void *h
    cdef bytes path
    if _openssl_state != 0:
        return _openssl_state == 1
    _openssl_state = -1
    import _ssl
    f = getattr(_ssl, "__file__", None)
    if f:
        path = f.encode()
        h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD)
    else:
        h = dlopen(NULL, RTLD_LAZY)   # _ssl built into the interpreter
    if h == NULL:
        return 0
    p_SSL_write_ex = <f_ssl_rw_ex>_sym(h, b"SSL_write_ex")
    p_SSL_read_ex = <f_ssl_rw_ex>_sym(h, b"SSL_read_ex")
    p_SSL_get_error = <f_ssl_get_error>_sym(h, b"SSL_get_error")
    p_SSL_get_ex_data = <f_ssl_get_ex_data>_sym(h, b"SSL_get_ex_data")
    p_SSL_get_rbio = <f_ssl_get_bio>_sym(h, b"SSL_get_rbio")
    p_SSL_get_wbio = <f_ssl_get_bio>_sym(h, b"SSL_get_wbio")
    p_BIO_read = <f_bio_rw>_sym(h, b"BIO_read")
    p_BIO_write = <f_bio_rw>_sym(h, b"BIO_write")
    p_BIO_ctrl_pending = <f_bio_ctrl_pending>_sym(h, b"BIO_ctrl_pending")
    p_ERR_get_error = <f_err_get>_sym(h, b"ERR_get_error")
    p_ERR_clear_error = <f_err_clear>_sym(h, b"ERR_clear_error")
    p_ERR_reason_error_string = <f_err_string>_sym(h, b"ERR_reason_error_string")
    p_ERR_lib_error_string = <f_err_string>_sym(h, b"ERR_lib_error_string")
    if (p_SSL_write_ex == NULL or p_SSL_read_ex == NULL or p_SSL_get_error == NULL
            or p_SSL_get_ex_data == NULL or p_SSL_get_rbio == NULL or p_SSL_get_wbio == NULL
            or p_BIO_read == NULL or p_BIO_write == NULL or p_BIO_ctrl_pending == NULL
            or p_ERR_get_error == NULL or p_ERR_clear_error == NULL
            or p_ERR_reason_error_string == NULL or p_ERR_lib_error_string == NULL):
        return 0
    _openssl_state = 1
    return 1


def tls_attach_failure() -> str:
    """Why the last :meth:`TlsPipe.attach` returned None, or "" when it attached."""
    return _attach_failure


cdef void *_ssl_pointer(inner):
    """The SSL* of an ``_ssl._SSLSocket`` made by ``SSLContext.wrap_bio``, or NULL. CPython lays the
    object out as {PyObject_HEAD; socket weakref; SSL *ssl; context; ...}: the pointer is taken
    only when the fields around it hold what they must (no socket, the object's own context) and
    OpenSSL confirms it (the SSL object's application data is this very object)."""
    cdef char *p
    cdef Py_ssize_t head = sizeof(PyObject)
    cdef void *ssl
    if type(inner).__name__ != "_SSLSocket" or type(inner).__basicsize__ < head + 3 * sizeof(void *):
        return NULL
    ctx = inner.context
    p = <char *><PyObject *>inner
    if (<void **>(p + head))[0] != NULL:                       # the socket: none for wrap_bio
        return NULL
    if (<void **>(p + head + 2 * sizeof(void *)))[0] != <void *>ctx:
        return NULL
    ssl = (<void **>(p + head + sizeof(void *)))[0]
    if ssl == NULL or p_SSL_get_ex_data(ssl, 0) != <void *>inner:
        return NULL
    if p_SSL_get_rbio(ssl) == NULL or p_SSL_get_wbio(ssl) == NULL:
        return NULL
    return ssl


cdef object _tls_error(int code):
    """The ssl exception for a failed SSL_read/SSL_write (``code`` from SSL_get_error)."""
    import ssl as _pyssl
    cdef unsigned long e = p_ERR_get_error()
    cdef unsigned long last = e
    while e != 0:
        last = e
        e = p_ERR_get_error()
    reason = lib = None
    if last != 0:
        if p_ERR_reason_error_string(last) != NULL:
            reason = p_ERR_reason_error_string(last).decode("ascii", "replace")
        if p_ERR_lib_error_string(last) != NULL:
            lib = p_ERR_lib_error_string(last).decode("ascii", "replace")
    if code == SSL_ERROR_ZERO_RETURN:
        exc = _pyssl.SSLZeroReturnError(code, "TLS/SSL connection has been closed (EOF)")
    elif code == SSL_ERROR_SYSCALL or (reason or "").lower() == "unexpected eof while reading":
        exc = _pyssl.SSLEOFError(8, "EOF occurred in violation of protocol")
    else:
        text = reason or f"SSL error {code}"
        exc = _pyssl.SSLError(code, f"[{(lib or 'SSL').upper()}: {text.upper().replace(' ', '_')}] "
                                    f"{text}")
        exc.reason = text.upper().replace(" ", "_")
        exc.library = (lib or "SSL").upper()
    return exc


@cython.final
cdef class TlsPipe:
    """The data phase of one TLS connection, after the handshake: encrypts a ``SendQueue`` into
    ciphertext written to the socket, and decrypts what the socket delivers into a
    ``FrameReader``, with the GIL held throughout (see the notes above)."""


    def __cinit__(self):
        self._ssl = self._wbio = self._rbio = NULL
        self._out = self._stage = self._rbuf = NULL
        self._out_cap = self._out_len = self._out_off = 0
        self.bytes_in = 0

    def __dealloc__(self):
        free(self._out)
        free(self._stage)
        free(self._rbuf)

    @staticmethod
    def attach(sslobj):
        """A TlsPipe on the SSL object of ``sslobj`` (an ssl.SSLObject whose handshake is done),
        or None when OpenSSL or that object cannot be reached with certainty here."""
        global _attach_failure
        cdef TlsPipe pipe
        cdef void *ssl
        if _load_openssl() != 1:
            _attach_failure = ("OpenSSL's SSL_read_ex/SSL_write_ex/BIO functions were not found in "
                               "the library the interpreter's _ssl module loaded")
            return None
        inner = getattr(sslobj, "_sslobj", None)
        if inner is None:
            _attach_failure = "ssl.SSLObject has no _sslobj attribute in this Python"
            return None
        ssl = _ssl_pointer(inner)
        if ssl == NULL:
            _attach_failure = (f"the layout of _ssl.{type(inner).__name__} in this Python "
                               f"({sys.version.split()[0]}) is not the one this build checks for")
            return None
        _attach_failure = ""
        pipe = TlsPipe()
        pipe._ssl = ssl
        pipe._wbio = p_SSL_get_wbio(ssl)
        pipe._rbio = p_SSL_get_rbio(ssl)
        pipe._keep = sslobj
        pipe._stage = <char *>malloc(TLS_STAGE)
        pipe._rbuf = <char *>malloc(TLS_READ)
        if pipe._stage == NULL or pipe._rbuf == NULL:
            raise MemoryError()
        return pipe

    @property
    def wants_write(self):
        """True while ciphertext waits for the socket."""
        return self._out_off < self._out_len or p_BIO_ctrl_pending(self._wbio) > 0

    cdef int _out_reserve(self, Py_ssize_t more) except -1:
        cdef char *nb
        cdef Py_ssize_t ncap
        if self._out_off == self._out_len:
            self._out_off = self._out_len = 0
        if self._out_cap - self._out_len >= more:
            return 0
        if self._out_off > 0:
            memmove(self._out, self._out + self._out_off, self._out_len - self._out_off)
            self._out_len -= self._out_off
            self._out_off = 0
            if self._out_cap - self._out_len >= more:
                return 0
        ncap = max(self._out_cap * 2, self._out_len + more, 65536)
        nb = <char *>realloc(self._out, ncap)
        if nb == NULL:
            raise MemoryError()
        self._out = nb
        self._out_cap = ncap
        return 0

    def put_ciphertext(self, data):
        """Queue ciphertext taken out of the SSL object before this pipe existed (it goes first)."""
        cdef Py_buffer pb
        PyObject_GetBuffer(data, &pb, PyBUF_SIMPLE)
        try:
            self._out_reserve(pb.len)
            memcpy(self._out + self._out_len, pb.buf, pb.len)
            self._out_len += pb.len
        finally:
            PyBuffer_Release(&pb)

    cdef int _take_ciphertext(self) except -1:
        """Move what the SSL object wrote into its outgoing BIO to _out."""
        cdef size_t n = p_BIO_ctrl_pending(self._wbio)
        cdef int r
        while n > 0:
            if n > 0x40000000:
                n = 0x40000000
            self._out_reserve(<Py_ssize_t>n)
            r = p_BIO_read(self._wbio, self._out + self._out_len, <int>n)
            if r <= 0:
                break
            self._out_len += r
            n = p_BIO_ctrl_pending(self._wbio)
        return 0

    cdef int _ssl_write(self, const char *buf, Py_ssize_t n) except -1:
        cdef size_t done
        cdef int rc
        while n > 0:
            p_ERR_clear_error()
            rc = p_SSL_write_ex(self._ssl, <void *>buf, <size_t>n, &done)
            if rc != 1:
                # A memory BIO takes everything: WANT_WRITE cannot happen; anything else is fatal.
                raise _tls_error(p_SSL_get_error(self._ssl, rc))
            buf += done
            n -= done
        return 0

    def flush(self, int fd):
        """Write pending ciphertext to the non-blocking ``fd``; True when all of it is written."""
        cdef ssize_t r
        self._take_ciphertext()
        while self._out_off < self._out_len:
            r = c_write(fd, self._out + self._out_off, self._out_len - self._out_off)
            if r < 0:
                if errno == EINTR:
                    continue
                if errno == EAGAIN:
                    return False
                raise OSError(errno, "write failed")
            self._out_off += r
        self._out_off = self._out_len = 0
        return True

    def encrypt(self, SendQueue q, Py_ssize_t limit):
        """Encrypt up to about ``limit`` queued bytes (whole buffers; at least one), as if written;
        the ciphertext waits in the pipe for :meth:`flush`. Returns the tokens of requests whose
        last byte was encrypted. Large buffers are encrypted where they lie, small ones gathered
        (a request header, a small batch) so that few TLS records carry them."""
        cdef Py_ssize_t k, off, seg, staged = 0, total = 0
        cdef Py_buffer *pb
        k = q.core.head
        while k < q.core.tail and total < limit:
            pb = &q.core.bufs[k]
            off = q.core.head_off if k == q.core.head else 0
            seg = pb.len - off
            if seg >= TLS_DIRECT:
                if staged:
                    self._ssl_write(self._stage, staged)
                    staged = 0
                self._ssl_write(<char *>pb.buf + off, seg)
            else:
                if staged + seg > TLS_STAGE:
                    self._ssl_write(self._stage, staged)
                    staged = 0
                memcpy(self._stage + staged, <char *>pb.buf + off, seg)
                staged += seg
            total += seg
            k += 1
        if staged:
            self._ssl_write(self._stage, staged)
        self._take_ciphertext()
        return q._advance(total)

    def read(self, int fd, reader):
        """Read what the non-blocking ``fd`` has, decrypt it and frame the plaintext with
        ``reader`` (a FrameReader; anything with ``feed(bytes)`` works too). Returns
        (frames, eof); raises OSError, ssl.SSLError, CorruptFrameError."""
        cdef ssize_t r
        cdef bint eof = False
        cdef FrameReader fr = reader if type(reader) is FrameReader else None
        frames = []
        while True:
            r = c_read(fd, self._rbuf, TLS_READ)
            if r < 0:
                if errno == EINTR:
                    continue
                if errno == EAGAIN:
                    break
                raise OSError(errno, "read failed")
            if r == 0:
                eof = True
                break
            self.bytes_in += r
            if p_BIO_write(self._rbio, self._rbuf, <int>r) != r:
                raise MemoryError()
            if self._decrypt(fr, reader, frames):
                eof = True
                break
            if r < TLS_READ:
                break
        if p_BIO_ctrl_pending(self._wbio) > 0:   # TLS 1.3 post-handshake answers (key update)
            self.flush(fd)
        return frames, eof

    cdef bint _decrypt(self, FrameReader fr, reader, list frames) except -1:
        """Decrypt every complete record in the incoming BIO; True at the peer's close."""
        cdef size_t n
        cdef int rc, code
        cdef char tmp[16384]
        while True:
            p_ERR_clear_error()
            if fr is not None:
                fr._ensure_space(16384)
                rc = p_SSL_read_ex(self._ssl, fr.c.buf + fr.c.end, <size_t>(fr.c.cap - fr.c.end), &n)
                if rc == 1:
                    fr.c.end += n
                    fr.c.bytes_read += n
                    continue
            else:
                rc = p_SSL_read_ex(self._ssl, tmp, sizeof(tmp), &n)
                if rc == 1:
                    frames.extend(reader.feed(PyBytes_FromStringAndSize(tmp, n)))
                    continue
            code = p_SSL_get_error(self._ssl, rc)
            if code == SSL_ERROR_WANT_READ:
                break
            exc = _tls_error(code)
            import ssl as _pyssl
            if isinstance(exc, (_pyssl.SSLZeroReturnError, _pyssl.SSLEOFError)):
                if fr is not None:
                    frames.extend(fr._extract())
                return True
            raise exc
        if fr is not None:
            frames.extend(fr._extract())
        return False
