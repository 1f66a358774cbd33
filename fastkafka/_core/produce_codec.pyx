# cython: language_level=3
"""Produce requests and responses in C: the codec the sender hands to ``NetworkClient.send``.

The generic schema codec (:mod:`fastkafka.protocol`) builds and walks nested dicts, which costs
Python work per request and per partition on the producer's I/O thread. This codec writes the same
bytes from a compact body and reads an answer into small objects, for every Produce version the
client sends (3-11; 9+ are flexible: compact strings and arrays, tagged fields).

Request body: a tuple ``(transactional_id, acks, timeout_ms, parts)`` where ``parts`` is a list of
``(topic, partition, records)``. Partitions are grouped by topic in the order each topic first
appears, as the sender's dict grouping did, so the bytes equal ``protocol.encode_request``'s for the
nested body built from the same parts. ``records`` (a buffer, a list/tuple of buffers, a
``BatchView`` (a compressed batch, sent as its header and payload), or None) goes into the frame by
reference, never copied.

Frame: the convention of :func:`fastkafka.protocol.encode_request`: a list of buffers whose first
element starts with the 4-byte big-endian size; each non-empty records buffer is its own element;
small glue ``bytes`` sit between them (empty glue is left out).

Response: parsed in place from the frame (no copy), into a :class:`ProduceResult`. Every length and
count is checked against the bytes that are left before anything is read or allocated, so a
truncated or garbled frame raises :class:`~fastkafka.errors.CorruptFrameError` (the network layer
then closes the connection) and never reads out of bounds or allocates a size it was told. Known
tagged fields (v10+ ``current_leader`` per partition, ``node_endpoints``) are decoded and checked
the way the generic decoder checks them; unknown tags are skipped; bytes after the body are ignored.
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

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
DEF _UVARINT_SATURATED = 0xFFFFFFFFFFFFFFFF

cdef tuple _EMPTY = ()


cdef int _check_version(int version) except -1:
    if version < _MIN_VERSION or version > _MAX_VERSION:
        raise UnsupportedVersionError(
            f"PRODUCE (0) version {version} is not supported (fastkafka supports "
            f"{_MIN_VERSION}-{_MAX_VERSION})")
    return 0


# ======================================================================================= encoding
# Glue (everything that is not a records buffer) is written into one growing C buffer; each records
# buffer met on the way is remembered with the glue offset where it goes. The frame is assembled
# at the end, when the size prefix is known: glue slices as bytes, records buffers as they are.

cdef struct Glue:
    unsigned char *buf
    Py_ssize_t len
    Py_ssize_t cap
    bint heap
    Py_ssize_t *splits          # glue offset before each external buffer
    Py_ssize_t nsplits
    Py_ssize_t splits_cap
    Py_ssize_t ext_len          # bytes held by reference


cdef int _grow(Glue *g, Py_ssize_t need) except -1:
    cdef Py_ssize_t cap = g.cap * 2
    cdef unsigned char *p
    while cap < g.len + need:
        cap *= 2
    if g.heap:
        p = <unsigned char *>PyMem_Realloc(g.buf, cap)
    else:
        p = <unsigned char *>PyMem_Malloc(cap)
        if p != NULL:
            memcpy(p, g.buf, g.len)
    if p == NULL:
        raise MemoryError()
    g.buf = p
    g.cap = cap
    g.heap = True
    return 0


cdef inline int _reserve(Glue *g, Py_ssize_t n) except -1:
    if g.len + n > g.cap:
        _grow(g, n)
    return 0


cdef inline int _put_u8(Glue *g, uint8_t v) except -1:
    _reserve(g, 1)
    g.buf[g.len] = v
    g.len += 1
    return 0


cdef inline int _put_i16(Glue *g, int16_t v) except -1:
    cdef uint16_t u = <uint16_t>v
    _reserve(g, 2)
    g.buf[g.len] = <uint8_t>(u >> 8)
    g.buf[g.len + 1] = <uint8_t>u
    g.len += 2
    return 0


cdef inline void _store_i32(unsigned char *p, int32_t v) noexcept nogil:
    cdef uint32_t u = <uint32_t>v
    p[0] = <uint8_t>(u >> 24)
    p[1] = <uint8_t>(u >> 16)
    p[2] = <uint8_t>(u >> 8)
    p[3] = <uint8_t>u


cdef inline int _put_i32(Glue *g, int32_t v) except -1:
    _reserve(g, 4)
    _store_i32(g.buf + g.len, v)
    g.len += 4
    return 0


cdef inline int _put_uvarint(Glue *g, uint64_t v) except -1:
    _reserve(g, 10)
    while v >= 0x80:
        g.buf[g.len] = <uint8_t>((v & 0x7F) | 0x80)
        g.len += 1
        v >>= 7
    g.buf[g.len] = <uint8_t>v
    g.len += 1
    return 0


cdef inline int _put_raw(Glue *g, const char *data, Py_ssize_t n) except -1:
    _reserve(g, n)
    memcpy(g.buf + g.len, data, n)
    g.len += n
    return 0


cdef int _put_string(Glue *g, object s, bint compact, bint nullable, str what) except -1:
    """A STRING / NULLABLE_STRING (int16 length) or its compact form (uvarint length + 1)."""
    cdef const char *data
    cdef Py_ssize_t n
    cdef bytes raw
    if s is None:
        if not nullable:
            raise TypeError(f"{what} must be a str, not None")
        if compact:
            return _put_u8(g, 0)
        return _put_i16(g, -1)
    if type(s) is str:
        data = PyUnicode_AsUTF8AndSize(s, &n)   # cached in the str: no copy for the next request
    elif isinstance(s, (bytes, bytearray)):
        raw = bytes(s)
        data = PyBytes_AS_STRING(raw)
        n = PyBytes_GET_SIZE(raw)
    else:
        raise TypeError(f"{what} must be a str, not {type(s).__name__}")
    if n > 32767:
        raise ValueError(f"{what} is {n} bytes long; a Kafka string holds at most 32767")
    if compact:
        _put_uvarint(g, <uint64_t>n + 1)
    else:
        _put_i16(g, <int16_t>n)
    return _put_raw(g, data, n)


cdef int _attach(Glue *g, list ext, object buf, Py_ssize_t n) except -1:
    """Remember ``buf`` (``n`` > 0 bytes) as the next external part of the frame, at this offset."""
    cdef Py_ssize_t *p
    cdef Py_ssize_t cap
    if g.nsplits == g.splits_cap:
        cap = g.splits_cap * 2 if g.splits_cap else 16
        p = <Py_ssize_t *>PyMem_Realloc(g.splits, cap * sizeof(Py_ssize_t))
        if p == NULL:
            raise MemoryError()
        g.splits = p
        g.splits_cap = cap
    g.splits[g.nsplits] = g.len
    g.nsplits += 1
    g.ext_len += n
    ext.append(buf)
    return 0


cdef Py_ssize_t _nbytes(object b) except -1:
    cdef Py_buffer view
    if PyBytes_CheckExact(b):
        return PyBytes_GET_SIZE(b)
    try:
        PyObject_GetBuffer(b, &view, PyBUF_SIMPLE)
    except (TypeError, BufferError) as e:
        raise TypeError(f"records must be a contiguous buffer, a list of buffers or None, "
                        f"not {type(b).__name__} ({e})") from None
    n = view.len
    PyBuffer_Release(&view)
    return n


cdef int _put_records(Glue *g, list ext, object records, bint compact) except -1:
    cdef Py_ssize_t n = 0, i, k, sz
    cdef Py_ssize_t small[8]
    cdef Py_ssize_t *sizes
    if records is None:
        if compact:
            return _put_u8(g, 0)
        return _put_i32(g, -1)
    if type(records) is BatchView:
        # a batch whose compressed records are apart from its header: both by reference
        records = (<BatchView>records).pieces_c()
    if type(records) is list or type(records) is tuple:
        k = len(records)
        if k <= 8:
            sizes = &small[0]
        else:
            sizes = <Py_ssize_t *>PyMem_Malloc(k * sizeof(Py_ssize_t))
            if sizes == NULL:
                raise MemoryError()
        try:
            for i in range(k):
                sizes[i] = _nbytes(records[i])
                n += sizes[i]
            _put_records_len(g, n, compact)
            for i in range(k):
                if sizes[i]:
                    _attach(g, ext, records[i], sizes[i])
        finally:
            if sizes != &small[0]:
                PyMem_Free(sizes)
        return 0
    n = _nbytes(records)
    _put_records_len(g, n, compact)
    if n:
        _attach(g, ext, records, n)
    return 0


cdef int _put_records_len(Glue *g, Py_ssize_t n, bint compact) except -1:
    if n > 2147483647:
        raise ValueError(f"records of {n} bytes do not fit a Produce request")
    if compact:
        return _put_uvarint(g, <uint64_t>n + 1)
    return _put_i32(g, <int32_t>n)


cdef int64_t _as_int(object v, str what, int bits) except? -1:
    """``v`` as a signed ``bits``-bit field: TypeError for a non-int, ValueError out of range."""
    cdef int64_t x, lim = (<int64_t>1) << (bits - 1)
    if not isinstance(v, int):
        raise TypeError(f"{what} must be an int, not {type(v).__name__}")
    try:
        x = v
    except OverflowError:
        x = lim                       # beyond int64: out of range below
    if not -lim <= x < lim:
        raise ValueError(f"{what} {v} does not fit in int{bits}")
    return x


cdef inline int32_t _as_int32(object v, str what) except? -1:
    return <int32_t>_as_int(v, what, 32)


cdef inline int16_t _as_int16(object v, str what) except? -1:
    return <int16_t>_as_int(v, what, 16)


cdef list _assemble(Glue *g, list ext):
    """The frame: glue slices and the external buffers, the first slice always present."""
    cdef list out = []
    cdef Py_ssize_t start = 0, off, k
    for k in range(g.nsplits):
        off = g.splits[k]
        if k == 0 or off > start:
            out.append(PyBytes_FromStringAndSize(<char *>g.buf + start, off - start))
        out.append(ext[k])
        start = off
    if g.nsplits == 0 or g.len > start:
        out.append(PyBytes_FromStringAndSize(<char *>g.buf + start, g.len - start))
    return out


cdef list _encode(int version, int32_t correlation_id, object client_id, object body):
    cdef bint flexible = version >= _FIRST_FLEXIBLE
    cdef unsigned char stack[_STACK_GLUE]
    cdef Glue g
    cdef list ext = []
    cdef list parts
    cdef list topics = []          # the distinct topics, in order of first appearance
    cdef dict group_of = None      # topic -> group number, made when a second topic object shows up
    cdef Py_ssize_t n, i, gi, ngroups = 0, last_g = -1, count
    cdef Py_ssize_t *links = NULL  # next entry of the same topic, then head/tail/count per group
    cdef Py_ssize_t *head = NULL
    cdef Py_ssize_t *tail = NULL
    cdef Py_ssize_t *counts = NULL
    cdef object item, topic, last_topic = None
    cdef int64_t total
    cdef int16_t acks_v
    cdef int32_t timeout_v

    if type(body) is not tuple or PyTuple_GET_SIZE(body) != 4:
        raise TypeError("the Produce body must be a tuple (transactional_id, acks, timeout_ms, parts), "
                        f"not {type(body).__name__}")
    transactional_id, acks, timeout_ms, parts_obj = body
    if type(parts_obj) is not list:
        raise TypeError(f"parts must be a list of (topic, partition, records), not {type(parts_obj).__name__}")
    parts = <list>parts_obj
    acks_v = _as_int16(acks, "acks")
    timeout_v = _as_int32(timeout_ms, "timeout_ms")

    g.buf = stack
    g.len = 0
    g.cap = _STACK_GLUE
    g.heap = False
    g.splits = NULL
    g.nsplits = 0
    g.splits_cap = 0
    g.ext_len = 0
    n = PyList_GET_SIZE(parts)
    try:
        # Group the parts by topic: a linked list of entries per topic, in O(n).
        if n:
            links = <Py_ssize_t *>PyMem_Malloc(4 * n * sizeof(Py_ssize_t))
            if links == NULL:
                raise MemoryError()
            head = links + n
            tail = links + 2 * n
            counts = links + 3 * n
        for i in range(n):
            item = <object>PyList_GET_ITEM(parts, i)
            if type(item) is not tuple or PyTuple_GET_SIZE(item) != 3:
                raise TypeError(f"parts[{i}] must be a tuple (topic, partition, records), not {item!r}")
            topic = <object>PyTuple_GET_ITEM(item, 0)
            if topic is not last_topic:
                if type(topic) is not str:
                    raise TypeError(f"parts[{i}]: the topic must be a str, not {type(topic).__name__}")
                if ngroups and group_of is None:
                    group_of = {topics[0]: 0}
                found = group_of.get(topic) if group_of is not None else None
                if found is None:
                    gi = ngroups
                    ngroups += 1
                    topics.append(topic)
                    if group_of is not None:
                        group_of[topic] = gi
                    head[gi] = i
                    tail[gi] = -1
                    counts[gi] = 0
                else:
                    gi = <Py_ssize_t>found
                last_topic = topic
                last_g = gi
            gi = last_g
            if tail[gi] >= 0:
                links[tail[gi]] = i
            tail[gi] = i
            links[i] = -1
            counts[gi] += 1

        # Header (v1 for 3-8, v2 with tagged fields for 9+): the client id is never compact.
        _put_i32(&g, 0)   # the size, filled in at the end
        _put_i16(&g, 0)   # api key PRODUCE
        _put_i16(&g, <int16_t>version)
        _put_i32(&g, correlation_id)
        _put_string(&g, client_id, False, True, "client_id")
        if flexible:
            _put_u8(&g, 0)
        # Body.
        _put_string(&g, transactional_id, flexible, True, "transactional_id")
        _put_i16(&g, acks_v)
        _put_i32(&g, timeout_v)
        if flexible:
            _put_uvarint(&g, <uint64_t>ngroups + 1)
        else:
            _put_i32(&g, <int32_t>ngroups)
        for gi in range(ngroups):
            _put_string(&g, topics[gi], flexible, False, "topic")
            count = counts[gi]
            if flexible:
                _put_uvarint(&g, <uint64_t>count + 1)
            else:
                _put_i32(&g, <int32_t>count)
            i = head[gi]
            while i >= 0:
                item = <object>PyList_GET_ITEM(parts, i)
                _put_i32(&g, _as_int32(<object>PyTuple_GET_ITEM(item, 1), "partition"))
                _put_records(&g, ext, <object>PyTuple_GET_ITEM(item, 2), flexible)
                if flexible:
                    _put_u8(&g, 0)   # partition tagged fields
                i = links[i]
            if flexible:
                _put_u8(&g, 0)       # topic tagged fields
        if flexible:
            _put_u8(&g, 0)           # body tagged fields
        total = <int64_t>g.len + g.ext_len - 4
        if total > 2147483647:
            raise ValueError(f"a Produce request of {total} bytes does not fit a frame")
        _store_i32(g.buf, <int32_t>total)
        return _assemble(&g, ext)
    finally:
        PyMem_Free(links)
        PyMem_Free(g.splits)
        if g.heap:
            PyMem_Free(g.buf)


# ======================================================================================= decoding
cdef struct Reader:
    const unsigned char *p
    Py_ssize_t pos
    Py_ssize_t end
    Py_ssize_t size      # of the whole frame (for messages)
    int version


cdef int _corrupt(Reader *r, str what) except -1:
    raise CorruptFrameError(
        f"cannot decode PRODUCE (0) v{r.version} response ({r.size} bytes): {what}")


cdef inline int _need(Reader *r, Py_ssize_t n) except -1:
    if n > r.end - r.pos:
        _corrupt(r, f"needs {n} bytes at offset {r.pos}, only {r.end - r.pos} left")
    return 0


cdef inline int16_t _i16(Reader *r) except? -1:
    cdef const unsigned char *p
    _need(r, 2)
    p = r.p + r.pos
    r.pos += 2
    return <int16_t>((<uint16_t>p[0] << 8) | p[1])


cdef inline int32_t _i32(Reader *r) except? -1:
    cdef const unsigned char *p
    _need(r, 4)
    p = r.p + r.pos
    r.pos += 4
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3])


cdef inline int64_t _i64(Reader *r) except? -1:
    cdef const unsigned char *p
    cdef uint64_t v = 0
    cdef int k
    _need(r, 8)
    p = r.p + r.pos
    r.pos += 8
    for k in range(8):
        v = (v << 8) | p[k]
    return <int64_t>v


cdef uint64_t _uvarint(Reader *r) except? 0xFFFFFFFFFFFFFFFF:
    """An unsigned varint of at most 10 bytes; a value past 64 bits reads as 2**64-1, which every
    length check then refuses (a tag number is only compared)."""
    cdef uint64_t v = 0, b
    cdef int shift = 0
    cdef bint saturated = False
    while True:
        if r.pos >= r.end:
            _corrupt(r, f"unsigned varint runs past the end at offset {r.pos}")
        b = r.p[r.pos]
        r.pos += 1
        if shift < 64:
            if shift > 57 and (b & 0x7F) >> (64 - shift):
                saturated = True
            v |= (b & 0x7F) << shift
        elif b & 0x7F:
            saturated = True
        if b < 0x80:
            return _UVARINT_SATURATED if saturated else v
        shift += 7
        if shift > 63:
            _corrupt(r, f"unsigned varint longer than 10 bytes at offset {r.pos}")


cdef object _string(Reader *r, bint compact, bint nullable, str what):
    cdef uint64_t u
    cdef Py_ssize_t n, at
    if compact:
        u = _uvarint(r)
        if u == 0:
            if not nullable:
                _corrupt(r, f"null {what}")
            return None
        if u - 1 > <uint64_t>(r.end - r.pos):
            _corrupt(r, f"{what} of {u - 1} bytes at offset {r.pos}, only {r.end - r.pos} left")
        n = <Py_ssize_t>(u - 1)
    else:
        n = _i16(r)
        if n < 0:
            if not nullable or n != -1:
                _corrupt(r, f"invalid {what} length {n}")
            return None
        _need(r, n)
    at = r.pos
    r.pos += n
    try:
        return PyUnicode_DecodeUTF8(<const char *>r.p + at, n, NULL)
    except UnicodeDecodeError as e:
        _corrupt(r, f"{what} at offset {at} is not UTF-8 ({e.reason})")


cdef Py_ssize_t _count(Reader *r, bint compact, str what) except -1:
    """An array length, refused when the array could not fit in the bytes left (each element
    takes at least one byte): nothing is ever sized by a count the frame claims."""
    cdef uint64_t u
    cdef int64_t n
    if compact:
        u = _uvarint(r)
        if u == 0:
            _corrupt(r, f"{what} is null")
        if u - 1 > <uint64_t>(r.end - r.pos):
            _corrupt(r, f"{what} claims {u - 1} elements but only {r.end - r.pos} bytes remain")
        return <Py_ssize_t>(u - 1)
    n = _i32(r)
    if n < 0:
        _corrupt(r, f"invalid {what} length {n}")
    if n > r.end - r.pos:
        _corrupt(r, f"{what} claims {n} elements but only {r.end - r.pos} bytes remain")
    return <Py_ssize_t>n


cdef Py_ssize_t _tagged_field(Reader *r, uint64_t *tag) except -1:
    """Reads one tagged field's tag and size; returns the offset where it ends (checked)."""
    cdef uint64_t size
    tag[0] = _uvarint(r)
    size = _uvarint(r)
    if size > <uint64_t>(r.end - r.pos):
        _corrupt(r, f"tagged field of {size} bytes at offset {r.pos} runs past the end")
    return r.pos + <Py_ssize_t>size


cdef int _skip_tags(Reader *r) except -1:
    cdef uint64_t n, k, tag
    n = _uvarint(r)
    k = 0
    while k < n:            # every field takes two bytes at least: the loop ends with the frame
        r.pos = _tagged_field(r, &tag)
        k += 1
    return 0


cdef int _sized(Reader *r, Py_ssize_t start, Py_ssize_t end, str what) except -1:
    if r.pos != end:
        _corrupt(r, f"tagged field {what} has size {end - start} but used {r.pos - start}")
    return 0


ctypedef int (*tag0_reader)(Reader *r, object target) except -1


cdef int _walk_tags(Reader *r, tag0_reader read_tag0, object target, str what) except -1:
    """A tagged-fields section: tag 0 (v10+) is read by ``read_tag0`` within its declared size
    (checked to fill it exactly); other tags are skipped."""
    cdef uint64_t n, k, tag
    cdef Py_ssize_t start, end, outer_end = r.end
    n = _uvarint(r)
    k = 0
    while k < n:
        end = _tagged_field(r, &tag)
        if tag == 0 and r.version >= _FIRST_TAGGED_LEADER:
            start = r.pos
            r.end = end
            read_tag0(r, target)
            r.end = outer_end
            _sized(r, start, end, what)
        r.pos = end
        k += 1
    return 0


cdef int _current_leader(Reader *r, object target) except -1:
    cdef PartitionResult pr = <PartitionResult>target
    pr.leader_id = _i32(r)
    pr.leader_epoch = _i32(r)
    _skip_tags(r)
    return 0


cdef int _partition_tags(Reader *r, PartitionResult pr) except -1:
    """Partition tagged fields: tag 0 is current_leader (v10+)."""
    return _walk_tags(r, _current_leader, pr, "current_leader (tag 0)")


cdef list _node_endpoints(Reader *r):
    cdef Py_ssize_t n, i
    cdef list out
    n = _count(r, True, "node_endpoints")
    out = []
    for i in range(n):
        node_id = _i32(r)
        host = _string(r, True, False, "node_endpoints host")
        port = _i32(r)
        rack = _string(r, True, True, "node_endpoints rack")
        _skip_tags(r)
        out.append((node_id, host, port, rack))
    return out


cdef int _read_node_endpoints(Reader *r, object target) except -1:
    (<ProduceResult>target).node_endpoints = _node_endpoints(r)
    return 0


cdef int _response_tags(Reader *r, ProduceResult res) except -1:
    """Body tagged fields: tag 0 is node_endpoints (v10+)."""
    return _walk_tags(r, _read_node_endpoints, res, "node_endpoints (tag 0)")


cdef PartitionResult _partition(Reader *r, str topic, bint flexible):
    cdef PartitionResult pr = PartitionResult.__new__(PartitionResult)
    cdef Py_ssize_t n, i
    cdef list errors
    pr.topic = topic
    pr.partition = _i32(r)
    pr.error_code = _i16(r)
    pr.base_offset = _i64(r)
    pr.log_append_time_ms = _i64(r)                      # v2+
    pr.log_start_offset = _i64(r) if r.version >= 5 else -1
    pr.record_errors = _EMPTY
    pr.error_message = None
    pr.leader_id = -1
    pr.leader_epoch = -1
    if r.version >= 8:
        n = _count(r, flexible, "record_errors")
        if n:
            errors = []
            for i in range(n):
                batch_index = _i32(r)
                message = _string(r, flexible, True, "batch_index_error_message")
                if flexible:
                    _skip_tags(r)
                errors.append((batch_index, message))
            pr.record_errors = errors
        pr.error_message = _string(r, flexible, True, "error_message")
    if flexible:
        _partition_tags(r, pr)
    return pr


cdef ProduceResult _decode(int version, const unsigned char *data, Py_ssize_t size):
    cdef Reader r
    cdef ProduceResult res = ProduceResult.__new__(ProduceResult)
    cdef bint flexible = version >= _FIRST_FLEXIBLE
    cdef Py_ssize_t ntopics, nparts, t, k
    cdef list partitions = []
    cdef str topic
    r.p = data
    r.pos = 0
    r.end = size
    r.size = size
    r.version = version
    res.partitions = partitions
    res.node_endpoints = _EMPTY
    res.correlation_id = _i32(&r)
    if flexible:
        _skip_tags(&r)           # response header v1
    ntopics = _count(&r, flexible, "responses")
    for t in range(ntopics):
        topic = _string(&r, flexible, False, "topic name")
        nparts = _count(&r, flexible, "partition_responses")
        for k in range(nparts):
            partitions.append(_partition(&r, topic, flexible))
        if flexible:
            _skip_tags(&r)
    res.throttle_time_ms = _i32(&r)
    if flexible:
        _response_tags(&r, res)
    # Bytes after the body are ignored, as decode_response (and Kafka's own parsers) do.
    return res


cdef ProduceResult decode_frame(int version, const unsigned char *data, Py_ssize_t size):
    _check_version(version)
    return _decode(version, data, size)


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
