"""Bounds that hold whatever the broker sends: a Metadata answer of a million partitions does not
stall the I/O thread (close(timeout) keeps its bound), and a topic the brokers report unknown is
logged at once and fails its sends with a typed error after topic_metadata_propagation_max_ms."""
from __future__ import annotations

import asyncio
import logging
import socket
import struct
import threading
import time

import pytest

from faultbroker import Cluster, FaultBroker
from fastkafka import Producer
from fastkafka._net.cluster import cluster_from_response
from fastkafka._net.metadata_answer import LargeMetadataAnswer, MetadataCodec, MetadataDecodeJob
from fastkafka.aio import AsyncProducer
from fastkafka.errors import KafkaTimeoutError, UnknownTopicOrPartitionError
from fastkafka.protocol import ApiKey, decode_response
from faultbroker.protocol import decode_request, encode_response

MILLION = 1_000_000


def _metadata_body(port: int, topic: str, partitions: int) -> dict:
    row = {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 0,
           "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": []}
    return {"throttle_time_ms": 0, "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": port}],
            "cluster_id": "c", "controller_id": 1,
            "topics": [{"error_code": 0, "name": topic,
                        "partitions": [dict(row, partition_index=i) for i in range(partitions)]}]}


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _compact_str(text: str) -> bytes:
    raw = text.encode()
    return _uvarint(len(raw) + 1) + raw


def metadata_v12_frame(correlation_id: int, port: int, topic: str, partitions: int) -> bytes:
    """The frame (size prefix included) encode_response gives for ``_metadata_body`` at v12, built
    with struct: the generic encoder takes tens of seconds for a million partitions on a loaded
    machine (test_hand_built_frame_is_the_codecs checks that both agree)."""
    one = _uvarint(2) + struct.pack(">i", 1)                    # [1], compact
    part = struct.Struct(">hiii")
    tail = one + one + _uvarint(1) + b"\x00"                     # replicas, isr, no offline; no tags
    parts = b"".join([part.pack(0, i, 1, 0) + tail for i in range(partitions)])
    body = b"".join([
        struct.pack(">i", correlation_id), b"\x00",              # response header v1
        struct.pack(">i", 0),                                    # throttle_time_ms
        _uvarint(2), struct.pack(">i", 1), _compact_str("127.0.0.1"), struct.pack(">i", port),
        b"\x00", b"\x00",                                        # rack null, tags
        _compact_str("c"), struct.pack(">i", 1),                 # cluster_id, controller_id
        _uvarint(2), struct.pack(">h", 0), _compact_str(topic), bytes(16), b"\x00",
        _uvarint(partitions + 1), parts,
        struct.pack(">i", -2147483648), b"\x00",                 # topic_authorized_operations, tags
        b"\x00"])                                                 # the body's tags
    return struct.pack(">i", len(body)) + body


def test_hand_built_frame_is_the_codecs():
    body = _metadata_body(4321, "t", 300)
    body["topics"][0]["topic_id"] = bytes(16)
    assert metadata_v12_frame(5, 4321, "t", 300) == encode_response(ApiKey.METADATA, 12, 5, body)


class BigMetadataBroker:
    """A socket stand-in for a broker: answers ApiVersions, and every Metadata request with one
    pre-encoded answer (v12) listing ``partitions`` partitions of ``topic``; nothing else."""

    def __init__(self, topic: str, partitions: int):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.frame = metadata_v12_frame(0, self.port, topic, partitions)
        self.metadata_requests = 0
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self._conns.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c: socket.socket) -> None:
        buf = b""
        try:
            while True:
                while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
                    data = c.recv(65536)
                    if not data:
                        return
                    buf += data
                n = struct.unpack_from(">i", buf)[0]
                header, _ = decode_request(buf[4:4 + n])
                buf = buf[4 + n:]
                corr = header["correlation_id"]
                if header["api_key"] == ApiKey.API_VERSIONS:
                    c.sendall(encode_response(ApiKey.API_VERSIONS, min(header["api_version"], 3), corr, {
                        "error_code": 0, "api_keys": [
                            {"api_key": int(ApiKey.API_VERSIONS), "min_version": 0, "max_version": 3},
                            {"api_key": int(ApiKey.METADATA), "min_version": 12, "max_version": 12},
                            {"api_key": int(ApiKey.PRODUCE), "min_version": 3, "max_version": 11}]}))
                elif header["api_key"] == ApiKey.METADATA:
                    self.metadata_requests += 1
                    c.sendall(self.frame[:4] + struct.pack(">i", corr) + self.frame[8:])
        except OSError:
            return

    def close(self) -> None:
        self.sock.close()
        for c in self._conns:
            c.close()


@pytest.fixture(scope="module")
def big_broker():
    b = BigMetadataBroker("big", MILLION)
    yield b
    b.close()


def test_million_partition_metadata_answer_keeps_send_and_close_bounded(big_broker):
    assert len(big_broker.frame) > 20_000_000       # the 26 MB answer of the report
    p = Producer(bootstrap_servers=big_broker.bootstrap, max_block_ms=3000, enable_idempotence=False)
    try:
        start = time.monotonic()
        try:
            p.send("big", b"x")
        except KafkaTimeoutError:
            pass                                   # typed, and within its bound (below)
        took = time.monotonic() - start
        assert took < 3.5, f"send with max_block_ms=3000 took {took:.2f} s"
        assert big_broker.metadata_requests >= 1
    finally:
        start = time.monotonic()
        p.close(2)
        took = time.monotonic() - start
    assert took < 2.5, f"close(2) took {took:.2f} s"


def _small_answer(version: int = 12) -> bytes:
    frame = encode_response(ApiKey.METADATA, version, 7, _metadata_body(9092, "t", 5000))
    return frame[4:]                               # without the size prefix, as a connection reads it


def test_codec_leaves_a_large_answer_undecoded_and_the_job_builds_the_same_cluster():
    frame = _small_answer()
    assert isinstance(MetadataCodec().decode(12, frame), dict)    # under the bound: decoded at once
    answer = MetadataCodec(off_turn_bytes=1000).decode(12, frame)
    assert isinstance(answer, LargeMetadataAnswer) and answer.throttle_time_ms == 0
    done = threading.Event()
    job = MetadataDecodeJob(answer, done.set).start()
    assert done.wait(30) and job.join(5)
    cluster, error, problems = job.outcome
    assert error is None and problems == []
    inline = cluster_from_response(decode_response(ApiKey.METADATA, 12, frame)[1])
    assert cluster.partition_count("t") == inline.partition_count("t") == 5000
    assert [cluster.leader_for("t", i) for i in range(5000)] == [1] * 5000
    assert sorted(cluster.brokers) == sorted(inline.brokers) == [1]


def test_throttle_of_an_undecoded_answer_is_read():
    body = _metadata_body(9092, "t", 10)
    body["throttle_time_ms"] = 1234
    frame = encode_response(ApiKey.METADATA, 12, 7, body)[4:]
    assert MetadataCodec(off_turn_bytes=10).decode(12, frame).throttle_time_ms == 1234


def test_cancelled_job_reports_nothing():
    answer = MetadataCodec(off_turn_bytes=1000).decode(12, _small_answer())
    calls = []
    job = MetadataDecodeJob(answer, lambda: calls.append(1))
    job.cancel()
    job.start()
    assert job.join(30)
    assert job.outcome is None and calls == []


def test_garbled_large_answer_is_a_typed_outcome():
    frame = _small_answer()[:5000]                 # cut short
    done = threading.Event()
    job = MetadataDecodeJob(LargeMetadataAnswer(12, frame), done.set).start()
    assert done.wait(30)
    cluster, error, problems = job.outcome
    assert cluster is None and type(error).__name__ == "CorruptFrameError"


# -- a topic the brokers report unknown ---------------------------------------------------------

@pytest.fixture
def no_autocreate():
    b = FaultBroker(Cluster(auto_create_topics=False))
    try:
        yield b
    finally:
        b.close()
    assert b.crashed == [] and b.handler_errors == []


def _warnings_naming(caplog, topic):
    return [r for r in caplog.records
            if r.levelno == logging.WARNING and repr(topic) in r.getMessage()
            and "UNKNOWN_TOPIC_OR_PARTITION" in r.getMessage()]


def _assert_warned_once_at_once(caplog, topic, start):
    warned = _warnings_naming(caplog, topic)
    assert len(warned) == 1, [r.getMessage() for r in caplog.records]
    assert warned[0].created - start < 1.0
    text = warned[0].getMessage()
    assert "auto.create.topics.enable" in text and "misspelt" in text


@pytest.mark.parametrize("how", ["send", "send_batch", "partitions_for"])
def test_unknown_topic_is_logged_at_once_and_fails_typed_after_its_bound(no_autocreate, caplog, how):
    caplog.set_level(logging.WARNING, logger="fastkafka")
    with Producer(bootstrap_servers=no_autocreate.bootstrap, max_block_ms=20_000,
                  topic_metadata_propagation_max_ms=1500) as p:
        start = time.time()
        t0 = time.monotonic()
        with pytest.raises(UnknownTopicOrPartitionError, match="'no-such-topic'"):
            if how == "send":
                p.send("no-such-topic", b"v")
            elif how == "send_batch":
                p.send_batch("no-such-topic", [b"a", b"b"])
            else:
                p.partitions_for("no-such-topic")
        took = time.monotonic() - t0
        assert 1.4 < took < 3.0, took
        _assert_warned_once_at_once(caplog, "no-such-topic", start)


def test_unknown_topic_never_waits_past_max_block_ms(no_autocreate, caplog):
    caplog.set_level(logging.WARNING, logger="fastkafka")
    with Producer(bootstrap_servers=no_autocreate.bootstrap, max_block_ms=1000) as p:
        assert p.config.topic_metadata_propagation_max_ms == 30_000   # the default
        start = time.time()
        t0 = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            p.send("missing", b"v")
        assert time.monotonic() - t0 < 2.0
        _assert_warned_once_at_once(caplog, "missing", start)


def test_topic_created_while_waiting_is_sent_to(no_autocreate, caplog):
    caplog.set_level(logging.WARNING, logger="fastkafka")
    with Producer(bootstrap_servers=no_autocreate.bootstrap, max_block_ms=20_000,
                  topic_metadata_propagation_max_ms=10_000) as p:
        threading.Timer(1.0, no_autocreate.create_topic, args=("late", 2)).start()
        md = p.send("late", b"v").get(10)
        assert md.topic == "late"
        assert len(_warnings_naming(caplog, "late")) == 1


def test_async_send_to_unknown_topic(no_autocreate, caplog):
    caplog.set_level(logging.WARNING, logger="fastkafka")

    async def main():
        p = AsyncProducer(bootstrap_servers=no_autocreate.bootstrap, max_block_ms=20_000,
                          topic_metadata_propagation_max_ms=1500)
        try:
            t0 = time.monotonic()
            with pytest.raises(UnknownTopicOrPartitionError):
                fut = await p.send("gone", b"v")
                await fut
            return time.monotonic() - t0
        finally:
            await p.close()

    start = time.time()
    took = asyncio.run(main())
    assert 1.4 < took < 4.0, took        # within a metadata refresh (1 s at most) of the bound
    _assert_warned_once_at_once(caplog, "gone", start)


def test_confluent_setting_maps_to_the_producer_setting():
    from fastkafka.compat.confluent._config import translate
    out = translate({"bootstrap.servers": "h:1", "topic.metadata.propagation.max.ms": 1234})
    settings = out[0] if isinstance(out, tuple) else out
    assert settings["topic_metadata_propagation_max_ms"] == 1234


@pytest.mark.parametrize("path", ["rows", "arrow"])
def test_spark_sink_task_to_unknown_topic(no_autocreate, caplog, path):
    from spark_sink import task as sink_task
    from spark_sink.options import settings_from_options

    caplog.set_level(logging.WARNING, logger="fastkafka")
    settings = settings_from_options({"kafka.bootstrap.servers": no_autocreate.bootstrap,
                                      "topic": f"spark-{path}",
                                      "kafka.topic.metadata.propagation.max.ms": "1500"})
    settings = settings.with_columns(["value"])
    writer = sink_task.TaskWriter(settings)
    try:
        start = time.time()
        t0 = time.monotonic()
        with pytest.raises(UnknownTopicOrPartitionError):
            if path == "rows":
                writer.write_row_values(b"v")
            else:
                import pyarrow as pa
                writer.write_arrow(pa.record_batch([pa.array([b"v"], pa.binary())], names=["value"]))
        assert 1.4 < time.monotonic() - t0 < 3.0
        _assert_warned_once_at_once(caplog, f"spark-{path}", start)
    finally:
        with sink_task._producers_lock:
            for k in [k for k, p in sink_task._producers.items() if p is writer.producer]:
                del sink_task._producers[k]
        writer.producer.close(1)


# -- other answers that could hold the I/O thread up ---------------------------------------------

def test_metadata_answer_trickling_in_keeps_send_and_close_bounded(fb):
    from faultbroker import split_frames

    fb.script.on(ApiKey.METADATA, split_frames(chunk=1, pause=0.05), times=None)
    p = Producer(bootstrap_servers=fb.bootstrap, max_block_ms=1500, enable_idempotence=False)
    try:
        t0 = time.monotonic()
        with pytest.raises(KafkaTimeoutError):
            p.send("trickle", b"v")
        assert time.monotonic() - t0 < 2.2
    finally:
        t0 = time.monotonic()
        p.close(2)
        took = time.monotonic() - t0
    assert took < 2.5, f"close(2) took {took:.2f} s"


def test_huge_api_versions_answer_is_refused_undecoded(fb, caplog):
    from faultbroker import rewrite_response
    from fastkafka._net.handshake import API_VERSIONS_CODEC, API_VERSIONS_MAX_BYTES

    entry = {"api_key": 10_000, "min_version": 0, "max_version": 0}
    many = API_VERSIONS_MAX_BYTES // 7 + 1000           # each entry is 7 bytes or more at v3
    frame = encode_response(ApiKey.API_VERSIONS, 3, 1, {"error_code": 0, "api_keys": [entry] * many})[4:]
    with pytest.raises(Exception) as info:
        API_VERSIONS_CODEC.decode(3, frame)
    assert type(info.value).__name__ == "CorruptFrameError" and "ApiVersions answer of" in str(info.value)

    def huge(body, header, request):
        body["api_keys"] = body["api_keys"] + [entry] * many

    caplog.set_level(logging.DEBUG, logger="fastkafka")
    fb.script.on(ApiKey.API_VERSIONS, rewrite_response(huge), times=1)
    with Producer(bootstrap_servers=fb.bootstrap, max_block_ms=10_000, reconnect_backoff_ms=10) as p:
        assert p.send("after-huge", b"v").get(10).topic == "after-huge"   # the next attempt is fine
    assert any("ApiVersions answer of" in r.getMessage() for r in caplog.records)


def test_topic_created_after_its_bound_passed_is_sent_to(no_autocreate):
    with Producer(bootstrap_servers=no_autocreate.bootstrap, max_block_ms=20_000,
                  topic_metadata_propagation_max_ms=500) as p:
        with pytest.raises(UnknownTopicOrPartitionError):
            p.send("created-later", b"v")
        no_autocreate.create_topic("created-later", 1)
        # the last answer still says unknown: the send waits for an answer of its own
        assert p.send("created-later", b"v").get(10).topic == "created-later"


def test_kafka_python_and_aiokafka_layers_keep_their_peers_timeout(no_autocreate, caplog):
    """kafka-python and aiokafka have no bound of their own for an unknown topic: their layers
    keep the peer's KafkaTimeoutError at max_block_ms (the WARNING is logged all the same)."""
    from fastkafka.compat import aiokafka as aio_layer
    from fastkafka.compat import kafka_python as kp_layer

    caplog.set_level(logging.WARNING, logger="fastkafka")
    kp = kp_layer.KafkaProducer(bootstrap_servers=no_autocreate.bootstrap, max_block_ms=1500)
    try:
        assert kp._producer.config.topic_metadata_propagation_max_ms == 2**31 - 1
        with pytest.raises(kp_layer.KafkaTimeoutError):
            kp.send("kp-missing", b"v")
        assert len(_warnings_naming(caplog, "kp-missing")) == 1
    finally:
        kp.close(1)

    async def main():
        p = aio_layer.AIOKafkaProducer(bootstrap_servers=no_autocreate.bootstrap)
        try:
            return p._p.config.topic_metadata_propagation_max_ms
        finally:
            await p.stop()
    assert asyncio.run(main()) == 2**31 - 1
