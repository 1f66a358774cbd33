# cython: language_level=3
"""Produce requests and responses in C: the codec the sender hands to ``NetworkClient.send``.

Contract: :class:`ProduceCodec` (Produce v3-11, stateless): ``encode(version, correlation_id,
client_id, body)`` with ``body = (transactional_id, acks, timeout_ms, parts)`` and ``parts`` a list
of ``(topic, partition, records)`` returns the frame as a list of buffers, records by reference;
``decode(version, frame)`` returns a :class:`ProduceResult` or raises
:class:`~fastkafka.errors.CorruptFrameError`. The C functions the I/O thread calls without the GIL
(``encode_produce_c``, ``parse_produce_response_c``) are declared in ``produce_codec.pxd``. The
encoder is ``produce_codec_encode.pxi``, the decoder ``produce_codec_decode.pxi``.

How and why: docs/internals.md#the-produce-codec.
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy, memset
from posix.mman cimport MAP_ANONYMOUS, MAP_FAILED, MAP_PRIVATE, PROT_NONE, PROT_READ, PROT_WRITE, mmap, mprotect, munmap
from posix.unistd cimport _SC_PAGESIZE, sysconf

from fastkafka._wire.records cimport BatchView

from fastkafka.errors import CorruptFrameError, UnsupportedVersionError

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size) except NULL

#: Produce versions this codec encodes and decodes (those of fastkafka.protocol.SUPPORTED_VERSIONS).
MIN_VERSION = 3
MAX_VERSION = 11
DEF _MIN_VERSION = 3
DEF _MAX_VERSION = 11
DEF _FIRST_FLEXIBLE = 9
DEF _FIRST_TAGGED_LEADER = 10
DEF _STACK_GLUE = 512
DEF _STACK_SEGS = 32
DEF _STACK_ANSWERS = 16
DEF _UVARINT_SATURATED = 0xFFFFFFFFFFFFFFFF

cdef tuple _EMPTY = ()


cdef int _check_version(int version) except -1:
    if version < _MIN_VERSION or version > _MAX_VERSION:
        raise UnsupportedVersionError(
            f"PRODUCE (0) version {version} is not supported (fastkafka supports "
            f"{_MIN_VERSION}-{_MAX_VERSION})")
    return 0


include "produce_codec_encode.pxi"
include "produce_codec_decode.pxi"


# =================================================================================== public types
@cython.final
@cython.freelist(64)
cdef class PartitionResult:
    """One partition's answer: ``topic``, ``partition``, ``error_code``, ``base_offset``,
    ``log_append_time_ms``, ``log_start_offset`` (-1 before v5), ``error_message`` (v8+),
    ``record_errors`` (v8+: a list of ``(batch_index, message)``, an empty tuple when there are
    none), ``leader_id`` / ``leader_epoch`` (the v10+ tagged current_leader, -1 when absent)."""

    def __repr__(self):
        return (f"PartitionResult({self.topic!r}, {self.partition}, error_code={self.error_code}, "
                f"base_offset={self.base_offset}, log_append_time_ms={self.log_append_time_ms}, "
                f"log_start_offset={self.log_start_offset}, error_message={self.error_message!r}, "
                f"record_errors={self.record_errors!r}, leader=({self.leader_id}, {self.leader_epoch}))")


@cython.final
@cython.freelist(16)
cdef class ProduceResult:
    """A decoded Produce response: ``throttle_time_ms`` (read by the network layer for KIP-219
    throttling), ``partitions`` (the :class:`PartitionResult` objects in frame order),
    ``node_endpoints`` (v10+ tagged field: ``(node_id, host, port, rack)`` tuples) and
    ``correlation_id``."""

    def get(self, tp, default=None):
        """The result for ``tp`` = ``(topic, partition)``, or ``default``. A partition listed twice
        resolves to its last entry. The index is built on the first call, once per response."""
        cdef PartitionResult pr
        cdef dict index = self._index
        if index is None:
            index = {}
            for pr in self.partitions:
                index[(pr.topic, pr.partition)] = pr
            self._index = index
        return index.get(tp, default)

    def __len__(self):
        return len(self.partitions)

    def __repr__(self):
        return (f"ProduceResult(throttle_time_ms={self.throttle_time_ms}, "
                f"partitions={self.partitions!r}, node_endpoints={self.node_endpoints!r})")


@cython.final
cdef class ProduceCodec:
    """The Produce codec for ``NetworkClient.send(..., codec=)``.

    >>> codec = ProduceCodec()
    >>> frame = codec.encode(9, 7, "app", (None, -1, 30000, [("t", 0, b"...batch...")]))
    >>> frame[1]
    b'...batch...'
    """

    def __cinit__(self):
        self.min_version = _MIN_VERSION
        self.max_version = _MAX_VERSION

    def encode(self, int version, int32_t correlation_id, client_id, body):
        """encode(version, correlation_id, client_id, body) -> list of buffers (see the module doc).

        TypeError for a body of the wrong shape or types, ValueError for a value out of range,
        UnsupportedVersionError for a version outside 3-11."""
        _check_version(version)
        return _encode(version, correlation_id, client_id, body)

    def decode(self, int version, frame):
        """decode(version, frame) -> ProduceResult. ``frame`` is the response without its size
        prefix (it starts with the correlation id), any contiguous buffer; read in place.

        CorruptFrameError for a truncated or garbled frame."""
        cdef Py_buffer view
        _check_version(version)
        if PyBytes_CheckExact(frame):
            return _decode(version, <const unsigned char *>PyBytes_AS_STRING(frame),
                           PyBytes_GET_SIZE(frame))
        PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
        try:
            return _decode(version, <const unsigned char *>view.buf, view.len)
        finally:
            PyBuffer_Release(&view)
