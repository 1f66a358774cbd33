"""Test helpers around real brokers: an independent reader (confluent-kafka) and topic names."""
from __future__ import annotations

import itertools
import os
import time
import uuid
from dataclasses import dataclass, field

__all__ = ["ReadMessage", "read_back", "unique_name", "read_back_flat", "read_all", "committed_offsets",
           "assert_exactly_once_in_order"]

_counter = itertools.count()


def unique_name(prefix: str = "t") -> str:
    """A topic name unique within and across sessions (Kafka-legal characters only)."""
    return f"{prefix}-{os.getpid()}-{next(_counter)}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class ReadMessage:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list = field(default_factory=list)   # [(str, bytes|None)], as confluent-kafka gives them
    timestamp: int = -1                           # milliseconds
    timestamp_type: int = 0                       # confluent_kafka.TIMESTAMP_* constant


def read_back(bootstrap: str, topic: str, partitions, expected_count: int, timeout: float = 30.0,
              extra_config: dict | None = None) -> dict[int, list[ReadMessage]]:
    """Read ``expected_count`` messages of ``topic`` back with confluent-kafka's Consumer.

    ``partitions`` is an int (partitions 0..n-1) or an iterable of partition ids. The consumer checks
    CRCs (``check.crcs=true``), is assigned to the explicit partitions from the beginning (no group
    coordination, no commits) and stops as soon as ``expected_count`` messages were read. Any consumer
    error other than partition EOF fails the calling test; so does a timeout, with per-partition counts
    in the message. Returns {partition: [ReadMessage in offset order]} with every requested partition
    present (possibly empty).
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    parts = list(range(partitions)) if isinstance(partitions, int) else sorted(partitions)
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": f"fastkafka-readback-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "check.crcs": True,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 50,
        "log_level": 3,
    }
    if extra_config:
        conf.update(extra_config)
    out: dict[int, list[ReadMessage]] = {p: [] for p in parts}
    count = 0
    consumer = Consumer(conf)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        deadline = time.monotonic() + timeout
        while count < expected_count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                counts = {p: len(v) for p, v in out.items()}
                raise AssertionError(
                    f"read_back({topic!r} @ {bootstrap}): read {count} of {expected_count} messages "
                    f"in {timeout}s; per-partition counts {counts}")
            batch = consumer.consume(num_messages=10000, timeout=min(0.5, remaining))
            for m in batch:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise AssertionError(f"read_back({topic!r} @ {bootstrap}): consumer error {err}")
                ts_type, ts = m.timestamp()
                out[m.partition()].append(ReadMessage(
                    topic=m.topic(), partition=m.partition(), offset=m.offset(), key=m.key(),
                    value=m.value(), headers=list(m.headers() or []), timestamp=ts, timestamp_type=ts_type))
                count += 1
    finally:
        consumer.close()
    for msgs in out.values():
        msgs.sort(key=lambda m: m.offset)
    return out


def read_back_flat(bootstrap: str, topic: str, partitions, expected_count: int,
                   timeout: float = 30.0) -> list[ReadMessage]:
    """``read_back`` flattened: all messages, ordered by (partition, offset)."""
    res = read_back(bootstrap, topic, partitions, expected_count, timeout)
    return [m for p in sorted(res) for m in res[p]]


def read_all(bootstrap: str, topic: str, partitions, isolation_level: str = "read_committed",
             timeout: float = 30.0) -> list[bytes | None]:
    """Every value of ``topic``'s ``partitions`` (an int: 0..n-1, or an iterable of ids) as
    confluent-kafka's Consumer with ``isolation.level=isolation_level`` and ``check.crcs=true``
    sees it, reading each partition from the beginning to its end (partition EOF: for
    read_committed the last stable offset, so a transaction still open holds the read back).
    Returns the values ordered by (partition, offset). Any consumer error, or a partition not at
    its end within ``timeout``, fails the calling test."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    parts = list(range(partitions)) if isinstance(partitions, int) else sorted(partitions)
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"fastkafka-readall-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "check.crcs": True,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "isolation.level": isolation_level,
        "fetch.wait.max.ms": 50,
        "log_level": 3,
    })
    got: dict[int, list] = {p: [] for p in parts}
    at_end: set[int] = set()
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        deadline = time.monotonic() + timeout
        while len(at_end) < len(parts):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"read_all({topic!r} @ {bootstrap}, {isolation_level}): partitions "
                    f"{sorted(set(parts) - at_end)} not read to their end in {timeout}s")
            for m in consumer.consume(num_messages=10000, timeout=min(0.5, remaining)):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_end.add(m.partition())
                        continue
                    raise AssertionError(f"read_all({topic!r} @ {bootstrap}): consumer error {err}")
                at_end.discard(m.partition())
                got[m.partition()].append((m.offset(), m.value()))
    finally:
        consumer.close()
    return [v for p in parts for _o, v in sorted(got[p], key=lambda x: x[0])]


def committed_offsets(bootstrap: str, group_id: str, topic_partitions, timeout: float = 15.0) -> dict:
    """``{(topic, partition): offset}`` the consumer group ``group_id`` has committed, as
    confluent-kafka's ``Consumer.committed()`` reads them (OffsetFetch, waiting for stable
    offsets); a partition with no committed offset maps to None."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id,
                         "enable.auto.commit": False, "log_level": 3})
    try:
        tps = consumer.committed([TopicPartition(t, p) for t, p in topic_partitions], timeout=timeout)
    finally:
        consumer.close()
    return {(tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None) for tp in tps}


def assert_exactly_once_in_order(got: dict, mds, n: int) -> None:
    """``got`` (from :func:`read_back`) holds records whose values start with their 8-digit index
    0..n-1, each stored once, in index order per partition, at the partition and offset its
    ``RecordMetadata`` in ``mds`` (indexed the same way) reported."""
    seen = []
    for part, msgs in got.items():
        seqs = [int(m.value[:8]) for m in msgs]
        assert seqs == sorted(seqs), f"partition {part} out of order"
        seen += seqs
        for m in msgs:
            md = mds[int(m.value[:8])]
            assert (md.partition, md.offset) == (part, m.offset)
    assert sorted(seen) == list(range(n)), "records lost or written twice"
