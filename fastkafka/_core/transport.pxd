# The contract of fastkafka/_core/transport.pyx: the connection's send queue (gathered writes),
# its frame reader (size-prefixed Kafka frames) and the TLS data phase. See the .pyx docstrings.
from cpython.buffer cimport Py_buffer


cdef class SendQueue:
    cdef Py_buffer *_bufs
    cdef Py_ssize_t _cap
    cdef Py_ssize_t _head       # index of the first unwritten buffer
    cdef Py_ssize_t _tail       # one past the last buffer
    cdef Py_ssize_t _head_off   # bytes of _bufs[_head] already written
    cdef readonly long long queued_bytes   # total bytes ever pushed
    cdef readonly long long written_bytes  # total bytes ever written
    cdef object _tokens         # deque of (end position, token)

    cdef int _reserve(self) except -1
    cdef list _advance(self, Py_ssize_t n)

    # Bytes or request tokens not yet written (has_pending() for C callers).
    cdef inline bint has_pending_c(self):
        return self.queued_bytes != self.written_bytes or len(self._tokens) > 0


cdef class FrameReader:
    cdef char *_buf
    cdef Py_ssize_t _cap
    cdef Py_ssize_t _start   # first unconsumed byte
    cdef Py_ssize_t _end     # one past the last received byte
    cdef readonly Py_ssize_t max_frame_size
    cdef readonly long long bytes_read

    cdef int _ensure_space(self, Py_ssize_t need) except -1
    cdef Py_ssize_t _pending_frame_size(self) except -2
    cdef list _extract(self)
    cdef bint fill_c(self, int fd) except -1
    cdef bint next_frame_c(self, const char **frame, Py_ssize_t *size) except -1


cdef class TlsPipe:
    cdef void *_ssl
    cdef void *_wbio
    cdef void *_rbio
    cdef object _keep           # the SSLObject: owns the SSL object and both memory BIOs
    cdef char *_out             # ciphertext not yet on the socket: _out[_out_off:_out_len]
    cdef Py_ssize_t _out_cap, _out_len, _out_off
    cdef char *_stage           # small plaintext buffers gathered for one SSL_write
    cdef char *_rbuf            # ciphertext read from the socket
    cdef readonly long long bytes_in

    cdef int _out_reserve(self, Py_ssize_t more) except -1
    cdef int _take_ciphertext(self) except -1
    cdef int _ssl_write(self, const char *buf, Py_ssize_t n) except -1
    cdef bint _decrypt(self, FrameReader fr, reader, list frames) except -1
