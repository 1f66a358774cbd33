"""aiokafka's ``AIOKafkaProducer`` on :class:`fastkafka.aio.AsyncProducer`.

Code written for aiokafka runs with one changed import::

    from fastkafka.compat.aiokafka import AIOKafkaProducer    # was: from aiokafka import ...

    async with AIOKafkaProducer(bootstrap_servers="localhost:9092") as producer:
        futs = [await producer.send("events", b"v%d" % i) for i in range(1000)]
        mds = await asyncio.gather(*futs)
        md = await producer.send_and_wait("events", b"one more", key=b"k")

Its keyword arguments, with aiokafka's defaults (``bootstrap_servers='localhost'``, port 9092,
``acks=1``, ``linger_ms=0``, ``max_batch_size=16384``, ``request_timeout_ms=40000``, idempotence
off); each one works as in aiokafka, is accepted and ignored for a documented reason, or is refused
naming what to use. ``await send()`` queues the record and returns a future of aiokafka's
``RecordMetadata`` (``None`` with ``acks=0``), as aiokafka's does: awaiting it is what waits for
the delivery. Errors are aiokafka's classes when aiokafka is installed (each also the matching
``fastkafka.errors`` class: ``except`` either), this module's classes of the same names otherwise.
docs/migration.md, "From aiokafka", lists every method and argument with what the layer does.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import operator
import sys
import time
import traceback
import warnings
from asyncio import _get_running_loop
from collections import namedtuple
from typing import Any

from fastkafka import errors as _fk
from fastkafka.aio import AsyncProducer
from fastkafka._net.jaas import _jwt_expiry
from fastkafka.compat._aiokafka_errors import (OffsetAndMetadata, RecordMetadata, TopicPartition,
                                               _convert, _error, errors)

log = logging.getLogger("fastkafka")

__all__ = ["AIOKafkaProducer", "BatchBuilder", "RecordMetadata", "TopicPartition",
           "OffsetAndMetadata", "TransactionContext", "errors"]

_INT32_MAX = 2**31 - 1
_tuple_new = tuple.__new__

# -- settings ----------------------------------------------------------------------------------
_missing = object()


class _ConfigError(_fk.ConfigError):
    """A ConfigError (a ValueError, as aiokafka raises for bad arguments) whose text is the bare
    message, as aiokafka's ValueError's is."""

    def __str__(self) -> str:
        return self.message


def _servers(value) -> list[str]:
    """aiokafka's bootstrap_servers: 'host[:port]', comma-separated, or a list; port 9092."""
    items = [v.strip() for v in value.split(",")] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise _fk.ConfigError(f"bootstrap_servers must be 'host[:port]' or a list of them, got "
                              f"{value!r}")
    out = []
    for item in items:
        if not isinstance(item, str) or not item:
            raise _fk.ConfigError(f"bootstrap_servers entries must be 'host[:port]' strings, got "
                                  f"{item!r}")
        host_only = ":" not in item or (item.startswith("[") and item.endswith("]"))
        out.append(f"{item}:9092" if host_only else item)
    return out


def _is_default_partitioner(obj) -> bool:
    if obj is _missing:
        return True
    cls = type(obj)
    return cls.__name__ == "DefaultPartitioner" and cls.__module__.startswith("aiokafka")


def _adapt_partitioner(fn):
    """aiokafka's ``partitioner(key_bytes, all_partitions, available_partitions)`` as fastkafka's
    ``(key, num_partitions, available_partitions)``; the key is the serialized one."""
    if not callable(fn):
        raise _fk.ConfigError(f"partitioner must be a callable(key_bytes, all_partitions, "
                              f"available_partitions) -> int, got {type(fn).__name__}")

    def partition(key, num_partitions, available):
        return fn(key, list(range(num_partitions)), list(available))
    partition.__qualname__ = f"aiokafka_partitioner({getattr(fn, '__qualname__', fn)!s})"
    return partition


def _token_provider(provider, owner: "AIOKafkaProducer"):
    """aiokafka's AbstractTokenProvider (``async token()``, optional ``extensions()``) as
    fastkafka's callable() -> (token, expiry). The coroutine runs on the producer's event loop (a
    provider may use ``run_in_executor`` or the loop's sessions), awaited by the I/O thread."""
    if not callable(getattr(provider, "token", None)):
        raise _fk.ConfigError("sasl_oauth_token_provider must be an aiokafka AbstractTokenProvider "
                              "(an object with async token())")
    ext = getattr(provider, "extensions", None)

    def token():
        result = provider.token()
        if inspect.isawaitable(result):
            loop = owner._ap._loop
            if loop is not None and loop.is_running() and not loop.is_closed():
                result = asyncio.run_coroutine_threadsafe(_awaited(result), loop).result(
                    owner._request_timeout_ms / 1000)
            else:
                result = asyncio.run(_awaited(result))
        # the JWT's exp when the token is one, else asked again in 5 minutes
        return result, _jwt_expiry(result) if isinstance(result, str) and _jwt_expiry(result) \
            else time.time() + 300
    if callable(ext):
        # sent with the token, as aiokafka sends them (RFC 7628 key=value pairs)
        token.extensions = lambda: dict(ext() or {})
    return token


async def _awaited(aw):
    return await aw


def _settings(kw: dict) -> tuple[dict, dict]:
    """aiokafka's arguments -> (fastkafka settings, the layer's own state)."""
    own: dict[str, Any] = {}
    s: dict[str, Any] = {}
    s["bootstrap_servers"] = _servers(kw["bootstrap_servers"])
    AIOKafkaProducer._PRODUCER_CLIENT_ID_SEQUENCE += 1
    client_id = kw["client_id"]
    if client_id is None:
        client_id = f"aiokafka-producer-{AIOKafkaProducer._PRODUCER_CLIENT_ID_SEQUENCE}"
    s["client_id"] = client_id

    acks, idem, txn_id = kw["acks"], kw["enable_idempotence"], kw["transactional_id"]
    if acks not in (0, 1, -1, "all", _missing):
        raise _ConfigError("Invalid ACKS parameter")
    if txn_id is not None:
        idem = True
    if idem:
        if acks is _missing:
            acks = -1
        elif acks not in ("all", -1):
            raise _ConfigError(f"acks={acks} not supported if enable_idempotence=True")
    if acks is _missing:
        acks = 1
    elif acks == "all":
        acks = -1
    s["acks"], s["enable_idempotence"] = acks, bool(idem)
    own["acks"] = acks
    if txn_id is not None:
        s["transactional_id"] = txn_id
        s["transaction_timeout_ms"] = kw["transaction_timeout_ms"]

    ct = kw["compression_type"]
    if ct not in ("gzip", "snappy", "lz4", "zstd", None):
        raise _ConfigError("Invalid compression type!")
    if ct is not None:
        from fastkafka._wire.compression import check_available
        try:
            check_available(ct)
        except _fk.ConfigError as e:
            raise _error("UnsupportedCodecError", _fk.ConfigError,
                         f"Compression library for {ct} not found: {e}") from None
    s["compression_type"] = ct or "none"

    s["batch_size"] = kw["max_batch_size"]
    s["linger_ms"] = kw["linger_ms"]
    mrs = kw["max_request_size"]
    if not isinstance(mrs, int) or isinstance(mrs, bool) or mrs < 1:
        raise _fk.ConfigError(f"max_request_size must be a positive int, got {mrs!r}")
    own["max_request_size"] = mrs
    # the layer bounds each record as aiokafka does (_check_size); fastkafka's own bound adds the
    # produce request's overhead (REQUEST_OVERHEAD, 317 bytes, against aiokafka's 82), which must
    # not refuse a record aiokafka's bound lets through
    s["max_request_size"] = min(max(mrs + 256, 1024), _INT32_MAX)
    rt = kw["request_timeout_ms"]
    s["request_timeout_ms"] = rt
    own["request_timeout_ms"] = rt
    if isinstance(rt, int) and isinstance(kw["linger_ms"], int):
        # aiokafka: a batch expires request_timeout_ms after its creation unless sent, and a
        # produce request may take request_timeout_ms more; send() waits for buffer room and
        # metadata up to request_timeout_ms
        s["delivery_timeout_ms"] = min(kw["linger_ms"] + 2 * rt, _INT32_MAX)
        s["max_block_ms"] = rt
    s["metadata_max_age_ms"] = kw["metadata_max_age_ms"]
    s["topic_metadata_propagation_max_ms"] = _INT32_MAX   # aiokafka: a timeout at max_block_ms only
    s["retry_backoff_ms"] = kw["retry_backoff_ms"]
    cmi = kw["connections_max_idle_ms"]
    s["connections_max_idle_ms"] = 2**40 if cmi is None else cmi

    part = kw["partitioner"]
    s["partitioner"] = "murmur2" if _is_default_partitioner(part) else _adapt_partitioner(part)

    proto = kw["security_protocol"]
    # aiokafka's checks, with its messages (AIOKafkaClient.__init__)
    if proto not in ("SSL", "PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL"):
        raise _ConfigError("`security_protocol` should be SSL or PLAINTEXT")
    if proto in ("SSL", "SASL_SSL") and kw["ssl_context"] is None:
        raise _ConfigError("`ssl_context` is mandatory if security_protocol=='SSL'")
    if proto in ("SASL_SSL", "SASL_PLAINTEXT"):
        if kw["sasl_mechanism"] not in ("PLAIN", "GSSAPI", "SCRAM-SHA-256", "SCRAM-SHA-512",
                                        "OAUTHBEARER"):
            raise _ConfigError("only `PLAIN`, `GSSAPI`, `SCRAM-SHA-256`, `SCRAM-SHA-512` and "
                               "`OAUTHBEARER`sasl_mechanism are supported at the moment")
        if kw["sasl_mechanism"] == "PLAIN" and (kw["sasl_plain_username"] is None
                                                or kw["sasl_plain_password"] is None):
            raise _ConfigError("sasl_plain_username and sasl_plain_password required for PLAIN "
                               "sasl")
    s["security_protocol"] = proto
    if kw["ssl_context"] is not None:
        s["ssl_context"] = kw["ssl_context"]
    if isinstance(proto, str) and proto.startswith("SASL"):
        mech = kw["sasl_mechanism"]
        s["sasl_mechanism"] = mech
        if kw["sasl_plain_username"] is not None:
            s["sasl_plain_username"] = kw["sasl_plain_username"]
        if kw["sasl_plain_password"] is not None:
            s["sasl_plain_password"] = kw["sasl_plain_password"]
        if kw["sasl_oauth_token_provider"] is not None:
            own["token_provider"] = kw["sasl_oauth_token_provider"]
    # aiokafka's GSSAPI arguments are fastkafka's settings of the same names (the ticket comes from
    # the default ticket cache, as with aiokafka); its defaults pass only with GSSAPI.
    gssapi = isinstance(proto, str) and proto.startswith("SASL") and kw["sasl_mechanism"] == "GSSAPI"
    if gssapi or kw["sasl_kerberos_service_name"] != "kafka":
        s["sasl_kerberos_service_name"] = kw["sasl_kerberos_service_name"]
    if kw["sasl_kerberos_domain_name"] is not None:
        s["sasl_kerberos_domain_name"] = kw["sasl_kerberos_domain_name"]
    return s, own


# -- record sizes as aiokafka counts them (DefaultRecordBatchBuilder) --------------------------
_BATCH_HEADER = 61          # DefaultRecordBatch.HEADER_STRUCT.size
_MAX_RECORD_OVERHEAD = 21   # 5 length + 10 timestamp + 5 offset + 1 attributes


def _varint_size(value: int) -> int:
    """Bytes of Kafka's zigzag varint of ``value``."""
    v = (value << 1) ^ (value >> 63)
    n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


def _size_of(key, value, headers) -> int:
    """aiokafka's ``DefaultRecordBatchBuilder.size_of``: key, value and headers of one record."""
    size = 1 if key is None else _varint_size(len(key)) + len(key)
    size += 1 if value is None else _varint_size(len(value)) + len(value)
    size += _varint_size(len(headers))
    for h_key, h_value in headers:
        n = len(h_key.encode("utf-8"))
        size += _varint_size(n) + n
        size += 1 if h_value is None else _varint_size(len(h_value)) + len(h_value)
    return size


class _TypeError(_fk.InvalidRecordError):
    """An InvalidRecordError (a TypeError, as aiokafka raises) whose text is aiokafka's."""

    def __str__(self) -> str:
        return self.message


def _check_bytes(x, what: str) -> None:
    if not (x is None or type(x) in (bytes, bytearray, memoryview)):
        # the text of aiokafka's record builder (its C extension, the one pip installs)
        raise _TypeError(f"a bytes-like object is required, not '{type(x).__name__}'")


class _BatchRecordMetadata(namedtuple("DefaultRecordMetadata", ["offset", "size", "timestamp"])):
    """What ``BatchBuilder.append`` returns, as aiokafka's: the record's offset in the batch, its
    size in bytes and its timestamp; ``crc`` is None (record batches v2)."""

    __slots__ = ()

    @property
    def crc(self):
        return None


def _topic_serializer(serializer, field: str):
    """``serialize(topic, obj)`` for a Schema Registry serializer, else None (a plain ``f(obj)``,
    called as aiokafka calls it)."""
    if serializer is None:
        return None
    from fastkafka.schema_registry._serializers import topic_serializer

    return topic_serializer(serializer, field)


class BatchBuilder:
    """aiokafka's BatchBuilder (``producer.create_batch()``): records for one ``send_batch``,
    bounded by ``max_batch_size`` bytes counted as aiokafka counts them."""

    def __init__(self, batch_size: int, key_serializer=None, value_serializer=None):
        self._batch_size = batch_size
        self._key_serializer, self._value_serializer = key_serializer, value_serializer
        self._records: list[tuple] = []
        self._size = _BATCH_HEADER
        self._first_ts: int | None = None
        self._closed = False

    def append(self, *, timestamp, key, value, headers=[]):  # noqa: B006 - aiokafka's signature
        """Add a record; returns its metadata (``offset`` in the batch, ``size``, ``timestamp``),
        or None when the batch is full or closed (the batch is then closed)."""
        if headers is None:
            headers = []
        if self._closed:
            return None
        if self._key_serializer is not None:
            key = self._key_serializer(key)
        if self._value_serializer is not None:
            value = self._value_serializer(value)
        offset = len(self._records)
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        elif type(timestamp) is not int:
            raise _TypeError(repr(timestamp))
        _check_bytes(key, "key")
        _check_bytes(value, "value")
        if self._first_ts is None:
            delta, first = 0, True
        else:
            delta, first = timestamp - self._first_ts, False
        body = (1 + _varint_size(delta) + _varint_size(offset)
                + _size_of(key, value, list(headers)))
        required = body + _varint_size(body)
        if required + self._size > self._batch_size and not first:
            self._closed = True
            return None
        if first:
            self._first_ts = timestamp
        self._size += required
        self._records.append((key, value, timestamp, list(headers) or None))
        return _BatchRecordMetadata(offset, required, timestamp)

    def close(self) -> None:
        """Close the batch to further records (it may still be sent)."""
        self._closed = True

    def closed(self) -> bool:
        """Whether the batch takes no more records."""
        return self._closed

    def size(self) -> int:
        """The batch's size in bytes (uncompressed, header included)."""
        return self._size

    def record_count(self) -> int:
        """The number of records appended."""
        return len(self._records)


#: A transaction call in the wrong state (begin twice, commit without begin): aiokafka fails an
#: ``assert`` there; the layer's error is aiokafka's IllegalStateError and an AssertionError.
_TxnStateError = type("IllegalStateError", (errors.IllegalStateError, AssertionError),
                      {"__module__": __name__})


# -- the producer ------------------------------------------------------------------------------
def _wrap(exc: BaseException) -> BaseException:
    return _convert(exc) if isinstance(exc, _fk.KafkaError) else exc


class AIOKafkaProducer:
    """aiokafka's ``AIOKafkaProducer`` on :class:`fastkafka.aio.AsyncProducer`; see
    :mod:`fastkafka.compat.aiokafka` and docs/migration.md, "From aiokafka"."""

    _PRODUCER_CLIENT_ID_SEQUENCE = 0
    _closed = None          # None: construction did not finish (no ResourceWarning then)
    _source_traceback = None

    def __init__(self, *, loop=None, bootstrap_servers="localhost", client_id=None,
                 metadata_max_age_ms=300000, request_timeout_ms=40000, api_version=None,
                 acks=_missing, key_serializer=None, value_serializer=None, compression_type=None,
                 max_batch_size=16384, partitioner=_missing, max_request_size=1048576,
                 linger_ms=0, retry_backoff_ms=100, security_protocol="PLAINTEXT",
                 ssl_context=None, connections_max_idle_ms=540000, enable_idempotence=False,
                 transactional_id=None, transaction_timeout_ms=60000, sasl_mechanism="PLAIN",
                 sasl_plain_password=None, sasl_plain_username=None,
                 sasl_kerberos_service_name="kafka", sasl_kerberos_domain_name=None,
                 sasl_oauth_token_provider=None):
        if loop is not None:
            warnings.warn("The `loop` parameter has been deprecated since 0.7.1 and will be "
                          "removed in a future release.", DeprecationWarning, stacklevel=2)
        if api_version is not None:
            warnings.warn("The `api_version` parameter has been deprecated since 0.13.0. It is "
                          "now a no-op and will be removed in a future release. ",
                          DeprecationWarning, stacklevel=2)
        kw = dict(locals())
        settings, own = _settings(kw)
        self._key_serializer, self._value_serializer = key_serializer, value_serializer
        # a Schema Registry serializer (fastkafka.schema_registry's, or confluent-kafka's) is
        # called with the topic: serialize(topic, obj)
        self._key_by_topic = _topic_serializer(key_serializer, "key")
        self._value_by_topic = _topic_serializer(value_serializer, "value")
        self._max_request_size = own["max_request_size"]
        self._request_timeout_ms = own["request_timeout_ms"]
        self._acks0 = own["acks"] == 0
        self._batch_size = max_batch_size
        self._transactional = transactional_id is not None
        if "token_provider" in own:
            settings["sasl_oauth_token_provider"] = _token_provider(own["token_provider"], self)
        try:
            self._ap = AsyncProducer(**settings)
        except _fk.KafkaError as e:
            raise _convert(e) from None
        self._p = self._ap._p
        self._md = self._p._metadata
        self._serializing = key_serializer is not None or value_serializer is not None
        # a record without headers whose key and value total this much is within
        # max_request_size however aiokafka counts it (_check_size then has nothing to do)
        self._unchecked_size = self._max_request_size - _BATCH_HEADER - _MAX_RECORD_OVERHEAD - 11
        self._tps: dict = {}
        self._counts: dict = {}     # topic -> partition count last seen
        self._client_id = settings["client_id"]
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        self._loop = running
        if running is not None and running.get_debug():
            self._source_traceback = traceback.extract_stack(sys._getframe(1))
        self._started = False
        self._unresolved: set = set()     # send()'s futures not resolved yet (flush() awaits them)
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("started" if self._started else "not started")
        return f"<fastkafka.compat.aiokafka.AIOKafkaProducer client_id={self._client_id!r} {state}>"

    def __del__(self, _warnings=warnings):
        if self._closed is False:
            _warnings.warn(f"Unclosed AIOKafkaProducer {self!r}", ResourceWarning, source=self)
            loop = self._loop or getattr(getattr(self, "_ap", None), "_loop", None)
            if loop is not None and not loop.is_closed():
                context = {"producer": self, "message": "Unclosed AIOKafkaProducer"}
                if self._source_traceback is not None:
                    context["source_traceback"] = self._source_traceback
                loop.call_exception_handler(context)

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect: awaits the cluster's metadata (up to ``request_timeout_ms``); raises
        ``KafkaConnectionError`` when no bootstrap server can be reached, as aiokafka does. A
        transactional producer also gets its producer id here."""
        try:
            await self._ap.start()
        except _fk.KafkaError as e:
            raise _convert(e) from None
        self._loop = self._ap._loop
        await self._bootstrap()
        if self._transactional:
            try:
                await self._ap.init_transactions(self._request_timeout_ms / 1000)
            except _fk.KafkaError as e:
                raise _convert(e) from None
        self._started = True

    async def _bootstrap(self) -> None:
        md = self._p._metadata
        loop = self._loop
        deadline = loop.time() + self._request_timeout_ms / 1000
        md.request_update()
        self._p._sender.wakeup()
        servers = {f"{h}:{p}" if ":" not in h else f"[{h}]:{p}" for h, p in md.bootstrap_servers}
        while md.version <= 0:
            failed = md.connection_errors()
            if (servers and all(failed.get(s, "no answer yet") != "no answer yet" for s in servers)
                    or loop.time() >= deadline):
                raise _error("KafkaConnectionError", _fk.NetworkError,
                             f"Unable to bootstrap from {sorted(servers)}"
                             + (f": {md.describe_connection_errors()}" if failed else ""))
            await asyncio.sleep(0.005)

    async def stop(self) -> None:
        """Deliver what is queued and close (a second call does nothing)."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._ap.close()
        except _fk.KafkaError as e:
            raise _convert(e) from None

    async def __aenter__(self) -> "AIOKafkaProducer":
        await self.start()
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        await self.stop()

    async def flush(self) -> None:
        """Await the delivery of every record sent so far: on return their futures are done (a
        batch completes on the I/O thread a moment before its records' outcomes reach the loop)."""
        sent = list(self._unresolved)
        await self._ap.flush()
        if sent:
            await asyncio.wait(sent)

    # -- metadata ------------------------------------------------------------------------------
    async def partitions_for(self, topic: str) -> set:
        """The set of ``topic``'s partitions, awaiting its metadata (up to request_timeout_ms;
        then ``UnknownTopicOrPartitionError``, as aiokafka)."""
        return set(await self._partitions(topic))

    async def _partitions(self, topic):
        try:
            return await self._ap.partitions_for(topic)
        except _fk.KafkaTimeoutError as e:
            peer = errors.UnknownTopicOrPartitionError
            raise _convert(e, peer) from None
        except _fk.KafkaError as e:
            raise _convert(e) from None

    # -- sending -------------------------------------------------------------------------------
    async def send(self, topic, value=None, key=None, partition=None, timestamp_ms=None,
                   headers=None):
        """Queue a record; returns a future of its ``RecordMetadata`` (``None`` with acks=0).
        Awaits the topic's metadata first when it is not known yet (as aiokafka does)."""
        if value is None and key is None:
            raise AssertionError("Need at least one: key or value")
        if self._closed:
            raise _error("ProducerClosed", _fk.ProducerClosedError)
        if partition is not None and type(partition) is not int:
            try:                        # any integer (numpy's too), as aiokafka's comparisons take
                partition = operator.index(partition)
            except TypeError:
                raise AssertionError("Unrecognized partition") from None
        n = self._counts.get(topic)     # a topic once known stays known: no lookup per record
        if n is None or (partition is not None and partition >= n):
            n = self._md.cluster.partition_count(topic)
            if n <= 0:
                n = len(await self._partitions(topic))
            self._counts[topic] = n
        if self._transactional and self._p.transaction_state != "IN_TRANSACTION":
            raise _error("IllegalOperation", _fk.IllegalStateError,
                         "Can't send messages while not in transaction")
        if self._serializing:
            if self._key_by_topic is not None:
                key = self._key_by_topic(topic, key)
            elif self._key_serializer is not None:
                key = self._key_serializer(key)
            if self._value_by_topic is not None:
                value = self._value_by_topic(topic, value)
            elif self._value_serializer is not None:
                value = self._value_serializer(value)
        if headers:
            headers = list(headers)
        else:
            headers = None
        if not (headers is None and type(value) is bytes and (key is None or type(key) is bytes)
                and len(value) + (0 if key is None else len(key)) <= self._unchecked_size):
            self._check_size(key, value, headers)
        if partition is not None and not 0 <= partition < n:
            raise AssertionError("Unrecognized partition")
        if timestamp_ms is None:
            timestamp_ms = int(time.time() * 1000)
        outer = _get_running_loop().create_future()

        # One future per record: the I/O thread's outcome comes to this callback on the loop
        # (produce()'s on_delivery), which resolves it with aiokafka's RecordMetadata.
        def delivered(err, md, outer=outer, ts=timestamp_ms):
            self._resolve(outer, ts, err, md)
        try:
            self._ap.produce(topic, value, key, partition, delivered, timestamp_ms, headers)
        except _fk.BufferExhaustedError:
            # no buffer memory now: send() waits for it on the loop (max_block_ms, which is
            # request_timeout_ms as aiokafka's send waits); later records queue behind this one
            try:
                inner = self._ap.send(topic, value, key, partition, timestamp_ms, headers)
            except _fk.KafkaError as e:
                raise _convert(e) from None
            inner.add_done_callback(lambda f: delivered(f.exception(), None) if f.exception()
                                    else delivered(None, f.result()))
        except _fk.KafkaError as e:
            raise _convert(e) from None
        # (its outcome reaches _resolve on the loop, after this returns: never before the add)
        self._unresolved.add(outer)
        return outer

    def _resolve(self, outer: asyncio.Future, ts: int, err, md) -> None:
        self._unresolved.discard(outer)
        if outer.done():        # cancelled by its owner
            if err is not None:
                log.warning("record was not delivered and nobody awaits it: %r", err)
            return
        if err is not None:
            outer.set_exception(_wrap(err))
        elif self._acks0:
            outer.set_result(None)
        else:
            topic, partition, stamp = md.topic, md.partition, md.timestamp
            tp = self._tps.get((topic, partition))
            if tp is None:
                tp = self._tps[(topic, partition)] = TopicPartition(topic, partition)
            # (tuple.__new__: the named tuple's own __new__ is Python code, per record)
            outer.set_result(_tuple_new(RecordMetadata, (
                topic, partition, tp, md.offset, stamp, 0 if stamp == ts else 1, None)))

    def _check_size(self, key, value, headers) -> None:
        _check_bytes(key, "key")
        _check_bytes(value, "value")
        limit = self._max_request_size
        kn = len(key) if key is not None else 0
        vn = len(value) if value is not None else 0
        if headers is None and kn + vn + _BATCH_HEADER + _MAX_RECORD_OVERHEAD + 11 <= limit:
            return
        size = _BATCH_HEADER + _MAX_RECORD_OVERHEAD + _size_of(key, value, headers or [])
        if size > limit:
            raise _error("MessageSizeTooLargeError", _fk.RecordTooLargeError,
                         f"The message is {size} bytes when serialized which is larger than the "
                         f"maximum request size you have configured with the max_request_size "
                         f"configuration")

    async def send_and_wait(self, topic, value=None, key=None, partition=None, timestamp_ms=None,
                            headers=None):
        """Send a record and await its ``RecordMetadata``."""
        fut = await self.send(topic, value, key, partition, timestamp_ms, headers)
        return await fut

    def create_batch(self) -> BatchBuilder:
        """An empty :class:`BatchBuilder` (``max_batch_size`` bytes, the producer's
        serializers), to fill and hand to :meth:`send_batch`."""
        if self._key_by_topic is not None or self._value_by_topic is not None:
            raise _fk.ConfigError(
                "create_batch() cannot use a Schema Registry serializer: a batch does not know its "
                "topic until send_batch, and the schema's subject depends on it. Serialize first "
                "(serializer(value, SerializationContext(topic, MessageField.VALUE))) into a "
                "producer without that serializer, or use send()")
        return BatchBuilder(self._batch_size, self._key_serializer, self._value_serializer)

    async def send_batch(self, batch: BatchBuilder, topic: str, *, partition: int):
        """Queue the batch's records to ``topic``'s ``partition``; returns a future of the
        batch's ``RecordMetadata`` (its first record's offset; ``timestamp`` -1 unless the topic
        uses log-append time, as aiokafka's)."""
        if self._closed:
            raise _error("ProducerClosed", _fk.ProducerClosedError)
        partitions = await self._partitions(topic)
        if partition is None or not (type(partition) is int and 0 <= partition < len(partitions)):
            raise AssertionError("Unrecognized partition")
        if self._transactional and self._p.transaction_state != "IN_TRANSACTION":
            raise _error("IllegalOperation", _fk.IllegalStateError,
                         "Can't send messages while not in transaction")
        batch.close()
        records = batch._records
        loop = asyncio.get_running_loop()
        outer = loop.create_future()
        if not records:
            outer.set_result(None)
            return outer
        inners = []
        try:
            for key, value, ts, headers in records:
                inners.append(self._ap.send(topic, value, key, partition, ts, headers))
        except _fk.KafkaError as e:
            raise _convert(e) from None
        state = [len(inners)]
        first_ts = records[0][2]
        acks0 = self._acks0

        def done(_f) -> None:
            state[0] -= 1
            if state[0] or outer.done():
                return
            for f in inners:
                if f.exception() is not None:
                    outer.set_exception(_wrap(f.exception()))
                    return
            if acks0:
                outer.set_result(None)
                return
            md = inners[0].result()
            log_append = md.timestamp != first_ts
            outer.set_result(RecordMetadata(
                topic, partition, TopicPartition(topic, partition), md.offset,
                md.timestamp if log_append else -1, 1 if log_append else 0, None))

        for f in inners:
            f.add_done_callback(done)
        return outer

    # -- transactions --------------------------------------------------------------------------
    def _ensure_transactional(self) -> None:
        if not self._transactional:
            raise _error("IllegalOperation", _fk.IllegalStateError,
                         "You need to configure transaction_id to use transactions")

    async def begin_transaction(self) -> None:
        """Begin a transaction (getting the producer id first if ``start()`` did not)."""
        self._ensure_transactional()
        try:
            if self._p.transaction_state in ("UNINITIALIZED", None):
                await self._ap.init_transactions(self._request_timeout_ms / 1000)
            self._ap.begin_transaction()
        except _fk.IllegalStateError as e:
            raise _convert(e, _TxnStateError) from None
        except _fk.KafkaError as e:
            raise _convert(e) from None

    async def commit_transaction(self) -> None:
        """Deliver the transaction's records, then commit it."""
        self._ensure_transactional()
        try:
            await self._ap.commit_transaction()
        except _fk.IllegalStateError as e:
            raise _convert(e, _TxnStateError) from None
        except _fk.KafkaError as e:
            raise _convert(e) from None

    async def abort_transaction(self) -> None:
        """Abort the transaction: its records are never read by read_committed consumers."""
        self._ensure_transactional()
        try:
            await self._ap.abort_transaction()
        except _fk.IllegalStateError as e:
            raise _convert(e, _TxnStateError) from None
        except _fk.KafkaError as e:
            raise _convert(e) from None

    def transaction(self) -> "TransactionContext":
        """``async with producer.transaction():`` begins a transaction, commits it at the end,
        aborts it when the block raises."""
        return TransactionContext(self)

    async def send_offsets_to_transaction(self, offsets, group_id) -> None:
        """Commit ``{TopicPartition: offset or (offset, metadata)}`` for consumer group
        ``group_id`` as part of the current transaction."""
        self._ensure_transactional()
        if self._p.transaction_state != "IN_TRANSACTION":
            raise _error("IllegalOperation", _fk.IllegalStateError,
                         "Not in the middle of a transaction")
        if not group_id or not isinstance(group_id, str):
            raise ValueError(group_id)
        if not offsets or not isinstance(offsets, dict):
            raise ValueError(offsets)
        formatted = {}
        for tp, om in offsets.items():
            if not (isinstance(tp, tuple) and hasattr(tp, "topic") and hasattr(tp, "partition")):
                raise TypeError("Key should be TopicPartition instance")
            if isinstance(om, int):
                offset, metadata = om, ""
            else:
                try:
                    offset, metadata = om
                except Exception as exc:
                    raise ValueError(offsets) from exc
                if not isinstance(metadata, str):
                    raise TypeError("Metadata should be a string")
            formatted[(tp.topic, tp.partition)] = (offset, metadata)
        try:
            await self._ap.send_offsets_to_transaction(formatted, group_id)
        except _fk.KafkaError as e:
            raise _convert(e) from None


class TransactionContext:
    """aiokafka's ``producer.transaction()``: begin on entry; commit on a clean exit, abort when
    the block raised (unless the producer's error is fatal: then the block's error goes on)."""

    def __init__(self, producer: AIOKafkaProducer):
        self._producer = producer

    async def __aenter__(self) -> "TransactionContext":
        await self._producer.begin_transaction()
        return self

    async def __aexit__(self, exc_type, exc_value, tb) -> None:
        if exc_type is not None:
            if self._producer._p.transaction_state == "FATAL_ERROR":
                return
            await self._producer.abort_transaction()
        else:
            await self._producer.commit_transaction()
