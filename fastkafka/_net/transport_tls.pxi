# transport_tls.pxi: the TLS data phase: TlsPipe, OpenSSL calls on the ssl module's own SSL
# object, between a SendQueue and a FrameReader: with the GIL held (TlsPipe's methods, the GIL
# turn) or without it (tls_write_c / tls_fill_c, the I/O thread's GIL-free turn).
# Included by transport.pyx (one compiled unit with the send queue and the frame reader it
# drives); the contract is in transport.pxd, the explanation in docs/internals.md ("Transport").

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
#
# The state is a C struct (TlsCore, transport.pxd) so that the I/O thread's GIL-free turn can
# encrypt and write its Produce requests and read and decrypt their answers without the GIL
# (tls_write_c, tls_fill_c): the same OpenSSL calls the GIL turn makes through TlsPipe, on the same
# state, never at the same time (both turns are the I/O thread's; the GIL-free one runs inside the
# GIL turn's wait). CPython's own SSLObject.read/write make these calls with the GIL released,
# so what OpenSSL does inside them (TLS 1.3 KeyUpdate and NewSessionTicket messages handled inside
# SSL_read, the ssl module's keylog and message callbacks, which take the GIL themselves) is
# already done without the GIL there. A failure met without the GIL is kept in the TlsCore
# (``failed``) and raised, typed as before, by the GIL turn's next call (_raise_failed).

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


cdef object _tls_error(int code, unsigned long last=0):
    """The ssl exception for a failed SSL_read/SSL_write (``code`` from SSL_get_error; ``last``: the
    OpenSSL error code kept by a turn without the GIL, else read from this thread's error queue)."""
    import ssl as _pyssl
    cdef unsigned long e
    if last == 0:
        e = p_ERR_get_error()
        last = e
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


# -- the C core: with the GIL (TlsPipe's methods) or without it (the GIL-free turn) -------------

# thread: io · lock: none · gil: any
cdef int _tls_reserve_c(TlsCore *t, Py_ssize_t more) noexcept nogil:
    """Room for ``more`` ciphertext bytes after _out_len: 0, or -1 (no memory)."""
    cdef char *nb
    cdef Py_ssize_t ncap
    if t.out_off == t.out_len:
        t.out_off = t.out_len = 0
    if t.out_cap - t.out_len >= more:
        return 0
    if t.out_off > 0:
        memmove(t.out, t.out + t.out_off, t.out_len - t.out_off)
        t.out_len -= t.out_off
        t.out_off = 0
        if t.out_cap - t.out_len >= more:
            return 0
    ncap = t.out_cap * 2
    if ncap < t.out_len + more:
        ncap = t.out_len + more
    if ncap < 65536:
        ncap = 65536
    nb = <char *>realloc(t.out, ncap)
    if nb == NULL:
        return -1
    t.out = nb
    t.out_cap = ncap
    return 0


# thread: io · lock: none · gil: any
cdef int _tls_take_c(TlsCore *t) noexcept nogil:
    """Move what the SSL object wrote into its outgoing BIO to ``out``: 0, or -1 (no memory)."""
    cdef size_t n = p_BIO_ctrl_pending(t.wbio)
    cdef int r
    while n > 0:
        if n > 0x40000000:
            n = 0x40000000
        if _tls_reserve_c(t, <Py_ssize_t>n) < 0:
            return -1
        r = p_BIO_read(t.wbio, t.out + t.out_len, <int>n)
        if r <= 0:
            break
        t.out_len += r
        n = p_BIO_ctrl_pending(t.wbio)
    return 0


# thread: io · lock: none · gil: any
cdef int _tls_write_c(TlsCore *t, const char *buf, Py_ssize_t n) noexcept nogil:
    """SSL_write all of ``buf``: 0, or the SSL_get_error code (its OpenSSL error code kept in
    ``t.failed_err``, this thread's error queue emptied)."""
    cdef size_t done
    cdef int rc, code
    cdef unsigned long e
    while n > 0:
        p_ERR_clear_error()
        rc = p_SSL_write_ex(t.ssl, <void *>buf, <size_t>n, &done)
        if rc != 1:
            # A memory BIO takes everything: WANT_WRITE cannot happen; anything else is fatal.
            code = p_SSL_get_error(t.ssl, rc)
            e = p_ERR_get_error()
            while e != 0:
                t.failed_err = e
                e = p_ERR_get_error()
            return code if code > 0 else SSL_ERROR_SSL
        buf += done
        n -= done
    return 0


# thread: io · lock: none · gil: any
cdef Py_ssize_t _tls_flush_c(TlsCore *t, int fd) noexcept nogil:
    """Write pending ciphertext to the non-blocking ``fd``: 1 when all of it is written, 0 when
    the socket takes no more now, -errno, RD_NO_MEMORY."""
    cdef ssize_t r
    if _tls_take_c(t) < 0:
        return RD_NO_MEMORY
    while t.out_off < t.out_len:
        r = c_write(fd, t.out + t.out_off, t.out_len - t.out_off)
        if r < 0:
            if errno == EINTR:
                continue
            if errno == EAGAIN:
                return 0
            return -errno
        t.out_off += r
    t.out_off = t.out_len = 0
    return 1


# thread: io · lock: none · gil: any
cdef bint tls_out_pending_c(TlsCore *t) noexcept nogil:
    return t.out_off < t.out_len or p_BIO_ctrl_pending(t.wbio) > 0


# thread: io · lock: none · gil: any
cdef Py_ssize_t tls_write_c(TlsCore *t, SendQueueCore *q, int fd) noexcept nogil:
    cdef Py_ssize_t k, off, seg, r, staged = 0, total = 0
    cdef Py_buffer *pb
    cdef int code
    if t.failed:
        return TLS_FAILED
    k = q.head
    while k < q.tail:
        pb = &q.bufs[k]
        off = q.head_off if k == q.head else 0
        seg = pb.len - off
        if seg >= TLS_DIRECT or staged + seg > TLS_STAGE:
            if staged:
                code = _tls_write_c(t, t.stage, staged)
                if code:
                    t.failed = code
                    return TLS_FAILED
                sq_consume_c(q, staged)
                total += staged
                staged = 0
        if seg >= TLS_DIRECT:
            code = _tls_write_c(t, <char *>pb.buf + off, seg)
            if code:
                t.failed = code
                return TLS_FAILED
            sq_consume_c(q, seg)
            total += seg
        else:
            memcpy(t.stage + staged, <char *>pb.buf + off, seg)
            staged += seg
        k += 1
    if staged:
        code = _tls_write_c(t, t.stage, staged)
        if code:
            t.failed = code
            return TLS_FAILED
        sq_consume_c(q, staged)
        total += staged
    r = _tls_flush_c(t, fd)
    if r < 0:
        return r
    return total


# thread: io · lock: none · gil: any
cdef Py_ssize_t tls_fill_c(TlsCore *t, ReaderCore *rd, int fd) noexcept nogil:
    cdef ssize_t r
    cdef size_t n
    cdef int rc, code
    cdef unsigned long e
    if t.failed or t.closed:
        return TLS_FAILED
    while True:
        r = c_read(fd, t.rbuf, TLS_READ)
        if r < 0:
            if errno == EINTR:
                continue
            if errno == EAGAIN:
                break
            return -errno
        if r == 0:
            return RD_EOF
        t.bytes_in += r
        if p_BIO_write(t.rbio, t.rbuf, <int>r) != r:
            return RD_NO_MEMORY
        while True:
            if rd_reserve_c(rd, 16384) < 0:
                return RD_NO_MEMORY
            p_ERR_clear_error()
            rc = p_SSL_read_ex(t.ssl, rd.buf + rd.end, <size_t>(rd.cap - rd.end), &n)
            if rc == 1:
                rd.end += n
                rd.bytes_read += n
                continue
            code = p_SSL_get_error(t.ssl, rc)
            if code == SSL_ERROR_WANT_READ:
                break
            if code == SSL_ERROR_WANT_WRITE:
                return TLS_HAND_BACK       # the GIL turn's SSL_read decides (as before)
            # close_notify (SSL_ERROR_ZERO_RETURN) or a failure (a record that does not decrypt:
            # SSL_ERROR_SSL, or SSL_ERROR_SYSCALL): kept for the GIL turn, which reports it typed
            e = p_ERR_get_error()
            while e != 0:
                t.failed_err = e
                e = p_ERR_get_error()
            if code == SSL_ERROR_ZERO_RETURN:
                t.closed = True
            else:
                t.failed = code
            return TLS_FAILED
        if r < TLS_READ:
            break
    if p_BIO_ctrl_pending(t.wbio) > 0:
        # SSL_read made records to send back (a TLS 1.3 KeyUpdate's answer, a renegotiation): the
        # GIL turn writes them (TlsPipe.read flushes them), as it did before
        return TLS_HAND_BACK
    return 0


@cython.final
cdef class TlsPipe:
    """The data phase of one TLS connection, after the handshake: encrypts a ``SendQueue`` into
    ciphertext written to the socket, and decrypts what the socket delivers into a
    ``FrameReader``. Its methods hold the GIL throughout (see the notes above); its C core
    (``c``) is also driven by the GIL-free turn, which owns it while the GIL turn waits."""


    def __cinit__(self):
        memset(&self.c, 0, sizeof(TlsCore))

    def __dealloc__(self):
        free(self.c.out)
        free(self.c.stage)
        free(self.c.rbuf)

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
        pipe.c.ssl = ssl
        pipe.c.wbio = p_SSL_get_wbio(ssl)
        pipe.c.rbio = p_SSL_get_rbio(ssl)
        pipe._keep = sslobj
        pipe.c.stage = <char *>malloc(TLS_STAGE)
        pipe.c.rbuf = <char *>malloc(TLS_READ)
        if pipe.c.stage == NULL or pipe.c.rbuf == NULL:
            raise MemoryError()
        return pipe

    @property
    def bytes_in(self):
        """Ciphertext bytes read from the socket (both turns)."""
        return self.c.bytes_in

    @property
    def wants_write(self):
        """True while ciphertext waits for the socket."""
        return tls_out_pending_c(&self.c)

    cdef int _out_reserve(self, Py_ssize_t more) except -1:
        if _tls_reserve_c(&self.c, more) < 0:
            raise MemoryError()
        return 0

    def put_ciphertext(self, data):
        """Queue ciphertext taken out of the SSL object before this pipe existed (it goes first)."""
        cdef Py_buffer pb
        PyObject_GetBuffer(data, &pb, PyBUF_SIMPLE)
        try:
            self._out_reserve(pb.len)
            memcpy(self.c.out + self.c.out_len, pb.buf, pb.len)
            self.c.out_len += pb.len
        finally:
            PyBuffer_Release(&pb)

    cdef int _take_ciphertext(self) except -1:
        """Move what the SSL object wrote into its outgoing BIO to the pipe's ciphertext."""
        if _tls_take_c(&self.c) < 0:
            raise MemoryError()
        return 0

    cdef int _raise_failed(self) except -1:
        """Raise, typed, the failure a turn without the GIL met and kept (nothing when none)."""
        cdef int code = self.c.failed
        if code:
            raise _tls_error(code, self.c.failed_err)
        return 0

    cdef int _ssl_write(self, const char *buf, Py_ssize_t n) except -1:
        cdef int code
        self._raise_failed()
        self.c.failed_err = 0
        code = _tls_write_c(&self.c, buf, n)
        if code:
            self.c.failed = code
            self._raise_failed()
        return 0

    def flush(self, int fd):
        """Write pending ciphertext to the non-blocking ``fd``; True when all of it is written."""
        cdef Py_ssize_t r = _tls_flush_c(&self.c, fd)
        if r == RD_NO_MEMORY:
            raise MemoryError()
        if r < 0:
            raise OSError(-r, "write failed")
        return r == 1

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
                    self._ssl_write(self.c.stage, staged)
                    staged = 0
                self._ssl_write(<char *>pb.buf + off, seg)
            else:
                if staged + seg > TLS_STAGE:
                    self._ssl_write(self.c.stage, staged)
                    staged = 0
                memcpy(self.c.stage + staged, <char *>pb.buf + off, seg)
                staged += seg
            total += seg
            k += 1
        if staged:
            self._ssl_write(self.c.stage, staged)
        self._take_ciphertext()
        return q._advance(total)

    def read(self, int fd, reader):
        """Read what the non-blocking ``fd`` has, decrypt it and frame the plaintext with
        ``reader`` (a FrameReader; anything with ``feed(bytes)`` works too). Returns
        (frames, eof); raises OSError, ssl.SSLError, CorruptFrameError. Frames the GIL-free turn
        decrypted into the reader and left come first; a failure it met is raised here."""
        cdef ssize_t r
        cdef bint eof = False
        cdef FrameReader fr = reader if type(reader) is FrameReader else None
        frames = []
        self._raise_failed()
        if self.c.closed:                     # close_notify, seen by the GIL-free turn
            eof = True
        while not eof:
            r = c_read(fd, self.c.rbuf, TLS_READ)
            if r < 0:
                if errno == EINTR:
                    continue
                if errno == EAGAIN:
                    break
                raise OSError(errno, "read failed")
            if r == 0:
                eof = True
                break
            self.c.bytes_in += r
            if p_BIO_write(self.c.rbio, self.c.rbuf, <int>r) != r:
                raise MemoryError()
            if self._decrypt(fr, reader, frames):
                eof = True
                break
            if r < TLS_READ:
                break
        if fr is not None:
            frames.extend(fr._extract())
        if p_BIO_ctrl_pending(self.c.wbio) > 0:   # TLS 1.3 post-handshake answers (key update)
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
                rc = p_SSL_read_ex(self.c.ssl, fr.c.buf + fr.c.end, <size_t>(fr.c.cap - fr.c.end), &n)
                if rc == 1:
                    fr.c.end += n
                    fr.c.bytes_read += n
                    continue
            else:
                rc = p_SSL_read_ex(self.c.ssl, tmp, sizeof(tmp), &n)
                if rc == 1:
                    frames.extend(reader.feed(PyBytes_FromStringAndSize(tmp, n)))
                    continue
            code = p_SSL_get_error(self.c.ssl, rc)
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
