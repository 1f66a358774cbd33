"""kafka-python's ``KafkaProducer`` on :class:`fastkafka.Producer`.

Code written for kafka-python runs with one changed import::

    from fastkafka.compat.kafka_python import KafkaProducer    # was: from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers="localhost:9092",
                             value_serializer=lambda v: json.dumps(v).encode())
    md = producer.send("events", {"n": 1}).get(timeout=10)

Its keyword arguments are kafka-python's, with kafka-python's defaults where they differ from
fastkafka's (``linger_ms=0``, ``batch_size=16384``, ``buffer_memory=32 MiB``,
``reconnect_backoff_max_ms=30000``); every one either works as in kafka-python or raises
:class:`~fastkafka.errors.ConfigError` at construction naming what to use instead. ``send``
returns kafka-python's future (``get``, ``add_callback``, ``add_errback``, ``add_both``,
``succeeded``, ``failed``, ``is_done``, ``value``, ``exception``) of kafka-python's
``RecordMetadata``. Callbacks run on the producer's I/O thread, as kafka-python's run on its
sender thread: keep them short. docs/migration.md, "From kafka-python", lists every argument.
"""
from __future__ import annotations

import logging
import time
from collections import namedtuple
from typing import Any, Callable

from fastkafka.errors import (ConfigError, IllegalStateError, KafkaError, KafkaTimeoutError,
                              RecordTooLargeError, SerializationError)
from fastkafka._producer.router import PARTITIONER, unknown_partition
from fastkafka.producer import Producer

log = logging.getLogger("fastkafka")

__all__ = ["KafkaProducer", "FutureRecordMetadata", "RecordMetadata", "TopicPartition",
           "KafkaError", "KafkaTimeoutError", "KafkaConfigurationError", "IllegalStateError",
           "MessageSizeTooLargeError", "SerializationError"]

#: kafka-python's names of fastkafka's errors (the same classes: ``except`` either name).
KafkaConfigurationError = ConfigError
MessageSizeTooLargeError = RecordTooLargeError

#: kafka-python's TopicPartition and RecordMetadata (named tuples with its fields).
TopicPartition = namedtuple("TopicPartition", ["topic", "partition"])
RecordMetadata = namedtuple("RecordMetadata", [
    "topic", "partition", "topic_partition", "offset", "timestamp", "log_start_offset",
    "checksum", "serialized_key_size", "serialized_value_size", "serialized_header_size"])

# kafka-python's defaults where fastkafka's differ (docs/migration.md says why each is kept).
_KP_DEFAULTS = {"linger_ms": 0, "batch_size": 16384, "buffer_memory": 32 * 1024 * 1024,
                "reconnect_backoff_max_ms": 30000}

# Same name, same meaning: passed to fastkafka.Producer as given.
_SAME = frozenset({
    "client_id", "acks", "enable_idempotence", "transactional_id", "transaction_timeout_ms",
    "delivery_timeout_ms", "batch_size", "linger_ms", "buffer_memory", "connections_max_idle_ms",
    "max_block_ms", "max_request_size", "metadata_max_age_ms", "retry_backoff_ms",
    "request_timeout_ms", "reconnect_backoff_ms", "reconnect_backoff_max_ms",
    "max_in_flight_requests_per_connection", "security_protocol", "ssl_context",
    "ssl_check_hostname", "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password",
    "sasl_mechanism", "sasl_plain_username", "sasl_plain_password", "client_dns_lookup"})

_TCP_NODELAY = [(6, 1, 1)]          # (IPPROTO_TCP, TCP_NODELAY, 1): what fastkafka sets anyway

# Arguments that only tune kafka-python's own machinery: accepted (checked loosely), no effect.
_NO_EFFECT = {
    "api_version_auto_timeout_ms": "there is no version probe at construction: each connection "
                                   "negotiates with ApiVersions",
    "bootstrap_timeout_ms": "the producer connects on first use; max_block_ms bounds the wait",
    "sock_chunk_bytes": "kafka-python's read chunking", "sock_chunk_buffer_count":
    "kafka-python's read chunking", "metrics_enabled": "the metrics are always kept",
}

# Arguments with no equivalent: only their default is accepted; any other value is a ConfigError
# with what to do instead.
_DEFAULT_ONLY = {
    "send_buffer_bytes": (None, "the kernel's autotuned socket buffers are used; remove it"),
    "receive_buffer_bytes": (None, "the kernel's autotuned socket buffers are used; remove it"),
    "socket_options": (_TCP_NODELAY, "the producer sets TCP_NODELAY and nothing else"),
    "ssl_crlfile": (None, "build an ssl.SSLContext (load_verify_locations, verify_flags with "
                          "ssl.VERIFY_CRL_CHECK_LEAF) and pass ssl_context"),
    "ssl_ciphers": (None, "build an ssl.SSLContext (set_ciphers) and pass ssl_context"),
    "sasl_kerberos_name": (None, "GSSAPI (Kerberos) is not supported: use PLAIN, SCRAM or "
                                 "OAUTHBEARER"),
    "sasl_kerberos_service_name": ("kafka", "GSSAPI (Kerberos) is not supported"),
    "sasl_kerberos_domain_name": (None, "GSSAPI (Kerberos) is not supported"),
    "metric_reporters": ([], "there are no reporters: call metrics() for the counters"),
    "selector": (None, "the producer's I/O loop is epoll, built in"),
    "kafka_client": (None, "the network client is fastkafka's own"),
    "proxy_url": (None, "SOCKS5 proxies are not supported"),
    "socks5_proxy": (None, "SOCKS5 proxies are not supported"),
    "allow_auto_create_topics": (True, "metadata requests always allow the broker to create the "
                                       "topic (its auto.create.topics.enable decides)"),
}


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


def _api_version(value) -> None:
    """api_version: None, a tuple of ints or a version string ('0.10', 'auto'); never used."""
    ok = (value is None or isinstance(value, str)
          or (isinstance(value, tuple) and all(isinstance(x, int) for x in value)))
    if not ok:
        raise ConfigError(f"api_version must be None, a tuple such as (2, 6) or a string, got "
                          f"{value!r} (it has no effect: API versions are negotiated with each "
                          f"broker through ApiVersions)")
    if value is not None:
        log.debug("api_version=%r has no effect: the producer negotiates API versions with each "
                  "broker (ApiVersions)", value)


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
    """kafka-python's AbstractTokenProvider (``token()``) as fastkafka's callable() -> (token,
    expiry): asked again every 5 minutes, as kafka-python asks at every connection."""
    if callable(provider) and not hasattr(provider, "token"):
        return provider
    if not callable(getattr(provider, "token", None)):
        raise ConfigError("sasl_oauth_token_provider must have a token() method (kafka-python's "
                          "AbstractTokenProvider) or be a callable() -> (token, expiry)")
    return lambda: (provider.token(), time.time() + 300)


class FutureRecordMetadata:
    """kafka-python's future of one ``send``: ``get(timeout=None)``, ``add_callback(f, *args,
    **kwargs)`` (``f(*args, metadata, **kwargs)``), ``add_errback`` (``f(*args, exception,
    **kwargs)``), ``add_both``, ``succeeded()``, ``failed()``, ``retriable()``, ``is_done``,
    ``value``, ``exception``. Callbacks added before completion run on the producer's I/O thread;
    added after, at once on the caller's. A callback that raises is logged and skipped."""

    __slots__ = ("_f", "_header_size", "_md")

    def __init__(self, future, header_size: int):
        self._f, self._header_size, self._md = future, header_size, None

    def _convert(self, md) -> RecordMetadata:
        out = self._md
        if out is None:
            out = self._md = RecordMetadata(
                md.topic, md.partition, TopicPartition(md.topic, md.partition), md.offset,
                md.timestamp, -1, None, md.serialized_key_size, md.serialized_value_size,
                self._header_size)
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
        return self._f.exception(0) if self._f.done() else None

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """The RecordMetadata; raises the delivery error, or KafkaTimeoutError after ``timeout``
        seconds (forever when None)."""
        return self._convert(self._f.get(timeout))

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
                f(*args, err, **kwargs)
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

    def __init__(self, **configs: Any):
        settings: dict[str, Any] = dict(_KP_DEFAULTS)
        # (field, serialize(topic, headers, data)): kafka-python Serializer objects
        self._serialize_fields: list[tuple[str, Callable]] = []
        self._object_partitioner = None
        configs = dict(configs)
        settings["bootstrap_servers"] = _servers(configs.pop("bootstrap_servers", "localhost"))
        _api_version(configs.pop("api_version", None))
        for name, value in configs.items():
            if name in _SAME:
                settings[name] = value
            elif name in _NO_EFFECT:
                log.debug("%s=%r has no effect: %s", name, value, _NO_EFFECT[name])
            elif name in _DEFAULT_ONLY:
                default, instead = _DEFAULT_ONLY[name]
                if value != default and not (default is None and value in ([], ())):
                    raise ConfigError(f"{name}={value!r} is not supported (kafka-python setting): "
                                      f"{instead}")
            elif name in ("key_serializer", "value_serializer"):
                self._serializer(name, value, settings)
            elif name == "compression_type":
                settings[name] = "none" if value is None else value
            elif name == "retries":
                settings[name] = min(value, 2**31 - 1) if isinstance(value, float) else value
            elif name == "partitioner":
                self._partitioner(value, settings)
            elif name == "receive_message_max_bytes":
                settings["max_response_size"] = value
            elif name == "sasl_oauth_token_provider":
                settings[name] = None if value is None else _token_provider(value)
            else:
                settings[name] = value      # a fastkafka setting, or a ConfigError naming the key
        if self._serialize_fields or self._object_partitioner is not None:
            # the slow path (_prepare) serializes every field itself, callables too
            for field in ("key", "value"):
                fn = settings.pop(f"{field}_serializer", None)
                if fn is not None:
                    self._serialize_fields.append((field, lambda t, h, d, fn=fn: fn(d)))
        self._producer = Producer(**settings)
        self._closed = False

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
        list of (str, bytes) pairs. Raises at once as :meth:`fastkafka.Producer.send` does
        (SerializationError when a serializer fails, KafkaTimeoutError when metadata did not come
        within max_block_ms)."""
        p = self._producer
        if self._serialize_fields or self._object_partitioner is not None:
            value, key, partition = self._prepare(topic, value, key, headers, partition)
        header_size = -1
        if headers:
            header_size = sum(len(k.encode() if isinstance(k, str) else k) + len(v or b"")
                              for k, v in headers)
        return FutureRecordMetadata(p.send(topic, value, key, partition, timestamp_ms, headers),
                                    header_size)

    def _prepare(self, topic, value, key, headers, partition):
        """The slow path: kafka-python Serializer objects (``serialize(topic, headers, data)``)
        and a kafka-python Partitioner object (``partition(topic, key, serialized_key, value,
        serialized_value, cluster)``)."""
        raw_key, raw_value = key, value
        p = self._producer
        for field, ser in self._serialize_fields:
            obj = value if field == "value" else key
            try:
                out = ser(topic, headers or [], obj)
            except Exception as e:
                raise SerializationError(f"{field}_serializer failed on the {field} of a record "
                                         f"for topic {topic!r} ({type(e).__name__}: {e}); nothing "
                                         f"was sent", field=field, topic=topic) from e
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

    def flush(self, timeout: float | None = None) -> None:
        """Send what is queued and wait for it; KafkaTimeoutError when records are still
        undelivered after ``timeout`` seconds (as kafka-python)."""
        left = self._producer.flush(timeout)
        if left:
            raise KafkaTimeoutError(f"{left} record(s) not delivered after flush({timeout})")

    def close(self, timeout: float | None = None, null_logger: bool = False) -> None:
        """Deliver what is queued (up to ``timeout`` seconds, forever when None), then stop."""
        self._producer.close(timeout)
        self._closed = True

    def partitions_for(self, topic: str) -> set[int]:
        """The partition numbers of ``topic``, a set (waits for metadata up to max_block_ms)."""
        return set(self._producer.partitions_for(topic))

    def bootstrap_connected(self) -> bool:
        """True once a broker answered (the producer has cluster metadata)."""
        return self._producer.metrics()["metadata_version"] > 0

    def metrics(self, raw: bool = False) -> dict:
        """kafka-python's ``metrics()``: ``{group: {name: float}}`` with the Java producer's
        metric names and windows (:meth:`fastkafka.Producer.java_metrics`), groups
        ``"producer-metrics"``, ``"producer-node-metrics.node-<id>"`` and
        ``"producer-topic-metrics.<topic>"``. An average with no event in the windows is 0.0
        and such a maximum ``-inf``, as kafka-python reports them. ``raw=True`` returns
        fastkafka's own counters (:meth:`fastkafka.Producer.metrics`), not kafka-python's
        ``KafkaMetric`` objects."""
        if raw:
            return self._producer.metrics()
        return kafka_python_metrics(self._producer.java_metrics())

    # -- transactions: kafka-python's calls, fastkafka's semantics --------------------------
    def init_transactions(self, timeout: float | None = None) -> None:
        self._producer.init_transactions(timeout)

    def begin_transaction(self) -> None:
        self._producer.begin_transaction()

    def send_offsets_to_transaction(self, offsets, consumer_group_id) -> None:
        """``offsets``: {TopicPartition: OffsetAndMetadata} (kafka-python's), or fastkafka's
        forms; ``consumer_group_id``: the group id, or a consumer's group metadata."""
        if isinstance(offsets, dict):
            offsets = {tuple(tp): ((v.offset, v.metadata) if hasattr(v, "offset") else v)
                       for tp, v in offsets.items()}
        self._producer.send_offsets_to_transaction(offsets, consumer_group_id)

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._producer.commit_transaction(timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._producer.abort_transaction(timeout)

