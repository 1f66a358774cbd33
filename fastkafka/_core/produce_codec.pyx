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
small glue ``bytes`` sit between them (empty glue is left out). The bytes are written by
``encode_produce_c`` (see produce_codec.pxd), which the producer's I/O thread also calls without
the GIL: glue into a C buffer, batches as segments referring to them in place.

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
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy

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
DEF _UVARINT_SATURATED = 0xFFFFFFFFFFFFFFFF

cdef tuple _EMPTY = ()


cdef int _check_version(int version) except -1:
    if version < _MIN_VERSION or version > _MAX_VERSION:
        raise UnsupportedVersionError(
            f"PRODUCE (0) version {version} is not supported (fastkafka supports "
            f"{_MIN_VERSION}-{_MAX_VERSION})")
    return 0


# ======================================================================================= encoding
# encode_produce_c writes a request without the GIL as segments: the bytes that are not a batch's
# ("glue") into a caller's buffer, each batch's bytes by reference. ProduceCodec.encode (_encode)
# goes through it too: it groups its parts by topic into a ProducePart array, has the request
# encoded, and turns the segments into the frame of buffers (glue as bytes, batches as they came).

cdef inline void _store_i32(unsigned char *p, int32_t v) noexcept nogil:
    cdef uint32_t u = <uint32_t>v
    p[0] = <uint8_t>(u >> 24)
    p[1] = <uint8_t>(u >> 16)
    p[2] = <uint8_t>(u >> 8)
    p[3] = <uint8_t>u


# Where encode_produce_c writes: every write is counted, and done only while it fits, so that one
# pass tells a caller with too small buffers how much it needs.
cdef struct _Out:
    char *glue
    Py_ssize_t cap
    Py_ssize_t len          # glue bytes of the request so far
    Segment *segs
    Py_ssize_t scap
    Py_ssize_t nsegs        # segments of the request so far
    Py_ssize_t run          # glue offset where the glue not yet in a segment starts
    Py_ssize_t ext          # bytes referenced


cdef inline void _o_raw(_Out *o, const char *p, Py_ssize_t n) noexcept nogil:
    if n > 0 and o.len + n <= o.cap:
        memcpy(o.glue + o.len, p, <size_t>n)
    o.len += n


cdef inline void _o_u8(_Out *o, uint8_t v) noexcept nogil:
    if o.len < o.cap:
        o.glue[o.len] = <char>v
    o.len += 1


cdef inline void _o_i16(_Out *o, int16_t v) noexcept nogil:
    cdef uint16_t u = <uint16_t>v
    if o.len + 2 <= o.cap:
        o.glue[o.len] = <char>(u >> 8)
        o.glue[o.len + 1] = <char>u
    o.len += 2


cdef inline void _o_i32(_Out *o, int32_t v) noexcept nogil:
    if o.len + 4 <= o.cap:
        _store_i32(<unsigned char *>o.glue + o.len, v)
    o.len += 4


cdef inline void _o_uvarint(_Out *o, uint64_t v) noexcept nogil:
    while v >= 0x80:
        _o_u8(o, <uint8_t>((v & 0x7F) | 0x80))
        v >>= 7
    _o_u8(o, <uint8_t>v)


cdef inline void _o_string(_Out *o, const char *p, Py_ssize_t n, bint compact) noexcept nogil:
    # a STRING / NULLABLE_STRING (int16 length; n < 0: null) or its compact form (uvarint n + 1)
    if n < 0:
        if compact:
            _o_u8(o, 0)
        else:
            _o_i16(o, -1)
        return
    if compact:
        _o_uvarint(o, <uint64_t>n + 1)
    else:
        _o_i16(o, <int16_t>n)
    _o_raw(o, p, n)


cdef inline void _o_count(_Out *o, Py_ssize_t n, bint compact) noexcept nogil:
    if compact:
        _o_uvarint(o, <uint64_t>n + 1)
    else:
        _o_i32(o, <int32_t>n)


cdef inline void _o_seg(_Out *o, const char *p, Py_ssize_t n) noexcept nogil:
    if o.nsegs < o.scap:
        o.segs[o.nsegs].p = p
        o.segs[o.nsegs].n = n
    o.nsegs += 1


cdef inline void _o_flush(_Out *o) noexcept nogil:
    # the glue written since the last segment, as one segment
    if o.len > o.run:
        _o_seg(o, o.glue + o.run if o.len <= o.cap else NULL, o.len - o.run)
        o.run = o.len


cdef inline void _o_ref(_Out *o, const char *p, Py_ssize_t n) noexcept nogil:
    # n bytes at p by reference, after the glue before them
    if n > 0:
        _o_flush(o)
        _o_seg(o, p, n)
        o.ext += n


cdef inline bint _same_topic(const ProducePart *a, const ProducePart *b) noexcept nogil:
    return a.topic_len == b.topic_len and (
        a.topic == b.topic or memcmp(a.topic, b.topic, <size_t>a.topic_len) == 0)


cdef Py_ssize_t encode_produce_c(int version, int32_t correlation_id,
                                 const char *client_id, Py_ssize_t client_id_len,
                                 const char *transactional_id, Py_ssize_t tid_len,
                                 int16_t acks, int32_t timeout_ms,
                                 const ProducePart *parts, Py_ssize_t nparts,
                                 char *glue, Py_ssize_t glue_cap,
                                 Segment *segs, Py_ssize_t segs_cap,
                                 Py_ssize_t *nsegs) noexcept nogil:
    cdef bint flexible = version >= _FIRST_FLEXIBLE
    cdef _Out o
    cdef Py_ssize_t i, j, k, ntopics = 0, n
    cdef const ProducePart *pp
    nsegs[0] = 0
    if (version < _MIN_VERSION or version > _MAX_VERSION or nparts < 0
            or (nparts > 0 and parts == NULL) or client_id_len > 32767 or tid_len > 32767):
        return 0
    o.glue = glue
    o.cap = glue_cap if glue != NULL else 0
    o.len = 0
    o.segs = segs
    o.scap = segs_cap if segs != NULL else 0
    o.nsegs = 0
    o.run = 0
    o.ext = 0
    # Header (v1 for 3-8, v2 with tagged fields for 9+): the client id is never compact.
    _o_i32(&o, 0)                  # the size, written at the end
    _o_i16(&o, 0)                  # api key PRODUCE
    _o_i16(&o, <int16_t>version)
    _o_i32(&o, correlation_id)
    _o_string(&o, client_id, client_id_len, False)
    if flexible:
        _o_u8(&o, 0)
    # Body.
    _o_string(&o, transactional_id, tid_len, flexible)
    _o_i16(&o, acks)
    _o_i32(&o, timeout_ms)
    i = 0
    while i < nparts:
        j = i + 1
        while j < nparts and _same_topic(&parts[i], &parts[j]):
            j += 1
        ntopics += 1
        i = j
    _o_count(&o, ntopics, flexible)
    i = 0
    while i < nparts:
        j = i + 1
        while j < nparts and _same_topic(&parts[i], &parts[j]):
            j += 1
        if parts[i].topic_len < 0 or parts[i].topic_len > 32767 or (
                parts[i].topic == NULL and parts[i].topic_len > 0):
            return 0
        _o_string(&o, parts[i].topic, parts[i].topic_len, flexible)
        _o_count(&o, j - i, flexible)
        for k in range(i, j):
            pp = &parts[k]
            _o_i32(&o, pp.partition)
            if pp.records_len < 0:                   # null records (NULLABLE_BYTES)
                if flexible:
                    _o_u8(&o, 0)
                else:
                    _o_i32(&o, -1)
            else:
                n = pp.records_len
                if pp.records2 != NULL:
                    if pp.records2_len < 0 or pp.records2_len > 2147483647:
                        return 0
                    n += pp.records2_len
                if n > 2147483647 or (pp.records == NULL and pp.records_len > 0):
                    return 0
                if flexible:
                    _o_uvarint(&o, <uint64_t>n + 1)
                else:
                    _o_i32(&o, <int32_t>n)
                _o_ref(&o, pp.records, pp.records_len)
                if pp.records2 != NULL:
                    _o_ref(&o, pp.records2, pp.records2_len)
            if flexible:
                _o_u8(&o, 0)       # partition tagged fields
        if flexible:
            _o_u8(&o, 0)           # topic tagged fields
        i = j
    if flexible:
        _o_u8(&o, 0)               # body tagged fields
    _o_flush(&o)
    if o.len + o.ext - 4 > 2147483647:
        return 0
    nsegs[0] = o.nsegs
    if o.len > o.cap or o.nsegs > o.scap:
        return -o.len
    _store_i32(<unsigned char *>glue, <int32_t>(o.len + o.ext - 4))
    return o.len


cdef object _utf8(object s, str what, const char **p, Py_ssize_t *n):
    """A string field's UTF-8 bytes (``p``/``n``; None: NULL, -1) and the object holding them,
    to keep while they are used: a str (its UTF-8 cached in it), bytes (of bytes or bytearray)."""
    cdef bytes raw
    if s is None:
        p[0] = NULL
        n[0] = -1
        return None
    if type(s) is str:
        p[0] = PyUnicode_AsUTF8AndSize(s, n)   # cached in the str: no copy for the next request
    elif isinstance(s, (bytes, bytearray)):
        raw = bytes(s)
        s = raw
        p[0] = PyBytes_AS_STRING(raw)
        n[0] = PyBytes_GET_SIZE(raw)
    else:
        raise TypeError(f"{what} must be a str, not {type(s).__name__}")
    if n[0] > 32767:
        raise ValueError(f"{what} is {n[0]} bytes long; a Kafka string holds at most 32767")
    return s


cdef Py_ssize_t _piece(object b, const char **p) except -1:
    """Size and address of a records buffer. The address is what its segment refers to; _encode
    puts the object itself in the frame in its place and never reads through it."""
    cdef Py_buffer view
    cdef Py_ssize_t n
    if PyBytes_CheckExact(b):
        p[0] = PyBytes_AS_STRING(b)
        return PyBytes_GET_SIZE(b)
    try:
        PyObject_GetBuffer(b, &view, PyBUF_SIMPLE)
    except (TypeError, BufferError) as e:
        raise TypeError(f"records must be a contiguous buffer, a list of buffers or None, "
                        f"not {type(b).__name__} ({e})") from None
    p[0] = <const char *>view.buf
    n = view.len
    PyBuffer_Release(&view)
    return n


cdef int _check_records_len(Py_ssize_t n) except -1:
    if n > 2147483647:
        raise ValueError(f"records of {n} bytes do not fit a Produce request")
    return 0


cdef Py_ssize_t _records_part(ProducePart *pp, object records, list ext) except -1:
    """Fill in ``pp``'s records from a part's ``records`` and append to ``ext`` what goes in the
    frame for each segment of them: the buffer, or for a list of more than two non-empty buffers
    (one segment of their total size) a tuple of them. Returns the bytes referenced."""
    cdef Py_ssize_t n = 0, k, i, sz, cnt = 0, first = 0, second = 0
    cdef const char *p
    cdef object o
    pp.records = NULL
    pp.records_len = 0
    pp.records2 = NULL
    pp.records2_len = 0
    if records is None:
        pp.records_len = -1
        return 0
    if type(records) is BatchView:
        # a batch whose compressed records are apart from its header: both by reference
        records = (<BatchView>records).pieces_c()
    if type(records) is list or type(records) is tuple:
        k = len(records)
        for i in range(k):
            o = records[i]
            sz = _piece(o, &p)
            if sz == 0:
                continue
            n += sz
            cnt += 1
            if cnt == 1:
                pp.records = p
                pp.records_len = sz
                first = i
            elif cnt == 2:
                pp.records2 = p
                pp.records2_len = sz
                second = i
        _check_records_len(n)
        if cnt >= 1 and cnt <= 2:
            ext.append(records[first])
            if cnt == 2:
                ext.append(records[second])
        elif cnt > 2:
            pp.records_len = n
            pp.records2 = NULL
            pp.records2_len = 0
            ext.append(tuple([o for o in records if _piece(o, &p)]))
        return n
    n = _piece(records, &p)
    _check_records_len(n)
    if n:
        pp.records = p
        pp.records_len = n
        ext.append(records)
    return n


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


cdef list _frame(const char *glue, Py_ssize_t used, const Segment *segs, Py_ssize_t nsegs,
                 list ext):
    """The frame of buffers for encode_produce_c's segments: glue as bytes, each batch segment
    replaced by what ``ext`` holds for it (a buffer, or a tuple of buffers sent one after the
    other: records buffers are never tuples)."""
    cdef list out = []
    cdef Py_ssize_t k, j = 0
    cdef uintptr_t lo = <uintptr_t>glue, hi = <uintptr_t>(glue + used), at
    cdef object e
    for k in range(nsegs):
        at = <uintptr_t>segs[k].p
        if lo <= at < hi:
            out.append(PyBytes_FromStringAndSize(segs[k].p, segs[k].n))
        else:
            e = ext[j]
            j += 1
            if type(e) is tuple:
                out.extend(<tuple>e)
            else:
                out.append(e)
    return out


cdef list _encode(int version, int32_t correlation_id, object client_id, object body):
    cdef char stack_glue[_STACK_GLUE]
    cdef Segment stack_segs[_STACK_SEGS]
    cdef char *glue = stack_glue
    cdef Segment *segs = stack_segs
    cdef ProducePart *pp = NULL
    cdef list ext = []
    cdef list keep = []            # what holds the topics' UTF-8 while they are used
    cdef list parts
    cdef list topics = []          # the distinct topics, in order of first appearance
    cdef dict group_of = None      # topic -> group number, made when a second topic object shows up
    cdef Py_ssize_t n, i, gi, k, ngroups = 0, last_g = -1, topic_bytes = 0, ext_len = 0
    cdef Py_ssize_t glue_cap, segs_cap, used, nsegs = 0
    cdef Py_ssize_t *links = NULL  # next entry of the same topic, then head/tail/count per group
    cdef Py_ssize_t *head = NULL
    cdef Py_ssize_t *tail = NULL
    cdef Py_ssize_t *counts = NULL
    cdef object item, topic, last_topic = None, cid_keep, tid_keep
    cdef const char *cid
    cdef const char *tid
    cdef const char *tp
    cdef Py_ssize_t cid_n, tid_n, tn
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
            pp = <ProducePart *>malloc(n * sizeof(ProducePart))   # read by encode_produce_c
            if pp == NULL:
                raise MemoryError()
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

        cid_keep = _utf8(client_id, "client_id", &cid, &cid_n)
        tid_keep = _utf8(transactional_id, "transactional_id", &tid, &tid_n)
        # The parts in topic order: each topic's partitions one after the other.
        k = 0
        for gi in range(ngroups):
            keep.append(_utf8(topics[gi], "topic", &tp, &tn))
            topic_bytes += tn
            i = head[gi]
            while i >= 0:
                item = <object>PyList_GET_ITEM(parts, i)
                pp[k].topic = tp
                pp[k].topic_len = tn
                pp[k].partition = _as_int32(<object>PyTuple_GET_ITEM(item, 1), "partition")
                ext_len += _records_part(&pp[k], <object>PyTuple_GET_ITEM(item, 2), ext)
                k += 1
                i = links[i]

        glue_cap = produce_glue_bound(n, topic_bytes, cid_n, tid_n)
        segs_cap = produce_segs_bound(n)
        if glue_cap > _STACK_GLUE:
            glue = <char *>malloc(glue_cap)
            if glue == NULL:
                raise MemoryError()
        else:
            glue_cap = _STACK_GLUE
        if segs_cap > _STACK_SEGS:
            segs = <Segment *>malloc(segs_cap * sizeof(Segment))
            if segs == NULL:
                raise MemoryError()
        else:
            segs_cap = _STACK_SEGS
        used = encode_produce_c(version, correlation_id, cid, cid_n, tid, tid_n, acks_v, timeout_v,
                                pp, n, glue, glue_cap, segs, segs_cap, &nsegs)
        if used == 0:
            raise ValueError(f"a Produce request of {ext_len} bytes of records and more does not "
                             f"fit a frame")
        if used < 0:   # the bounds are bounds: cannot be
            raise AssertionError(f"Produce glue bound {glue_cap} < {-used} or segments bound "
                                 f"{segs_cap} < {nsegs}")
        return _frame(glue, used, segs, nsegs, ext)
    finally:
        PyMem_Free(links)
        free(pp)
        if glue != stack_glue:
            free(glue)
        if segs != stack_segs:
            free(segs)


def _encode_segments_for_test(int version, int32_t correlation_id, client_id, transactional_id,
                              int16_t acks, int32_t timeout_ms, list parts, Py_ssize_t glue_cap,
                              Py_ssize_t segs_cap):
    """For tests only: ``encode_produce_c`` called as the GIL-free turn calls it, with buffers of
    ``glue_cap`` bytes and ``segs_cap`` segments. ``client_id`` / ``transactional_id``: bytes or
    None; ``parts``: ``(topic bytes, partition, records, records2)`` with records bytes or None
    (null) and records2 bytes or None (no second piece). Returns a dict: ``result`` and ``nsegs``
    (what the function returned and set), ``segments`` (``(is_glue, bytes)`` each, when it
    succeeded), ``glue_bound`` / ``segs_bound`` (produce_glue_bound / produce_segs_bound)."""
    cdef Py_ssize_t n = len(parts), i, r, nsegs = -7, topic_bytes = 0
    cdef ProducePart *pp = <ProducePart *>malloc((n + 1) * sizeof(ProducePart))
    cdef char *glue = <char *>malloc(glue_cap + 1 if glue_cap > 0 else 1)
    cdef Segment *segs = <Segment *>malloc((segs_cap + 1 if segs_cap > 0 else 1) * sizeof(Segment))
    cdef const char *cid = NULL
    cdef const char *tid = NULL
    cdef Py_ssize_t cid_n = -1, tid_n = -1
    cdef uintptr_t lo, hi, at
    try:
        if pp == NULL or glue == NULL or segs == NULL:
            raise MemoryError()
        if client_id is not None:
            cid = PyBytes_AS_STRING(client_id)
            cid_n = PyBytes_GET_SIZE(client_id)
        if transactional_id is not None:
            tid = PyBytes_AS_STRING(transactional_id)
            tid_n = PyBytes_GET_SIZE(transactional_id)
        for i in range(n):
            topic, partition, records, records2 = parts[i]
            pp[i].topic = PyBytes_AS_STRING(topic)
            pp[i].topic_len = PyBytes_GET_SIZE(topic)
            topic_bytes += pp[i].topic_len
            pp[i].partition = partition
            pp[i].records = NULL if records is None else PyBytes_AS_STRING(records)
            pp[i].records_len = -1 if records is None else PyBytes_GET_SIZE(records)
            pp[i].records2 = NULL if records2 is None else PyBytes_AS_STRING(records2)
            pp[i].records2_len = 0 if records2 is None else PyBytes_GET_SIZE(records2)
        with nogil:
            r = encode_produce_c(version, correlation_id, cid, cid_n, tid, tid_n, acks, timeout_ms,
                                 pp, n, glue, glue_cap, segs, segs_cap, &nsegs)
        out = {"result": r, "nsegs": nsegs, "segments": None,
               "glue_bound": produce_glue_bound(n, topic_bytes, cid_n, tid_n),
               "segs_bound": produce_segs_bound(n)}
        if r > 0:
            lo = <uintptr_t>glue
            hi = <uintptr_t>(glue + r)
            out["segments"] = [
                (lo <= <uintptr_t>segs[i].p < hi, PyBytes_FromStringAndSize(segs[i].p, segs[i].n))
                for i in range(nsegs)]
        return out
    finally:
        free(pp)
        free(glue)
        free(segs)


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
