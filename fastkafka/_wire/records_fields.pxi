# records_fields.pxi: a record's fields: headers validated and encoded, key and value read as
# buffers (get_view), and the buffer views the builder exports.
# Included by records.pyx (one compiled unit with the builder, which calls these inline); the
# contract is in records.pxd, the explanation in docs/internals.md ("Record batches").

# ---- headers ------------------------------------------------------------

cdef list _prepare_headers(object headers, Py_ssize_t *size_out):
    """Validate headers (a list or tuple of (key, value) pairs, or a dict: its items in its order);
    return [(key bytes, value bytes or None), ...] and the encoded size of the headers section
    (count varint included). A str key or value is taken as its UTF-8 (UnicodeEncodeError, a
    ValueError, for a lone surrogate)."""
    cdef list out
    cdef Py_ssize_t size, i, n
    cdef object item, hk, hv
    if headers is None:
        size_out[0] = 1
        return None
    if isinstance(headers, dict):
        headers = list((<dict>headers).items())
    elif not isinstance(headers, (list, tuple)):
        raise TypeError(
            f"headers must be a list or tuple of (key, value) pairs or a dict, got "
            f"{type(headers).__name__}")
    n = len(headers)
    if n == 0:
        size_out[0] = 1
        return None
    out = []
    size = size_uvarint(zigzag64(n))
    for i in range(n):
        item = headers[i]
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise TypeError(
                f"header {i} must be a (key, value) pair, got {type(item).__name__}")
        hk, hv = item
        if isinstance(hk, str):
            hk = PyUnicode_AsUTF8String(hk)
        elif not PyBytes_Check(hk):
            raise TypeError(
                f"header {i}: key must be str or bytes, got {type(hk).__name__}")
        if hv is not None:
            if isinstance(hv, (bytearray, memoryview)):
                hv = bytes(hv)
            elif isinstance(hv, str):
                hv = PyUnicode_AsUTF8String(hv)
            elif not PyBytes_Check(hv):
                raise TypeError(
                    f"header {i}: value must be bytes, bytearray, memoryview, str or None, "
                    f"got {type(hv).__name__}")
        size += _len_field_size(PyBytes_GET_SIZE(hk))
        size += _len_field_size(-1 if hv is None else PyBytes_GET_SIZE(hv))
        out.append((hk, hv))
    size_out[0] = size
    return out


cdef Py_ssize_t headers_encoded_size(object headers) except -1:
    cdef Py_ssize_t size = 0
    if type(headers) is EncodedHeaders:
        return PyBytes_GET_SIZE((<EncodedHeaders>headers).data)
    _prepare_headers(headers, &size)
    return size


cdef class EncodedHeaders:
    """EncodedHeaders(headers): a record headers section (a list or tuple of (str|bytes,
    bytes-like|str|None) pairs, or a dict of them) encoded once, validated as ``send()`` validates
    headers.

    Accepted wherever headers are (``send``, ``produce``, ``send_batch``): each record then gets
    a copy of the encoded bytes instead of its headers being converted and encoded again (what
    ``send_batch`` does with its one headers list, and what the Spark sink does with its task
    headers)."""

    def __cinit__(self, headers):
        cdef Py_ssize_t size = 0
        cdef list prepared
        if type(headers) is EncodedHeaders:
            self.data = (<EncodedHeaders>headers).data
            return
        prepared = _prepare_headers(headers, &size)
        out = PyBytes_FromStringAndSize(NULL, size)
        _write_headers(PyBytes_AS_STRING(out), prepared)
        self.data = out

    def __len__(self):
        return PyBytes_GET_SIZE(self.data)

    def __repr__(self):
        return f"EncodedHeaders({PyBytes_GET_SIZE(self.data)} bytes)"


cdef Py_ssize_t _write_headers(char *p, list prepared) noexcept:
    cdef Py_ssize_t k
    cdef object hk, hv
    if prepared is None:
        p[0] = 0
        return 1
    k = write_uvarint(p, zigzag64(len(prepared)))
    for hk, hv in prepared:
        k += _write_bytes_field(p + k, PyBytes_AS_STRING(hk), PyBytes_GET_SIZE(hk))
        if hv is None:
            k += write_uvarint(p + k, 1)   # zigzag(-1)
        else:
            k += _write_bytes_field(p + k, PyBytes_AS_STRING(hv), PyBytes_GET_SIZE(hv))
    return k


# ---- key / value extraction ------------------------------------------------

#: What a key or value may be, as error messages say it.
BYTES_LIKE = "bytes-like (bytes, bytearray, memoryview or another C-contiguous buffer)"
#: ... and what else it may be.
OR_STR = "str (sent as UTF-8)"


cdef int get_view(object obj, str name, Py_buffer *view, const char **p,
                  Py_ssize_t *n) except -1:
    """Pointer/length of a bytes-like or str record field (None: NULL, -1); InvalidRecordError
    naming ``name`` for anything else, MalformedRecordError (also a ValueError) for a buffer that
    cannot be had as one C-contiguous block (released memoryview, strided view or array) or a str
    that is not valid Unicode. Any C-contiguous buffer is taken as its raw bytes, whatever its item
    size or number of dimensions; a str as its UTF-8 (str_utf8: no copy, valid while ``obj`` is
    alive, which the caller holds). Returns 1 when ``view`` was filled and must be released."""
    if obj is None:
        p[0] = NULL
        n[0] = -1
        return 0
    if PyBytes_CheckExact(obj):
        p[0] = PyBytes_AS_STRING(obj)
        n[0] = PyBytes_GET_SIZE(obj)
        return 0
    if PyUnicode_Check(obj):
        return str_utf8(obj, name, -1, p, n)
    if not PyObject_CheckBuffer(obj):
        raise InvalidRecordError(
            f"{name} must be {BYTES_LIKE}, {OR_STR} or None, not {type(obj).__name__}")
    try:
        PyObject_GetBuffer(obj, view, PyBUF_SIMPLE)
    except (BufferError, ValueError, TypeError) as e:
        raise unusable_buffer(obj, name, e) from None
    p[0] = <const char *>view.buf
    n[0] = view.len
    return 1


cdef int str_utf8(object s, str name, Py_ssize_t index, const char **p,
                  Py_ssize_t *n) except -1:
    """The UTF-8 of str ``s`` as pointer and length: CPython keeps it in the str once made, so
    there is no copy after the first call and it stays valid while ``s`` is alive. A str that is
    not valid Unicode (a lone surrogate) raises MalformedRecordError naming ``name`` (``name[index]``
    for an index >= 0). Returns 0."""
    try:
        p[0] = PyUnicode_AsUTF8AndSize(s, n)
    except UnicodeEncodeError as e:
        if index >= 0:
            name = f"{name}[{index}]"
        raise MalformedRecordError(
            f"{name}: str cannot be encoded as UTF-8 ({e.reason} at position {e.start}); expected "
            f"{BYTES_LIKE}, str of valid Unicode or None") from None
    return 0


cdef object unusable_buffer(object obj, str name, object exc):
    """The MalformedRecordError for a buffer-protocol object whose buffer cannot be read as one
    block of bytes (``exc`` is what asking for it raised): a released memoryview, a strided or
    Fortran-ordered view or array."""
    if isinstance(obj, memoryview) and isinstance(exc, ValueError):  # a strided one: BufferError
        return MalformedRecordError(f"{name}: the memoryview has been released; expected "
                                    f"{BYTES_LIKE} or None")
    return MalformedRecordError(
        f"{name}: {type(obj).__name__} is not one C-contiguous block of bytes ({exc}); expected "
        f"{BYTES_LIKE} or None: pass a contiguous copy, e.g. bytes(...)")


cdef inline void _fill_view(Py_buffer *view, object owner, char *buf, Py_ssize_t n,
                            int flags):
    """A read-only one-dimensional byte view of ``buf[:n]`` owned by ``owner``."""
    view.buf = buf
    view.obj = owner
    view.len = n
    view.readonly = 1
    view.itemsize = 1
    view.format = _FORMAT_B if (flags & 0x0004) else NULL   # PyBUF_FORMAT
    view.ndim = 1
    view.shape = &view.len if (flags & 0x0008) else NULL  # PyBUF_ND
    view.strides = &view.itemsize if (flags & 0x0010) == 0x0010 else NULL  # PyBUF_STRIDES
    view.suboffsets = NULL
    view.internal = NULL
