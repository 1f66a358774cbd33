"""Inputs of code moved from confluent-kafka: ``str`` values, keys and header values (sent as
UTF-8), dict headers, ``callback=`` for ``on_delivery=``, and confluent-kafka config keys with no
setting here (refused at construction naming what to use instead).

The encoder, the column reader and the accumulator are driven directly; the send path (one C call)
against the in-process fault broker, whose stored batches are decoded by the reference decoder.
"""
from __future__ import annotations

import time

import pyarrow as pa
import pytest

import reference_records as ref
from faultbroker import FaultBroker
from fastkafka import EncodedHeaders, Producer
from fastkafka._producer.accumulator import RecordAccumulator
from fastkafka._producer.batch import BatchFuture
from fastkafka._producer.bufferpool import BufferPool
from fastkafka._producer.columns import column_lengths
from fastkafka._producer.partitioner import partitions_for_keys
from fastkafka._producer.sendpath import validate_field, validate_headers
from fastkafka._wire.records import BatchBuilder, headers_size
from fastkafka.config import REPLACED_FOREIGN, ProducerConfig, canonical_name
from fastkafka.errors import ConfigError, InvalidRecordError, MalformedRecordError

TS = 1_700_000_000_000
LONE = "bad \udc80 str"              # a lone surrogate: no UTF-8 for it
TEXTS = ["", "plain", "\u00e9t\u00e9", "\u043a\u043b\u044e\u0447", "\U0001f600 emoji"]


def decoded(builder: BatchBuilder):
    builder.close()
    builder.stamp(-1, -1, -1)
    return ref.decode_batch(builder.buffer()).records


# ---- str values and keys: the encoder ------------------------------------------------------------

@pytest.mark.parametrize("text", TEXTS)
def test_a_str_value_and_key_are_written_as_their_utf8(text):
    b = BatchBuilder(1 << 16)
    assert b.append(TS, text, text + "!")
    assert b.append(TS, text.encode(), (text + "!").encode())    # the same record as bytes
    r_str, r_bytes = decoded(b)
    assert (r_str.key, r_str.value) == (text.encode("utf-8"), (text + "!").encode("utf-8"))
    assert (r_str.key, r_str.value) == (r_bytes.key, r_bytes.value)


@pytest.mark.parametrize("field", ["key", "value"])
def test_a_str_with_a_lone_surrogate_is_malformed_naming_the_argument(field):
    b = BatchBuilder(1024)
    args = {"key": b"k", "value": b"v", field: LONE}
    with pytest.raises(MalformedRecordError, match=rf"^.*{field}: str cannot be encoded as UTF-8"
                                                    rf" \(surrogates not allowed at position 4\)"):
        b.append(TS, args["key"], args["value"])
    assert b.record_count == 0
    with pytest.raises(MalformedRecordError, match=f"{field}: str cannot be encoded"):
        validate_field(LONE, field)
    validate_field("\u00e9", field)          # fine: nothing raised
    with pytest.raises(InvalidRecordError, match=f"{field} must be bytes-like.*str .*not int"):
        validate_field(5, field)


# ---- str in send_batch lists: the column reader and the accumulator -------------------------------

def test_lists_of_str_are_columns_and_a_lone_surrogate_names_its_index():
    assert column_lengths(["a", b"b", None, "\u00e9"], ["k", "k", None, b"k"]) == (4, 4)
    with pytest.raises(MalformedRecordError, match=r"values\[2\]: str cannot be encoded as UTF-8"):
        column_lengths([b"a", "b", LONE], None)
    with pytest.raises(MalformedRecordError, match=r"keys\[0\]: str cannot be encoded"):
        column_lengths([b"a"], [LONE])
    with pytest.raises(InvalidRecordError, match=r"values\[1\] must be bytes-like.*str.*not int"):
        column_lengths(["a", 1], None)


def make_acc():
    return RecordAccumulator(1 << 16, 0, None, 5, 100, 120_000, BufferPool(1 << 20, 1 << 16), False)


def test_append_batch_of_str_lists_and_dict_headers_writes_utf8():
    acc = make_acc()
    values = TEXTS + [None, b"raw"]
    keys = ["k%d" % i for i in range(len(TEXTS))] + [None, "\u00e9"]
    headers = {"source": "web \u00e9", "trace": None, b"raw": b"\x00\xff"}
    fut = BatchFuture(None)
    assert acc.append_batch("t", 0, values, keys, headers, TS, fut, 0, 0) == len(values)
    recs = [r for batch in acc.queued("t", 0) for r in decoded(batch.builder)]
    assert [r.value for r in recs] == [t.encode() for t in TEXTS] + [None, b"raw"]
    assert [r.key for r in recs] == [k.encode() if k is not None else None for k in keys]
    want = [("source", "web \u00e9".encode()), ("trace", None), ("raw", b"\x00\xff")]
    assert all(r.headers == want for r in recs)


def test_append_batch_refuses_a_lone_surrogate_before_appending_anything():
    acc = make_acc()
    fut = BatchFuture(None)
    with pytest.raises(MalformedRecordError, match=r"values\[1\]") as ei:
        acc.append_batch("t", 0, ["ok", LONE], None, None, TS, fut, 0, 0)
    assert ei.value.records_appended == 0 and acc.incomplete_record_count() == 0


def test_str_keys_are_placed_as_their_utf8():
    keys = TEXTS[1:] + ["another \u00e9"]
    as_bytes = [k.encode() for k in keys]
    for partitioner in ("murmur2", "consistent_random", "fnv1a"):
        want = list(partitions_for_keys(as_bytes, 7, 0, partitioner))
        assert list(partitions_for_keys(keys, 7, 0, partitioner)) == want
        assert list(partitions_for_keys(pa.array(keys, pa.string()), 7, 0, partitioner)) == want


# ---- headers: dicts and str values -------------------------------------------------------------

def test_dict_headers_encode_as_the_list_of_their_items_in_dict_order():
    d = {"k": b"v", "k2": "text \u00e9", b"k3": None, "k4": bytearray(b"ba"), "k5": memoryview(b"mv")}
    as_list = [("k", b"v"), ("k2", "text \u00e9".encode()), (b"k3", None), ("k4", b"ba"),
               ("k5", b"mv")]
    assert EncodedHeaders(d).data == EncodedHeaders(as_list).data == ref.encode_headers(as_list)
    assert headers_size(d) == validate_headers(d) == len(ref.encode_headers(as_list))
    reordered = dict(reversed(list(d.items())))
    assert EncodedHeaders(reordered).data == ref.encode_headers(list(reversed(as_list)))
    assert EncodedHeaders({}).data == b"\x00"


def test_str_header_values_in_lists_and_dicts():
    b = BatchBuilder(1 << 16)
    b.append(TS, None, b"v", [("a", "\u00e9"), ("b", "")])
    b.append(TS, None, b"v", {"a": "\u00e9", "b": ""})
    r1, r2 = decoded(b)
    assert r1.headers == r2.headers == [("a", "\u00e9".encode()), ("b", b"")]


@pytest.mark.parametrize("headers, error, match", [
    ({"k": b"v", "bad": LONE}, MalformedRecordError,
     r"headers: header 1 \('bad'\): the str value cannot be encoded as UTF-8"),
    ([("k", LONE)], MalformedRecordError, r"headers: header 0 \('k'\): the str value"),
    ({LONE: b"v"}, MalformedRecordError, r"headers: header 0: key .* cannot be encoded as UTF-8"),
    ({"k": b"v", "n": 5}, InvalidRecordError,
     r"headers: header 1: value must be bytes, bytearray, memoryview, str or None, got int"),
    ({7: b"v"}, InvalidRecordError, r"headers: header 0: key must be str or bytes, got int"),
    ({"k"}, InvalidRecordError, r"headers must be a list or tuple of \(key, value\) pairs or a "
                                r"dict, got set"),
])
def test_bad_headers_name_the_header(headers, error, match):
    with pytest.raises(error, match=match) as ei:
        validate_headers(headers)
    assert type(ei.value) is error


# ---- the send path (send / produce / send_batch) against the in-process broker --------------------

TOPIC = "confluent"


@pytest.fixture(scope="module")
def broker():
    b = FaultBroker()
    b.create_topic(TOPIC, 1)
    yield b
    b.close()
    assert b.crashed == [] and b.handler_errors == []


@pytest.fixture(scope="module")
def producer(broker):
    p = Producer(bootstrap_servers=broker.bootstrap, linger_ms=1, max_block_ms=5000)
    p.send(TOPIC, b"warm-up").get(10)
    yield p
    p.close(5)


def stored(broker, start):
    recs = [r for b in broker.cluster.batches(TOPIC, 0) for r in ref.decode_batch(b.data).records]
    return recs[start:]


def test_send_produce_and_send_batch_take_confluent_inputs(producer, broker):
    start = broker.cluster.record_count(TOPIC)
    seen = []
    md = producer.send(TOPIC, "value \u00e9", key="key \u043a", headers={"h": "x", "b": b"y"},
                       callback=lambda err, md: seen.append(("send", err, md.offset))).get(10)
    producer.produce(TOPIC, "produced", "k2", headers=[("h", "\U0001f600")],
                     callback=lambda err, md: seen.append(("produce", err, md.offset)))
    producer.send_batch(TOPIC, ["b1", b"b2"], keys=["bk", None], headers={"h": "batch"}).get(10)
    assert producer.flush(10) == 0
    assert seen == [("send", None, md.offset), ("produce", None, md.offset + 1)]
    got = [(r.key, r.value, r.headers) for r in stored(broker, start)]
    assert got == [
        ("key \u043a".encode(), "value \u00e9".encode(), [("h", b"x"), ("b", b"y")]),
        (b"k2", b"produced", [("h", "\U0001f600".encode())]),
        (b"bk", b"b1", [("h", b"batch")]),
        (None, b"b2", [("h", b"batch")]),
    ]


def test_a_confluent_style_callback_is_pointed_at_the_compat_layer(producer, caplog):
    """msg.topic() on a RecordMetadata: the error logged names the attributes and the compat layer;
    msg.value() and msg.error() raise an AttributeError that says what to use instead."""
    import logging
    calls = []

    def confluent_style(err, msg):
        calls.append(1)
        print(msg.topic(), msg.partition())

    with caplog.at_level(logging.ERROR, logger="fastkafka"):
        producer.produce(TOPIC, b"v", callback=confluent_style)
        assert producer.flush(10) == 0        # returns after the callbacks (and their logging)
    assert calls == [1]
    logged = [r.getMessage() for r in caplog.records if "delivery callback" in r.getMessage()]
    assert len(logged) == 1
    assert "md.topic, md.partition, md.offset, md.timestamp are attributes" in logged[0]
    assert "fastkafka.compat.confluent.Producer" in logged[0]
    md = producer.send(TOPIC, b"v").get(10)
    with pytest.raises(AttributeError, match="the error is the callback's first argument"):
        md.error()
    with pytest.raises(AttributeError, match="keep the value in a closure"):
        md.value()
    with pytest.raises(AttributeError, match="no attribute 'nonsense'$"):
        md.nonsense


def test_flush_returns_after_every_delivery_callback_has_run(producer):
    """confluent-kafka's and the Java client's flush() return after the callbacks: code that
    collects results in its callback reads them right after flush(). Callbacks that release the
    GIL (sleep, print to a file) give the flushing thread every chance to run early."""
    done = []

    def slow(err, md):
        time.sleep(0.002)
        done.append(md.offset)

    for _ in range(5):
        done.clear()
        for i in range(50):
            producer.produce(TOPIC, b"r%d" % i, on_delivery=slow)
        assert producer.flush(30) == 0
        assert len(done) == 50
    futures = [producer.send(TOPIC, b"s", on_delivery=slow) for _ in range(20)]
    done.clear()
    futures[-1].get(30)                     # the last record's batch: its callbacks have run
    assert done[-1] == futures[-1].get().offset


@pytest.mark.parametrize("call", ["send", "produce"])
def test_callback_and_on_delivery_together_or_not_callable_are_refused(producer, call):
    fn = getattr(producer, call)
    with pytest.raises(InvalidRecordError, match="on_delivery and callback given: callback is "
                                                 "another name for on_delivery"):
        fn(TOPIC, b"v", on_delivery=print, callback=print)
    with pytest.raises(InvalidRecordError, match="callback must be a callable.*got int"):
        fn(TOPIC, b"v", callback=5)
    with pytest.raises(MalformedRecordError, match="value: str cannot be encoded"):
        fn(TOPIC, LONE)
    with pytest.raises(MalformedRecordError, match=r"header 0 \('k'\): the str value"):
        fn(TOPIC, b"v", headers={"k": LONE})
    assert producer.metrics()["records_queued"] == 0


def test_send_batch_lone_surrogate_names_the_index_and_queues_nothing(producer):
    with pytest.raises(MalformedRecordError, match=r"keys\[1\]: str cannot be encoded"):
        producer.send_batch(TOPIC, [b"a", b"b"], keys=["k", LONE])
    with pytest.raises(MalformedRecordError, match=r"values\[0\]: str cannot be encoded"):
        producer.send_batch(TOPIC, [LONE])
    assert producer.metrics()["records_queued"] == 0


# ---- confluent-kafka config keys with no setting here -------------------------------------------

LOGGER = 'logging.getLogger("fastkafka")'


@pytest.mark.parametrize("key, must_name", [
    ("logger", ["metrics()", LOGGER]),
    ("debug", [LOGGER, "DEBUG"]),
    ("throttle_cb", ["throttle"]),
    ("oauth_cb", ["sasl_oauth_token_provider"]),
    ("queue.buffering.max.messages", ["buffer_memory", "bytes"]),
    ("queue_buffering_max_messages", ["buffer_memory"]),
    ("queue.buffering.max.kbytes", ["buffer_memory"]),
    ("batch.num.messages", ["batch_size"]),
])
def test_confluent_keys_fail_at_construction_naming_what_to_use(key, must_name):
    with pytest.raises(ConfigError) as ei:
        Producer({"bootstrap.servers": "localhost:9092", key: print})
    msg = str(ei.value)
    assert f"config key {key!r} (confluent-kafka) is not supported" in msg
    assert "did you mean" not in msg
    for part in must_name:
        assert part in msg, (part, msg)
    with pytest.raises(ConfigError, match="not supported"):
        ProducerConfig(bootstrap_servers="localhost:9092", **{key.replace(".", "_"): 1})


@pytest.mark.parametrize("cb_key, interval_key", [("stats_cb", "statistics.interval.ms"),
                                                   ("stats_cb", "statistics_interval_ms")])
def test_stats_cb_and_its_interval_are_settings(cb_key, interval_key):
    cfg = ProducerConfig({"bootstrap.servers": "localhost:9092", cb_key: print, interval_key: 1000})
    assert (cfg.stats_cb, cfg.statistics_interval_ms) == (print, 1000)
    assert "stats_cb" not in REPLACED_FOREIGN and "statistics.interval.ms" not in REPLACED_FOREIGN


def test_every_replaced_key_is_refused_and_none_is_a_setting():
    for key in REPLACED_FOREIGN:
        with pytest.raises(ConfigError) as ei:
            canonical_name(key)
        assert "did you mean" not in str(ei.value) and REPLACED_FOREIGN[key] in str(ei.value)
    # a key that is only close to one of them still gets the usual suggestion
    with pytest.raises(ConfigError, match="did you mean queue.buffering.max.ms"):
        canonical_name("queue.buffering.max.mss")


# ---- error_cb: another name of on_error ----------------------------------------------------------

def test_error_cb_is_on_error_and_given_with_it_is_refused():
    def hook(error):
        pass
    assert ProducerConfig(bootstrap_servers="localhost:9092", error_cb=hook).on_error is hook
    assert ProducerConfig({"bootstrap.servers": "localhost:9092", "error_cb": hook}).on_error is hook
    assert canonical_name("error_cb") == "on_error" and "error_cb" not in REPLACED_FOREIGN
    with pytest.raises(ConfigError, match="on_error given twice"):
        ProducerConfig(bootstrap_servers="localhost:9092", on_error=hook, error_cb=hook)
    with pytest.raises(ConfigError, match="on_error must be a callable"):
        ProducerConfig(bootstrap_servers="localhost:9092", error_cb=5)


def test_error_cb_of_producer_and_async_producer_gets_the_outage():
    import asyncio
    import socket

    from fastkafka.aio import AsyncProducer
    from fastkafka.errors import AllBrokersDownError

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    closed = f"127.0.0.1:{s.getsockname()[1]}"
    s.close()

    def wait_for_report(got):
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
        return [type(e) for e in got]

    got = []
    with Producer({"bootstrap.servers": closed, "error_cb": got.append}) as p:
        assert wait_for_report(got) == [AllBrokersDownError]
        assert p.metrics()["errors_reported"] == 1
    got_async = []

    async def run():
        async with AsyncProducer({"bootstrap.servers": closed, "error_cb": got_async.append}):
            assert await asyncio.to_thread(wait_for_report, got_async) == [AllBrokersDownError]
    asyncio.run(run())
    assert str(got_async[0]).startswith("ALL_BROKERS_DOWN (-170): all 1 known broker down: "
                                        f"{closed} (connection refused)")
