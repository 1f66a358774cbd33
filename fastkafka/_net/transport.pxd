# path:
#   request: SendQueue.push / sq_push_raw_c -> sq_write_c (writev) -> the finished requests' tokens
#   answer:  rd_fill_c (read) -> rd_peek_c / next_frame_c -> rd_consume_c
#   TLS:     TlsPipe.encrypt (a SendQueue) -> flush; TlsPipe.read -> _decrypt -> FrameReader.feed

# The contract of fastkafka/_net/transport.pyx: the connection's send queue (gathered writes),
# its frame reader (size-prefixed Kafka frames) and the TLS data phase. How and why:
# docs/internals.md#transport.
from cpython.buffer cimport Py_buffer


# The send queue's state as C memory, reachable without the GIL (see the .pyx notes): segments
# bufs[done:head] are written but may still hold a Python buffer export (released with the GIL),
# bufs[head:tail] wait to be written, bufs[head] from head_off on. A segment pushed raw has
# obj == NULL: its memory is kept alive by whoever queued it, nothing is released.
cdef struct SendQueueCore:
    Py_buffer *bufs            # libc malloc/realloc (never PyMem_Malloc)
    Py_ssize_t cap
    Py_ssize_t done            # first written segment not yet released
    Py_ssize_t head            # first unwritten segment
    Py_ssize_t tail            # one past the last segment
    Py_ssize_t head_off        # bytes of bufs[head] already written
    long long queued_bytes     # total bytes ever pushed
    long long written_bytes    # total bytes ever written
    Py_ssize_t exports         # segments in bufs[done:tail] holding a Python buffer export

# Without the GIL. Room for ``n`` more segments: 0, or -1 (no memory; nothing changed).
# thread: io · lock: none · gil: any
cdef int sq_reserve_c(SendQueueCore *q, Py_ssize_t n) noexcept nogil
# Queue ``n`` bytes at ``p`` (owner kept alive by the caller until written or cleared): 0, or -1
# (no memory; nothing changed). n == 0 queues nothing. Adds no token.
# thread: io · lock: none · gil: any
cdef int sq_push_raw_c(SendQueueCore *q, const char *p, Py_ssize_t n) noexcept nogil
# Write with writev as much as the non-blocking ``fd`` takes, advancing over written segments
# (segments of Python pushes included: their buffer exports stay held until the GIL path releases
# them, see sq_release_c). Returns the bytes written (0 when the socket takes nothing: EAGAIN is
# not an error), or -errno for a socket error (bytes written before it are accounted for).
# thread: io · lock: none · gil: any
cdef Py_ssize_t sq_write_c(SendQueueCore *q, int fd) noexcept nogil
# Mark ``n`` more bytes written (the TLS pipe and pop_bytes copy them out themselves).
# thread: io · lock: none · gil: any
cdef void sq_consume_c(SendQueueCore *q, Py_ssize_t n) noexcept nogil
# With the GIL: release the buffer exports of written segments.
cdef void sq_release_c(SendQueueCore *q) noexcept
# With the GIL: drop every segment (exports released; raw ones forgotten), as if written.
cdef void sq_clear_c(SendQueueCore *q) noexcept


cdef class SendQueue:
    cdef SendQueueCore core     # reach it without the GIL through &q.core, taken with the GIL
    cdef object _tokens         # deque of (end position, token)
    cdef list _raw_keep         # push_raw_copy()'s copies (tests)

    cdef list _advance(self, Py_ssize_t n)
    cdef list _finished(self)
    cdef list clear_c(self)

    # Bytes or request tokens not yet written, or written buffers not yet released (has_pending()
    # for C callers: a write turn settles all of them).
    cdef inline bint has_pending_c(self):
        return (self.core.queued_bytes != self.core.written_bytes or len(self._tokens) > 0
                or self.core.done != self.core.head)


# The frame reader's state as C memory, reachable without the GIL (&reader.c, taken with the GIL).
cdef struct ReaderCore:
    char *buf                  # libc malloc/realloc
    Py_ssize_t cap
    Py_ssize_t start           # first unconsumed byte
    Py_ssize_t end             # one past the last received byte
    Py_ssize_t max_frame_size
    long long bytes_read

cdef enum:
    # rd_fill_c / rd_peek_c / rd_frame_size_c results besides sizes and -errno
    RD_EOF = 1                 # rd_fill_c: the peer closed the stream
    RD_CORRUPT = -1000002      # a size prefix negative or over max_frame_size (the GIL path names it)
    RD_NO_MEMORY = -1000003

# Without the GIL. Room for ``need`` more bytes after the received ones: 0, or -1 (no memory).
# thread: io · lock: none · gil: any
cdef int rd_reserve_c(ReaderCore *c, Py_ssize_t need) noexcept nogil
# The size of the frame at the start: -1 while its prefix is incomplete, RD_CORRUPT.
# thread: io · lock: none · gil: any
cdef Py_ssize_t rd_frame_size_c(const ReaderCore *c) noexcept nogil
# Read what the non-blocking ``fd`` has: 0 (drained for now), RD_EOF, -errno, RD_CORRUPT (a bad
# size prefix is buffered: nothing read), RD_NO_MEMORY.
# thread: io · lock: none · gil: any
cdef Py_ssize_t rd_fill_c(ReaderCore *c, int fd) noexcept nogil
# The next complete frame's body in place (``frame[0]``), not consumed: its size, -1 when none is
# complete, RD_CORRUPT.
# thread: io · lock: none · gil: any
cdef Py_ssize_t rd_peek_c(ReaderCore *c, const char **frame) noexcept nogil
# Consume the frame of ``n`` bytes rd_peek_c returned.
# thread: io · lock: none · gil: any
cdef inline void rd_consume_c(ReaderCore *c, Py_ssize_t n) noexcept nogil:
    c.start += 4 + n


cdef class FrameReader:
    cdef ReaderCore c

    cdef int _ensure_space(self, Py_ssize_t need) except -1
    cdef Py_ssize_t _pending_frame_size(self) except -2
    cdef list _extract(self)
    cdef bint fill_c(self, int fd) except -1
    cdef bint next_frame_c(self, const char **frame, Py_ssize_t *size) except -1


# The TLS data phase's state as C memory (TlsPipe.c), reachable without the GIL: the SSL object
# (owned by the ssl.SSLObject the TlsPipe keeps alive), its two memory BIOs, the ciphertext not yet
# on the socket and the failure a turn without the GIL met, kept for the GIL turn to report.
# Who may use it when: docs/internals.md, "TLS on the GIL-free turn". One thread at a time, always
# the I/O thread: the GIL turn, or (while the connection is in the GIL-free turn's table,
# ConnCore.tlsd set) the GIL-free turn inside the GIL turn's wait.
cdef struct TlsCore:
    void *ssl
    void *wbio
    void *rbio
    char *out                  # ciphertext not yet on the socket: out[out_off:out_len] (libc)
    Py_ssize_t out_cap
    Py_ssize_t out_len
    Py_ssize_t out_off
    char *stage                # small plaintext buffers gathered for one SSL_write
    char *rbuf                 # ciphertext read from the socket
    long long bytes_in
    int failed                 # SSL_get_error code of a failure met without the GIL (0: none)
    unsigned long failed_err   # its last OpenSSL error code (ERR_get_error), 0 when none
    bint closed                # the peer's close_notify (or end of stream) seen without the GIL

cdef enum:
    # tls_fill_c() results besides 0, RD_EOF, -errno and the reader's codes
    TLS_FAILED = -1000010      # an SSL failure, kept in TlsCore.failed for the GIL turn to report
    TLS_HAND_BACK = -1000011   # not a failure, but the GIL turn must go on (post-handshake output
                               # to write, a want-write)

# Without the GIL. Ciphertext waits to be written (in the pipe or the SSL object's outgoing BIO).
# thread: io · lock: none · gil: any
cdef bint tls_out_pending_c(TlsCore *t) noexcept nogil
# Encrypt every queued segment of ``q`` (as if written: sq_consume_c) into ciphertext held by the
# pipe, then write the ciphertext to the non-blocking ``fd`` as far as it takes it. Returns the
# plaintext bytes encrypted (ciphertext may still wait: tls_out_pending_c), -errno for a socket
# error, TLS_FAILED (kept in t.failed; the rest stays queued), or RD_NO_MEMORY.
# thread: io · lock: none · gil: any
cdef Py_ssize_t tls_write_c(TlsCore *t, SendQueueCore *q, int fd) noexcept nogil
# Read what the non-blocking ``fd`` has, decrypt it into ``rd`` (frames are not consumed): 0 (all
# decrypted, nothing to write back), RD_EOF, -errno, RD_NO_MEMORY, TLS_FAILED (a close_notify or
# an SSL failure, kept in ``t`` for the GIL turn), TLS_HAND_BACK.
# thread: io · lock: none · gil: any
cdef Py_ssize_t tls_fill_c(TlsCore *t, ReaderCore *rd, int fd) noexcept nogil


cdef class TlsPipe:
    cdef TlsCore c              # reach it without the GIL through &pipe.c, taken with the GIL
    cdef object _keep           # the SSLObject: owns the SSL object and both memory BIOs

    cdef int _out_reserve(self, Py_ssize_t more) except -1
    cdef int _take_ciphertext(self) except -1
    cdef int _ssl_write(self, const char *buf, Py_ssize_t n) except -1
    cdef int _raise_failed(self) except -1
    cdef bint _decrypt(self, FrameReader fr, reader, list frames) except -1
