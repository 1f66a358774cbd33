"""A topic that does not exist, against Apache Kafka with auto.create.topics.enable=false: the
producer logs a WARNING naming it at once, keeps asking (it may be being created), and fails the
send with UnknownTopicOrPartitionError after topic_metadata_propagation_max_ms."""
from __future__ import annotations

import logging
import time

import pytest

from brokers import unique_name
from fastkafka import Producer
from fastkafka.errors import UnknownTopicOrPartitionError
from fastkafka_tools.apachekafka import KafkaCluster


@pytest.fixture(scope="module")
def kafka_no_autocreate():
    kc = KafkaCluster(nodes=1, heap_mb=256, properties={"auto.create.topics.enable": "false"}).start()
    try:
        yield kc
    finally:
        kc.stop()


def test_unknown_topic_warns_at_once_and_fails_typed(kafka_no_autocreate, caplog):
    caplog.set_level(logging.WARNING, logger="fastkafka")
    topic = unique_name("missing")
    with Producer(bootstrap_servers=kafka_no_autocreate.bootstrap, max_block_ms=60_000,
                  topic_metadata_propagation_max_ms=3000) as p:
        start = time.time()
        t0 = time.monotonic()
        with pytest.raises(UnknownTopicOrPartitionError, match=topic):
            p.send(topic, b"v")
        took = time.monotonic() - t0
        assert 2.9 < took < 6.0, took
        warned = [r for r in caplog.records if r.levelno == logging.WARNING
                  and repr(topic) in r.getMessage() and "UNKNOWN_TOPIC_OR_PARTITION" in r.getMessage()]
        assert len(warned) == 1, [r.getMessage() for r in caplog.records]
        assert warned[0].created - start < 1.0
        # the same producer still sends to a topic that exists
        kafka_no_autocreate.create_topic(topic, 1)
        assert p.send(topic, b"v").get(30).topic == topic
