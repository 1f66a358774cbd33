# produce_codec_decode.pxi: the Produce response decoder: parse_produce_response_c (one pass
# without the GIL), produce_answer_error, and decode_frame's objects built from the pass.
# Included by produce_codec.pyx (one compiled unit: the field readers stay inline in the parser);
# the contract is in produce_codec.pxd, the explanation in docs/internals.md
# ("The Produce codec").

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


# thread: any · lock: none · gil: any
cdef inline int _fail(_Reader *r, int kind, const char *field, Py_ssize_t at) noexcept nogil:
    r.info.error = kind
    r.info.err_field = field
    r.info.err_at = at
    return -1


# thread: any · lock: none · gil: any
cdef inline int _need(_Reader *r, Py_ssize_t n) noexcept nogil:
    if n > r.end - r.pos:
        r.info.err_size = <uint64_t>n
        r.info.err_left = r.end - r.pos
        return _fail(r, PRODUCE_ANSWER_NEED, NULL, r.pos)
    return 0


# thread: any · lock: none · gil: any
cdef inline int _i16(_Reader *r, int16_t *v) noexcept nogil:
    cdef const unsigned char *p
    if _need(r, 2) < 0:
        return -1
    p = r.p + r.pos
    r.pos += 2
    v[0] = <int16_t>((<uint16_t>p[0] << 8) | p[1])
    return 0


# thread: any · lock: none · gil: any
cdef inline int _i32(_Reader *r, int32_t *v) noexcept nogil:
    cdef const unsigned char *p
    if _need(r, 4) < 0:
        return -1
    p = r.p + r.pos
    r.pos += 4
    v[0] = <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3])
    return 0


# thread: any · lock: none · gil: any
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


# thread: any · lock: none · gil: any
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


# thread: any · lock: none · gil: any
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


# thread: any · lock: none · gil: any
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


# thread: any · lock: none · gil: any
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


# thread: any · lock: none · gil: any
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


# thread: any · lock: none · gil: any
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


# thread: any · lock: none · gil: any
cdef inline int _sized(_Reader *r, Py_ssize_t start, Py_ssize_t end, const char *what) noexcept nogil:
    """A known tagged field must fill its declared size exactly."""
    if r.pos != end:
        r.info.err_size = <uint64_t>(end - start)
        r.info.err_used = r.pos - start
        return _fail(r, PRODUCE_ANSWER_TAG_USED, what, r.pos)
    return 0


# thread: any · lock: none · gil: any
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


# thread: any · lock: none · gil: any
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


# thread: any · lock: none · gil: any
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


# thread: any · lock: none · gil: any
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


# thread: any · lock: none · gil: any
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


# thread: any · lock: none · gil: any
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
