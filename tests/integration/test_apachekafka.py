"""The Apache Kafka rig itself: the version asked for is the version running, its features, its
process lifecycle, and clear errors when Maven or the jars are missing."""
from __future__ import annotations

import os
import socket
import struct

import pytest

from fastkafka import Producer
from fastkafka import protocol as P
from fastkafka_tools.apachekafka import KafkaCluster, KafkaRigError, ensure_jars, kafka_version
from fastkafka.protocol import ApiKey

from brokers import read_back, unique_name


def _api_versions_v3(host: str, port: int) -> dict:
    frame = b"".join(bytes(b) for b in P.encode_request(
        ApiKey.API_VERSIONS, 3, 7, "fastkafka-test",
        {"client_software_name": "fastkafka-test", "client_software_version": "1"}))
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(frame)
        size = struct.unpack(">i", _recv(s, 4))[0]
        corr, body = P.decode_response(ApiKey.API_VERSIONS, 3, _recv(s, size))
    assert corr == 7
    return body


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return buf


def test_running_version_is_the_one_asked_for(kafka_broker):
    version = kafka_version()
    assert kafka_broker.version == version
    jars = os.listdir(ensure_jars("broker", version))
    assert f"kafka_2.13-{version}.jar" in jars
    body = _api_versions_v3(kafka_broker.host, kafka_broker.port)
    assert body["error_code"] == 0
    features = {f["name"]: f["max_version_level"] for f in body["finalized_features"]}
    assert features.get("metadata.version", 0) > 0, features
    major = int(version.split(".")[0])
    produce_max = {e["api_key"]: e["max_version"] for e in body["api_keys"]}[ApiKey.PRODUCE]
    if major >= 4:
        # KIP-890 part 2: 4.x clusters formatted with defaults run transaction protocol version 2
        # (the transactions work builds on it), which comes with Produce v12.
        assert features.get("transaction.version") == 2, features
        assert produce_max >= 12
    else:
        assert features.get("transaction.version", 0) == 0, features
        assert produce_max == 11


def test_stop_kills_every_process_and_removes_its_files():
    kc = KafkaCluster(nodes=1).start()
    node = kc.nodes[1]
    pid, base = node.pid, kc.base_dir
    topic = unique_name("rig")
    kc.create_topic(topic, 2)
    with Producer(bootstrap_servers=kc.bootstrap) as p:
        md = p.send(topic, b"x", partition=1).get(15)
    assert (md.partition, md.offset) == (1, 0)
    assert [m.value for m in read_back(kc.bootstrap, topic, 2, 1)[1]] == [b"x"]
    kc.stop()
    assert not node.running and node.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not os.path.exists(base)


def test_killed_node_restarts_with_its_data():
    with KafkaCluster(nodes=1) as kc:
        topic = unique_name("rig")
        kc.create_topic(topic, 1)
        with Producer(bootstrap_servers=kc.bootstrap) as p:
            for i in range(20):
                p.send(topic, b"%d" % i)
            assert p.flush(15) == 0
        kc.kill(1)
        assert not kc.running
        kc.start_node(1)
        got = read_back(kc.bootstrap, topic, 1, 20)
        assert [m.value for m in got[0]] == [b"%d" % i for i in range(20)]


def test_cluster_id_starting_with_a_dash():
    """One random cluster id in 64 starts with "-" (URL-safe base64); formatting must take it."""
    kc = KafkaCluster(nodes=1)
    kc.cluster_id = "-" + kc.cluster_id[1:]
    with kc:
        topic = unique_name("rig")
        kc.create_topic(topic, 1)
        with Producer(bootstrap_servers=kc.bootstrap) as p:
            assert p.send(topic, b"x").get(15).offset == 0


def test_missing_maven_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("FASTKAFKA_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))   # no mvn there
    with pytest.raises(KafkaRigError, match="apt-get install maven"):
        ensure_jars("broker", "4.4.0")


def test_unknown_part_is_rejected():
    with pytest.raises(ValueError, match="part must be one of"):
        ensure_jars("zookeeper")
