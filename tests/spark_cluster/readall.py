"""Reading a topic back to its end with an independent client (confluent-kafka's Consumer), and
Kafka's own view of open transactions (``kafka-transactions.sh list``: the TransactionsCommand)."""
from __future__ import annotations

import os
import time
import uuid

#: The repository root (the executors must not see it).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def wait_for(cond, timeout: float, what: str, every: float = 0.2):
    """Poll ``cond()`` until it returns something true (returned), or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def _consumer(bootstrap: str, committed: bool):
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": f"fk-cluster-{uuid.uuid4().hex}",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "isolation.level": "read_committed" if committed else "read_uncommitted",
                     "enable.partition.eof": True, "check.crcs": True, "fetch.wait.max.ms": 50,
                     "log_level": 3})


def end_offsets(bootstrap: str, topic: str, partitions: int, committed: bool) -> list[int]:
    """The high watermarks (``committed``: the last stable offsets, what ListOffsets answers a
    read_committed consumer) of the topic's partitions."""
    from confluent_kafka import TopicPartition

    c = _consumer(bootstrap, committed)
    try:
        out = []
        for p in range(partitions):
            c.assign([TopicPartition(topic, p)])
            out.append(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1])
        return out
    finally:
        c.close()


def read_all(bootstrap: str, topic: str, partitions: int, committed: bool = True,
             timeout: float = 60.0) -> list:
    """Every message of the topic up to its end (read_committed: up to the last stable offset),
    as confluent-kafka Messages. Fails on a consumer error or when the end is not reached."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

    c = _consumer(bootstrap, committed)
    out = []
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        at_end = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{topic}: end not reached in {timeout}s ({len(out)} read)"
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                at_end.add(m.partition())
                continue
            at_end.discard(m.partition())
            out.append(m)
    finally:
        c.close()
    return out


def open_transactions(kafka_broker, prefix: str) -> list[str]:
    """The lines of ``kafka-transactions.sh list`` (Kafka's ListTransactions) for ids of ``prefix``
    whose state is not CompleteCommit / CompleteAbort / Empty."""
    out = kafka_broker.run_tool("org.apache.kafka.tools.TransactionsCommand",
                                "--bootstrap-server", kafka_broker.bootstrap, "list")
    lines = [ln for ln in out.splitlines() if ln.split() and ln.split()[0].startswith(prefix + "-")]
    return [ln for ln in lines if not any(s in ln for s in ("CompleteCommit", "CompleteAbort", "Empty"))]


def all_transactions(kafka_broker, prefix: str) -> list[str]:
    out = kafka_broker.run_tool("org.apache.kafka.tools.TransactionsCommand",
                                "--bootstrap-server", kafka_broker.bootstrap, "list")
    return [ln for ln in out.splitlines() if ln.split() and ln.split()[0].startswith(prefix + "-")]
