"""kafka-python's ``KafkaProducer`` on :class:`fastkafka.Producer`.

Code written for kafka-python (3.0; 2.x's arguments are accepted too) runs with one changed
import::

    from fastkafka.compat.kafka_python import KafkaProducer    # was: from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers="localhost:9092",
                             value_serializer=lambda v: json.dumps(v).encode())
    md = producer.send("events", {"n": 1}).get(timeout=10)

Its keyword arguments are kafka-python's, with kafka-python's defaults where they differ from
fastkafka's (``linger_ms=0``, ``batch_size=16384``, ``reconnect_backoff_max_ms=30000``) and
kafka-python 3's rules (idempotence against ``acks``/``retries``/in-flight, ``api_version=None``
waiting for a broker in the constructor up to ``bootstrap_timeout_ms``); every one either works
as in kafka-python or raises ``KafkaConfigurationError`` at construction naming what to use
instead. ``send`` makes kafka-python's checks and returns its future (``get``, ``add_callback``,
``add_errback``, ``add_both``, ``succeeded``, ``failed``, ``is_done``, ``value``,
``exception``) of the installed kafka-python's ``RecordMetadata``. Every error raised is an
instance of both fastkafka's class and, when kafka-python is installed, kafka-python's
(:func:`kafka_python_error`): ``except kafka.errors.KafkaTimeoutError`` works unchanged.
Callbacks run on the producer's I/O thread, as kafka-python's run on its sender thread: keep
them short. docs/migration.md, "From kafka-python", lists every argument and method.
"""
from __future__ import annotations

import functools
import logging
import threading
import time
from collections import namedtuple
from typing import Any, Callable

from fastkafka import errors as _fk
from fastkafka.errors import ConfigError, KafkaError, SerializationError
from fastkafka._producer.router import PARTITIONER, unknown_partition
from fastkafka.producer import Producer
from fastkafka.schema_registry._serializers import topic_serializer

try:                                    # kafka-python installed: raise classes that are its own too
    import kafka.errors as _kp
    from kafka.producer.future import RecordMetadata
    from kafka.structs import TopicPartition
except ImportError:                     # pragma: no cover - exercised by test_without_kafka_python
    _kp = None
    #: kafka-python 3's TopicPartition and RecordMetadata (named tuples with its fields).
    TopicPartition = namedtuple("TopicPartition", ["topic", "partition"])
    RecordMetadata = namedtuple("RecordMetadata", [
        "topic", "partition", "topic_partition", "offset", "timestamp", "checksum",
        "serialized_key_size", "serialized_value_size", "serialized_header_size"])

log = logging.getLogger("fastkafka")

__all__ = ["KafkaProducer", "FutureRecordMetadata", "RecordMetadata", "TopicPartition",
           "KafkaError", "KafkaTimeoutError", "KafkaConfigurationError", "IllegalStateError",
           "MessageSizeTooLargeError", "UnsupportedVersionError", "KafkaConnectionError",
           "NoBrokersAvailable", "TransactionAbortedError", "SerializationError",
           "kafka_python_error"]


# -- errors -------------------------------------------------------------------------------------
# Every error the layer raises (or hands to a future, a callback or an errback) is an instance of
# a class that is both fastkafka's (``except fastkafka.errors.ConfigError``) and, when
# kafka-python is installed, kafka-python's (``except kafka.errors.KafkaConfigurationError``);
# without kafka-python, the layer's class of the same name. fastkafka's errors are translated at
# the layer's edge (kafka_python_error), never on the success path.

def _public(name: str, fk_cls: type, doc: str) -> type:
    kp_cls = getattr(_kp, name, None)
    bases = (fk_cls,) if kp_cls is None else (fk_cls, kp_cls)
    return type(name, bases, {"__module__": __name__, "__qualname__": name, "__doc__": doc,
                              "_kafka_python": True, "__hash__": object.__hash__})


KafkaConfigurationError = _public(
    "KafkaConfigurationError", ConfigError,
    "A setting kafka-python refuses (also fastkafka's ConfigError, a ValueError).")
KafkaTimeoutError = _public(
    "KafkaTimeoutError", _fk.KafkaTimeoutError,
    "Metadata, buffer memory, flush or a transaction step not done in time.")
MessageSizeTooLargeError = _public(
    "MessageSizeTooLargeError", _fk.RecordTooLargeError,
    "A record larger than max_request_size (or than the broker accepts).")
IllegalStateError = _public(
    "IllegalStateError", _fk.IllegalStateError,
    "A call the producer's state does not allow (closed, no transactional_id, ...).")
UnsupportedVersionError = _public(
    "UnsupportedVersionError", _fk.UnsupportedVersionError,
    "The broker does not support an API version the producer needs.")
KafkaConnectionError = _public(
    "KafkaConnectionError", _fk.NetworkError, "A broker connection failed.")
NoBrokersAvailable = _public(
    "NoBrokersAvailable", _fk.AllBrokersDownError,
    "No broker could be reached (kafka-python 2's name; kafka-python 3 raises KafkaTimeoutError "
    "from the constructor instead, as this layer does).")
TransactionAbortedError = _public(
    "TransactionAbortedError", _fk.TransactionAbortedError,
    "A record failed because its transaction was aborted.")

_PUBLIC = {c.__name__: c for c in (
    KafkaConfigurationError, KafkaTimeoutError, MessageSizeTooLargeError, IllegalStateError,
    UnsupportedVersionError, KafkaConnectionError, NoBrokersAvailable, TransactionAbortedError)}

# fastkafka's client-side classes -> kafka-python's class name (the most specific match wins)
_CLIENT_NAMES = {
    _fk.ConfigError: "KafkaConfigurationError",
    _fk.KafkaTimeoutError: "KafkaTimeoutError",
    _fk.RecordTooLargeError: "MessageSizeTooLargeError",
    _fk.ProducerClosedError: "IllegalStateError",
    _fk.IllegalStateError: "IllegalStateError",
    _fk.AllBrokersDownError: "NoBrokersAvailable",
    _fk.CorrelationIdMismatchError: "CorrelationIdError",
    _fk.CorruptFrameError: "KafkaProtocolError",
    _fk.InvalidBrokerResponseError: "KafkaProtocolError",
    _fk.SaslAuthenticationError: "SaslAuthenticationFailedError",
    _fk.TlsAuthenticationError: "KafkaConnectionError",
    _fk.NetworkError: "KafkaConnectionError",
    _fk.TransactionAbortedError: "TransactionAbortedError",
    _fk.UnsupportedVersionError: "UnsupportedVersionError",
}
# where kafka-python raises a builtin ValueError/TypeError (a partition that does not exist, a
# key/value/header of the wrong type), fastkafka's classes are those builtins already: as they are
_AS_IS = (_fk.UnknownPartitionError, _fk.InvalidRecordError)
_TRANSLATED: dict = {}
_TWIN_LOCK = threading.Lock()        # fastkafka class -> its kafka-python twin (or None: raised as is)


def _kp_class_for(fk_cls: type, code) -> type | None:
    """kafka-python's class for a fastkafka error class (and its code), None if it has none."""
    if issubclass(fk_cls, _AS_IS):
        return None
    for base in fk_cls.__mro__:
        name = _CLIENT_NAMES.get(base)
        if name is not None:
            return _PUBLIC.get(name) or getattr(_kp, name, None)
    if _kp is not None and issubclass(fk_cls, _fk.BrokerError) and isinstance(code, int):
        kp_cls = _kp.for_code(code)
        return _PUBLIC.get(kp_cls.__name__, kp_cls)
    return getattr(_kp, "KafkaError", None)


def _twin(fk_cls: type, code) -> type | None:
    key = (fk_cls, code) if issubclass(fk_cls, _fk.BrokerError) else fk_cls
    try:
        return _TRANSLATED[key]
    except KeyError:
        pass
    with _TWIN_LOCK:                    # one twin class per key, whichever thread comes first
        cls = _TRANSLATED.get(key, _TWIN_LOCK)
        if cls is _TWIN_LOCK:
            cls = _TRANSLATED[key] = _make_twin(fk_cls, code)
    return cls


def _make_twin(fk_cls: type, code) -> type | None:
    target = _kp_class_for(fk_cls, code)
    if target is None or issubclass(fk_cls, target):
        cls = None
    elif getattr(target, "_kafka_python", False) and target.__bases__[0] is fk_cls:
        cls = target                    # exactly the public class's fastkafka side
    else:
        name = target.__name__
        try:
            cls = type(name, (fk_cls, target), {"__module__": __name__, "__qualname__": name,
                                                "_kafka_python": True, "__hash__": object.__hash__})
        except TypeError:               # no consistent MRO: fastkafka's class, as is
            cls = None
        if cls is not None:
            cls.__reduce__ = _reduce_twin
    return cls


def _reduce_twin(self):
    # pickled as the fastkafka error it came from, translated again on load
    fk_cls = next(c for c in type(self).__mro__[1:] if not getattr(c, "_kafka_python", False)
                  and issubclass(c, KafkaError))
    state = {k: v for k, v in self.__dict__.items() if k not in ("message", "code")}
    return (_rebuild_twin, (fk_cls, self.message, self.code, state))


def _rebuild_twin(fk_cls, message, code, state):
    return kafka_python_error(_fk._rebuild(fk_cls, message, code, state))


for _cls in _PUBLIC.values():
    _cls.__reduce__ = _reduce_twin
del _cls


def kafka_python_error(exc: BaseException) -> BaseException:
    """``exc`` as kafka-python raises it: a fastkafka error becomes an instance of its twin class
    (fastkafka's class and kafka-python's, same message, code and attributes); a failed
    serializer's own exception is raised as kafka-python raises it (not wrapped); anything else
    is returned as is."""
    if not isinstance(exc, KafkaError) or getattr(exc, "_kafka_python", False):
        return exc
    if isinstance(exc, SerializationError) and exc.__cause__ is not None:
        return exc.__cause__
    cls = _twin(type(exc), exc.code)
    if cls is None:
        return exc
    out = cls.__new__(cls)
    out.__dict__.update(exc.__dict__)
    out.args = exc.args
    out.__cause__, out.__traceback__ = exc.__cause__, exc.__traceback__
    return out


def _raise_as_kafka_python(exc: BaseException):
    out = kafka_python_error(exc)
    if out is exc:
        raise exc
    raise out.with_traceback(exc.__traceback__) from out.__cause__


def _translating(method):
    """Wrap a method so that the fastkafka errors it raises are raised as kafka-python's."""
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except KafkaError as e:
            _raise_as_kafka_python(e)
    return wrapper


# kafka-python's defaults where fastkafka's differ (docs/migration.md says why each is kept).
_KP_DEFAULTS = {"linger_ms": 0, "batch_size": 16384, "buffer_memory": 32 * 1024 * 1024,
                "reconnect_backoff_max_ms": 30000,
                # no bound of its own for an unknown topic: KafkaTimeoutError at max_block_ms
                "topic_metadata_propagation_max_ms": 2**31 - 1}

# Same name, same meaning: passed to fastkafka.Producer as given.
_SAME = frozenset({
    "client_id", "acks", "enable_idempotence", "transactional_id", "transaction_timeout_ms",
    "delivery_timeout_ms", "batch_size", "linger_ms", "buffer_memory", "connections_max_idle_ms",
    "max_block_ms", "max_request_size", "metadata_max_age_ms", "retry_backoff_ms",
    "request_timeout_ms", "reconnect_backoff_ms", "reconnect_backoff_max_ms",
    "max_in_flight_requests_per_connection", "security_protocol", "ssl_context",
    "ssl_check_hostname", "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password",
    "sasl_mechanism", "sasl_plain_username", "sasl_plain_password", "client_dns_lookup"})

_RAW = (bytes, bytearray, memoryview)      # what kafka-python sends without a serializer
_TCP_NODELAY = [(6, 1, 1)]          # (IPPROTO_TCP, TCP_NODELAY, 1): what fastkafka sets anyway

# Arguments that only tune kafka-python's own machinery: accepted (checked loosely), no effect.
_NO_EFFECT = {
    "api_version_auto_timeout_ms": "kafka-python 2's version probe timeout: each connection "
                                   "negotiates with ApiVersions (bootstrap_timeout_ms bounds the "
                                   "constructor's wait)",
    "sock_chunk_bytes": "kafka-python 2's read chunking",
    "sock_chunk_buffer_count": "kafka-python 2's read chunking",
    "selector": "the producer's I/O loop is its own (epoll), whatever selector is given",
}

# Arguments with no equivalent: only their default is accepted; any other value is a
# KafkaConfigurationError with what to do instead.
_DEFAULT_ONLY = {
    "send_buffer_bytes": (None, "the kernel's autotuned socket buffers are used; remove it"),
    "receive_buffer_bytes": (None, "the kernel's autotuned socket buffers are used; remove it"),
    "socket_options": (_TCP_NODELAY, "the producer sets TCP_NODELAY and nothing else"),
    "ssl_crlfile": (None, "build an ssl.SSLContext (load_verify_locations, verify_flags with "
                          "ssl.VERIFY_CRL_CHECK_LEAF) and pass ssl_context"),
    "ssl_ciphers": (None, "build an ssl.SSLContext (set_ciphers) and pass ssl_context"),
    "metric_reporters": ([], "there are no reporters: call metrics() for the values"),
    "kafka_client": (None, "the network client is fastkafka's own"),
    "proxy_url": (None, "SOCKS5 proxies are not supported"),
    "socks5_proxy": (None, "SOCKS5 proxies are not supported"),
    "allow_auto_create_topics": (True, "metadata requests always allow the broker to create the "
                                       "topic (its auto.create.topics.enable decides)"),
}


def _is_default(name: str, value, default) -> bool:
    if value == default or (default is None and value in ([], ())):
        return True
    if name == "kafka_client":          # kafka-python's own default class, passed explicitly
        return getattr(value, "__module__", "").startswith("kafka.") and \
            getattr(value, "__name__", "") == "KafkaNetClient"
    return False


def _servers(value) -> list[str]:
    """kafka-python's bootstrap_servers: 'host[:port]' or a list of them, port 9092 by default."""
    items = [v.strip() for v in value.split(",")] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items:
        raise ConfigError(f"bootstrap_servers must be 'host[:port]' or a list of them, got {value!r}")
    out = []
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(f"bootstrap_servers entries must be strings, got {item!r}")
        host_only = (":" not in item or (item.startswith("[") and item.endswith("]")))
        out.append(f"{item}:9092" if host_only else item)
    return out


def _api_version(value):
    """kafka-python's api_version: None (probe the broker: the constructor waits for it), a tuple
    of ints, or a deprecated version string ('2.6'; 'auto' = None). Returns the tuple or None.
    It chooses no wire format here: each connection negotiates its API versions (ApiVersions)."""
    if isinstance(value, str):
        deprecated = value
        try:
            value = None if value == "auto" else tuple(map(int, value.split(".")))
        except ValueError:
            raise KafkaConfigurationError(f"api_version={deprecated!r}: a version such as (2, 6) "
                                          f"or None was expected") from None
        log.warning('use api_version=%s [tuple] -- "%s" as str is deprecated', value, deprecated)
    if value is not None and not (isinstance(value, tuple) and value
                                  and all(isinstance(x, int) for x in value)):
        raise KafkaConfigurationError(
            f"api_version must be None, a tuple such as (2, 6) or a string, got {value!r} "
            f"(API versions are negotiated with each broker through ApiVersions)")
    if value is not None:
        log.debug("api_version=%r chooses nothing: the producer negotiates API versions with each "
                  "broker (ApiVersions)", value)
    return value


def _idempotence(configs: dict, api_version) -> None:
    """kafka-python 3's rules (KIP-679) on enable_idempotence, acks, retries and
    max_in_flight_requests_per_connection, with its messages: a conflict with idempotence left at
    its default turns idempotence off with a WARNING; with enable_idempotence=True or a
    transactional_id it is a KafkaConfigurationError naming the argument."""
    user_set = "enable_idempotence" in configs
    idempotent = configs.get("enable_idempotence", True)
    transactional = configs.get("transactional_id")
    if configs.get("acks") == "all":
        configs["acks"] = -1
    if user_set and not idempotent and transactional:
        raise KafkaConfigurationError("Cannot set transactional_id without enable_idempotence.")
    if transactional:
        idempotent = user_set = True
    if idempotent:
        conflicts = []
        if "acks" in configs and configs["acks"] != -1:
            conflicts.append(("acks", configs["acks"]))
        if "retries" in configs and configs["retries"] == 0:
            conflicts.append(("retries", 0))
        inflight = configs.get("max_in_flight_requests_per_connection")
        if isinstance(inflight, int) and inflight > 5:
            conflicts.append(("max_in_flight_requests_per_connection", inflight))
        if conflicts:
            conflict_str = ", ".join("%s=%r" % kv for kv in conflicts)
            if user_set:
                raise KafkaConfigurationError(
                    "enable_idempotence=True is incompatible with user-provided %s" % (conflict_str,))
            log.warning("Idempotence will be disabled because user-provided config conflicts with"
                        " idempotent defaults: %s", conflict_str)
            idempotent = False
    if idempotent and api_version is not None and api_version < (0, 11):
        if user_set:
            raise KafkaConfigurationError(
                "Idempotent/Transactional producer requires broker >= 0.11 (got api_version=%s)"
                % (api_version,))
        log.warning("Idempotence will be disabled because broker api_version %s < (0, 11)",
                    api_version)
        idempotent = False
    configs["enable_idempotence"] = idempotent


def _compression(value, api_version) -> str:
    """compression_type as kafka-python checks it (ValueError for an unknown codec, or one the
    given api_version predates)."""
    if value is None:
        return "none"
    if value not in ("gzip", "snappy", "lz4", "zstd"):
        raise KafkaConfigurationError(f"Not supported codec: {value}")
    if api_version is not None:
        if value == "lz4" and api_version < (0, 8, 2):
            raise KafkaConfigurationError("LZ4 Requires >= Kafka 0.8.2 Brokers")
        if value == "zstd" and api_version < (2, 1):
            raise KafkaConfigurationError("Zstd Requires >= Kafka 2.1 Brokers")
    return value


def _is_kafka_python_default_partitioner(obj) -> bool:
    cls = type(obj)
    return (cls.__module__.startswith("kafka.partitioner")
            and cls.__name__ in ("DefaultPartitioner", "StickyPartitioner"))


def _adapt_partitioner(fn: Callable) -> Callable:
    """kafka-python's ``partitioner(key_bytes, all_partitions, available_partitions)`` as
    fastkafka's ``(key, num_partitions, available_partitions)``; the key is the serialized one."""
    def partition(key, num_partitions, available):
        return fn(key, list(range(num_partitions)), list(available))
    partition.__qualname__ = f"kafka_python_partitioner({getattr(fn, '__qualname__', fn)!s})"
    return partition


class _Cluster:
    """What a kafka-python ``Partitioner.partition(..., cluster)`` reads of the cluster."""

    def __init__(self, partitions: list[int], available: list[int]):
        self._all, self._available = set(partitions), set(available)

    def partitions_for_topic(self, topic):
        return set(self._all)

    def available_partitions_for_topic(self, topic):
        return set(self._available)


def _token_provider(provider) -> Callable:
    """kafka-python's AbstractTokenProvider (``token()``, ``extensions()``) as fastkafka's
    callable() -> (token, expiry): asked again before the JWT's ``exp``, or every 5 minutes for
    a token that is not a JWT (kafka-python asks at every connection); its extensions are sent."""
    from fastkafka._net.jaas import TokenMethodProvider

    if callable(provider) and not hasattr(provider, "token"):
        return provider
    if not callable(getattr(provider, "token", None)):
        raise ConfigError("sasl_oauth_token_provider must have a token() method (kafka-python's "
                          "AbstractTokenProvider) or be a callable() -> (token, expiry)")
    return TokenMethodProvider(provider)


if "log_start_offset" in RecordMetadata._fields:        # kafka-python 2.x installed
    def _record_metadata(md, header_size: int) -> RecordMetadata:
        return RecordMetadata(md.topic, md.partition, TopicPartition(md.topic, md.partition),
                              md.offset, md.timestamp, -1, None, md.serialized_key_size,
                              md.serialized_value_size, header_size)
else:
    def _record_metadata(md, header_size: int) -> RecordMetadata:
        return RecordMetadata(md.topic, md.partition, TopicPartition(md.topic, md.partition),
                              md.offset, md.timestamp, None, md.serialized_key_size,
                              md.serialized_value_size, header_size)


class FutureRecordMetadata:
    """kafka-python's future of one ``send``: ``get(timeout=None)``, ``add_callback(f, *args,
    **kwargs)`` (``f(*args, metadata, **kwargs)``), ``add_errback`` (``f(*args, exception,
    **kwargs)``), ``add_both``, ``succeeded()``, ``failed()``, ``retriable()``, ``is_done``,
    ``value``, ``exception``. Callbacks added before completion run on the producer's I/O thread;
    added after, at once on the caller's. A callback that raises is logged and skipped. The
    exception is kafka-python's class (and fastkafka's): kafka_python_error."""

    __slots__ = ("_f", "_header_size", "_md", "_exc")

    def __init__(self, future, header_size: int):
        self._f, self._header_size, self._md, self._exc = future, header_size, None, None

    def _convert(self, md) -> RecordMetadata:
        out = self._md
        if out is None:
            out = self._md = _record_metadata(md, self._header_size)
        return out

    def _error(self, err):
        """The delivery error as kafka-python's class, the same instance every time."""
        out = self._exc
        if out is None:
            out = self._exc = kafka_python_error(err)
        return out

    @property
    def is_done(self) -> bool:
        return self._f.done()

    def succeeded(self) -> bool:
        return self._f.done() and self._f.exception(0) is None

    def failed(self) -> bool:
        return self._f.done() and self._f.exception(0) is not None

    def retriable(self) -> bool:
        exc = self.exception
        return bool(getattr(exc, "retriable", False))

    @property
    def value(self) -> RecordMetadata | None:
        """The RecordMetadata once delivered, else None."""
        return self._convert(self._f.metadata) if self.succeeded() else None

    @property
    def exception(self) -> BaseException | None:
        """The delivery error once failed, else None."""
        if not self._f.done():
            return None
        err = self._f.exception(0)
        return None if err is None else self._error(err)

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """The RecordMetadata; raises the delivery error, or KafkaTimeoutError after ``timeout``
        seconds (forever when None)."""
        try:
            return self._convert(self._f.get(timeout))
        except KafkaError as e:
            if not self._f.done():          # the wait timed out: not the record's error
                _raise_as_kafka_python(e)
            out = self._error(e)
            if out is e:
                raise
            raise out.with_traceback(e.__traceback__) from out.__cause__

    def add_callback(self, f: Callable, *args, **kwargs) -> "FutureRecordMetadata":
        """Call ``f(*args, metadata, **kwargs)`` once the record is delivered."""
        def on_done(err, md):
            if err is None:
                f(*args, self._convert(md), **kwargs)
        self._f.add_callback(on_done)
        return self

    def add_errback(self, f: Callable, *args, **kwargs) -> "FutureRecordMetadata":
        """Call ``f(*args, exception, **kwargs)`` if the record fails."""
        def on_done(err, md):
            if err is not None:
                f(*args, self._error(err), **kwargs)
        self._f.add_callback(on_done)
        return self

    def add_both(self, f: Callable, *args, **kwargs) -> "FutureRecordMetadata":
        """``add_callback`` and ``add_errback`` of the same ``f``."""
        self.add_callback(f, *args, **kwargs)
        return self.add_errback(f, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<kafka_python.FutureRecordMetadata {self._f!r}>"


def _kp_value(name: str, value):
    """A java_metrics() value as kafka-python gives it: a float; None (no event in the windows)
    as kafka-python's empty Avg (0) or Max (-inf); metadata-age before any metadata stays None."""
    if value is None:
        if name.endswith("-max"):
            return float("-inf")
        return None if name == "metadata-age" else 0.0
    return float(value)


def kafka_python_metrics(java: dict) -> dict:
    """A java_metrics() document in kafka-python's ``KafkaProducer.metrics()`` shape: one flat
    group per node (``producer-node-metrics.node-1``) and per topic
    (``producer-topic-metrics.<topic>``)."""
    out = {"producer-metrics": {k: _kp_value(k, v)
                                for k, v in java.get("producer-metrics", {}).items()}}
    for group in ("producer-node-metrics", "producer-topic-metrics"):
        for key, metrics in java.get(group, {}).items():
            out[f"{group}.{key}"] = {k: _kp_value(k, v) for k, v in metrics.items()}
    return out


class KafkaProducer:
    """kafka-python's ``KafkaProducer(**configs)`` on :class:`fastkafka.Producer`; see the module
    docstring and docs/migration.md. ``producer.fastkafka`` is the Producer underneath."""

    @_translating
    def __init__(self, **configs: Any):
        self._closed = True                 # until the Producer exists (close() and __del__)
        settings: dict[str, Any] = dict(_KP_DEFAULTS)
        # (field, serialize(topic, headers, data)): kafka-python Serializer objects
        self._serialize_fields: list[tuple[str, Callable]] = []
        self._object_partitioner = None
        configs = dict(configs)
        settings["bootstrap_servers"] = _servers(configs.pop("bootstrap_servers", "localhost"))
        api_version = _api_version(configs.pop("api_version", None))
        bootstrap_timeout_ms = configs.pop("bootstrap_timeout_ms", 30000)
        self._metrics_enabled = bool(configs.pop("metrics_enabled", True))
        _idempotence(configs, api_version)
        if configs.get("batch_size") == 0:
            configs["batch_size"] = 1       # kafka-python: 0 disables batching; one record a batch
        for name, value in configs.items():
            if name in _SAME:
                settings[name] = value
            elif name in _NO_EFFECT:
                log.debug("%s=%r has no effect: %s", name, value, _NO_EFFECT[name])
            elif name in _DEFAULT_ONLY:
                default, instead = _DEFAULT_ONLY[name]
                if not _is_default(name, value, default):
                    raise KafkaConfigurationError(
                        f"{name}={value!r} is not supported (kafka-python setting): {instead}")
            elif name in ("key_serializer", "value_serializer"):
                self._serializer(name, value, settings)
            elif name == "compression_type":
                settings[name] = _compression(value, api_version)
            elif name == "retries":
                settings[name] = min(value, 2**31 - 1) if isinstance(value, float) else value
            elif name == "partitioner":
                self._partitioner(value, settings)
            elif name == "receive_message_max_bytes":
                settings["max_response_size"] = value
            elif name == "sasl_oauth_token_provider":
                settings[name] = None if value is None else _token_provider(value)
            elif name.startswith("sasl_kerberos_"):    # kafka-python's defaults pass without GSSAPI
                if value is not None and (value != "kafka" or configs.get("sasl_mechanism") == "GSSAPI"):
                    settings[name] = str(value) if type(value).__module__.startswith("gssapi") else value
            else:
                settings[name] = value      # a fastkafka setting, or a ConfigError naming the key
        if self._serialize_fields or self._object_partitioner is not None:
            # the slow path (_prepare) serializes every field itself, callables too
            for field in ("key", "value"):
                fn = settings.pop(f"{field}_serializer", None)
                if fn is not None:
                    by_topic = topic_serializer(fn, field)   # a Schema Registry serializer
                    self._serialize_fields.append(
                        (field, (lambda t, h, d, fn=fn: fn(d)) if by_topic is None else
                         (lambda t, h, d, fn=by_topic: fn(t, d))))
        self._producer = Producer(**settings)
        # kafka-python refuses an unserialized key/value that is not bytes before any wait
        serialized = {field for field, _ser in self._serialize_fields}
        self._raw_key = "key" not in serialized and settings.get("key_serializer") is None
        self._raw_value = "value" not in serialized and settings.get("value_serializer") is None
        self._closed = False
        if api_version is None:
            self._bootstrap(settings["bootstrap_servers"], bootstrap_timeout_ms)

    def _bootstrap(self, servers: list, timeout_ms) -> None:
        """As kafka-python's constructor without api_version: wait for a broker's answer up to
        bootstrap_timeout_ms, else close and raise KafkaTimeoutError('Unable to bootstrap ...')."""
        p = self._producer
        metadata = p._metadata
        version = metadata.request_update()
        p._sender.wakeup()
        try:
            metadata.await_update(version, max(timeout_ms, 0) / 1000.0, None)
        except _fk.KafkaTimeoutError:
            why = metadata.describe_connection_errors()
            self.close(0)
            raise KafkaTimeoutError(f"Unable to bootstrap from {','.join(servers)} within "
                                    f"bootstrap_timeout_ms={timeout_ms}" + (f": {why}" if why else "")
                                    + "; pass api_version=(x, y) to connect on first use "
                                      "instead") from None
        except BaseException:
            self.close(0)                   # e.g. authentication refused: raised as it is
            raise

    def _serializer(self, name: str, value, settings: dict) -> None:
        if value is not None and not callable(value) and callable(getattr(value, "serialize", None)):
            self._serialize_fields.append((name[:-len("_serializer")], value.serialize))
        else:
            settings[name] = value

    def _partitioner(self, value, settings: dict) -> None:
        if value is None or _is_kafka_python_default_partitioner(value):
            return                          # murmur2 of the serialized key, as kafka-python's
        if callable(getattr(value, "partition", None)) and not callable(value):
            self._object_partitioner = value
        elif callable(value):
            settings["partitioner"] = _adapt_partitioner(value)
        else:
            raise ConfigError(f"partitioner must be a callable(key_bytes, all_partitions, "
                              f"available_partitions) -> int or a kafka.partitioner.Partitioner, "
                              f"got {type(value).__name__}")

    @property
    def fastkafka(self) -> Producer:
        """The :class:`fastkafka.Producer` this runs on."""
        return self._producer

    @property
    def config(self) -> dict:
        """The settings in effect, by fastkafka name (secrets read ``"***"``)."""
        return self._producer.config.as_dict()

    def __repr__(self) -> str:
        return f"<fastkafka.compat.kafka_python.KafkaProducer on {self._producer!r}>"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, topic: str, value=None, key=None, headers=None, partition=None,
             timestamp_ms=None) -> FutureRecordMetadata:
        """Queue one record; returns kafka-python's :class:`FutureRecordMetadata`. ``value`` and
        ``key`` go through the serializers (also when None, as in kafka-python); ``headers`` is a
        list of (str, bytes) tuples. Raises at once what kafka-python raises: ValueError when
        both key and value are None or the partition is unknown, TypeError for badly typed
        headers or a serialized key/value that is not bytes, a failing serializer's own
        exception, KafkaTimeoutError when metadata did not come within max_block_ms,
        MessageSizeTooLargeError, IllegalStateError once closed."""
        if value is None and key is None:
            raise ValueError("Need at least one: key or value")
        if self._raw_value and value is not None and type(value) not in _RAW:
            raise TypeError("Unsupported type for serialized value: %s" % type(value))
        if self._raw_key and key is not None and type(key) not in _RAW:
            raise TypeError("Unsupported type for serialized key: %s" % type(key))
        header_size = -1
        if headers is not None:
            if type(headers) is not list:
                raise TypeError("headers must be list-type")
            header_size = 0
            for item in headers:
                if not (type(item) is tuple and len(item) == 2 and type(item[0]) is str
                        and isinstance(item[1], bytes)):
                    raise TypeError("All headers items must be (str, bytes) tuples")
                header_size += len(item[0].encode()) + len(item[1])
            if not headers:
                header_size = -1
        try:
            if self._serialize_fields or self._object_partitioner is not None:
                value, key, partition = self._prepare(topic, value, key, headers, partition)
            return FutureRecordMetadata(
                self._producer.send(topic, value, key, partition, timestamp_ms, headers),
                header_size)
        except KafkaError as e:
            _raise_as_kafka_python(e)

    def _prepare(self, topic, value, key, headers, partition):
        """The slow path: kafka-python Serializer objects (``serialize(topic, headers, data)``)
        and a kafka-python Partitioner object (``partition(topic, key, serialized_key, value,
        serialized_value, cluster)``)."""
        raw_key, raw_value = key, value
        p = self._producer
        for field, ser in self._serialize_fields:
            obj = value if field == "value" else key
            out = ser(topic, headers or [], obj)     # its exception propagates, as in kafka-python
            if field == "value":
                value = out
            else:
                key = out
        if partition is None and self._object_partitioner is not None:
            parts = p.partitions_for(topic)
            available = p._metadata.cluster.available_partitions(topic) or parts
            partition = self._object_partitioner.partition(
                topic, raw_key, key, raw_value, value, _Cluster(parts, available))
            if partition is None or not isinstance(partition, int) or partition not in parts:
                raise unknown_partition(PARTITIONER, topic, partition, len(parts))
        return value, key, partition

    @_translating
    def flush(self, timeout: float | None = None) -> None:
        """Send what is queued and wait for it; KafkaTimeoutError when records are still
        undelivered after ``timeout`` seconds (as kafka-python)."""
        left = self._producer.flush(timeout)
        if left:
            raise KafkaTimeoutError(f"Timeout waiting for future: {left} record(s) not delivered "
                                    f"after flush({timeout})")

    @_translating
    def close(self, timeout: float | None = None, null_logger: bool = False) -> None:
        """Deliver what is queued (up to ``timeout`` seconds, forever when None), then stop and
        close the kafka-python Serializer objects given as key/value_serializer. A second close
        does nothing; a negative timeout is kafka-python's ValueError."""
        if timeout is not None and not 0 <= timeout:
            raise ValueError("Invalid timeout: %s" % timeout)
        if self._closed:
            return
        self._closed = True
        self._producer.close(timeout)
        for _field, ser in self._serialize_fields:
            close = getattr(getattr(ser, "__self__", None), "close", None)
            if callable(close):
                close()

    @_translating
    def partitions_for(self, topic: str) -> set[int]:
        """The partition numbers of ``topic``, a set (waits for metadata up to max_block_ms)."""
        return set(self._producer.partitions_for(topic))

    def bootstrap_connected(self) -> bool:
        """True once a broker answered (the producer has cluster metadata)."""
        return self._producer.metrics()["metadata_version"] > 0

    def metrics(self, raw: bool = False) -> dict | None:
        """kafka-python's ``metrics()``: ``{group: {name: float}}`` with the Java producer's
        metric names and windows (:meth:`fastkafka.Producer.java_metrics`), groups
        ``"producer-metrics"``, ``"producer-node-metrics.node-<id>"`` and
        ``"producer-topic-metrics.<topic>"``. An average with no event in the windows is 0.0
        and such a maximum ``-inf``, as kafka-python reports them; None with
        ``metrics_enabled=False``, as kafka-python. ``raw=True`` returns fastkafka's own
        counters (:meth:`fastkafka.Producer.metrics`), not kafka-python's ``KafkaMetric``
        objects."""
        if not self._metrics_enabled:
            return None
        if raw:
            return self._producer.metrics()
        return kafka_python_metrics(self._producer.java_metrics())

    # -- transactions: kafka-python's calls, fastkafka's semantics --------------------------
    @_translating
    def init_transactions(self, timeout: float | None = None) -> None:
        """As kafka-python's: waits up to max_block_ms (or ``timeout`` seconds, fastkafka's)."""
        self._producer.init_transactions(timeout)

    @_translating
    def begin_transaction(self) -> None:
        self._producer.begin_transaction()

    @_translating
    def send_offsets_to_transaction(self, offsets, consumer_group_id) -> None:
        """``offsets``: {TopicPartition: OffsetAndMetadata(offset, metadata, leader_epoch)}
        (kafka-python's; the leader epoch is committed with the offset), or fastkafka's forms;
        ``consumer_group_id``: the group id, or a consumer's ``group_metadata()``."""
        if isinstance(offsets, dict):
            offsets = {tuple(tp): ((v.offset, v.metadata, getattr(v, "leader_epoch", -1))
                                   if hasattr(v, "offset") else v)
                       for tp, v in offsets.items()}
        self._producer.send_offsets_to_transaction(offsets, consumer_group_id)

    @_translating
    def commit_transaction(self, timeout: float | None = None) -> None:
        self._producer.commit_transaction(timeout)

    @_translating
    def abort_transaction(self, timeout: float | None = None) -> None:
        self._producer.abort_transaction(timeout)
