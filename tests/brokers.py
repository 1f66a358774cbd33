"""Test helpers around real brokers: an independent reader (confluent-kafka) and topic names."""
from __future__ import annotations

import itertools
import os
import time
import uuid
from dataclasses import dataclass, field

__all__ = ["ReadMessage", "read_back", "unique_name", "read_back_flat"]

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
