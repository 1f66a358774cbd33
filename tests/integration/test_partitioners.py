"""librdkafka's partitioner names on Apache Kafka: for each name, the same keys produced through
confluent-kafka (librdkafka) and through fastkafka's send(), produce() and send_batch() (a list and
a pyarrow array) land on the same partitions, for a topic of 7 partitions and one of 100.

Records librdkafka places on its sticky partition (null keys, and empty keys for
``consistent_random``; every record for ``random``) are not reproducible and are not compared;
``murmur2`` is the Java client's placement, which differs from librdkafka's ``murmur2`` for null keys
only (checked as such)."""
from __future__ import annotations

import confluent_kafka
import pyarrow as pa
import pytest

from fastkafka import Producer
from fastkafka._producer.partitioner import PARTITIONERS, java_partition, key_partition

from brokers import read_back, unique_name

# 200 keys, a few empty ones, a null one, and a key whose FNV-1a is 0x80000000 (no positive int32
# absolute value: tests/unit/fastkafka/_producer/test_partitioner.py).
KEYS = ([b"key-%d" % i for i in range(200)] + [b""] * 3 + [None, b"\x02W\x96\xdfM"]
        + [b"user:%d" % (i * 7919) for i in range(20)])
PATHS = ("send", "produce", "list", "arrow")


def _value(path: str, i: int) -> bytes:
    return b"%s:%d" % (path.encode(), i)


def _confluent_placement(bootstrap: str, topic: str, name: str) -> dict[int, int]:
    """Record index -> partition, from confluent-kafka's delivery reports."""
    placed = {}
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            placed[int(msg.value().split(b":")[1])] = msg.partition()

    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "partitioner": name,
                                  "linger.ms": 5})
    for i, k in enumerate(KEYS):
        p.produce(topic, value=_value("confluent", i), key=k, on_delivery=on_delivery)
    assert p.flush(60) == 0 and not errors, errors
    return placed


def _fastkafka_placement(bootstrap: str, topic: str, n: int, name: str) -> dict[str, dict[int, int]]:
    """path -> record index -> partition: send()'s and produce()'s RecordMetadata, send_batch's
    records read back from the topic."""
    placed = {path: {} for path in PATHS}
    errors = []

    def on_delivery(i):
        def report(err, md):
            if err is not None:
                errors.append(err)
            else:
                placed["produce"][i] = md.partition
        return report

    with Producer(bootstrap_servers=bootstrap, partitioner=name, linger_ms=5) as p:
        futures = [p.send(topic, _value("send", i), key=k) for i, k in enumerate(KEYS)]
        for i, k in enumerate(KEYS):
            p.produce(topic, _value("produce", i), key=k, on_delivery=on_delivery(i))
        values = [_value("list", i) for i in range(len(KEYS))]
        assert p.send_batch(topic, values, keys=list(KEYS)).get(60) == len(KEYS)
        values = pa.array([_value("arrow", i) for i in range(len(KEYS))], pa.binary())
        assert p.send_batch(topic, values, keys=pa.array(KEYS, pa.binary())).get(60) == len(KEYS)
        for i, f in enumerate(futures):
            placed["send"][i] = f.get(60).partition
        assert p.flush(60) == 0
    assert not errors, errors
    total = (1 + len(PATHS)) * len(KEYS)             # confluent-kafka's records are there too
    for partition, messages in read_back(bootstrap, topic, n, total, timeout=60).items():
        for m in messages:
            path, i = m.value.decode().split(":")
            if path in ("list", "arrow"):
                placed[path][int(i)] = partition
    return placed


@pytest.mark.parametrize("n", [7, 100])
@pytest.mark.parametrize("name", list(PARTITIONERS))
def test_placement_equals_confluent_kafka(kafka_broker, name, n):
    topic = unique_name("part")
    kafka_broker.create_topic(topic, n)
    theirs = _confluent_placement(kafka_broker.bootstrap, topic, name)
    ours = _fastkafka_placement(kafka_broker.bootstrap, topic, n, name)
    assert len(theirs) == len(KEYS)
    for path in PATHS:
        assert len(ours[path]) == len(KEYS), path
    compared = 0
    for i, k in enumerate(KEYS):
        expected = key_partition(k, n, name)
        if expected is None:
            # the sticky partition, here and in librdkafka; librdkafka's murmur2 alone hashes a
            # null key (as no bytes), where the Java client's placement is sticky
            if name == "murmur2" and k is None:
                assert theirs[i] == java_partition(b"", n)
            continue
        got = {path: ours[path][i] for path in PATHS}
        assert got == dict.fromkeys(PATHS, theirs[i]), (name, n, k)
        assert theirs[i] == expected, (name, n, k)
        compared += 1
    if name == "random":
        assert compared == 0
    else:
        assert compared >= 220, compared    # every non-empty key, and the deterministic others
