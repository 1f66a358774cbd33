# produce_codec_encode.pxi: the Produce request encoder: encode_produce_c (without the GIL) and
# ProduceCodec.encode's _encode, which groups a body's parts by topic and frames the segments.
# Included by produce_codec.pyx (one compiled unit: the byte writers stay inline in the encoder);
# the contract is in produce_codec.pxd, the explanation in docs/internals.md
# ("The Produce codec").

# ======================================================================================= encoding
# encode_produce_c writes a request without the GIL as segments: the bytes that are not a batch's
# ("glue") into a caller's buffer, each batch's bytes by reference. ProduceCodec.encode (_encode)
# goes through it too: it groups its parts by topic into a ProducePart array, has the request
# encoded, and turns the segments into the frame of buffers (glue as bytes, batches as they came).

# thread: any · lock: none · gil: any
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


# thread: any · lock: none · gil: any
cdef inline void _o_raw(_Out *o, const char *p, Py_ssize_t n) noexcept nogil:
    if n > 0 and o.len + n <= o.cap:
        memcpy(o.glue + o.len, p, <size_t>n)
    o.len += n


# thread: any · lock: none · gil: any
cdef inline void _o_u8(_Out *o, uint8_t v) noexcept nogil:
    if o.len < o.cap:
        o.glue[o.len] = <char>v
    o.len += 1


# thread: any · lock: none · gil: any
cdef inline void _o_i16(_Out *o, int16_t v) noexcept nogil:
    cdef uint16_t u = <uint16_t>v
    if o.len + 2 <= o.cap:
        o.glue[o.len] = <char>(u >> 8)
        o.glue[o.len + 1] = <char>u
    o.len += 2


# thread: any · lock: none · gil: any
cdef inline void _o_i32(_Out *o, int32_t v) noexcept nogil:
    if o.len + 4 <= o.cap:
        _store_i32(<unsigned char *>o.glue + o.len, v)
    o.len += 4


# thread: any · lock: none · gil: any
cdef inline void _o_uvarint(_Out *o, uint64_t v) noexcept nogil:
    while v >= 0x80:
        _o_u8(o, <uint8_t>((v & 0x7F) | 0x80))
        v >>= 7
    _o_u8(o, <uint8_t>v)


# thread: any · lock: none · gil: any
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


# thread: any · lock: none · gil: any
cdef inline void _o_count(_Out *o, Py_ssize_t n, bint compact) noexcept nogil:
    if compact:
        _o_uvarint(o, <uint64_t>n + 1)
    else:
        _o_i32(o, <int32_t>n)


# thread: any · lock: none · gil: any
cdef inline void _o_seg(_Out *o, const char *p, Py_ssize_t n) noexcept nogil:
    if o.nsegs < o.scap:
        o.segs[o.nsegs].p = p
        o.segs[o.nsegs].n = n
    o.nsegs += 1


# thread: any · lock: none · gil: any
cdef inline void _o_flush(_Out *o) noexcept nogil:
    # the glue written since the last segment, as one segment
    if o.len > o.run:
        _o_seg(o, o.glue + o.run if o.len <= o.cap else NULL, o.len - o.run)
        o.run = o.len


# thread: any · lock: none · gil: any
cdef inline void _o_ref(_Out *o, const char *p, Py_ssize_t n) noexcept nogil:
    # n bytes at p by reference, after the glue before them
    if n > 0:
        _o_flush(o)
        _o_seg(o, p, n)
        o.ext += n


# thread: any · lock: none · gil: any
cdef inline bint _same_topic(const ProducePart *a, const ProducePart *b) noexcept nogil:
    return a.topic_len == b.topic_len and (
        a.topic == b.topic or memcmp(a.topic, b.topic, <size_t>a.topic_len) == 0)


# thread: any · lock: none · gil: any
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
