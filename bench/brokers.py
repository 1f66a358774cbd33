"""The brokers of the benchmark scripts: start one (Apache Kafka or tansu) for a script's rounds, and
count what a topic holds after a measurement (its offsets, or what a ``read_committed`` consumer
reads)."""

from __future__ import annotations

import time

from harness import TANSU_LINE, kafka_line

BROKERS = ("kafka", "tansu")


def start_broker(kind: str, args):
    """Apache Kafka (one KRaft node, full JIT) or tansu (null storage), started."""
    if kind == "kafka":
        from fastkafka_tools.apachekafka import KafkaCluster

        return KafkaCluster(nodes=1, jit="full", heap_mb=args.kafka_heap_mb).start(timeout=180)
    from fastkafka_tools.localbroker import LocalBroker

    return LocalBroker(kind="tansu", storage="null").start()


def each_broker(kinds, args, run):
    """Start each broker kind in turn, call ``run(kind, broker)`` and stop it. Returns
    ([(section title, run's result, seconds)], [broker description lines])."""
    out, broker_lines = [], []
    for kind in kinds:
        t0 = time.monotonic()
        broker = start_broker(kind, args)
        try:
            results = run(kind, broker)
        finally:
            broker.stop()
        if kind == "kafka":
            title = f"Apache Kafka {broker.version}"
            broker_lines.append(kafka_line(broker.version, args.kafka_heap_mb, broker.data_place))
        else:
            title = "tansu (storage null://)"
            broker_lines.append(TANSU_LINE)
        out.append((title, results, time.monotonic() - t0))
    return out, broker_lines


def stored_records(bootstrap: str, topic: str, partitions: int) -> int:
    """Records the broker holds in ``topic``: the sum of latest - earliest offsets."""
    from fastkafka.admin import Admin

    with Admin(bootstrap_servers=bootstrap, client_id="e2e-check") as admin:
        return sum(admin.list_offsets(topic, p, "latest", timeout_ms=30000)
                   - admin.list_offsets(topic, p, "earliest", timeout_ms=30000) for p in range(partitions))


def committed_records(bootstrap: str, topic: str, partitions: int, timeout: float = 120.0) -> int:
    """Records a ``read_committed`` consumer reads from ``topic`` (every partition from the
    beginning to its end, which for read_committed is the last stable offset): committed records
    only, no aborted or still-open ones and no transaction markers. confluent-kafka's Consumer
    with ``isolation.level=read_committed``; raises on a consumer error or a partition not read
    to its end within ``timeout`` seconds."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"e2e-count-{topic}-{time.monotonic_ns()}",
        "enable.auto.commit": False, "enable.partition.eof": True, "auto.offset.reset": "earliest",
        "isolation.level": "read_committed", "fetch.wait.max.ms": 50, "log_level": 3})
    count, at_end = 0, set()
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"partitions {sorted(set(range(partitions)) - at_end)} of {topic} "
                                   f"not read to their end in {timeout:.0f}s")
            for m in consumer.consume(num_messages=10000, timeout=0.5):
                err = m.error()
                if err is None:
                    count += 1
                    at_end.discard(m.partition())
                elif err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                else:
                    raise RuntimeError(f"consumer error on {topic}: {err}")
    finally:
        consumer.close()
    return count


#: Settings of the broker started by the benchmark: a deleted topic's files go at once (not a
#: minute later, in the middle of another measurement).
BROKER_PROPERTIES = {"log.segment.delete.delay.ms": 0}


class Topics:
    """Creates, counts and deletes topics over one bootstrap address (confluent-kafka's AdminClient:
    all of a measurement's topics in one request)."""

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap

    def _admin(self):
        """A new AdminClient per operation: a long-lived one kept answering list_offsets on a topic
        created after its first requests with "No leaders found" (its metadata cache)."""
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})

    def _tps(self, names: list[str], partitions: int):
        from confluent_kafka import TopicPartition

        return [TopicPartition(t, p) for t in names for p in range(partitions)]

    def create(self, names: list[str], partitions: int, timeout: float = 180.0) -> None:
        """Create ``names`` with ``partitions`` each (the broker's replication factor), then wait
        until every partition answers ListOffsets (its leader has taken it on: writable)."""
        from confluent_kafka.admin import NewTopic

        admin = self._admin()  # referenced until its futures are done
        futs = admin.create_topics([NewTopic(t, partitions, -1) for t in names],
                                        request_timeout=timeout, operation_timeout=timeout)
        for f in futs.values():
            f.result()
        self._offsets(names, partitions, "latest", timeout)

    def _offsets(self, names: list[str], partitions: int, spec: str, timeout: float) -> dict:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import OffsetSpec

        want = OffsetSpec.latest() if spec == "latest" else OffsetSpec.earliest()
        deadline = time.monotonic() + timeout
        while True:
            admin = self._admin()
            futs = admin.list_offsets({tp: want for tp in self._tps(names, partitions)},
                                           request_timeout=30)
            try:
                return {(tp.topic, tp.partition): f.result().offset for tp, f in futs.items()}
            except KafkaException as e:  # not leader yet, leader unknown: the topic is coming up
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{len(names)} topic(s) of {partitions} partitions not "
                                       f"writable after {timeout:.0f}s: {e}") from e
                time.sleep(0.1)

    def counts(self, names: list[str], partitions: int) -> list[int]:
        """Records held per partition (latest - earliest offset), topic by topic."""
        latest = self._offsets(names, partitions, "latest", 60)
        earliest = self._offsets(names, partitions, "earliest", 60)
        return [latest[(t, p)] - earliest[(t, p)] for t in names for p in range(partitions)]

    def latest(self, names: list[str], partitions: int) -> list[int]:
        """The latest offset (the next record's) of every partition, topic by topic."""
        latest = self._offsets(names, partitions, "latest", 60)
        return [latest[(t, p)] for t in names for p in range(partitions)]

    def delete(self, names: list[str]) -> None:
        admin = self._admin()
        for f in admin.delete_topics(names, operation_timeout=60).values():
            f.result()
