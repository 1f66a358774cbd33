"""confluent-kafka's producer inputs on Apache Kafka: ``str`` values and keys, dict headers with
``str`` values and ``callback=``, through ``send``, ``produce`` and ``send_batch``. What
confluent-kafka's consumer reads back is byte for byte what confluent-kafka's own producer writes
for the same call."""
from __future__ import annotations

import pytest

from brokers import read_back, unique_name
from fastkafka import Producer

pytestmark = pytest.mark.broker

# (value, key, headers) as code written for confluent-kafka passes them
CALLS = [
    ("order \u00e9t\u00e9", "customer-\u043a", {"source": "web", "trace": b"\x00\xff", "none": None}),
    ("", "", {"emoji": "\U0001f600"}),
    ("plain", None, [("list", "str value"), ("bytes", b"b")]),
]


def test_str_values_keys_dict_headers_and_callback_read_back_as_confluent_kafka_writes_them(
        kafka_broker):
    from confluent_kafka import Producer as ConfluentProducer

    ours, theirs = unique_name("ck-in"), unique_name("ck-ref")
    kafka_broker.create_topic(ours, 3)
    kafka_broker.create_topic(theirs, 3)
    delivered = []

    def report(err, md):
        delivered.append((err, md.partition, md.offset))

    with Producer(bootstrap_servers=kafka_broker.bootstrap, linger_ms=5,
                  partitioner="consistent_random") as p:
        value, key, headers = CALLS[0]
        p.produce(ours, value, key, headers=headers, callback=report)
        value, key, headers = CALLS[1]
        md = p.send(ours, value, key, headers=headers, callback=report).get(30)
        value, key, headers = CALLS[2]
        p.send_batch(ours, [value], keys=[key], headers=headers).get(30)
        assert p.flush(30) == 0
    assert [err for err, _, _ in delivered] == [None, None]
    assert delivered[1][1:] == (md.partition, md.offset)

    ref = ConfluentProducer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 5})
    for value, key, headers in CALLS:
        ref.produce(theirs, value, key, headers=headers)
    assert ref.flush(30) == 0
    del ref

    def by_key_and_value(topic):
        msgs = [m for ms in read_back(kafka_broker.bootstrap, topic, 3, len(CALLS)).values()
                for m in ms]
        return sorted(((m.key, m.value, m.headers, m.partition) for m in msgs),
                      key=lambda t: (t[0] or b"", t[1]))

    got, want = by_key_and_value(ours), by_key_and_value(theirs)
    # the exact bytes, independent of the reference producer
    assert [(k, v) for k, v, _, _ in got] == sorted(
        ((None if k is None else k.encode(), v.encode()) for v, k, _ in CALLS),
        key=lambda t: (t[0] or b"", t[1]))
    assert [h for k, v, h, _ in got if v == "order \u00e9t\u00e9".encode()] == [
        [("source", b"web"), ("trace", b"\x00\xff"), ("none", None)]]
    # and what confluent-kafka's producer writes for the same calls: headers in order, and records
    # with a non-empty key on the partition librdkafka's default partitioner picks for its UTF-8
    # (an empty or null key is placed at random by librdkafka)
    assert [(k, v, h) for k, v, h, _ in got] == [(k, v, h) for k, v, h, _ in want]
    assert [part for k, _, _, part in got if k] == [part for k, _, _, part in want if k]
