"""``on_error`` on Apache Kafka with a real outage: a one-node cluster of its own is SIGKILLed while
a producer is connected, the producer keeps trying, the node is started again. The application
hears exactly one AllBrokersDownError for the outage (not one per failed attempt) and one
BrokersRecovered after it, and the records sent before, during and after the outage are read back
by confluent-kafka's consumer. Waits are bounded polls for a state."""
from __future__ import annotations

import time

import pytest

from brokers import read_back
from fastkafka import Producer
from fastkafka.errors import AllBrokersDownError, BrokersRecovered

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]


def wait_until(cond, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def kafka1():
    from fastkafka_tools.apachekafka import KafkaCluster

    kc = KafkaCluster(nodes=1).start()
    yield kc
    kc.stop()


def test_one_all_brokers_down_report_per_outage_and_one_recovery(kafka1):
    kafka1.create_topic("outage", 1)
    got = []
    with Producer(bootstrap_servers=kafka1.bootstrap, on_error=got.append,
                  error_report_interval_ms=0, reconnect_backoff_max_ms=200,
                  delivery_timeout_ms=180_000, request_timeout_ms=5_000) as p:
        assert p.send("outage", b"before").get(30).offset == 0
        kafka1.kill(1)
        wait_until(lambda: got, "the outage report")
        during = p.send("outage", b"during")          # waits for the broker
        failed = p.metrics()["net_disconnects"]
        wait_until(lambda: p.metrics()["net_disconnects"] >= failed + 5,
                   "five more failed attempts")
        assert [type(e) for e in got] == [AllBrokersDownError]
        addr = kafka1.bootstrap
        assert list(got[0].brokers) == [addr] and got[0].brokers[addr] == "connection refused"
        kafka1.start_node(1)
        wait_until(lambda: len(got) == 2, "the recovery report")
        assert during.get(120).offset == 1
        assert p.send("outage", b"after").get(30).offset == 2
        assert [type(e) for e in got] == [AllBrokersDownError, BrokersRecovered]
        assert got[1].down_ms > 0 and p.metrics()["errors_reported"] == 2
    values = [m.value for m in read_back(kafka1.bootstrap, "outage", 1, 3)[0]]
    assert values == [b"before", b"during", b"after"]
