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

Response: parsed in place from the frame (no copy) by ``parse_produce_response_c`` (see
produce_codec.pxd), one pass in C that the I/O thread can also run without the GIL: one
``ProducePartAnswer`` per partition (numbers, and where the strings and arrays are in the frame) and
a ``ProduceAnswerInfo`` for the frame (the correlation id, the throttle time, whether every partition
is a plain success, where node_endpoints are, or what is wrong with it). :func:`decode_frame` runs
that pass (validating strings as UTF-8 too) and builds a :class:`ProduceResult` from its answers.
Every length and count is checked against the bytes that are left before anything is read or
allocated, so a truncated or garbled frame raises :class:`~fastkafka.errors.CorruptFrameError` (the
network layer then closes the connection) and never reads out of bounds or allocates a size it was
told. Known tagged fields (v10+ ``current_leader`` per partition, ``node_endpoints``) are decoded
and checked the way the generic decoder checks them; unknown tags are skipped; bytes after the body
are ignored.
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


# ======================================================================================= decoding
# parse_produce_response_c reads a frame in one pass without the GIL into C answers (one
# ProducePartAnswer per partition, a ProduceAnswerInfo for the frame); every reader below returns
# 0, or -1 with the fault recorded in the info (what produce_answer_error turns into the message).
# decode_frame runs the same pass validating the strings as UTF-8 too (the faults then come in the
# order of the frame, as they did when the decoder raised as it went), then builds the objects
# from the answers: strings from their recorded positions, record_errors and node_endpoints from
# where the pass found them (already checked).

cdef struct _Reader:
    const unsigned char *p
    Py_ssize_t pos
    Py_ssize_t end          # where the bytes being read end (a tagged field's end inside one)
    int version
    bint utf8               # validate strings as UTF-8
    ProduceAnswerInfo *info


cdef inline int _fail(_Reader *r, int kind, const char *field, Py_ssize_t at) noexcept nogil:
    r.info.error = kind
    r.info.err_field = field
    r.info.err_at = at
    return -1


cdef inline int _need(_Reader *r, Py_ssize_t n) noexcept nogil:
    if n > r.end - r.pos:
        r.info.err_size = <uint64_t>n
        r.info.err_left = r.end - r.pos
        return _fail(r, PRODUCE_ANSWER_NEED, NULL, r.pos)
    return 0


cdef inline int _i16(_Reader *r, int16_t *v) noexcept nogil:
    cdef const unsigned char *p
    if _need(r, 2) < 0:
        return -1
    p = r.p + r.pos
    r.pos += 2
    v[0] = <int16_t>((<uint16_t>p[0] << 8) | p[1])
    return 0


cdef inline int _i32(_Reader *r, int32_t *v) noexcept nogil:
    cdef const unsigned char *p
    if _need(r, 4) < 0:
        return -1
    p = r.p + r.pos
    r.pos += 4
    v[0] = <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3])
    return 0


cdef inline int _i64(_Reader *r, int64_t *v) noexcept nogil:
    cdef const unsigned char *p
    cdef uint64_t u = 0
    cdef int k
    if _need(r, 8) < 0:
        return -1
    p = r.p + r.pos
    r.pos += 8
    for k in range(8):
        u = (u << 8) | p[k]
    v[0] = <int64_t>u
    return 0


cdef int _uvarint(_Reader *r, uint64_t *out) noexcept nogil:
    """An unsigned varint of at most 10 bytes; a value past 64 bits reads as 2**64-1, which every
    length check then refuses (a tag number is only compared)."""
    cdef uint64_t v = 0, b
    cdef int shift = 0
    cdef bint saturated = False
    while True:
        if r.pos >= r.end:
            return _fail(r, PRODUCE_ANSWER_VARINT_END, NULL, r.pos)
        b = r.p[r.pos]
        r.pos += 1
        if shift < 64:
            if shift > 57 and (b & 0x7F) >> (64 - shift):
                saturated = True
            v |= (b & 0x7F) << shift
        elif b & 0x7F:
            saturated = True
        if b < 0x80:
            out[0] = _UVARINT_SATURATED if saturated else v
            return 0
        shift += 7
        if shift > 63:
            return _fail(r, PRODUCE_ANSWER_VARINT_LONG, NULL, r.pos)


cdef bint _utf8_valid(const unsigned char *s, Py_ssize_t n) noexcept nogil:
    """Well-formed UTF-8 (Unicode table 3-7: no overlong form, surrogate or code point past
    U+10FFFF), what Python's strict decoder accepts."""
    cdef Py_ssize_t i = 0
    cdef unsigned char c, c1
    while i < n:
        c = s[i]
        if c < 0x80:
            i += 1
            continue
        if c < 0xC2 or c > 0xF4:
            return False
        if c < 0xE0:
            if i + 1 >= n or (s[i + 1] & 0xC0) != 0x80:
                return False
            i += 2
            continue
        if c < 0xF0:
            if i + 2 >= n:
                return False
            c1 = s[i + 1]
            if c == 0xE0:
                if c1 < 0xA0 or c1 > 0xBF:
                    return False
            elif c == 0xED:
                if c1 < 0x80 or c1 > 0x9F:
                    return False
            elif (c1 & 0xC0) != 0x80:
                return False
            if (s[i + 2] & 0xC0) != 0x80:
                return False
            i += 3
            continue
        if i + 3 >= n:
            return False
        c1 = s[i + 1]
        if c == 0xF0:
            if c1 < 0x90 or c1 > 0xBF:
                return False
        elif c == 0xF4:
            if c1 < 0x80 or c1 > 0x8F:
                return False
        elif (c1 & 0xC0) != 0x80:
            return False
        if (s[i + 2] & 0xC0) != 0x80 or (s[i + 3] & 0xC0) != 0x80:
            return False
        i += 4
    return True


cdef int _string(_Reader *r, bint compact, bint nullable, const char *what,
                 Py_ssize_t *at, Py_ssize_t *n) noexcept nogil:
    """A (compact) (nullable) string: its offset and length (null: -1, -1)."""
    cdef uint64_t u
    cdef int16_t s
    cdef Py_ssize_t ln
    at[0] = -1
    n[0] = -1
    if compact:
        if _uvarint(r, &u) < 0:
            return -1
        if u == 0:
            if not nullable:
                return _fail(r, PRODUCE_ANSWER_NULL_STRING, what, r.pos)
            return 0
        if u - 1 > <uint64_t>(r.end - r.pos):
            r.info.err_size = u - 1
            r.info.err_left = r.end - r.pos
            return _fail(r, PRODUCE_ANSWER_STRING_SIZE, what, r.pos)
        ln = <Py_ssize_t>(u - 1)
    else:
        if _i16(r, &s) < 0:
            return -1
        if s < 0:
            if not nullable or s != -1:
                r.info.err_length = s
                return _fail(r, PRODUCE_ANSWER_BAD_LENGTH, what, r.pos)
            return 0
        ln = s
        if _need(r, ln) < 0:
            return -1
    if r.utf8 and not _utf8_valid(r.p + r.pos, ln):
        r.info.err_length = ln
        return _fail(r, PRODUCE_ANSWER_UTF8, what, r.pos)
    at[0] = r.pos
    n[0] = ln
    r.pos += ln
    return 0


cdef int _count(_Reader *r, bint compact, const char *what, Py_ssize_t *n) noexcept nogil:
    """An array length, refused when the array could not fit in the bytes left (each element
    takes at least one byte): nothing is ever sized by a count the frame claims."""
    cdef uint64_t u
    cdef int32_t v
    if compact:
        if _uvarint(r, &u) < 0:
            return -1
        if u == 0:
            return _fail(r, PRODUCE_ANSWER_NULL_ARRAY, what, r.pos)
        if u - 1 > <uint64_t>(r.end - r.pos):
            r.info.err_size = u - 1
            r.info.err_left = r.end - r.pos
            return _fail(r, PRODUCE_ANSWER_COUNT, what, r.pos)
        n[0] = <Py_ssize_t>(u - 1)
        return 0
    if _i32(r, &v) < 0:
        return -1
    if v < 0:
        r.info.err_length = v
        return _fail(r, PRODUCE_ANSWER_BAD_LENGTH, what, r.pos)
    if v > r.end - r.pos:
        r.info.err_size = <uint64_t>v
        r.info.err_left = r.end - r.pos
        return _fail(r, PRODUCE_ANSWER_COUNT, what, r.pos)
    n[0] = v
    return 0


cdef int _tagged_field(_Reader *r, uint64_t *tag, Py_ssize_t *end) noexcept nogil:
    """One tagged field's tag and size; *end: the offset where it ends (checked)."""
    cdef uint64_t size
    if _uvarint(r, tag) < 0 or _uvarint(r, &size) < 0:
        return -1
    if size > <uint64_t>(r.end - r.pos):
        r.info.err_size = size
        return _fail(r, PRODUCE_ANSWER_TAG_SIZE, NULL, r.pos)
    end[0] = r.pos + <Py_ssize_t>size
    return 0


cdef int _skip_tags(_Reader *r) noexcept nogil:
    cdef uint64_t n, k = 0, tag
    cdef Py_ssize_t end
    if _uvarint(r, &n) < 0:
        return -1
    while k < n:            # every field takes two bytes at least: the loop ends with the frame
        if _tagged_field(r, &tag, &end) < 0:
            return -1
        r.pos = end
        k += 1
    return 0


cdef inline int _sized(_Reader *r, Py_ssize_t start, Py_ssize_t end, const char *what) noexcept nogil:
    """A known tagged field must fill its declared size exactly."""
    if r.pos != end:
        r.info.err_size = <uint64_t>(end - start)
        r.info.err_used = r.pos - start
        return _fail(r, PRODUCE_ANSWER_TAG_USED, what, r.pos)
    return 0


cdef int _partition_tags(_Reader *r, ProducePartAnswer *a) noexcept nogil:
    """Partition tagged fields: tag 0 is current_leader (v10+), read within its size; other tags
    are skipped."""
    cdef uint64_t n, k = 0, tag
    cdef Py_ssize_t start, end, outer_end = r.end
    if _uvarint(r, &n) < 0:
        return -1
    while k < n:
        if _tagged_field(r, &tag, &end) < 0:
            return -1
        if tag == 0 and r.version >= _FIRST_TAGGED_LEADER:
            start = r.pos
            r.end = end
            if _i32(r, &a.leader_id) < 0 or _i32(r, &a.leader_epoch) < 0 or _skip_tags(r) < 0:
                return -1
            r.end = outer_end
            if _sized(r, start, end, "current_leader (tag 0)") < 0:
                return -1
        r.pos = end
        k += 1
    return 0


cdef int _node_endpoints(_Reader *r) noexcept nogil:
    cdef Py_ssize_t n, i, first, at, ln
    cdef int32_t v
    if _count(r, True, "node_endpoints", &n) < 0:
        return -1
    first = r.pos
    for i in range(n):
        if (_i32(r, &v) < 0 or _string(r, True, False, "node_endpoints host", &at, &ln) < 0
                or _i32(r, &v) < 0 or _string(r, True, True, "node_endpoints rack", &at, &ln) < 0
                or _skip_tags(r) < 0):
            return -1
    r.info.node_endpoints_at = first
    r.info.node_endpoints_count = n
    return 0


cdef int _response_tags(_Reader *r) noexcept nogil:
    """Body tagged fields: tag 0 is node_endpoints (v10+), read within its size; other tags are
    skipped."""
    cdef uint64_t n, k = 0, tag
    cdef Py_ssize_t start, end, outer_end = r.end
    if _uvarint(r, &n) < 0:
        return -1
    while k < n:
        if _tagged_field(r, &tag, &end) < 0:
            return -1
        if tag == 0 and r.version >= _FIRST_TAGGED_LEADER:
            start = r.pos
            r.end = end
            if _node_endpoints(r) < 0:
                return -1
            r.end = outer_end
            if _sized(r, start, end, "node_endpoints (tag 0)") < 0:
                return -1
        r.pos = end
        k += 1
    return 0


cdef int _partition(_Reader *r, ProducePartAnswer *a, bint flexible) noexcept nogil:
    cdef Py_ssize_t n, i, at, ln
    cdef int32_t batch_index
    a.partition = 0
    a.error_code = 0
    a.base_offset = 0
    a.log_append_time_ms = 0
    a.log_start_offset = -1
    a.error_message_at = -1
    a.error_message_len = -1
    a.record_errors_at = -1
    a.record_errors_count = 0
    a.leader_id = -1
    a.leader_epoch = -1
    if (_i32(r, &a.partition) < 0 or _i16(r, &a.error_code) < 0 or _i64(r, &a.base_offset) < 0
            or _i64(r, &a.log_append_time_ms) < 0):                    # v2+
        return -1
    if r.version >= 5 and _i64(r, &a.log_start_offset) < 0:
        return -1
    if r.version >= 8:
        if _count(r, flexible, "record_errors", &n) < 0:
            return -1
        a.record_errors_at = r.pos
        a.record_errors_count = n
        for i in range(n):
            if (_i32(r, &batch_index) < 0
                    or _string(r, flexible, True, "batch_index_error_message", &at, &ln) < 0):
                return -1
            if flexible and _skip_tags(r) < 0:
                return -1
        if _string(r, flexible, True, "error_message", &a.error_message_at, &a.error_message_len) < 0:
            return -1
    if flexible and _partition_tags(r, a) < 0:
        return -1
    return 0


cdef Py_ssize_t _parse(int version, const unsigned char *data, Py_ssize_t size,
                       ProducePartAnswer *out, Py_ssize_t out_cap, ProduceAnswerInfo *info,
                       bint utf8) noexcept nogil:
    """parse_produce_response_c, and with ``utf8`` decode_frame's pass (strings validated)."""
    cdef _Reader r
    cdef bint flexible = version >= _FIRST_FLEXIBLE
    cdef Py_ssize_t ntopics, nparts, t, k, count = 0, topic_at, topic_len
    cdef ProducePartAnswer scratch
    cdef ProducePartAnswer *a
    memset(info, 0, sizeof(ProduceAnswerInfo))
    info.all_plain = True
    info.node_endpoints_at = -1
    info.node_endpoints_count = -1
    info.end = -1
    info.err_at = -1
    if version < _MIN_VERSION or version > _MAX_VERSION:
        info.error = PRODUCE_ANSWER_VERSION
        return -1
    if out == NULL or out_cap < 0:
        out_cap = 0
    r.p = data
    r.pos = 0
    r.end = size if data != NULL and size > 0 else 0
    r.version = version
    r.utf8 = utf8
    r.info = info
    if _i32(&r, &info.correlation_id) < 0:
        return -1
    if flexible and _skip_tags(&r) < 0:           # response header v1
        return -1
    if _count(&r, flexible, "responses", &ntopics) < 0:
        return -1
    for t in range(ntopics):
        if _string(&r, flexible, False, "topic name", &topic_at, &topic_len) < 0:
            return -1
        info.ntopics = t + 1
        if _count(&r, flexible, "partition_responses", &nparts) < 0:
            return -1
        for k in range(nparts):
            a = &out[count] if count < out_cap else &scratch
            a.topic = data + topic_at
            a.topic_len = topic_len
            count += 1
            info.nparts = count
            if _partition(&r, a, flexible) < 0:
                return -1
            if (a.error_code != 0 and a.error_code != 46) or a.error_message_at >= 0 or a.record_errors_count:
                info.all_plain = False
        if flexible and _skip_tags(&r) < 0:
            return -1
    if _i32(&r, &info.throttle_time_ms) < 0:
        return -1
    if flexible and _response_tags(&r) < 0:
        return -1
    # Bytes after the body are ignored, as decode_response (and Kafka's own parsers) do.
    info.end = r.pos
    return count


cdef Py_ssize_t parse_produce_response_c(int version, const unsigned char *data, Py_ssize_t size,
                                         ProducePartAnswer *out, Py_ssize_t out_cap,
                                         ProduceAnswerInfo *info) noexcept nogil:
    return _parse(version, data, size, out, out_cap, info, False)


cdef object produce_answer_error(int version, const unsigned char *data, Py_ssize_t size,
                                 const ProduceAnswerInfo *info):
    cdef int kind = info.error
    cdef str field = (<bytes>info.err_field).decode() if info.err_field != NULL else ""
    cdef str what, reason
    if kind == PRODUCE_ANSWER_VERSION:
        return UnsupportedVersionError(
            f"PRODUCE (0) version {version} is not supported (fastkafka supports "
            f"{_MIN_VERSION}-{_MAX_VERSION})")
    if kind == PRODUCE_ANSWER_NEED:
        what = f"needs {info.err_size} bytes at offset {info.err_at}, only {info.err_left} left"
    elif kind == PRODUCE_ANSWER_VARINT_END:
        what = f"unsigned varint runs past the end at offset {info.err_at}"
    elif kind == PRODUCE_ANSWER_VARINT_LONG:
        what = f"unsigned varint longer than 10 bytes at offset {info.err_at}"
    elif kind == PRODUCE_ANSWER_NULL_STRING:
        what = f"null {field}"
    elif kind == PRODUCE_ANSWER_STRING_SIZE:
        what = f"{field} of {info.err_size} bytes at offset {info.err_at}, only {info.err_left} left"
    elif kind == PRODUCE_ANSWER_BAD_LENGTH:
        what = f"invalid {field} length {info.err_length}"
    elif kind == PRODUCE_ANSWER_NULL_ARRAY:
        what = f"{field} is null"
    elif kind == PRODUCE_ANSWER_COUNT:
        what = f"{field} claims {info.err_size} elements but only {info.err_left} bytes remain"
    elif kind == PRODUCE_ANSWER_TAG_SIZE:
        what = f"tagged field of {info.err_size} bytes at offset {info.err_at} runs past the end"
    elif kind == PRODUCE_ANSWER_TAG_USED:
        what = f"tagged field {field} has size {info.err_size} but used {info.err_used}"
    elif kind == PRODUCE_ANSWER_UTF8:
        reason = "invalid UTF-8"
        if (data != NULL and 0 <= info.err_at and 0 <= info.err_length
                and info.err_at + info.err_length <= size):
            try:
                PyUnicode_DecodeUTF8(<const char *>data + info.err_at, info.err_length, NULL)
            except UnicodeDecodeError as e:
                reason = e.reason
        what = f"{field} at offset {info.err_at} is not UTF-8 ({reason})"
    else:
        what = f"unknown fault {kind}"
    return CorruptFrameError(
        f"cannot decode PRODUCE (0) v{version} response ({size} bytes): {what}")


cdef inline str _text(const unsigned char *data, Py_ssize_t at, Py_ssize_t n):
    return PyUnicode_DecodeUTF8(<const char *>data + at, n, NULL)


cdef object _walk_failed(int version, const unsigned char *data, Py_ssize_t size,
                         const ProduceAnswerInfo *info):
    # the pass checked what is walked again: cannot be
    return AssertionError(f"a checked part of a Produce response failed to read again: "
                          f"{produce_answer_error(version, data, size, info)}")


cdef list _record_errors(int version, const unsigned char *data, Py_ssize_t size,
                         const ProducePartAnswer *a):
    cdef _Reader r
    cdef ProduceAnswerInfo info
    cdef bint flexible = version >= _FIRST_FLEXIBLE
    cdef Py_ssize_t i, at, ln
    cdef int32_t batch_index
    cdef list errors = []
    r.p = data
    r.pos = a.record_errors_at
    r.end = size
    r.version = version
    r.utf8 = False
    r.info = &info
    for i in range(a.record_errors_count):
        if (_i32(&r, &batch_index) < 0
                or _string(&r, flexible, True, "batch_index_error_message", &at, &ln) < 0
                or (flexible and _skip_tags(&r) < 0)):
            raise _walk_failed(version, data, size, &info)
        errors.append((batch_index, None if at < 0 else _text(data, at, ln)))
    return errors


cdef list _node_endpoint_list(int version, const unsigned char *data, Py_ssize_t size,
                              const ProduceAnswerInfo *answer):
    cdef _Reader r
    cdef ProduceAnswerInfo info
    cdef Py_ssize_t i, host_at, host_n, rack_at, rack_n
    cdef int32_t node_id, port
    cdef list out = []
    r.p = data
    r.pos = answer.node_endpoints_at
    r.end = size
    r.version = version
    r.utf8 = False
    r.info = &info
    for i in range(answer.node_endpoints_count):
        if (_i32(&r, &node_id) < 0 or _string(&r, True, False, "node_endpoints host", &host_at, &host_n) < 0
                or _i32(&r, &port) < 0
                or _string(&r, True, True, "node_endpoints rack", &rack_at, &rack_n) < 0
                or _skip_tags(&r) < 0):
            raise _walk_failed(version, data, size, &info)
        out.append((node_id, _text(data, host_at, host_n), port,
                    None if rack_at < 0 else _text(data, rack_at, rack_n)))
    return out


cdef ProduceResult _build(int version, const unsigned char *data, Py_ssize_t size,
                          const ProducePartAnswer *out, Py_ssize_t n, const ProduceAnswerInfo *info):
    """The objects for a frame decode_frame's pass accepted (its strings are valid UTF-8)."""
    cdef ProduceResult res = ProduceResult.__new__(ProduceResult)
    cdef PartitionResult pr
    cdef const ProducePartAnswer *a
    cdef const unsigned char *last_topic = NULL
    cdef Py_ssize_t i
    cdef list partitions = []
    cdef str topic = None
    res.correlation_id = info.correlation_id
    res.throttle_time_ms = info.throttle_time_ms
    res.partitions = partitions
    res.node_endpoints = _EMPTY
    for i in range(n):
        a = &out[i]
        if a.topic != last_topic:          # the partitions of one topic entry share its name
            topic = _text(a.topic, 0, a.topic_len)
            last_topic = a.topic
        pr = PartitionResult.__new__(PartitionResult)
        pr.topic = topic
        pr.partition = a.partition
        pr.error_code = a.error_code
        pr.base_offset = a.base_offset
        pr.log_append_time_ms = a.log_append_time_ms
        pr.log_start_offset = a.log_start_offset
        pr.error_message = None if a.error_message_at < 0 else _text(data, a.error_message_at,
                                                                      a.error_message_len)
        pr.record_errors = _record_errors(version, data, size, a) if a.record_errors_count else _EMPTY
        pr.leader_id = a.leader_id
        pr.leader_epoch = a.leader_epoch
        partitions.append(pr)
    if info.node_endpoints_count >= 0:
        res.node_endpoints = _node_endpoint_list(version, data, size, info)
    return res


cdef ProduceResult _decode(int version, const unsigned char *data, Py_ssize_t size):
    """One pass (with the GIL: a Produce answer is small, and taking the GIL back could wait for
    another thread's switch interval), then the objects. A frame of more partitions than the stack
    holds is parsed again into a heap array of the size the first pass counted."""
    cdef ProducePartAnswer stack[_STACK_ANSWERS]
    cdef ProducePartAnswer *out = stack
    cdef ProduceAnswerInfo info
    cdef Py_ssize_t n, again
    n = _parse(version, data, size, out, _STACK_ANSWERS, &info, True)
    if n < 0:
        raise produce_answer_error(version, data, size, &info)
    if n <= _STACK_ANSWERS:
        return _build(version, data, size, out, n, &info)
    out = <ProducePartAnswer *>malloc(n * sizeof(ProducePartAnswer))
    if out == NULL:
        raise MemoryError()
    try:
        again = _parse(version, data, size, out, n, &info, True)
        if again != n:
            raise AssertionError(f"a Produce response parsed twice gave {n} then {again} partitions")
        return _build(version, data, size, out, n, &info)
    finally:
        free(out)


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
