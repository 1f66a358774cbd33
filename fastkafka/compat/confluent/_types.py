"""The value types of :mod:`fastkafka.compat.confluent`: ``KafkaError``, ``KafkaException``,
the delivered ``Message``, the ``list_topics`` metadata classes, and the translation of
fastkafka's errors into confluent-kafka's codes.

These are this project's own classes with confluent-kafka's shapes (method names, constants,
code values); they are not confluent-kafka's classes, so ``isinstance`` against
``confluent_kafka.KafkaError`` is False.
"""
from __future__ import annotations

import struct
from typing import Any

from fastkafka import errors as fk

#: confluent-kafka's timestamp types (``Message.timestamp()[0]``).
TIMESTAMP_NOT_AVAILABLE = 0
TIMESTAMP_CREATE_TIME = 1
TIMESTAMP_LOG_APPEND_TIME = 2

from fastkafka.compat.confluent._codes import CODES as _CODES

#: code -> (confluent-kafka's name, librdkafka's description): all of confluent-kafka's constants
_NAMES = {code: (name, text) for code, name, text in _CODES}


class KafkaError:
    """confluent-kafka's error object: ``code()``, ``name()``, ``str()``, ``fatal()``,
    ``retriable()``, ``txn_requires_abort()``. Compares equal to another KafkaError or an int of
    the same code (``err == KafkaError._PURGE_QUEUE``). ``cause`` is the fastkafka exception it
    was made from (None when made directly)."""

    # confluent-kafka's constants (all of them: set below from _codes.CODES)

    __slots__ = ("_code", "_reason", "_fatal", "_retriable", "_txn_requires_abort", "cause")

    def __init__(self, error: int, reason: str | None = None, fatal: bool = False,
                 retriable: bool = False, txn_requires_abort: bool = False):
        if isinstance(error, bool) or not isinstance(error, int):
            raise TypeError(f"KafkaError(error): error must be an int code, got {type(error).__name__}")
        self._code = error
        self._reason = reason
        self._fatal = bool(fatal)
        self._retriable = bool(retriable)
        self._txn_requires_abort = bool(txn_requires_abort)
        self.cause: BaseException | None = None

    def code(self) -> int:
        return self._code

    def name(self) -> str:
        """confluent-kafka's name of the code; ``ERR_<code>?`` for a code it has no name for."""
        entry = _NAMES.get(self._code)
        return entry[0] if entry is not None else f"ERR_{self._code}?"

    def str(self) -> str:
        """The reason given, else librdkafka's description of the code (``Err-<code>?`` for a
        code it does not know)."""
        if self._reason:
            return self._reason
        entry = _NAMES.get(self._code)
        return entry[1] if entry is not None else f"Err-{self._code}?"

    def fatal(self) -> bool:
        return self._fatal

    def retriable(self) -> bool:
        return self._retriable

    def txn_requires_abort(self) -> bool:
        return self._txn_requires_abort

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, KafkaError):
            return self._code == other._code
        if isinstance(other, int) and not isinstance(other, bool):
            return self._code == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._code)

    def __str__(self) -> str:
        return f'KafkaError{{code={self.name()},val={self._code},str="{self.str()}"}}'

    __repr__ = __str__


for _code, _name, _text in _CODES:
    setattr(KafkaError, _name, _code)
del _code, _name, _text


class KafkaException(Exception):
    """Raised where confluent-kafka raises ``KafkaException``: ``args[0]`` is the
    :class:`KafkaError` (``e.args[0].code()``, ``e.args[0].txn_requires_abort()``). The
    fastkafka exception it comes from is its ``__cause__``."""

    def __init__(self, error: Any = None, *args: Any):
        if isinstance(error, int) and not isinstance(error, bool):
            error = KafkaError(error, args[0] if args and isinstance(args[0], str) else None)
            args = args[1:]
        super().__init__(error, *args)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class _Purged(fk.KafkaError):
    """A record taken out of the queue by ``purge()`` (reported as ``_PURGE_QUEUE``)."""

    code, name, description = -152, "_PURGE_QUEUE", "Local: Purged in queue"


# fastkafka client errors -> librdkafka local codes (the most specific class first).
_CLIENT_CODES = [
    (_Purged, -152),
    (fk.DeliveryTimeoutError, -192),
    (fk.BufferExhaustedError, -184),
    (fk.KafkaTimeoutError, -185),
    (fk.RecordTooLargeError, 10),
    (fk.UnknownPartitionError, -190),
    (fk.InvalidRecordError, -186),
    (fk.ConfigError, -186),
    (fk.ProducerClosedError, -197),
    (fk.TransactionAbortedError, -152),    # librdkafka purges the queue when a transaction aborts
    (fk.BrokerDataLossError, -149),
    (fk.AllBrokersDownError, -187),        # _ALL_BROKERS_DOWN
    (fk.TlsError, -181),
    (fk.NetworkError, -195),
    (fk.SaslAuthenticationError, -169),
    (fk.TlsAuthenticationError, -181),
    (fk.IllegalStateError, -172),
]
_FENCED_CODES = (90, 47)   # PRODUCER_FENCED, INVALID_PRODUCER_EPOCH: librdkafka's fatal _FENCED


def to_kafka_error(exc: BaseException | None, fatal: bool = False) -> KafkaError | None:
    """The :class:`KafkaError` for a fastkafka exception (None for None): broker codes keep
    their code, client errors get librdkafka's local code (``_MSG_TIMED_OUT``, ``_QUEUE_FULL``,
    ``_TRANSPORT``, ...); the text is fastkafka's message."""
    if exc is None:
        return None
    if isinstance(exc, KafkaError):
        return exc
    code = None
    for cls, c in _CLIENT_CODES:
        if isinstance(exc, cls):
            code = c
            break
    if code is None:
        code = getattr(exc, "code", None)
        if not isinstance(code, int) or code <= -100:
            code = -1   # UNKNOWN
    txn_abort = isinstance(exc, fk.TransactionAbortableError)
    if code in _FENCED_CODES and isinstance(exc, fk.ProducerFencedError):
        code, fatal = -144, True
    message = getattr(exc, "message", None) or str(exc)
    err = KafkaError(code, message, fatal=fatal, retriable=bool(getattr(exc, "retriable", False)),
                     txn_requires_abort=txn_abort)
    err.cause = exc
    return err


def to_kafka_exception(exc: BaseException, fatal: bool = False) -> KafkaException:
    """A :class:`KafkaException` wrapping ``to_kafka_error(exc)``; raise it ``from exc``."""
    return KafkaException(to_kafka_error(exc, fatal))


# confluent-kafka's Message is compiled (fastkafka/compat/confluent/_fast.pyx): poll() fills one
# per delivery report.
from fastkafka.compat.confluent._fast import Message  # noqa: E402


class ThrottleEvent:
    """What ``throttle_cb`` receives: a broker throttled this client (KIP-219). ``broker_name``
    (``host:port``), ``broker_id``, ``throttle_time`` in seconds."""

    __slots__ = ("broker_name", "broker_id", "throttle_time")

    def __init__(self, broker_name: str, broker_id: int, throttle_time: float):
        self.broker_name, self.broker_id, self.throttle_time = broker_name, broker_id, throttle_time

    def __str__(self) -> str:
        return f"{self.broker_name}/{self.broker_id} throttled for {int(self.throttle_time * 1000)} ms"

    __repr__ = __str__


class BrokerMetadata:
    __slots__ = ("id", "host", "port")

    def __init__(self, id: int, host: str, port: int):
        self.id, self.host, self.port = id, host, port

    def __repr__(self) -> str:
        return f"BrokerMetadata({self.id}, {self.host}:{self.port})"

    def __str__(self) -> str:
        return f"{self.host}:{self.port}/{self.id}"


class PartitionMetadata:
    __slots__ = ("id", "leader", "replicas", "isrs", "error")

    def __init__(self, id: int, leader: int, replicas: list, isrs: list, error: KafkaError | None):
        self.id, self.leader, self.replicas, self.isrs, self.error = id, leader, replicas, isrs, error

    def __repr__(self) -> str:
        return f"PartitionMetadata({self.id})"


class TopicMetadata:
    __slots__ = ("topic", "partitions", "error")

    def __init__(self, topic: str, partitions: dict, error: KafkaError | None):
        self.topic, self.partitions, self.error = topic, partitions, error

    def __repr__(self) -> str:
        return f"TopicMetadata({self.topic}, {len(self.partitions)} partitions)"


class ClusterMetadata:
    """What ``list_topics()`` returns: ``topics``, ``brokers``, ``cluster_id``,
    ``controller_id``, ``orig_broker_id``, ``orig_broker_name``."""

    __slots__ = ("cluster_id", "controller_id", "brokers", "topics", "orig_broker_id",
                 "orig_broker_name")

    def __init__(self):
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.brokers: dict[int, BrokerMetadata] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.orig_broker_id = -1
        self.orig_broker_name: str | None = None

    def __repr__(self) -> str:
        return f"ClusterMetadata({self.cluster_id})"


def _code_error(code: int) -> KafkaError | None:
    if not code:
        return None
    cls = fk.error_class_for_code(code)
    return KafkaError(code, retriable=bool(getattr(cls, "retriable", False)))


def cluster_metadata(cluster, cluster_id, orig_node, orig_host, orig_port) -> ClusterMetadata:
    """A :class:`ClusterMetadata` of a fastkafka ``Cluster`` (fastkafka._net.cluster)."""
    md = ClusterMetadata()
    md.cluster_id = cluster_id
    md.controller_id = cluster.controller_id
    for b in cluster.brokers.values():
        md.brokers[b.node_id] = BrokerMetadata(b.node_id, b.host, b.port)
        if orig_node < 0 and (b.host, b.port) == (orig_host, orig_port):
            orig_node = b.node_id
    md.orig_broker_id = orig_node
    md.orig_broker_name = f"{orig_host}:{orig_port}/{orig_node if orig_node >= 0 else 'bootstrap'}"
    for t in cluster.topics.values():
        parts = {p.partition: PartitionMetadata(p.partition, p.leader, list(p.replicas), list(p.isr),
                                                _code_error(p.error_code)) for p in t.partitions}
        md.topics[t.name] = TopicMetadata(t.name, parts, _code_error(t.error_code))
    return md


_CGMD_MAGIC = b"CGMDv2:"


def group_metadata(value: Any) -> Any:
    """confluent-kafka's ``consumer.consumer_group_metadata()`` (librdkafka's serialized form,
    bytes) as the mapping fastkafka's ``send_offsets_to_transaction`` takes; anything else as
    given."""
    if not isinstance(value, (bytes, bytearray)) or not bytes(value).startswith(_CGMD_MAGIC):
        return value
    data = bytes(value)[len(_CGMD_MAGIC):]
    try:
        (generation,) = struct.unpack_from("=i", data, 0)
        rest = data[4:]
        group_id, rest = rest.split(b"\0", 1)
        member_id, rest = rest.split(b"\0", 1)
        instance = None
        if rest[:1] == b"\0":
            instance = rest[1:].split(b"\0", 1)[0].decode()
    except (struct.error, ValueError, UnicodeDecodeError):
        raise fk.InvalidRecordError("group_metadata: not a consumer_group_metadata() value "
                                    "confluent-kafka can have made") from None
    return {"group_id": group_id.decode(), "generation_id": generation,
            "member_id": member_id.decode(), "group_instance_id": instance}
