"""Producer interceptors, as the Java client's ``ProducerInterceptor``: hooks that see every record
before it is sent and every outcome before the application does.

``Producer(..., interceptors=[obj, ...])`` takes objects (instances, not classes: a Java
``interceptor.classes`` class name cannot run here) with any of these methods:

- ``on_send(record) -> record``: called on the sending thread, in the order given, before the
  record is serialized and placed; gets a :class:`ProducerRecord` and returns the record to send
  (the same object changed in place, ``record.replace(...)``, or a new one). ``value``, ``key``,
  ``headers``, ``partition`` and ``timestamp_ms`` may change; ``topic`` may not. Each interceptor
  gets what the previous one returned.
- ``on_acknowledgement(metadata, error)``: called once per record on the producer's I/O thread
  when the record is acknowledged (``error`` None) or has failed, before the record's
  ``on_delivery`` callback and future callbacks, with the same ``RecordMetadata`` and error; also
  (on the sending thread) when the send raises after ``on_send`` ran, with ``partition`` -1 or
  the one asked for and ``offset`` -1, the error being the one the send raises. It must be quick:
  it runs on the I/O thread. Given a third parameter,
  ``on_acknowledgement(metadata, error, record)`` also gets the record this interceptor's
  ``on_send`` returned (to find per-record state, as :class:`fastkafka.otel.TracingInterceptor`
  finds its span).
- ``close()``: called once when the producer is closed, after its last record's outcome.

An interceptor whose method raises (or whose ``on_send`` returns something other than a
:class:`ProducerRecord` of the same topic) is logged on the ``fastkafka`` logger and skipped for
that record: the record goes on as the previous interceptor left it, never lost.

Without interceptors the send path and the completion path only test one field; see
docs/observability.md for the measured cost of one no-op interceptor.
"""
from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from typing import Any

from fastkafka._producer.batch import RecordMetadata
from fastkafka.errors import ConfigError, InvalidRecordError, MalformedRecordError

log = logging.getLogger("fastkafka")

_WHAT = ("interceptors=[obj, ...]: a list of objects (instances) with on_send(record) -> record, "
         "on_acknowledgement(metadata, error) and/or close() (see fastkafka.interceptors)")


class ProducerRecord:
    """One record as the interceptors see it in ``on_send``.

    ``headers`` is always a list of ``(key, value)`` pairs (a new list the interceptor may change
    in place: the producer's call's ``headers``, a dict's items in order, or empty); ``value`` and
    ``key`` are what was passed to the send (before ``value_serializer``/``key_serializer``);
    ``partition`` and ``timestamp_ms`` are None unless given. ``context`` is free for the
    interceptors' per-record state (None until one sets it)."""

    __slots__ = ("topic", "value", "key", "partition", "timestamp_ms", "headers", "context")

    def __init__(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
                 timestamp_ms: int | None = None, headers: list | None = None, context: Any = None):
        self.topic, self.value, self.key = topic, value, key
        self.partition, self.timestamp_ms = partition, timestamp_ms
        self.headers = [] if headers is None else headers
        self.context = context

    def replace(self, **changes) -> "ProducerRecord":
        """A copy with ``changes`` (field=value) applied; ``headers`` copied as a new list."""
        fields = {name: getattr(self, name) for name in self.__slots__}
        fields["headers"] = list(fields["headers"])
        fields.update(changes)
        return ProducerRecord(**fields)

    def __eq__(self, other):
        if not isinstance(other, ProducerRecord):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__[:-1])

    __hash__ = None

    def __repr__(self) -> str:
        return (f"ProducerRecord(topic={self.topic!r}, value={self.value!r}, key={self.key!r}, "
                f"partition={self.partition!r}, timestamp_ms={self.timestamp_ms!r}, "
                f"headers={self.headers!r})")


class ProducerInterceptor:
    """A base class with the three hooks doing nothing (subclassing it is optional: any object
    with one of the methods will do)."""

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        """The record to send (here: ``record`` unchanged)."""
        return record

    def on_acknowledgement(self, metadata: RecordMetadata, error: BaseException | None) -> None:
        """The record's outcome, on the I/O thread before its callback (here: nothing)."""

    def close(self) -> None:
        """The producer is closed (here: nothing)."""


def _headers_list(headers):
    """The headers of a send as a new list of pairs; what is not a list, tuple or mapping (a wrong
    type) is left as it is for the send to refuse."""
    if headers is None:
        return []
    if isinstance(headers, Mapping):
        return list(headers.items())
    if isinstance(headers, (list, tuple)):
        return list(headers)
    return headers


def _wants_record(fn) -> bool:
    """Whether ``on_acknowledgement`` takes a third positional argument (the record)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3 or any(p.kind is p.VAR_POSITIONAL for p in params)


def parse_interceptors(value) -> tuple | None:
    """The ``interceptors`` setting checked: None or empty for none, else a tuple of objects;
    ConfigError naming what to pass for a class name string, a class, or an object without hooks."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)):
        raise ConfigError(f"interceptors={value!r} is not supported: a Java class name cannot run "
                          f"here; pass {_WHAT}")
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"interceptors must be a list, got {type(value).__name__}: pass {_WHAT}"
                          + (" (for one interceptor: interceptors=[obj])"
                             if _hooks(value) else ""))
    for i, ic in enumerate(value):
        if isinstance(ic, (str, bytes)):
            raise ConfigError(f"interceptors[{i}] is the string {ic!r}: a Java class name cannot "
                              f"run here; pass {_WHAT}")
        if isinstance(ic, type):
            raise ConfigError(f"interceptors[{i}] is the class {ic.__name__}, not an instance: "
                              f"pass {ic.__name__}(...) ({_WHAT})")
        if not _hooks(ic):
            raise ConfigError(f"interceptors[{i}] ({type(ic).__name__}) has none of on_send, "
                              f"on_acknowledgement, close: pass {_WHAT}")
    return tuple(value) or None


def _hooks(obj) -> list[str]:
    return [n for n in ("on_send", "on_acknowledgement", "close") if callable(getattr(obj, n, None))]


class RecordAck:
    """One record's acknowledgement: the interceptors' ``on_acknowledgement``, then ``cb`` (the
    record's ``on_delivery``, or a send_batch's counter), with the same metadata and error.
    ``record`` is the record to send, as the last interceptor left it."""

    __slots__ = ("chain", "record", "seen", "cb")

    def __init__(self, chain: "InterceptorChain", record: ProducerRecord, seen):
        self.chain, self.record, self.seen, self.cb = chain, record, seen, None

    def __call__(self, error, metadata) -> None:
        self.chain.acknowledge(metadata, error, self.seen)
        cb = self.cb
        if cb is not None:
            cb(error, metadata)

    def fail(self, error: BaseException) -> None:
        """The send raised after on_send: the interceptors are told (not ``cb``: the caller gets
        the error raised)."""
        rec = self.record
        p = rec.partition
        partition = p if type(p) is int and 0 <= p < 2**31 else -1
        self.chain.acknowledge(RecordMetadata(rec.topic, partition, -1, -1), error, self.seen)

    def __repr__(self) -> str:   # in "delivery callback ... raised" log lines: the callback's
        return repr(self.cb) if self.cb is not None else "<interceptors' on_acknowledgement>"


class InterceptorChain:
    """The interceptors of one producer, run in order (see the module docstring)."""

    def __init__(self, interceptors):
        self.interceptors = tuple(interceptors)
        self._on_send = [(i, ic.on_send) for i, ic in enumerate(self.interceptors)
                         if callable(getattr(ic, "on_send", None))]
        self._on_ack = []
        for i, ic in enumerate(self.interceptors):
            fn = getattr(ic, "on_acknowledgement", None)
            if callable(fn):
                self._on_ack.append((i, fn, _wants_record(fn)))
        self._track = any(w for _, _, w in self._on_ack)

    @classmethod
    def of(cls, interceptors) -> "InterceptorChain | None":
        return cls(interceptors) if interceptors else None

    def intercept(self, topic, value=None, key=None, partition=None, timestamp_ms=None,
                  headers=None) -> RecordAck:
        """Run ``on_send`` over the record; its acknowledgement, whose ``record`` is the one to
        send."""
        _check_topic(topic)
        rec = ProducerRecord(topic, value, key, partition, timestamp_ms, _headers_list(headers))
        seen = [rec] * len(self.interceptors) if self._track else None
        for i, fn in self._on_send:
            try:
                out = fn(rec)
            except Exception:
                log.warning("interceptor %r: on_send raised; the record to %r goes on as the "
                            "previous interceptor left it", self.interceptors[i], topic,
                            exc_info=True)
                out = rec
            else:
                if type(out) is not ProducerRecord or out.topic != topic:
                    log.error("interceptor %r: on_send returned %s, expected a ProducerRecord of "
                              "topic %r (the topic may not change); the record goes on as the "
                              "previous interceptor left it", self.interceptors[i],
                              f"a record of topic {out.topic!r}" if type(out) is ProducerRecord
                              else type(out).__name__, topic)
                    out = rec
            rec = out
            if seen is not None:
                for j in range(i, len(seen)):
                    seen[j] = rec
        return RecordAck(self, rec, seen)

    def acknowledge(self, metadata, error, seen=None) -> None:
        """Each ``on_acknowledgement(metadata, error[, record])``; one that raises is logged."""
        for i, fn, wants in self._on_ack:
            try:
                if wants:
                    fn(metadata, error, seen[i] if seen is not None else None)
                else:
                    fn(metadata, error)
            except Exception:
                log.warning("interceptor %r: on_acknowledgement raised", self.interceptors[i],
                            exc_info=True)

    def close(self) -> None:
        """Each interceptor's ``close()``; one that raises is logged."""
        for ic in self.interceptors:
            fn = getattr(ic, "close", None)
            if callable(fn):
                try:
                    fn()
                except Exception:
                    log.warning("interceptor %r: close raised", ic, exc_info=True)

    # -- send_batch ----------------------------------------------------------------------------
    def intercept_batch(self, topic, values, keys, partition, headers, timestamp_ms, timestamps,
                        record_headers):
        """send_batch's records through ``on_send``, one :class:`ProducerRecord` each (pyarrow
        columns are read into Python objects first). Returns (send_batch's arguments for the
        records as the interceptors left them, one RecordAck per record)."""
        from fastkafka._producer.batch_args import column, per_record
        from fastkafka._producer.sendpath import validate_headers

        _check_topic(topic)
        validate_headers(headers)       # the call's: refused before any on_send
        values = _pylist(column(values, "values"))
        n = len(values)
        keys = [None] * n if keys is None else _pylist(column(keys, "keys"))
        parts = (partition if partition is None or isinstance(partition, int)
                 else _pylist(per_record(partition, "partition", n)))
        tss = None if timestamps is None else _timestamps(per_record(timestamps, "timestamps", n))
        rhs = None if record_headers is None else _record_headers(
            per_record(record_headers, "record_headers", n))
        common = _headers_list(headers)
        if len(keys) != n:
            return (topic, values, keys, partition, headers, timestamp_ms, timestamps,
                    record_headers), None   # _prepare_batch refuses it, naming the lengths
        acks = []
        for i in range(n):
            own = [] if rhs is None or rhs[i] is None else _headers_list(rhs[i])
            ts = tss[i] if tss is not None and tss[i] is not None else timestamp_ms
            p = parts[i] if isinstance(parts, list) else parts
            acks.append(self.intercept(topic, values[i], keys[i], p, ts,
                                       own + common if isinstance(own, list) else own))
        recs = [a.record for a in acks]
        out_parts = [r.partition for r in recs]
        out_ts = [r.timestamp_ms for r in recs]
        args = (topic, [r.value for r in recs],
                None if all(r.key is None for r in recs) else [r.key for r in recs],
                None if all(p is None for p in out_parts) else out_parts,
                None, timestamp_ms,
                None if all(t == timestamp_ms for t in out_ts) else out_ts,
                [r.headers or None for r in recs])
        return args, acks

    def send_batch(self, producer, topic, values, keys, partition, headers, timestamp_ms,
                   timestamps, record_headers):
        """Producer.send_batch with interceptors: on_send per record, every record checked, then
        each queued with its acknowledgement; a BatchFuture as without interceptors."""
        from fastkafka._producer.batch import BatchFuture

        producer._check_open()
        args, acks = self.intercept_batch(topic, values, keys, partition, headers, timestamp_ms,
                                          timestamps, record_headers)
        try:
            batch = producer._prepare_batch(*args, acks=acks)
        except BaseException as e:
            self.fail_all(acks, e)
            raise
        fut = BatchFuture(batch.n_records)
        try:
            producer._append_prepared(batch, fut)
        except BaseException as e:
            self.fail_all(acks, e, getattr(e, "records_appended", 0))
            raise
        return fut

    def fail_all(self, acks, error, start: int = 0) -> None:
        """The records of ``acks`` from ``start`` on were not queued: ``error`` to the
        interceptors."""
        if acks:
            for a in acks[start:]:
                a.fail(error)


def _check_topic(topic) -> None:
    """What a send raises for a topic that is not a non-empty str (before any on_send)."""
    if not isinstance(topic, str) or not topic:
        raise (MalformedRecordError if isinstance(topic, str) else InvalidRecordError)(
            f"topic must be a non-empty string, got {topic!r}")


def _pylist(col) -> list:
    """A column as a list of Python objects (pyarrow arrays read)."""
    if type(col) is list:
        return col
    if hasattr(col, "to_pylist"):
        return col.to_pylist()
    return list(col)


def _timestamps(col) -> list:
    """Per-record timestamps as ms ints or None (a pyarrow timestamp array converted to ms)."""
    if type(col) is list:
        return col
    import pyarrow as pa

    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.timestamp("ms", col.type.tz), safe=False).cast(pa.int64())
    return col.to_pylist()


def _record_headers(col) -> list:
    """Per-record headers as lists of pairs or None (a pyarrow list<struct<key, value>> read)."""
    if type(col) is list:
        return col
    out = []
    for entry in col.to_pylist():
        out.append(None if entry is None else
                   [(h["key"], h["value"]) if isinstance(h, dict) else h for h in entry])
    return out


__all__ = ["ProducerRecord", "ProducerInterceptor", "InterceptorChain", "RecordAck",
           "parse_interceptors"]
