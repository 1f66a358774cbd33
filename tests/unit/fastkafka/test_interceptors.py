"""Producer interceptors (fastkafka.interceptors): the setting, the order of on_send and what it may
change, a raising interceptor skipped and logged with the record never lost, on_acknowledgement on
the I/O thread before the record's callback with the same metadata and error, close(); on send,
produce, send_batch (lists and Arrow), fastkafka.aio and the compatibility layers. Against the
in-process fault broker, whose stored batches are decoded with kafka-python's decoder."""
from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from kafka.record.default_records import DefaultRecordBatch

from faultbroker import partition_error
from fastkafka import Producer
from fastkafka.config import ProducerConfig
from fastkafka.errors import ConfigError, InvalidRecordError, MalformedRecordError, UnknownPartitionError
from fastkafka.interceptors import ProducerInterceptor, ProducerRecord
from fastkafka.protocol import ApiKey

pytestmark = pytest.mark.faultbroker

FAST = dict(request_timeout_ms=2000, delivery_timeout_ms=15000, retry_backoff_ms=20,
            reconnect_backoff_ms=20, reconnect_backoff_max_ms=200, linger_ms=2, max_block_ms=5000)
INVALID_RECORD = 87          # not retriable: the record fails


def stored(fb, topic, partitions=1):
    """[(key, value, headers)] the broker stored, in partition then offset order."""
    out = []
    for part in range(partitions):
        for sb in fb.cluster.batches(topic, part):
            batch = DefaultRecordBatch(sb.data)
            assert batch.validate_crc()
            out.extend((r.key, r.value, list(r.headers)) for r in batch)
    return out


class Recorder(ProducerInterceptor):
    """Adds a header ``(name, b"1")``, records what it saw and its acknowledgements."""

    def __init__(self, name, events=None, value=None):
        self.name, self.events, self.value = name, events if events is not None else [], value
        self.seen, self.acks, self.closed = [], [], 0

    def on_send(self, record):
        self.seen.append(record.replace())
        record.headers.append((self.name, b"1"))
        if self.value is not None:
            record.value = self.value
        return record

    def on_acknowledgement(self, metadata, error):
        self.acks.append((metadata, error, threading.current_thread().name))
        self.events.append(("ack", self.name, metadata, error))

    def close(self):
        self.closed += 1
        self.events.append(("close", self.name))


class Raises:
    def on_send(self, record):
        raise RuntimeError("boom in on_send")

    def on_acknowledgement(self, metadata, error):
        raise RuntimeError("boom in on_acknowledgement")


class ReturnsNone:
    def on_send(self, record):
        return None


# ------------------------------------------------------------------------------------- settings
@pytest.mark.parametrize("value,says", [
    ("com.example.TracingInterceptor", "a Java class name cannot run here"),
    (["com.example.TracingInterceptor"], "a Java class name cannot run here"),
    ([Recorder], "not an instance: pass Recorder(...)"),
    ([object()], "has none of on_send, on_acknowledgement, close"),
    (Recorder("a"), "interceptors must be a list"),
])
def test_bad_interceptors_setting_names_what_to_pass(value, says):
    with pytest.raises(ConfigError) as e:
        ProducerConfig(bootstrap_servers="h:1", interceptors=value)
    assert says in str(e.value) and "interceptors=[obj, ...]" in str(e.value)


def test_java_interceptor_classes_names_the_setting():
    with pytest.raises(ConfigError, match=r"interceptors=\[obj, \.\.\.\]"):
        ProducerConfig({"bootstrap.servers": "h:1", "interceptor.classes": "com.example.X"})


def test_setting_accepts_a_list_or_tuple_and_empty_is_none():
    a = Recorder("a")
    assert ProducerConfig(bootstrap_servers="h:1", interceptors=[a]).interceptors == (a,)
    assert ProducerConfig(bootstrap_servers="h:1", interceptors=()).interceptors is None
    assert ProducerConfig(bootstrap_servers="h:1").interceptors is None


# ----------------------------------------------------------------------------------------- send
def test_on_send_runs_in_order_and_may_replace_value_key_headers(fb):
    fb.create_topic("t", 1)
    a, b = Recorder("a", value=b"from-a"), Recorder("b")

    class Key:
        def on_send(self, record):
            return record.replace(key=b"k2")

    with Producer(bootstrap_servers=fb.bootstrap, interceptors=[a, Key(), b], **FAST) as p:
        md = p.send("t", b"v", key=b"k", headers={"h": b"0"}).get(10)
    assert a.seen == [ProducerRecord("t", b"v", b"k", None, None, [("h", b"0")])]
    assert b.seen == [ProducerRecord("t", b"from-a", b"k2", None, None, [("h", b"0"), ("a", b"1")])]
    assert stored(fb, "t") == [(b"k2", b"from-a", [("h", b"0"), ("a", b"1"), ("b", b"1")])]
    assert md.offset == 0 and a.closed == b.closed == 1


def test_raising_interceptor_is_logged_and_skipped_record_never_lost(fb, caplog):
    fb.create_topic("t", 1)
    a, c = Recorder("a"), Recorder("c")
    caplog.set_level(logging.WARNING, logger="fastkafka")
    with Producer(bootstrap_servers=fb.bootstrap, interceptors=[a, Raises(), ReturnsNone(), c],
                  **FAST) as p:
        futs = [p.send("t", b"v%d" % i) for i in range(5)]
        assert [f.get(10).offset for f in futs] == list(range(5))
    assert [h for _, _, h in stored(fb, "t")] == [[("a", b"1"), ("c", b"1")]] * 5
    text = caplog.text
    assert "on_send raised" in text and "boom in on_send" in text
    assert "on_send returned NoneType, expected a ProducerRecord" in text
    assert "on_acknowledgement raised" in text
    assert len(a.acks) == len(c.acks) == 5      # the raising one does not stop the others


def test_on_acknowledgement_runs_on_the_io_thread_before_the_callback_with_the_same_objects(fb):
    fb.create_topic("t", 1)
    events = []
    ic = Recorder("a", events)
    fb.script.on(ApiKey.PRODUCE, partition_error(INVALID_RECORD), times=1)
    with Producer(bootstrap_servers=fb.bootstrap, interceptors=[ic], enable_idempotence=False,
                  retries=0, **FAST) as p:
        bad = p.send("t", b"x", on_delivery=lambda err, md: events.append(("cb", err, md)))
        with pytest.raises(Exception):
            bad.get(10)
        good = p.send("t", b"y", on_delivery=lambda err, md: events.append(("cb", err, md)))
        good.add_callback(lambda err, md: events.append(("later", err, md)))
        assert good.get(10).offset >= 0
    acks = [e for e in events if e[0] == "ack"]
    cbs = [e for e in events if e[0] == "cb"]
    assert [e[0] for e in events] == ["ack", "cb", "ack", "cb", "later", "close"]
    for (_, _, md, err), (_, cb_err, cb_md) in zip(acks, cbs):
        assert md is cb_md and err is cb_err
    assert acks[0][3] is not None and acks[0][3].code == INVALID_RECORD
    assert acks[1][3] is None and acks[1][2].offset == good.get(1).offset
    assert all(name.startswith("fastkafka-sender") for _, _, name in ic.acks)


def test_a_send_that_raises_is_acknowledged_with_its_error(fb):
    fb.create_topic("t", 1)
    ic = Recorder("a")
    with Producer(bootstrap_servers=fb.bootstrap, interceptors=[ic], **FAST) as p:
        with pytest.raises(UnknownPartitionError) as e:
            p.send("t", b"v", partition=7)
        with pytest.raises(MalformedRecordError):
            p.send("", b"v")                      # refused before any interceptor sees it
        with pytest.raises(InvalidRecordError):
            p.send_batch(5, [b"v"])
    [(md, err, _)] = ic.acks
    assert err is e.value and (md.topic, md.partition, md.offset) == ("t", 7, -1)
    assert len(ic.seen) == 1


def test_produce_without_callback_and_close_after_the_last_acknowledgement(fb):
    fb.create_topic("t", 3)
    events = []
    ic = Recorder("a", events)
    p = Producer(bootstrap_servers=fb.bootstrap, interceptors=[ic], **FAST)
    for i in range(30):
        p.produce("t", b"v%d" % i, key=b"k%d" % i)
    p.close(10)
    assert [e[0] for e in events] == ["ack"] * 30 + ["close"]
    assert all(e[3] is None and e[2].offset >= 0 for e in events[:30])
    assert len(stored(fb, "t", 3)) == 30 and ic.closed == 1


# ----------------------------------------------------------------------------------- send_batch
def test_send_batch_of_lists_runs_per_record(fb):
    fb.create_topic("t", 2)
    ic = Recorder("a")
    with Producer(bootstrap_servers=fb.bootstrap, interceptors=[ic], **FAST) as p:
        fut = p.send_batch("t", [b"v0", b"v1", b"v2"], keys=[b"k0", None, b"k2"],
                           headers=[("common", b"c")], record_headers=[[("own", b"o")], None, {}])
        assert fut.get(10) == 3
    assert [r.headers for r in ic.seen] == [[("own", b"o"), ("common", b"c")],
                                            [("common", b"c")], [("common", b"c")]]
    assert len(ic.acks) == 3 and all(err is None for _, err, _ in ic.acks)
    got = sorted(stored(fb, "t", 2), key=lambda r: r[1])
    assert [v for _, v, _ in got] == [b"v0", b"v1", b"v2"]
    assert got[0][2] == [("own", b"o"), ("common", b"c"), ("a", b"1")]


def test_send_batch_of_arrow_runs_per_record(fb):
    import pyarrow as pa
    fb.create_topic("t", 1)
    ic = Recorder("a")
    hdr = pa.array([[{"key": "x", "value": b"1"}], None],
                   pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
    with Producer(bootstrap_servers=fb.bootstrap, interceptors=[ic], **FAST) as p:
        fut = p.send_batch("t", pa.array([b"a", None], pa.binary()), keys=pa.array(["k", None]),
                           timestamps=pa.array([1_700_000_000_123, None], pa.int64()),
                           timestamp_ms=1_700_000_000_000, record_headers=hdr)
        assert fut.get(10) == 2
    assert [(r.value, r.key, r.timestamp_ms, r.headers) for r in ic.seen] == [
        (b"a", "k", 1_700_000_000_123, [("x", b"1")]), (None, None, 1_700_000_000_000, [])]
    assert stored(fb, "t") == [(b"k", b"a", [("x", b"1"), ("a", b"1")]), (None, None, [("a", b"1")])]
    assert [md.offset for md, _, _ in ic.acks] == [0, 1]


def test_send_batch_invalid_input_queues_nothing_and_acknowledges_every_record(fb):
    fb.create_topic("t", 1)
    ic = Recorder("a")
    with Producer(bootstrap_servers=fb.bootstrap, interceptors=[ic], **FAST) as p:
        with pytest.raises(Exception) as e:
            p.send_batch("t", [b"ok", 5])
        p.flush(5)
    assert len(ic.acks) == 2 and all(err is e.value for _, err, _ in ic.acks)
    assert stored(fb, "t") == []


# ------------------------------------------------------------------------------------------ aio
def test_aio_on_send_once_per_record_and_acknowledged_before_the_await(fb):
    from fastkafka.aio import AsyncProducer

    fb.create_topic("t", 1)
    events = []
    ic = Recorder("a", events)

    async def main():
        async with AsyncProducer(bootstrap_servers=fb.bootstrap, interceptors=[ic], **FAST) as p:
            md = await p.send("t", b"v0")          # waits for metadata first: tried twice
            events.append(("awaited", md))
            p.produce("t", b"v1", on_delivery=lambda err, md: events.append(("cb", err, md)))
            assert await p.send_batch("t", [b"v2", b"v3"]) == 2
            await p.flush()

    asyncio.run(main())
    assert len(ic.seen) == 4 and [r.value for r in ic.seen] == [b"v0", b"v1", b"v2", b"v3"]
    kinds = [e[0] for e in events]
    assert kinds.count("ack") == 4 and kinds[-1] == "close"
    assert kinds.index("ack") < kinds.index("awaited") and events[0][2] == events[1][1]
    ack_v1 = next(i for i, e in enumerate(events) if e[0] == "ack" and e[2].offset == 1)
    assert ack_v1 < kinds.index("cb") and events[kinds.index("cb")][2] == events[ack_v1][2]
    assert [h for _, _, h in stored(fb, "t")] == [[("a", b"1")]] * 4


# --------------------------------------------------------------------------------------- compat
def test_confluent_compat_acknowledges_on_the_io_thread_before_poll_serves_the_report(fb):
    from fastkafka.compat.confluent import Producer as CProducer

    fb.create_topic("t", 1)
    events = []
    ic = Recorder("a", events)
    p = CProducer({"bootstrap.servers": fb.bootstrap, "linger.ms": 2, "interceptors": [ic]})
    p.produce("t", b"v", on_delivery=lambda err, msg: events.append(("cb", err, msg.offset())))
    assert p.flush(10) == 0
    assert [e[0] for e in events] == ["ack", "cb"] and events[0][2].offset == events[1][2] == 0
    assert ic.acks[0][2].startswith("fastkafka-sender")
    assert stored(fb, "t") == [(None, b"v", [("a", b"1")])]


def test_kafka_python_compat_goes_through_the_interceptors(fb):
    from fastkafka.compat.kafka_python import KafkaProducer

    fb.create_topic("t", 1)
    ic = Recorder("a")
    p = KafkaProducer(bootstrap_servers=fb.bootstrap, linger_ms=2, interceptors=[ic])
    try:
        assert p.send("t", b"v").get(10).offset == 0
    finally:
        p.close(10)
    assert stored(fb, "t") == [(None, b"v", [("a", b"1")])] and ic.closed == 1
