# cython: language_level=3
"""Socket-level framing for one connection: ``SendQueue`` (gathered ``writev`` writes, taken up where
a partial write stopped; ``transport_sendqueue.pxi``), ``FrameReader`` (size-prefixed frames,
``CorruptFrameError`` for a bad size before anything is allocated; ``transport_reader.pxi``) and
``TlsPipe`` (a TLS connection's data phase; ``transport_tls.pxi``), on non-blocking sockets only.

Contract: ``transport.pxd`` (the C cores the I/O thread also uses without the GIL). How and why:
docs/internals.md#transport.
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


include "transport_sendqueue.pxi"
include "transport_reader.pxi"
include "transport_tls.pxi"
