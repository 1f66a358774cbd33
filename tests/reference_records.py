"""A small, obviously-correct RecordBatch v2 encoder and decoder in pure Python.

Used by the tests as the reference the Cython BatchBuilder must agree with. It
favours clarity over speed: every field is written with struct or the plain
varint helpers below, in the order of the Kafka protocol documentation.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

import crc32c as crc32c_pkg

from fastkafka._wire.compression import compress, decompress

HEADER = struct.Struct(">qiibIhiqqqhii")   # 61 bytes
assert HEADER.size == 61


# ---- varints -----------------------------------------------------------------

def zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def unzigzag(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


def write_varint(out: bytearray, n: int) -> None:
    v = zigzag(n) & 0xFFFFFFFFFFFFFFFF
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = 0
    v = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return unzigzag(v), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


# ---- records -------------------------------------------------------------------

@dataclass
class Record:
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list = field(default_factory=list)   # [(str, bytes | None)]


@dataclass
class Batch:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    records: list

    @property
    def compression_type(self) -> int:
        return self.attributes & 0x07

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & 0x10)


def _write_bytes(out: bytearray, data) -> None:
    if data is None:
        write_varint(out, -1)
    else:
        data = bytes(data)
        write_varint(out, len(data))
        out += data


def encode_headers(headers) -> bytes:
    """The headers section of a record: count varint, then key/value pairs."""
    headers = list(headers or [])
    out = bytearray()
    write_varint(out, len(headers))
    for hk, hv in headers:
        if isinstance(hk, str):
            hk = hk.encode("utf-8")
        _write_bytes(out, hk)
        _write_bytes(out, hv)
    return bytes(out)


def encode_record(offset_delta: int, timestamp_delta: int, key, value, headers) -> bytes:
    body = bytearray()
    body.append(0)                            # attributes
    write_varint(body, timestamp_delta)
    write_varint(body, offset_delta)
    _write_bytes(body, key)
    _write_bytes(body, value)
    body += encode_headers(headers)
    out = bytearray()
    write_varint(out, len(body))
    return bytes(out + body)


def encode_batch(records, *, compression: int = 0, level=None, producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1,
                 transactional: bool = False, base_timestamp=None) -> bytes:
    """records: iterable of (timestamp, key, value, headers)."""
    records = list(records)
    if base_timestamp is None:
        base_timestamp = records[0][0] if records else -1
    section = b"".join(
        encode_record(i, ts - base_timestamp, k, v, h) for i, (ts, k, v, h) in enumerate(records)
    )
    if compression:
        section = compress(compression, section, level)
    max_ts = max(r[0] for r in records) if records else base_timestamp
    attributes = (compression & 0x07) | (0x10 if transactional else 0)
    after_crc = struct.pack(
        ">hiqqqhii", attributes, len(records) - 1, base_timestamp, max_ts,
        producer_id, producer_epoch, base_sequence, len(records),
    ) + section
    crc = crc32c_pkg.crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)   # leader epoch + magic + crc + rest
    return struct.pack(">qiibI", 0, batch_length, -1, 2, crc) + after_crc


def decode_batch(buf) -> Batch:
    """Decode one batch; raises ValueError on a bad CRC, length or magic."""
    buf = bytes(buf)
    if len(buf) < HEADER.size:
        raise ValueError("batch shorter than its header")
    fields = HEADER.unpack_from(buf, 0)
    (base_offset, batch_length, leader_epoch, magic, crc, attributes, last_offset_delta,
     base_ts, max_ts, pid, epoch, base_seq, count) = fields
    if magic != 2:
        raise ValueError(f"magic {magic} != 2")
    if batch_length != len(buf) - 12:
        raise ValueError(f"batchLength {batch_length} != {len(buf) - 12}")
    actual = crc32c_pkg.crc32c(buf[21:])
    if actual != crc:
        raise ValueError(f"CRC mismatch: header {crc:#010x}, computed {actual:#010x}")
    section = buf[61:]
    codec = attributes & 0x07
    if codec:
        section = decompress(codec, section)
    records = []
    pos = 0
    for i in range(count):
        length, pos = read_varint(section, pos)
        end = pos + length
        rec_attrs = section[pos]
        pos += 1
        if rec_attrs != 0:
            raise ValueError(f"record {i}: attributes {rec_attrs} != 0")
        ts_delta, pos = read_varint(section, pos)
        offset_delta, pos = read_varint(section, pos)
        if offset_delta != i:
            raise ValueError(f"record {i}: offsetDelta {offset_delta}")
        key, pos = _read_bytes(section, pos)
        value, pos = _read_bytes(section, pos)
        nh, pos = read_varint(section, pos)
        headers = []
        for _ in range(nh):
            hk, pos = _read_bytes(section, pos)
            hv, pos = _read_bytes(section, pos)
            headers.append((hk.decode("utf-8"), hv))
        if pos != end:
            raise ValueError(f"record {i}: length {length} does not match its fields")
        records.append(Record(base_ts + ts_delta, key, value, headers))
    if pos != len(section):
        raise ValueError(f"{len(section) - pos} trailing bytes after {count} records")
    return Batch(base_offset, batch_length, leader_epoch, magic, crc, attributes,
                 last_offset_delta, base_ts, max_ts, pid, epoch, base_seq, count, records)


def _read_bytes(buf: bytes, pos: int):
    n, pos = read_varint(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise ValueError("truncated bytes field")
    return buf[pos:pos + n], pos + n
