"""The generic codec: compiles a (message, version) definition into closures once, then runs them.

Encoding appends to a :class:`Writer`: small fields are packed into one ``bytearray``; a ``records``
value is written as its length prefix followed by the value itself *by reference* (the bytearray so
far is closed off as one part, the record buffers become their own parts, a new bytearray starts).

Decoding works on any buffer (``bytes``, ``memoryview``) with an explicit position. Every decode
closure is ``(buf, pos) -> (value, new_pos)``; struct decoders fill a ``dict``. Runs of fixed-width
fields are packed/unpacked with one precompiled ``struct.Struct``.

Short or garbled input surfaces as ``struct.error``/``IndexError``/``UnicodeDecodeError`` or
:class:`_Corrupt` inside the closures; the public entry points turn all of them into
:class:`fastkafka.errors.CorruptFrameError`.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
import uuid as _uuid

from fastkafka.protocol.schema import Field, MISSING, in_versions

_FIXED = {
    "int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H", "float64": "d", "bool": "?",
}

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_pack_i16 = _I16.pack
_pack_i32 = _I32.pack
_unpack_i16 = _I16.unpack_from
_unpack_i32 = _I32.unpack_from


class _Corrupt(Exception):
    """Raised inside decoders for input that is structurally impossible (caught by the API layer)."""


class Writer:
    """Output of an encoding: ``parts`` (closed buffers) + ``buf`` (the open bytearray)."""

    __slots__ = ("buf", "parts", "ext_len")

    def __init__(self, prefix: bytes = b""):
        self.buf = bytearray(prefix)
        self.parts = []
        self.ext_len = 0  # bytes held by reference (records values)

    def attach(self, data, n: int) -> None:
        """Add an external buffer of ``n`` bytes by reference."""
        if n:
            self.parts.append(self.buf)
            self.parts.append(data)
            self.buf = bytearray()
            self.ext_len += n

    def finish(self) -> list:
        """The parts as a list. ``parts`` alternates glue (our bytearrays, even indexes) and external
        buffers (odd indexes); glue is turned into bytes (only the small glue is copied) and empty glue
        between two external buffers is dropped."""
        out = self.parts
        out.append(self.buf)
        self.buf = None
        return [p if i & 1 else bytes(p) for i, p in enumerate(out) if i == 0 or i & 1 or p]

    def glue_len(self) -> int:
        """Bytes written into glue so far (everything that is not an external buffer)."""
        return sum(len(p) for p in self.parts[::2]) + len(self.buf)


# ------------------------------------------------------------------------------ varints (shared)
def write_uvarint(buf: bytearray, n: int) -> None:
    if n < 0x80:
        buf.append(n)
        return
    if n < 0:
        raise ValueError(f"unsigned varint cannot be negative: {n}")
    while n >= 0x80:
        buf.append((n & 0x7F) | 0x80)
        n >>= 7
    buf.append(n)


def read_uvarint(buf, pos: int):
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise _Corrupt("unsigned varint longer than 10 bytes")



def skip_tagged_fields(buf, pos: int, where: str = "tagged field") -> int:
    """Skip a tagged-field section (count, then tag/size/bytes per field); returns the new pos."""
    n, pos = read_uvarint(buf, pos)
    for _ in range(n):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if pos + size > len(buf):
            raise _Corrupt(f"{where} runs past the end of the frame")
        pos += size
    return pos

def _zigzag_writer(bits):
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def write(buf, v):
        if not lo <= v <= hi:
            raise struct.error(f"varint out of range for int{bits}: {v}")
        write_uvarint(buf, (v << 1) ^ (v >> (bits - 1)) if v < 0 else v << 1)
    return write


def _zigzag_reader(bits):
    def read(buf, pos):
        u, pos = read_uvarint(buf, pos)
        if u >> bits:
            raise _Corrupt(f"varint too large for int{bits}")
        return (u >> 1) ^ -(u & 1), pos
    return read


write_varint = _zigzag_writer(32)
write_varlong = _zigzag_writer(64)
read_varint = _zigzag_reader(32)
read_varlong = _zigzag_reader(64)


def _take(buf, pos, n):
    end = pos + n
    if end > len(buf):
        raise _Corrupt(f"needs {n} bytes at offset {pos}, only {len(buf) - pos} left")
    return buf[pos:end], end


def _nbytes(b) -> int:
    t = type(b)
    if t is bytes or t is bytearray:
        return len(b)
    if t is memoryview:
        return b.nbytes
    return memoryview(b).nbytes


# ------------------------------------------------------------------- primitive value codecs
# Each primitive has: writer(buf: bytearray, value) and reader(buf, pos) -> (value, pos).

def _fixed_codec(code):
    st = struct.Struct(">" + code)
    pack, unpack, size = st.pack, st.unpack_from, st.size

    def write(buf, v):
        buf += pack(v)

    def read(buf, pos):
        return unpack(buf, pos)[0], pos + size
    return write, read


def _write_uuid(buf, v):
    if isinstance(v, _uuid.UUID):
        buf += v.bytes
    else:
        b = bytes(v)
        if len(b) != 16:
            raise ValueError(f"uuid must be 16 bytes, got {len(b)}")
        buf += b


def _read_uuid(buf, pos):
    b, pos = _take(buf, pos, 16)
    return _uuid.UUID(bytes=bytes(b)), pos


def _to_utf8(v):
    if type(v) is str:
        return v.encode("utf-8")
    if isinstance(v, (bytes, bytearray)):
        return v
    raise TypeError(f"expected str, got {type(v).__name__}")


def _string_codec(compact: bool, nullable: bool):
    if compact:
        def write(buf, v):
            if v is None:
                if not nullable:
                    raise TypeError("non-nullable string is None")
                buf.append(0)
                return
            b = _to_utf8(v)
            write_uvarint(buf, len(b) + 1)
            buf += b

        def read(buf, pos):
            n, pos = read_uvarint(buf, pos)
            if n == 0:
                if not nullable:
                    raise _Corrupt("null in a non-nullable string")
                return None, pos
            s, pos = _take(buf, pos, n - 1)
            return str(s, "utf-8"), pos
    else:
        def write(buf, v):
            if v is None:
                if not nullable:
                    raise TypeError("non-nullable string is None")
                buf += b"\xff\xff"
                return
            b = _to_utf8(v)
            buf += _pack_i16(len(b))
            buf += b

        def read(buf, pos):
            n = _unpack_i16(buf, pos)[0]
            pos += 2
            if n < 0:
                if not nullable or n != -1:
                    raise _Corrupt(f"invalid string length {n}")
                return None, pos
            s, pos = _take(buf, pos, n)
            return str(s, "utf-8"), pos
    return write, read


def _bytes_codec(compact: bool, nullable: bool):
    if compact:
        def write(buf, v):
            if v is None:
                if not nullable:
                    raise TypeError("non-nullable bytes is None")
                buf.append(0)
                return
            write_uvarint(buf, _nbytes(v) + 1)
            buf += v

        def read(buf, pos):
            n, pos = read_uvarint(buf, pos)
            if n == 0:
                if not nullable:
                    raise _Corrupt("null in non-nullable bytes")
                return None, pos
            s, pos = _take(buf, pos, n - 1)
            return bytes(s), pos
    else:
        def write(buf, v):
            if v is None:
                if not nullable:
                    raise TypeError("non-nullable bytes is None")
                buf += b"\xff\xff\xff\xff"
                return
            buf += _pack_i32(_nbytes(v))
            buf += v

        def read(buf, pos):
            n = _unpack_i32(buf, pos)[0]
            pos += 4
            if n < 0:
                if not nullable or n != -1:
                    raise _Corrupt(f"invalid bytes length {n}")
                return None, pos
            s, pos = _take(buf, pos, n)
            return bytes(s), pos
    return write, read


def _primitive(ftype: str, compact: bool, nullable: bool):
    if ftype in _FIXED:
        return _fixed_codec(_FIXED[ftype])
    if ftype == "uuid":
        return _write_uuid, _read_uuid
    if ftype == "varint":
        return write_varint, read_varint
    if ftype == "varlong":
        return write_varlong, read_varlong
    if ftype == "uvarint":
        return write_uvarint, read_uvarint
    if ftype == "string":
        return _string_codec(compact, nullable)
    if ftype in ("bytes", "records"):
        return _bytes_codec(compact, nullable)
    raise ValueError(f"unknown field type {ftype!r}")


# ------------------------------------------------------------------------------ compilation
def _fields_in(fields, version):
    return [f for f in fields if in_versions(f.versions, version)]


def compile_struct(fields, version: int, flexible: bool):
    """Compile a list of :class:`Field` for one version into ``(encode, decode)``.

    ``encode(w: Writer, value: dict)`` appends; ``decode(buf, pos) -> (dict, pos)``.
    """
    present = _fields_in(fields, version)
    regular = [f for f in present if not (flexible and f.tag is not None and in_versions(f.tagged, version))]
    tagged = sorted((f for f in present if f not in regular), key=lambda f: f.tag)
    absent = [f for f in fields if f not in present]

    enc_ops = []
    dec_ops = []

    # Group consecutive fixed-width fields into one struct op.
    run = []

    def close_run():
        if not run:
            return
        st = struct.Struct(">" + "".join(_FIXED[f.type] for f in run))
        names = tuple(f.name for f in run)
        defaults = tuple(f.default_value() for f in run)
        nd = tuple(zip(names, defaults))
        pack, unpack, size = st.pack, st.unpack_from, st.size
        if len(run) == 1:
            (name, default), = nd

            def enc(w, d):
                w.buf += pack(d.get(name, default))

            def dec(buf, pos, d):
                d[name] = unpack(buf, pos)[0]
                return pos + size
        else:
            def enc(w, d):
                w.buf += pack(*[d.get(n, df) for n, df in nd])

            def dec(buf, pos, d):
                d.update(zip(names, unpack(buf, pos)))
                return pos + size
        enc_ops.append(enc)
        dec_ops.append(dec)
        run.clear()

    for f in regular:
        if f.type in _FIXED:
            run.append(f)
            continue
        close_run()
        enc, dec = _compile_field(f, version, flexible)
        enc_ops.append(enc)
        dec_ops.append(dec)
    close_run()

    if flexible:
        enc, dec = _compile_tagged(tagged, version)
        enc_ops.append(enc)
        dec_ops.append(dec)

    absent_const = {f.name: f.default_value() for f in absent if not f.is_mutable_default()}
    absent_mut = [f for f in absent if f.is_mutable_default()]

    enc_ops = tuple(enc_ops)
    dec_ops = tuple(dec_ops)

    def encode(w, d):
        for op in enc_ops:
            op(w, d)

    if absent_mut:
        def decode(buf, pos):
            d = {}
            for op in dec_ops:
                pos = op(buf, pos, d)
            d.update(absent_const)
            for f in absent_mut:
                d[f.name] = f.default_value()
            return d, pos
    elif absent_const:
        def decode(buf, pos):
            d = {}
            for op in dec_ops:
                pos = op(buf, pos, d)
            d.update(absent_const)
            return d, pos
    else:
        def decode(buf, pos):
            d = {}
            for op in dec_ops:
                pos = op(buf, pos, d)
            return d, pos

    return encode, decode


def _value_codec(f: Field, version: int, flexible: bool):
    """(write(w, value), read(buf, pos) -> (value, pos)) for the value of field ``f``."""
    nullable = in_versions(f.nullable, version)
    if f.elem is not None:
        return _array_codec(f, version, flexible, nullable)
    if f.type == "struct":
        s_enc, s_dec = compile_struct(f.fields, version, flexible)
        default = f.default_value

        def write(w, v):
            s_enc(w, v if v is not None else default())
        return write, s_dec
    if f.type == "records":
        return _records_codec(flexible, nullable)
    pw, pr = _primitive(f.type, flexible, nullable)

    def write(w, v):
        pw(w.buf, v)
    return write, pr


def _compile_field(f: Field, version: int, flexible: bool):
    write, read = _value_codec(f, version, flexible)
    name = f.name
    if f.is_mutable_default():
        factory = f.default_value

        def enc(w, d):
            v = d.get(name, MISSING)
            write(w, factory() if v is MISSING else v)
    else:
        default = f.default_value()

        def enc(w, d):
            write(w, d.get(name, default))

    def dec(buf, pos, d):
        d[name], pos = read(buf, pos)
        return pos
    return enc, dec


def _records_codec(compact: bool, nullable: bool):
    def write(w, v):
        buf = w.buf
        if v is None:
            if not nullable:
                raise TypeError("records is None")
            if compact:
                buf.append(0)
            else:
                buf += b"\xff\xff\xff\xff"
            return
        if type(v) is list or type(v) is tuple:
            sizes = [_nbytes(b) for b in v]
            n = sum(sizes)
        else:
            sizes = None
            n = _nbytes(v)
        if compact:
            write_uvarint(buf, n + 1)
        else:
            buf += _pack_i32(n)
        if sizes is None:
            w.attach(v, n)
        else:
            for b, sz in zip(v, sizes):
                w.attach(b, sz)

    _, read = _bytes_codec(compact, nullable)
    return write, read


def _array_codec(f: Field, version: int, flexible: bool, nullable: bool):
    if f.elem == "struct":
        e_enc, e_dec = compile_struct(f.fields, version, flexible)
        fixed_code = None
    else:
        pw, pr = _primitive(f.elem, flexible, False)
        fixed_code = _FIXED.get(f.elem)

        def e_enc(w, v):
            pw(w.buf, v)
        e_dec = pr

    def write(w, items):
        buf = w.buf
        if items is None:
            if not nullable:
                raise TypeError(f"array {f.name} is not nullable in this version")
            if flexible:
                buf.append(0)
            else:
                buf += b"\xff\xff\xff\xff"
            return
        n = len(items)
        if flexible:
            write_uvarint(buf, n + 1)
        else:
            buf += _pack_i32(n)
        if fixed_code is not None and n:
            buf += struct.pack(">%d%s" % (n, fixed_code), *items)
            return
        for it in items:
            e_enc(w, it)

    def read_count(buf, pos):
        if flexible:
            n, pos = read_uvarint(buf, pos)
            n -= 1
        else:
            n = _unpack_i32(buf, pos)[0]
            pos += 4
        if n < 0:
            if n != -1 or not nullable:
                raise _Corrupt(f"invalid array length {n} for {f.name}")
            return None, pos
        if n > len(buf) - pos:
            raise _Corrupt(f"array {f.name} claims {n} elements but only {len(buf) - pos} bytes remain")
        return n, pos

    if fixed_code is not None:
        def read(buf, pos):
            n, pos = read_count(buf, pos)
            if n is None:
                return None, pos
            st = struct.Struct(">%d%s" % (n, fixed_code))
            return list(st.unpack_from(buf, pos)), pos + st.size
    else:
        row = f.row   # None, or the compact form each element takes as it is decoded

        def read(buf, pos):
            n, pos = read_count(buf, pos)
            if n is None:
                return None, pos
            out = []
            append = out.append
            for _ in range(n):
                v, pos = e_dec(buf, pos)
                append(v if row is None else row(v))
            return out, pos
    return write, read


class Row(tuple, Mapping):
    """A compact, read-only mapping for one decoded array element: the values in the schema's field
    order, in a tuple (no per-element dict). Reads like the dict it replaces (``row["name"]``,
    ``.get``, ``in``, ``==`` with a dict). Subclasses set ``_fields`` and ``_index``."""

    __slots__ = ()
    _fields: tuple = ()
    _index: dict = {}

    def __getitem__(self, key):
        if type(key) is str:
            try:
                return tuple.__getitem__(self, self._index[key])
            except KeyError:
                raise KeyError(key) from None
        return tuple.__getitem__(self, key)

    def get(self, key, default=None):
        i = self._index.get(key)
        return default if i is None else tuple.__getitem__(self, i)

    def __contains__(self, key):
        return key in self._index

    def __iter__(self):
        return iter(self._fields)

    def __len__(self):
        return len(self._fields)

    def keys(self):
        return self._fields

    def items(self):
        return zip(self._fields, tuple.__iter__(self))

    def values(self):
        return tuple(self)

    def __eq__(self, other):
        # Equal to the dict it replaces; an array kept as a shared tuple equals the same list.
        if not isinstance(other, Mapping) or len(other) != len(self._fields):
            return NotImplemented if not isinstance(other, Mapping) else False
        for k, v in zip(self._fields, tuple.__iter__(self)):
            if k not in other:
                return False
            w = other[k]
            if v != w and not (type(v) is tuple and type(w) is list and list(v) == w):
                return False
        return True

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None

    def __repr__(self):
        return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in self.items()) + "}"


def row_type(name: str, fields, shared_lists=()) -> "type[Row]":
    """A :class:`Row` subclass for ``fields`` (names), and the converter ``dict -> row`` for
    :class:`Field`'s ``row``. Lists in ``shared_lists`` become tuples shared between equal rows
    (replica sets repeat from partition to partition); the sharing table is bounded."""
    fields = tuple(fields)
    cls = type(name, (Row,), {"__slots__": (), "_fields": fields,
                              "_index": {f: i for i, f in enumerate(fields)}})
    shared: dict = {}
    as_tuple = frozenset(shared_lists)

    def convert(d: dict) -> Row:
        vals = []
        for f in fields:
            v = d[f]
            if f in as_tuple and v is not None:
                v = tuple(v)
                v = shared.setdefault(v, v)
                if len(shared) > 4096:
                    shared.clear()
            vals.append(v)
        return tuple.__new__(cls, vals)
    cls.convert = staticmethod(convert)
    return cls


def _compile_tagged(tagged, version):
    if not tagged:
        def enc(w, d):
            w.buf.append(0)

        def dec(buf, pos, d):
            return skip_tagged_fields(buf, pos)
        return enc, dec

    specs = []
    for f in tagged:
        write, read = _value_codec(f, version, True)
        specs.append((f.tag, f.name, f.default_value, write, read))
    by_tag = {s[0]: s for s in specs}

    def enc(w, d):
        out = []
        for tag, name, factory, write, _ in specs:
            v = d.get(name, MISSING)
            if v is MISSING or v == factory():
                continue
            sub = Writer()
            write(sub, v)
            if sub.parts:
                raise TypeError(f"tagged field {name} cannot hold records")
            out.append((tag, sub.buf))
        buf = w.buf
        write_uvarint(buf, len(out))
        for tag, data in out:
            write_uvarint(buf, tag)
            write_uvarint(buf, len(data))
            buf += data

    def dec(buf, pos, d):
        for _, name, factory, _, _ in specs:
            d[name] = factory()
        n, pos = read_uvarint(buf, pos)
        for _ in range(n):
            tag, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            end = pos + size
            if end > len(buf):
                raise _Corrupt("tagged field runs past the end of the frame")
            spec = by_tag.get(tag)
            if spec is not None:
                v, p2 = spec[4](buf, pos)
                if p2 != end:
                    raise _Corrupt(f"tagged field {spec[1]} (tag {tag}) has size {size} but used {p2 - pos}")
                d[spec[1]] = v
            pos = end
        return pos
    return enc, dec


def encode_struct(fields, version: int, flexible: bool, value: dict) -> bytes:
    """Encode ``value`` with ``fields`` into bytes (records values are copied here; tests/tools)."""
    enc, _ = compile_struct(fields, version, flexible)
    w = Writer()
    enc(w, value)
    return b"".join(bytes(p) for p in w.finish())


def decode_struct(fields, version: int, flexible: bool, data) -> tuple:
    """Decode one struct from ``data``; returns ``(dict, bytes_consumed)``."""
    _, dec = compile_struct(fields, version, flexible)
    return dec(data, 0)
