"""LocalBroker and the read_back reader against the real brokers (confluent-kafka writes)."""
from __future__ import annotations

import os
import socket
import struct
import time

import pytest
from confluent_kafka import Producer

from brokers import read_back
from fastkafka_tools.localbroker import LocalBroker, LocalBrokerError, api_versions_probe

pytestmark = pytest.mark.broker

# A recent, fixed timestamp: noida applies Kafka's default 7-day retention to record timestamps and
# deletes older records a few seconds after they are written (a 2023 timestamp made these tests flaky
# on a session broker that had been up long enough for its retention sweep to run).
TS = (time.time_ns() // 1_000_000 // 1000) * 1000 - 60_000


def _produce(bootstrap, topic, records):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 0})
    errors = []
    for part, key, value, headers in records:
        p.produce(topic, value, key=key, partition=part, headers=headers, timestamp=TS,
                  on_delivery=lambda e, m: errors.append(e) if e else None)
    assert p.flush(20) == 0
    assert errors == []


def test_api_versions_probe_parses(broker):
    payload = api_versions_probe("127.0.0.1", broker.port)
    cid, error_code, n = struct.unpack_from(">ihi", payload)
    assert cid == 0x5EED and error_code == 0 and n > 10
    keys = {struct.unpack_from(">h", payload, 10 + 6 * i)[0] for i in range(n)}
    assert {0, 3, 18}.issubset(keys)          # Produce, Metadata, ApiVersions


def test_create_topic_and_read_back(broker, fresh_topic):
    topic = fresh_topic(4)
    records = [(i % 4, b"k%d" % i, b"v%d" % i, [("h", b"x%d" % i)]) for i in range(40)]
    _produce(broker.bootstrap, topic, records)
    got = read_back(broker.bootstrap, topic, 4, 40)
    assert sorted(got) == [0, 1, 2, 3]
    for part, msgs in got.items():
        assert [m.offset for m in msgs] == list(range(10))
        assert [m.value for m in msgs] == [b"v%d" % i for i in range(part, 40, 4)]
        assert [m.key for m in msgs] == [b"k%d" % i for i in range(part, 40, 4)]
        assert all(m.topic == topic and m.partition == part for m in msgs)
        assert all(m.timestamp == TS for m in msgs)
        assert [m.headers for m in msgs] == [[("h", b"x%d" % i)] for i in range(part, 40, 4)]


def test_read_back_times_out_with_counts(broker, fresh_topic):
    topic = fresh_topic(2)
    _produce(broker.bootstrap, topic, [(0, None, b"only", None)])
    with pytest.raises(AssertionError, match=r"read 1 of 3 .*\{0: 1, 1: 0\}"):
        read_back(broker.bootstrap, topic, 2, 3, timeout=2)


@pytest.mark.parametrize("kind", ["tansu", "noida"])
def test_start_stop_leaves_nothing(kind):
    b = LocalBroker(kind)
    with b:
        pid, data_dir = b.pid, b.data_dir
        assert b.running and b.bootstrap == f"127.0.0.1:{b.port}"
        assert os.path.exists(f"/proc/{pid}")
        if kind == "noida":
            assert data_dir and os.path.isdir(data_dir)
    assert not b.running
    assert not os.path.exists(f"/proc/{pid}"), "broker process left behind"
    if kind == "noida":
        assert not os.path.exists(data_dir), "temporary data dir left behind"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", b.port), timeout=1).close()


def test_port_in_use_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(LocalBrokerError, match="exited with code .* last output"):
            LocalBroker("noida", port=port).start(timeout=5)


def test_bad_arguments():
    with pytest.raises(ValueError, match="kind must be one of"):
        LocalBroker("kafka")
    with pytest.raises(ValueError, match="storage='null' is a tansu option"):
        LocalBroker("noida", storage="null")


def test_null_storage_accepts_produce():
    with LocalBroker("tansu", storage="null") as b:
        b.create_topic("sink", 2)
        _produce(b.bootstrap, "sink", [(0, None, b"gone", None), (1, None, b"gone", None)])


def test_topics_without_confluent_kafka():
    """Product code must not need confluent-kafka: create/delete topics with it made unimportable."""
    import subprocess
    import sys

    code = r"""
import sys
sys.modules["confluent_kafka"] = None            # any import of it raises ImportError
from fastkafka_tools.localbroker import LocalBroker
from fastkafka.admin import Admin
for kind in ("tansu", "noida"):
    with LocalBroker(kind) as b:
        b.create_topic("six", 6)
        with Admin(bootstrap_servers=b.bootstrap) as a:
            parts = a.describe_topic("six")
            assert len(parts) == 6 and all(p.leader >= 0 for p in parts), parts
        b.delete_topic("six")
        b.create_topic("six", 2)
        with Admin(bootstrap_servers=b.bootstrap) as a:
            assert len(a.describe_topic("six")) == 2
        print(kind, "ok")
assert not any(m.startswith("confluent_kafka") and sys.modules[m] is not None for m in sys.modules)
"""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split() == ["tansu", "ok", "noida", "ok"]


def test_create_existing_topic_is_a_clear_error(broker, fresh_topic):
    topic = fresh_topic(3)
    with pytest.raises(LocalBrokerError, match="already exists|36"):
        broker.create_topic(topic, 3)
