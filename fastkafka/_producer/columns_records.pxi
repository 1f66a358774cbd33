# columns_records.pxi: the per-record timestamps and headers of send_batch (timestamps=...,
# record_headers=...): Arrow timestamp/integer arrays and Arrow list<struct<key, value>> arrays
# read from their buffers (list offsets, the struct's children, validity bitmaps), or lists made
# into C arrays once. Included by columns.pyx; the contract is in columns.pxd.

cdef object _INT_ERROR = ("timestamps must be a pyarrow timestamp or integer array, or a list "
                          "(or another iterable) of int (ms since the epoch) or None")


# ---- timestamps -----------------------------------------------------------------------------

cdef int _ts_unit(object t, TsColumn *ts) except -1:
    """The conversion of Arrow type ``t`` to ms in ``ts`` (mul, div)."""
    pa = pyarrow_module()
    ts.mul = 1
    ts.div = 1
    if pa.types.is_timestamp(t):
        unit = t.unit
        if unit == "s":
            ts.mul = 1000
        elif unit == "us":
            ts.div = 1000
        elif unit == "ns":
            ts.div = 1000000
    elif not pa.types.is_date64(t):    # date64: ms; an integer array (cast to int64): ms
        raise InvalidRecordError(f"timestamps: Arrow type {t} is not supported; {_INT_ERROR}")
    return 0


cdef int prepare_timestamps(object col, TsColumn *t, Py_ssize_t n, int64_t default,
                            list keep) except -1:
    cdef Py_ssize_t i, m
    cdef int64_t v
    cdef object bufs, x, arr
    cdef const int64_t[::1] view
    t.vals = NULL
    t.validity = NULL
    t.offset = 0
    t.mul = 1
    t.div = 1
    if is_arrow(col):
        pa = pyarrow_module()
        if isinstance(col, pa.ChunkedArray):
            col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
        if not isinstance(col, pa.Array):
            raise InvalidRecordError(f"timestamps: expected a pyarrow Array, got "
                                     f"{type(col).__name__}")
        if pa.types.is_integer(col.type):
            if col.type != pa.int64():
                try:
                    col = col.cast(pa.int64())
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:   # uint64 past int64
                    raise MalformedRecordError(f"timestamps: not ms since the epoch Kafka can "
                                               f"hold: {e}") from None
        else:
            _ts_unit(col.type, t)
        m = len(col)
        if m != n:
            raise MalformedRecordError(f"timestamps has {m} elements but values has {n}")
        keep.append(col)
        if n == 0:
            return 0
        bufs = col.buffers()
        keep.append(bufs)
        t.offset = col.offset
        t.vals = (<const int64_t *>_addr(bufs[1])) + t.offset
        if bufs[0] is not None and col.null_count > 0:
            t.validity = <const uint8_t *>_addr(bufs[0])
        for i in range(n):
            if t.validity != NULL and not ((t.validity[(t.offset + i) >> 3] >> ((t.offset + i) & 7)) & 1):
                continue
            v = t.vals[i]
            if v < 0 or (t.mul != 1 and v > INT64_MAX // t.mul):
                raise MalformedRecordError(
                    f"timestamps[{i}]: {v} ({col.type}) is not a time Kafka can hold (ms since "
                    f"the epoch, 0 or more); use a null for the producer's current time")
        return 0
    if col is None or isinstance(col, (str, bytes, bytearray, memoryview, dict)):
        raise InvalidRecordError(f"{_INT_ERROR}, not {type(col).__name__}")
    try:
        col = list(col)
    except TypeError:
        raise InvalidRecordError(f"{_INT_ERROR}, not {type(col).__name__}") from None
    if len(col) != n:
        raise MalformedRecordError(f"timestamps has {len(col)} elements but values has {n}")
    arr = array.array("q", bytes(8 * n))
    for i in range(n):
        x = col[i]
        if x is None:
            arr[i] = default
            continue
        if isinstance(x, bool) or not isinstance(x, int):
            raise InvalidRecordError(f"timestamps[{i}] must be an int (ms since the epoch) or None, "
                                     f"not {type(x).__name__}")
        if x < 0 or x > INT64_MAX:
            raise MalformedRecordError(f"timestamps[{i}]: {x} is not a time Kafka can hold (ms since "
                                       f"the epoch, 0 or more); use None for the current time")
        arr[i] = x
    keep.append(arr)
    if n:
        view = arr
        t.vals = &view[0]
    return 0


# ---- headers --------------------------------------------------------------------------------

cdef int _split_section(bytes data, Py_ssize_t *count, Py_ssize_t *skip) except -1:
    """The count and the length of the count varint of an encoded headers section."""
    cdef uint64_t u = 0
    cdef const char *p = PyBytes_AS_STRING(data)
    cdef int k = read_uvarint(p, p + PyBytes_GET_SIZE(data), 5, &u)
    if k <= 0:
        raise RuntimeError("an encoded headers section without its count")
    count[0] = <Py_ssize_t>unzigzag64(u)
    skip[0] = k
    return 0


cdef EncodedHeaders _encode(object headers, str name):
    try:
        return EncodedHeaders(headers)
    except TypeError as e:
        raise InvalidRecordError(f"{name}: {e}") from None
    except (ValueError, BufferError) as e:  # a lone surrogate, a released memoryview
        raise MalformedRecordError(f"{name}: {e}") from None


cdef int _prepare_arrow_headers(object col, HeaderColumn *h, Py_ssize_t n, list keep) except -1:
    cdef Py_ssize_t i, e, a, b, j, k
    cdef object bufs, st, kf, vf, sbufs
    cdef const uint8_t *sval = NULL
    cdef Py_ssize_t soff = 0
    pa = pyarrow_module()
    if isinstance(col, pa.ChunkedArray):
        col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    if not isinstance(col, pa.Array):
        raise InvalidRecordError(f"record_headers: expected a pyarrow Array, got "
                                 f"{type(col).__name__}")
    t = col.type
    want = ("record_headers must be an Arrow list<struct<key: string, value: binary>> (key string "
            "or large_string, value binary, large_binary, string or large_string; list or "
            "large_list)")
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)) or not pa.types.is_struct(t.value_type):
        raise InvalidRecordError(f"{want}, got {t}")
    st_t = t.value_type
    names = [st_t.field(x).name for x in range(st_t.num_fields)]
    if sorted(names) != ["key", "value"]:
        raise InvalidRecordError(f"{want}: its struct has the fields {names}")
    kt = st_t.field("key").type
    vt = st_t.field("value").type
    if not (pa.types.is_string(kt) or pa.types.is_large_string(kt)):
        raise InvalidRecordError(f"{want}: its key is {kt}")
    if not (pa.types.is_binary(vt) or pa.types.is_large_binary(vt) or pa.types.is_string(vt)
            or pa.types.is_large_string(vt) or pa.types.is_null(vt)):
        raise InvalidRecordError(f"{want}: its value is {vt}")
    if len(col) != n:
        raise MalformedRecordError(f"record_headers has {len(col)} elements but values has {n}")
    keep.append(col)
    h.kind = HDR_ARROW
    if n == 0:
        return 0
    bufs = col.buffers()
    keep.append(bufs)
    h.offset = col.offset
    if bufs[0] is not None and col.null_count > 0:
        h.validity = <const uint8_t *>_addr(bufs[0])
    if pa.types.is_list(t):
        h.loff32 = <const int32_t *>_addr(bufs[1])
    else:
        h.loff64 = <const int64_t *>_addr(bufs[1])
    st = col.values                 # the whole child: the list offsets index it
    kf = st.field("key")            # the struct's offset applied
    vf = st.field("value")
    prepare_column(kf, &h.keys, "record_headers key", keep)
    prepare_column(vf, &h.values, "record_headers value", keep)
    if st.null_count > 0:
        sbufs = st.buffers()
        keep.append(sbufs)
        if sbufs[0] is not None:
            sval = <const uint8_t *>_addr(sbufs[0])
            soff = st.offset
    if sval == NULL and h.keys.validity == NULL:
        return 0
    # every record checked before any is appended: no null header, no null key
    for i in range(n):
        j = h.offset + i
        if h.validity != NULL and not ((h.validity[j >> 3] >> (j & 7)) & 1):
            continue
        a = h.loff32[j] if h.loff32 != NULL else h.loff64[j]
        b = h.loff32[j + 1] if h.loff32 != NULL else h.loff64[j + 1]
        for e in range(a, b):
            k = soff + e
            if sval != NULL and not ((sval[k >> 3] >> (k & 7)) & 1):
                raise MalformedRecordError(
                    f"record_headers[{i}]: header {e - a} is null; a header is a (key, value) "
                    f"struct with a string key (drop the entry, or give it a key)")
            k = h.keys.offset + e
            if h.keys.validity != NULL and not ((h.keys.validity[k >> 3] >> (k & 7)) & 1):
                raise MalformedRecordError(
                    f"record_headers[{i}]: header {e - a} has a null key; header keys must be "
                    f"strings (a null value is allowed)")
    return 0


cdef int _prepare_list_headers(object col, HeaderColumn *h, Py_ssize_t n, list keep) except -1:
    cdef Py_ssize_t i, cnt = 0, skip = 0
    cdef object x, offs, counts, data
    cdef EncodedHeaders enc
    cdef const int64_t[::1] oview
    cdef const int64_t[::1] cview
    if col is None or isinstance(col, (str, bytes, bytearray, memoryview, dict)):
        raise InvalidRecordError(
            f"record_headers must be a pyarrow list<struct<key, value>> array or a list of "
            f"per-record headers (None, a list of (key, value) pairs or a dict each), not "
            f"{type(col).__name__}")
    try:
        col = list(col)
    except TypeError:
        raise InvalidRecordError(
            f"record_headers must be a pyarrow list<struct<key, value>> array or a list of "
            f"per-record headers, not {type(col).__name__}") from None
    if len(col) != n:
        raise MalformedRecordError(f"record_headers has {len(col)} elements but values has {n}")
    data = bytearray()
    offs = array.array("q", [0])
    counts = array.array("q")
    for i in range(n):
        x = col[i]
        if x is None:
            counts.append(0)
        else:
            enc = _encode(x, f"record_headers[{i}]")
            _split_section(enc.data, &cnt, &skip)
            counts.append(cnt)
            data += enc.data[skip:]
        offs.append(len(data))
    data = bytes(data)
    keep.append(data)
    keep.append(offs)
    keep.append(counts)
    h.kind = HDR_LIST
    h.ldata = PyBytes_AS_STRING(data)
    oview = offs
    h.loff64 = &oview[0]
    if n:
        cview = counts
        h.lcount = &cview[0]
    return 0


cdef int prepare_headers_column(object col, HeaderColumn *h, Py_ssize_t n, object call_headers,
                                list keep) except -1:
    cdef EncodedHeaders enc
    cdef Py_ssize_t cnt = 0, skip = 0
    h.kind = 0
    h.offset = 0
    h.validity = NULL
    h.loff32 = NULL
    h.loff64 = NULL
    h.keys.kind = COL_NULL
    h.values.kind = COL_NULL
    h.ldata = NULL
    h.lcount = NULL
    h.tail = NULL
    h.tail_len = 0
    h.tail_count = 0
    if call_headers is not None:
        enc = _encode(call_headers, "headers")
        keep.append(enc)
        _split_section(enc.data, &cnt, &skip)
        h.tail_count = cnt
        h.tail = PyBytes_AS_STRING(enc.data) + skip
        h.tail_len = PyBytes_GET_SIZE(enc.data) - skip
    if is_arrow(col):
        return _prepare_arrow_headers(col, h, n, keep)
    return _prepare_list_headers(col, h, n, keep)


# The record's own headers: the range [a, b) of the struct children (HDR_ARROW), or of ldata with
# its count (HDR_LIST).
# thread: app · lock: none · gil: any
cdef inline Py_ssize_t _own(const HeaderColumn *h, Py_ssize_t i, Py_ssize_t *a,
                            Py_ssize_t *b) noexcept nogil:
    cdef Py_ssize_t j
    if h.kind == HDR_LIST:
        a[0] = <Py_ssize_t>h.loff64[i]
        b[0] = <Py_ssize_t>h.loff64[i + 1]
        return <Py_ssize_t>h.lcount[i]
    j = h.offset + i
    if h.validity != NULL and not ((h.validity[j >> 3] >> (j & 7)) & 1):
        a[0] = b[0] = 0
        return 0
    if h.loff32 != NULL:
        a[0] = h.loff32[j]
        b[0] = h.loff32[j + 1]
    else:
        a[0] = <Py_ssize_t>h.loff64[j]
        b[0] = <Py_ssize_t>h.loff64[j + 1]
    return b[0] - a[0]


# thread: app · lock: none · gil: any
cdef Py_ssize_t headers_size(const HeaderColumn *h, Py_ssize_t i) noexcept nogil:
    cdef Py_ssize_t a, b, e, cnt, size, kl, vl
    cdef const char *p
    cnt = _own(h, i, &a, &b)
    if h.kind == HDR_LIST:
        size = b - a
    else:
        size = 0
        for e in range(a, b):
            arrow_get(&h.keys, e, &p, &kl)
            arrow_get(&h.values, e, &p, &vl)
            size += _len_field_size(kl) + _len_field_size(vl)
    return size_uvarint(zigzag64(cnt + h.tail_count)) + size + h.tail_len


# thread: app · lock: none · gil: any
cdef Py_ssize_t headers_write(const HeaderColumn *h, Py_ssize_t i, char *p) noexcept nogil:
    cdef Py_ssize_t a, b, e, cnt, kl, vl
    cdef const char *kp
    cdef const char *vp
    cdef char *q = p
    cnt = _own(h, i, &a, &b)
    q += write_uvarint(q, zigzag64(cnt + h.tail_count))
    if h.kind == HDR_LIST:
        memcpy(q, h.ldata + a, b - a)
        q += b - a
    else:
        for e in range(a, b):
            arrow_get(&h.keys, e, &kp, &kl)
            arrow_get(&h.values, e, &vp, &vl)
            q += write_uvarint(q, zigzag64(kl))
            if kl > 0:                            # never null: prepare_headers_column checked
                memcpy(q, kp, kl)
                q += kl
            q += write_uvarint(q, zigzag64(vl))   # -1 (a null value): zigzag 1, no bytes
            if vl > 0:
                memcpy(q, vp, vl)
                q += vl
    if h.tail_len:
        memcpy(q, h.tail, h.tail_len)
        q += h.tail_len
    return q - p


def read_timestamps(col, Py_ssize_t n, int64_t default=-1):
    """read_timestamps(col, n, default=-1) -> list[int]: the record timestamps (ms) ``send_batch``
    reads from ``timestamps=col`` for ``n`` records, nulls as ``default`` (the checks it does)."""
    cdef TsColumn t
    cdef list keep = []
    prepare_timestamps(col, &t, n, default, keep)
    return [ts_get(&t, i, default) for i in range(n)]


def read_record_headers(col, Py_ssize_t n, headers=None):
    """read_record_headers(col, n, headers=None) -> list[bytes]: each record's encoded headers
    section as ``send_batch`` writes it for ``record_headers=col`` and the call's ``headers``
    (the checks it does)."""
    cdef HeaderColumn h
    cdef list keep = [], out = []
    cdef Py_ssize_t i, size
    cdef bytes b
    prepare_headers_column(col, &h, n, headers, keep)
    for i in range(n):
        size = headers_size(&h, i)
        b = PyBytes_FromStringAndSize(NULL, size)
        if headers_write(&h, i, PyBytes_AS_STRING(b)) != size:
            raise RuntimeError(f"record {i}: headers_write wrote other than headers_size said")
        out.append(b)
    return out
