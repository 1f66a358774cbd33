"""The arguments of ``Producer.send_batch`` (and ``AsyncProducer.send_batch``): the columns
checked for what they are before the accumulator reads them (fastkafka/_producer/columns.pyx), and
a call checked and placed, waiting to be appended."""
from __future__ import annotations

from collections.abc import Mapping, Set as AbstractSet

from fastkafka.errors import InvalidRecordError, MalformedRecordError


class PreparedBatch:
    """A send_batch call checked and placed by the router, not yet appended."""

    __slots__ = ("topic", "values", "keys", "parts", "available", "max_block_ms", "headers",
                 "timestamp_ms", "n_records", "timestamps", "record_headers", "acks")

    def __init__(self, topic, values, keys, parts, available, max_block_ms, headers, timestamp_ms,
                 n_records, timestamps=None, record_headers=None, acks=None):
        self.topic, self.values, self.keys, self.parts = topic, values, keys, parts
        self.available, self.max_block_ms, self.headers = available, max_block_ms, headers
        self.timestamp_ms, self.n_records = timestamp_ms, n_records
        self.timestamps, self.record_headers = timestamps, record_headers
        self.acks = acks     # with interceptors: one RecordAck per record (fastkafka/interceptors.py)


_COLUMN = ("a list (or another iterable) of bytes-like/str/None, or a pyarrow binary/large_binary/"
           "string/large_string array")


def _is_arrow(obj) -> bool:
    return type(obj).__module__.startswith("pyarrow")


def column(col, name: str):
    """``values`` or ``keys`` of send_batch: a list or a pyarrow object as given (the accumulator
    checks the Arrow type); any other iterable read once into a list; InvalidRecordError naming
    ``name`` for what is not a column of records."""
    if type(col) is list or _is_arrow(col):
        return col
    if col is None or isinstance(col, (str, bytes, bytearray, memoryview)):
        hint = " (for one record, use send())" if col is not None else ""
        raise InvalidRecordError(f"{name} must be {_COLUMN}, got {type(col).__name__}{hint}")
    if isinstance(col, Mapping):
        raise InvalidRecordError(
            f"{name} must be {_COLUMN}, got {type(col).__name__} (for a mapping of key -> value, "
            f"pass values=list(d.values()), keys=list(d.keys()))")
    if isinstance(col, AbstractSet):
        raise InvalidRecordError(
            f"{name} must be {_COLUMN}, got {type(col).__name__}, whose order is arbitrary")
    try:
        it = iter(col)
    except TypeError:
        raise InvalidRecordError(f"{name} must be {_COLUMN}, got {type(col).__name__}") from None
    return list(it)


def per_record(col, name: str, n: int):
    """``timestamps`` / ``record_headers`` of send_batch: a list or a pyarrow object as given (the
    accumulator checks the rest), any other iterable read once into a list; one per record."""
    if type(col) is not list and not _is_arrow(col):
        if isinstance(col, (str, bytes, bytearray, memoryview, Mapping, AbstractSet)):
            raise InvalidRecordError(f"{name} must be one entry per record (a list or a pyarrow "
                                     f"array), got {type(col).__name__}")
        try:
            col = list(col)
        except TypeError:
            raise InvalidRecordError(f"{name} must be one entry per record (a list or a pyarrow "
                                     f"array), got {type(col).__name__}") from None
    if len(col) != n:
        raise MalformedRecordError(f"{name} has {len(col)} entries but values has {n}: expected "
                                   f"one per record")
    return col
