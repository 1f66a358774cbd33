"""fastkafka.compat.confluent.Producer: confluent-kafka's producer shapes, driven the way
confluent-kafka's documentation teaches them, against librdkafka's mock cluster.

Every test's producer code is written for confluent-kafka; only the import differs."""
from __future__ import annotations

import gc
import json
import logging
import threading
import time

import pytest

from fastkafka import errors as fk
from fastkafka.compat.confluent import (TIMESTAMP_CREATE_TIME, KafkaError,
                                        KafkaException, Producer)
from fastkafka.config import REPLACED_FOREIGN, ProducerConfig


class _Peer:
    """One of the two producers a side-by-side test runs: confluent-kafka's own, or the layer."""

    def __init__(self, name):
        if name == "confluent_kafka":
            import confluent_kafka as mod
        else:
            import fastkafka.compat.confluent as mod
        self.name = name
        self.Producer, self.KafkaError, self.KafkaException = (mod.Producer, mod.KafkaError,
                                                               mod.KafkaException)

    def __repr__(self):
        return self.name


@pytest.fixture(params=["confluent_kafka", "fastkafka"])
def peer(request):
    """confluent_kafka and fastkafka.compat.confluent, the same test run against each."""
    return _Peer(request.param)


@pytest.fixture
def cluster(mock_cluster):
    mock_cluster.create_topic("t", 4)
    return mock_cluster


def conf(mc, **extra):
    c = {"bootstrap.servers": mc.bootstraps, "linger.ms": 5}
    c.update(extra)
    return c


# ---- the classic loop: produce, poll(0), flush ---------------------------------------------------

def test_classic_loop_reports_are_served_by_poll_and_flush_on_the_callers_thread(cluster):
    p = Producer(conf(cluster))
    seen, threads = [], set()

    def delivery_report(err, msg):
        threads.add(threading.current_thread())
        seen.append((err, msg.topic(), msg.partition(), msg.key(), msg.value()))

    for i, data in enumerate(["a", "b", "c", "d", "e"]):
        p.poll(0)
        p.produce("t", data.encode("utf-8"), key=f"k{i % 2}", callback=delivery_report)
    assert len(p) == 5
    assert p.flush(10) == 0
    assert len(p) == 0
    assert threads == {threading.current_thread()}
    assert [s[4] for s in seen] == [b"a", b"b", b"c", b"d", b"e"] or \
        sorted(s[4] for s in seen) == [b"a", b"b", b"c", b"d", b"e"]
    assert all(err is None and topic == "t" for err, topic, *_ in seen)
    # one key, one partition
    parts = {}
    for _, _, part, key, _ in seen:
        parts.setdefault(key, set()).add(part)
    assert all(len(v) == 1 for v in parts.values())
    p.close()


def test_reports_wait_in_the_queue_until_poll_and_len_counts_them(cluster):
    p = Producer(conf(cluster, **{"linger.ms": 0}))
    got = []
    p.produce("t", b"x", callback=lambda err, msg: got.append(msg))
    deadline = time.monotonic() + 10
    while p._p._acc.incomplete_record_count() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    assert got == [] and len(p) == 1        # delivered, report not served yet
    assert p.poll(5) == 1
    assert len(p) == 0 and len(got) == 1
    msg = got[0]
    assert msg.error() is None and msg.offset() >= 0 and msg.len() == 1
    assert msg.timestamp()[0] in (TIMESTAMP_CREATE_TIME, 2) and msg.timestamp()[1] > 0
    assert msg.latency() is not None and msg.latency() >= 0
    assert p.poll(0) == 0
    p.close()


def test_message_gives_key_and_value_back_as_bytes_and_the_create_time(cluster, peer):
    p = peer.Producer(conf(cluster))
    got = []
    key, value = "k\u00e9", b"payload"
    p.produce("t", value, key, partition=2, timestamp=1_700_000_000_123,
              headers={"h": b"1"}, on_delivery=lambda err, msg: got.append((err, msg)))
    p.flush(10)
    err, msg = got[0]
    assert err is None
    assert msg.key() == key.encode() and msg.value() == value       # librdkafka's copies
    assert msg.partition() == 2 and msg.headers() is None           # a report has no headers
    ts_type, ts = msg.timestamp()
    # the mock cluster's topics stamp log-append time (and confluent-kafka reports it so)
    assert (ts_type, ts) == (TIMESTAMP_CREATE_TIME, 1_700_000_000_123) or ts_type == 2
    assert len(msg) == len(value)
    p.close()


def test_produce_without_callback_still_counts_until_served(cluster):
    p = Producer(conf(cluster))
    for _ in range(3):
        p.produce("t", b"v")
    assert len(p) == 3
    assert p.flush(10) == 0 and len(p) == 0
    p.close()


def test_default_on_delivery_from_config_and_only_error_reports(cluster):
    got = []
    p = Producer(conf(cluster, on_delivery=lambda err, msg: got.append(err),
                      **{"delivery.report.only.error": True}))
    p.produce("t", b"v")
    assert p.flush(10) == 0
    assert got == []                      # success not reported
    p.produce("t", b"v", partition=0)
    p.purge()                              # fails what is still queued (linger 5 ms)
    p.flush(10)
    assert all(e is not None for e in got)
    p.close()


# ---- BufferError and the retry loop ----------------------------------------------------------------

def test_queue_buffering_max_messages_raises_buffererror_and_poll_makes_room(cluster):
    p = Producer(conf(cluster, **{"queue.buffering.max.messages": 10}))
    delivered = []
    for i in range(10):
        p.produce("t", b"%d" % i, callback=lambda err, msg: delivered.append(msg.value()))
    with pytest.raises(BufferError, match="Queue full"):
        p.produce("t", b"x")
    # the classic retry loop
    sent = 10
    for i in range(10, 40):
        while True:
            try:
                p.produce("t", b"%d" % i, callback=lambda err, msg: delivered.append(msg.value()))
                sent += 1
                break
            except BufferError:
                p.poll(1)
    assert p.flush(10) == 0
    assert sorted(int(v) for v in delivered) == list(range(40))
    p.close()


# ---- callback exceptions ---------------------------------------------------------------------------

def test_an_exception_of_a_callback_propagates_out_of_poll_and_the_rest_stay_queued(cluster):
    p = Producer(conf(cluster))
    calls = []

    def bad(err, msg):
        calls.append("bad")
        raise ValueError("boom")

    p.produce("t", b"1", partition=0, callback=bad)
    p.produce("t", b"2", partition=0, callback=lambda err, msg: calls.append("good"))
    with pytest.raises(ValueError, match="boom"):
        p.flush(10)
    assert calls == ["bad"] and len(p) == 1
    assert p.flush(10) == 0
    assert calls == ["bad", "good"]
    p.close()


# ---- purge -----------------------------------------------------------------------------------------

def test_purge_fails_every_queued_record_with_purge_queue_on_the_next_poll(cluster):
    p = Producer(conf(cluster, **{"linger.ms": 60_000}))
    got = []
    for i in range(20):
        p.produce("t", b"%d" % i, key=b"%d" % i, callback=lambda err, msg: got.append((err, msg)))
    p.purge()
    assert got == []                    # reports come with poll
    assert p.poll(5) == 20
    assert len(got) == 20 and len(p) == 0
    for err, msg in got:
        assert err.code() == KafkaError._PURGE_QUEUE == -152
        assert err == KafkaError._PURGE_QUEUE and err.name() == "_PURGE_QUEUE"
        assert msg.error() is err and msg.offset() is None
    # the producer goes on
    p.produce("t", b"after", callback=lambda err, msg: got.append((err, msg)))
    assert p.flush(10) == 0 and got[-1][0] is None
    p.close()


def test_purge_in_queue_false_purges_nothing_and_nonblocking_purge_reports_later(cluster):
    p = Producer(conf(cluster, **{"linger.ms": 60_000}))
    got = []
    p.produce("t", b"a", callback=lambda err, msg: got.append(err))
    p.purge(in_queue=False)
    assert p.poll(0.2) == 0 and len(p) == 1
    p.purge(blocking=False)
    assert p.poll(5) == 1 and got[0].code() == -152
    p.close()


# ---- error objects and exceptions ------------------------------------------------------------------

def test_kafka_error_object_shape():
    e = KafkaError(KafkaError._MSG_TIMED_OUT)
    assert e.code() == -192 and e.name() == "_MSG_TIMED_OUT" and e.str() == "Local: Message timed out"
    assert not e.fatal() and not e.retriable() and not e.txn_requires_abort()
    assert e == -192 and e == KafkaError(-192) and e != KafkaError(-185)
    assert KafkaError(6, "x", retriable=True).retriable()
    assert KafkaError(6).name() == "NOT_LEADER_FOR_PARTITION"
    ex = KafkaException(KafkaError(KafkaError._STATE, "bad state"))
    assert ex.args[0].code() == -172 and "bad state" in str(ex)
    with pytest.raises(TypeError):
        KafkaError("6")


def test_too_large_and_unknown_partition_raise_kafka_exception(cluster, peer):
    p = peer.Producer(conf(cluster, **{"message.max.bytes": 2000}))
    p.produce("t", b"warm-up")                  # the topic's metadata comes with it
    assert p.flush(10) == 0
    with pytest.raises(peer.KafkaException) as ei:
        p.produce("t", b"x" * 5000)
    assert ei.value.args[0].code() == peer.KafkaError.MSG_SIZE_TOO_LARGE
    with pytest.raises(peer.KafkaException) as ei:
        p.produce("t", b"x", partition=99)
    assert ei.value.args[0].code() == peer.KafkaError._UNKNOWN_PARTITION
    with pytest.raises(TypeError):
        p.produce("t", 12.5)
    assert len(p) == 0                  # refused records are not counted
    assert p.flush(5) == 0


def test_transaction_commit_and_abort_with_reports(cluster):
    p = Producer(conf(cluster, **{"transactional.id": "tx-compat"}))
    p.init_transactions(10)
    got = []
    p.begin_transaction()
    p.produce("t", b"in-txn", callback=lambda err, msg: got.append(err))
    p.commit_transaction(10)
    assert got == [None]                 # served by the commit's flush
    p.begin_transaction()
    try:
        p.produce("t", b"aborted", partition=1, callback=lambda err, msg: got.append(err))
        p.abort_transaction(10)
    except KafkaException:
        pytest.fail("abort_transaction raised")
    p.poll(1)
    assert len(got) == 2 and got[1] is not None
    p.close()


# ---- error_cb, stats_cb, logger --------------------------------------------------------------------

def test_error_cb_is_served_by_poll(cluster):
    errors = []
    p = Producer(conf(cluster, error_cb=errors.append))
    p._p._sender.report_error(fk.BrokerDataLossError("node 1 lost records"))  # the I/O thread's hook
    assert errors == []
    assert p.poll(1) == 1
    assert errors[0].code() == KafkaError._INCONSISTENT and "lost records" in errors[0].str()
    p.close()


def test_error_cb_gets_all_brokers_down_as_librdkafka_names_it_and_no_recovery_event(cluster):
    errors, mine = [], []
    p = Producer(conf(cluster, error_cb=errors.append, on_error=mine.append))
    p._p._sender.report_error(fk.AllBrokersDownError("all 1 known broker down: h:1 (refused)"))
    p._p._sender.report_error(fk.BrokersRecovered("node 1 (h:1) is reachable again"))
    assert p.poll(1) == 1
    assert errors[0].code() == KafkaError._ALL_BROKERS_DOWN and errors[0].retriable()
    assert p.poll(0) == 0 and len(errors) == 1
    assert [type(e) for e in mine] == [fk.AllBrokersDownError, fk.BrokersRecovered]
    p.close()


def test_stats_cb_gets_a_json_document_every_interval(cluster):
    docs = []
    p = Producer(conf(cluster, stats_cb=docs.append, **{"statistics.interval.ms": 100}))
    p.produce("t", b"v")
    p.flush(10)
    deadline = time.monotonic() + 5
    while len(docs) < 2 and time.monotonic() < deadline:
        p.poll(0.2)
    assert len(docs) >= 2
    d = json.loads(docs[-1])
    assert d["type"] == "producer" and d["client_id"] == "fastkafka" and d["txmsgs"] == 1
    assert {"name", "ts", "time", "age", "msg_cnt", "msg_size", "tx", "tx_bytes"} <= set(d)
    assert d["fastkafka-metrics"]["records_sent"] == 1
    p.close()


def librdkafka_stats(cluster, topic, n):
    """The last stats document of confluent-kafka's own producer (librdkafka) after ``n`` records
    to ``topic`` of the mock cluster, taken right after the flush (librdkafka resets its windows
    at each emit)."""
    import confluent_kafka

    docs = []
    p = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstraps, "linger.ms": 5,
                                  "enable.idempotence": True, "statistics.interval.ms": 100,
                                  "stats_cb": docs.append})
    for i in range(n):
        p.produce(topic, b"v%d" % i, partition=i % 2)
    p.flush(10)
    deadline = time.monotonic() + 5
    while not docs and time.monotonic() < deadline:
        p.poll(0.1)
    p.poll(0.15)
    return json.loads(docs[-1])


def same_shape(ours: dict, theirs: dict, where: str) -> None:
    """Every field of ``ours`` is one of librdkafka's, with its JSON type (objects recursively)."""
    for key, value in ours.items():
        assert key in theirs, f"{where}{key} is not a librdkafka statistics field"
        if isinstance(value, dict):
            assert isinstance(theirs[key], dict), f"{where}{key}"
            same_shape(value, theirs[key], f"{where}{key}.")
        else:
            assert type(value) is type(theirs[key]), (f"{where}{key}", value, theirs[key])


def test_stats_follow_librdkafkas_schema_for_the_fields_filled(cluster):
    cluster.create_topic("st", 2)
    theirs = librdkafka_stats(cluster, "st", 8)
    docs = []
    p = Producer(conf(cluster, stats_cb=docs.append, **{"statistics.interval.ms": 100,
                                                         "enable.idempotence": True}))
    for i in range(8):
        p.produce("st", b"v%d" % i, partition=i % 2)
    p.flush(10)
    docs.clear()
    deadline = time.monotonic() + 5
    while not docs and time.monotonic() < deadline:
        p.poll(0.1)
    ours = json.loads(docs[-1])
    p.close()
    ours.pop("fastkafka-metrics"), ours.pop("java-metrics")
    their_broker = next(b for b in theirs["brokers"].values() if b["nodeid"] >= 0)
    their_window = their_broker["rtt"]
    for name, b in ours["brokers"].items():
        same_shape({k: v for k, v in b.items()}, their_broker, f"brokers.{name}.")
    their_topic = theirs["topics"]["st"]
    for name, t in ours["topics"].items():
        same_shape(t, their_topic, f"topics.{name}.")
    same_shape({k: v for k, v in ours.items() if k not in ("brokers", "topics")}, theirs, "")
    # and what it says
    assert ours["txmsgs"] == 8 and ours["msg_cnt"] == 0 and ours["tx"] >= ours["rx"] > 0
    up = [b for b in ours["brokers"].values() if b["nodeid"] >= 0 and b["state"] == "UP"]
    assert up and all(b["name"] == f"{b['nodename']}/{b['nodeid']}" for b in up)
    assert sum(b.get("tx", 0) for b in ours["brokers"].values()) == ours["tx"]
    assert any(set(b.get("rtt", {})) == {"avg", "max"} <= set(their_window) for b in up)
    t = ours["topics"]["st"]
    assert t["batchcnt"]["max"] <= 8 and 1 <= t["batchcnt"]["avg"] <= t["batchcnt"]["max"]
    assert 61 < t["batchsize"]["avg"] <= t["batchsize"]["max"]
    assert ours["eos"]["producer_id"] >= 0 and ours["eos"]["producer_epoch"] >= 0


def test_logger_receives_this_producers_records_once(cluster, caplog):
    mine = logging.getLogger("compat-test-logger")
    mine.propagate = False
    records = []

    class Collect(logging.Handler):
        def emit(self, record):
            records.append(record)
    mine.addHandler(Collect())
    p = Producer(conf(cluster), logger=mine)
    fk_log = logging.getLogger("fastkafka")
    name = p._p._name
    with caplog.at_level(logging.WARNING, logger="fastkafka"):
        fk_log.warning("producer %s: a test record", name)
        fk_log.warning("producer %s: not ours", "someone-else")
    assert [r.getMessage() for r in records] == [f"producer {name}: a test record"]
    assert [r.getMessage() for r in caplog.records] == ["producer someone-else: not ours"]
    p.close()
    fk_log.warning("producer %s: after close", name)
    assert len(records) == 1            # the route ends with the producer


# ---- config ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("settings,error,code", [
    ({"queue.buffering.max.messages": -1}, "KafkaException", -186),
    ({"statistics.interval.ms": "soon"}, "KafkaException", -186),
    ({"linger.ms": "abc"}, "KafkaException", -186),
    ({"linger.ms": -5}, "KafkaException", -186),
    ({"socket.timeout.ms": 5}, "KafkaException", -186),
    ({"no.such.property": 1}, "KafkaException", -186),
    ({"debug": "nonsense"}, "KafkaException", -186),
    ({"default.topic.config": {"no.such.topic.property": 1}}, "KafkaException", -186),
    ({"on_delivery": 5}, "KafkaException", -186),
    ({"error_cb": 5}, "TypeError", None),
    ({"stats_cb": 5}, "TypeError", None),
    ({"oauth_cb": 5}, "TypeError", None),
    ({"throttle_cb": 5}, "ValueError", None),
    ({"delivery.report.only.error": "maybe"}, "TypeError", None),
], ids=lambda v: str(v))
def test_bad_settings_raise_what_confluent_kafka_raises(peer, settings, error, code):
    with pytest.raises(Exception) as ei:
        peer.Producer({"bootstrap.servers": "127.0.0.1:1", **settings})
    exc = ei.value
    expected = peer.KafkaException if error == "KafkaException" else __builtins__[error] \
        if isinstance(__builtins__, dict) else getattr(__builtins__, error)
    assert type(exc) is expected, repr(exc)
    if code is not None:
        assert isinstance(exc.args[0], peer.KafkaError) and exc.args[0].code() == code
        assert exc.args[0].name() == "_INVALID_ARG"


def test_default_partitioner_is_consistent_random_and_can_be_changed(cluster):
    p = Producer(conf(cluster))
    assert p._p.config.partitioner == "consistent_random"
    p.close()
    p = Producer(conf(cluster, partitioner="murmur2_random"))
    assert p._p.config.partitioner == "murmur2_random"
    p.close()


def test_queue_buffering_max_kbytes_is_buffer_memory(cluster):
    p = Producer(conf(cluster, **{"queue.buffering.max.kbytes": 2048}))
    assert p._p.config.buffer_memory == 2048 * 1024
    p.close()


def test_secrets_are_not_in_repr_or_errors(cluster):
    secret = "s3cr3t-pw"
    p = Producer(conf(cluster, **{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                                  "sasl.username": "u", "sasl.password": secret,
                                  "socket.connection.setup.timeout.ms": 1000}))
    assert secret not in repr(p) and secret not in repr(p._p.config)
    p.set_sasl_credentials("u2", secret + "2")
    assert secret not in repr(p) and secret not in repr(p._p._client.sasl)
    p.close(0)
    for bad in ({"no.such.property": 5}, {"sasl.password": 5}, {"sasl.mechanism": "GSSAPI"}):
        with pytest.raises(KafkaException) as ei:
            Producer(conf(cluster, **{"sasl.password": secret, "sasl.username": "u",
                                      "security.protocol": "SASL_PLAINTEXT", **bad}))
        assert secret not in str(ei.value) and secret not in repr(ei.value.args[0])


def test_main_producer_refusals_name_the_compat_layer():
    # (stats_cb, statistics.interval.ms and error_cb are settings of the main producer too)
    for key in ("logger", "queue.buffering.max.messages", "on_delivery",
                "delivery.report.only.error"):
        assert "fastkafka.compat.confluent.Producer" in REPLACED_FOREIGN[key], key
        with pytest.raises(fk.ConfigError, match="fastkafka.compat.confluent.Producer"):
            ProducerConfig({"bootstrap.servers": "h:1", key: 1})


def test_a_dropped_producer_is_collected_closed_and_its_records_delivered(cluster):
    p = Producer(conf(cluster, **{"linger.ms": 50}))
    p.produce("t", b"v")
    inner = p._p
    thread, acc = inner._sender._thread, inner._acc
    del p, inner
    deadline = time.monotonic() + 15
    while thread.is_alive() and time.monotonic() < deadline:
        gc.collect()
        thread.join(0.1)
    assert not thread.is_alive()
    assert acc.incomplete_record_count() == 0


# ---- the compiled report path (PollCore, Message) --------------------------------------------------

def test_reports_served_by_another_thread_each_exactly_once(cluster):
    p = Producer(conf(cluster, **{"linger.ms": 1}))
    n = 3000
    served, stop = [], threading.Event()

    def poller():
        while not stop.is_set() or len(p):
            p.poll(0.05)
    t = threading.Thread(target=poller)
    t.start()
    for i in range(n):
        p.produce("t", b"%d" % i, callback=lambda err, msg: served.append((err, msg.value())))
    stop.set()
    t.join(30)
    assert not t.is_alive()
    assert len(p) == 0 and len(served) == n
    assert all(err is None for err, _ in served)
    assert sorted(int(v) for _, v in served) == list(range(n))
    p.close()


def test_a_callback_that_polls_does_not_serve_a_report_twice(cluster):
    p = Producer(conf(cluster))
    got = []

    def cb(err, msg):
        got.append(msg.value())
        p.poll(0)                        # re-entrant: serves the following reports
    for i in range(50):
        p.produce("t", b"%d" % i, partition=i % 4, callback=cb)
    assert p.flush(10) == 0
    assert sorted(int(v) for v in got) == list(range(50))
    p.close()


def test_offsets_and_partitions_come_from_the_batch(cluster):
    p = Producer(conf(cluster))
    got = []
    for i in range(10):
        p.produce("t", b"%d" % i, partition=3, callback=lambda err, msg: got.append(msg))
    p.flush(10)
    offsets = [m.offset() for m in got]
    assert offsets == list(range(offsets[0], offsets[0] + 10))
    assert {m.partition() for m in got} == {3} and {m.topic() for m in got} == {"t"}
    # the mock cluster answers with a log append time; the create time otherwise
    assert all(m.timestamp()[0] in (TIMESTAMP_CREATE_TIME, 2) and m.timestamp()[1] > 0 for m in got)
    assert all(0 <= m.latency() < 10 for m in got)
    p.close()


def test_produce_never_blocks_and_a_record_without_metadata_fails_with_msg_timed_out(peer):
    p = peer.Producer({"bootstrap.servers": "127.0.0.1:1", "message.timeout.ms": 1000,
                       "log_level": 0})                      # nobody listens
    got = []
    t0 = time.monotonic()
    p.produce("t", b"v", key=b"k", callback=lambda err, msg: got.append((err, msg)))
    p.produce("t", b"w")                          # no callback: counted, served empty
    assert time.monotonic() - t0 < 0.1            # queued, not waited for
    assert got == []
    assert p.flush(10) == 0
    assert time.monotonic() - t0 >= 0.9
    assert len(got) == 1
    err, msg = got[0]
    assert isinstance(err, peer.KafkaError) and msg.error() == err
    assert err.code() == peer.KafkaError._MSG_TIMED_OUT and err.name() == "_MSG_TIMED_OUT"
    assert (msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value()) == (
        "t", None, None, b"k", b"v")
    assert msg.timestamp() == (0, -1)               # TIMESTAMP_NOT_AVAILABLE
    assert msg.latency() >= 0.9


def test_a_producer_without_bootstrap_servers_is_made_and_its_records_time_out(peer):
    p = peer.Producer({"message.timeout.ms": 500, "log_level": 0})
    got = []
    p.produce("t", b"v", callback=lambda err, msg: got.append(err.code()))
    assert p.flush(5) == 0 and got == [peer.KafkaError._MSG_TIMED_OUT]
    assert p.close() is True


def test_a_broker_without_a_port_is_port_9092():
    p = Producer({"bootstrap.servers": "h1,PLAINTEXT://h2:9093,[::1],::2", "log_level": 0})
    assert p._p.config.bootstrap_servers == [("h1", 9092), ("h2", 9093), ("::1", 9092),
                                             ("::2", 9092)]
    p.close(0)


def test_message_is_constructible_and_has_confluent_kafkas_accessors():
    from fastkafka.compat.confluent import Message
    m = Message("t", 2, 7, b"k", b"vv", {"h": b"1"}, TIMESTAMP_CREATE_TIME, 5, None, None)
    assert (m.topic(), m.partition(), m.offset(), m.key(), m.value()) == ("t", 2, 7, b"k", b"vv")
    assert m.headers() == [("h", b"1")] and m.timestamp() == (1, 5) and m.len() == len(m) == 2
    assert m.error() is None and m.latency() is None and "t [2] @7" in repr(m)


def test_a_dropped_producer_with_unserved_reports_whose_callback_holds_it_is_collected(cluster):
    p = Producer(conf(cluster, **{"linger.ms": 1}))
    p.produce("t", b"v", callback=lambda err, msg: p.poll(0))   # the callback refers to p
    inner = p._p
    thread, acc = inner._sender._thread, inner._acc
    deadline = time.monotonic() + 10
    while acc.incomplete_record_count() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(p) == 1                              # delivered, its report not served
    del p, inner
    deadline = time.monotonic() + 15
    while thread.is_alive() and time.monotonic() < deadline:
        gc.collect()
        thread.join(0.1)
    assert not thread.is_alive()


def _plain_report(err, msg):          # no closure, no defaults: its reports are left out of the GC
    pass


def test_a_dropped_producer_with_untracked_reports_in_flight_and_unserved_leaves_nothing(cluster):
    p = Producer(conf(cluster, **{"linger.ms": 50}))
    p.produce("t", b"served-never", callback=_plain_report)
    p.flush(10)
    p.produce("t", b"unserved", callback=_plain_report)     # delivered, report never served
    p.produce("t", b"no-callback")
    inner = p._p
    thread, acc = inner._sender._thread, inner._acc
    deadline = time.monotonic() + 10
    while acc.incomplete_record_count() and time.monotonic() < deadline:
        time.sleep(0.01)
    p.produce("t", b"in-flight", callback=_plain_report)    # completes after the drop
    del p, inner
    deadline = time.monotonic() + 15
    while thread.is_alive() and time.monotonic() < deadline:
        gc.collect()
        thread.join(0.1)
    assert not thread.is_alive()
    assert acc.incomplete_record_count() == 0
    # the live-resources check of the test session fails the test if a batch stays referenced


# ---- side by side: confluent_kafka.Producer and the layer, one test body ------------------------

def _report(into):
    """A delivery callback recording what confluent-kafka's documentation has one look at."""
    def cb(err, msg):
        into.append((None if err is None else err.code(), msg.topic(), msg.partition(),
                     msg.key(), msg.value(), msg.headers(), msg.offset() is not None))
    return cb


@pytest.mark.parametrize("settings", [
    {"socket.timeout.ms": 5000},
    {"message.timeout.ms": 5000},
    {"message.timeout.ms": 10000, "request.timeout.ms": 30000, "linger.ms": 100},
    {"delivery.timeout.ms": 5000, "socket.timeout.ms": 60000},
    {"default.topic.config": {"acks": "all", "message.timeout.ms": 5000}},
    {"debug": "msg,broker", "log_level": 0},
    {"batch.num.messages": 100},
    {"linger.ms": 0.5, "queue.buffering.max.kbytes": 4096, "compression.level": -1},
    {"topic.metadata.refresh.interval.ms": 60000, "socket.keepalive.enable": True,
     "enable.ssl.certificate.verification": True, "group.id": "ignored-by-producers"},
], ids=lambda s: ",".join(s))
def test_settings_nearly_every_program_sets_are_accepted_and_records_delivered(cluster, peer,
                                                                              settings):
    p = peer.Producer(conf(cluster, **settings))
    got = []
    p.produce("t", b"v", key=b"k", headers=[("h", b"1")], callback=_report(got))
    assert p.flush(10) == 0
    assert got == [(None, "t", got[0][2], b"k", b"v", None, True)]     # no headers in a report
    assert got[0][2] in range(4)


@pytest.mark.parametrize("settings", [
    {"message.timeout.ms": 30000, "default.topic.config": {"message.timeout.ms": 1000}},
    {"default.topic.config": {"delivery.timeout.ms": 1000}, "message.timeout.ms": 30000},
], ids=["top-first", "dict-first"])
def test_default_topic_config_wins_over_the_top_level(peer, settings):
    p = peer.Producer({"bootstrap.servers": "127.0.0.1:1", "log_level": 0, **settings})
    got = []
    p.produce("t", b"v", callback=lambda err, msg: got.append(err.code()))
    assert p.flush(5) == 0                    # 1000 ms applied, not 30000
    assert got == [peer.KafkaError._MSG_TIMED_OUT]


def test_message_timeout_below_request_timeout_bounds_the_request(cluster, peer):
    """message.timeout.ms 1000 < request.timeout.ms 30000 + linger.ms: accepted, and a broker
    that answers after 4 s fails the record at its deadline, not the request's."""
    p = peer.Producer(conf(cluster, **{"message.timeout.ms": 1000, "request.timeout.ms": 30000,
                                       "retries": 0, "enable.idempotence": False}))
    p.produce("t", b"warm-up")
    assert p.flush(10) == 0
    for b in (1, 2, 3):
        cluster.set_rtt(b, 4000)
    got = []
    t0 = time.monotonic()
    p.produce("t", b"late", callback=_report(got))
    assert p.flush(15) == 0
    took = time.monotonic() - t0
    for b in (1, 2, 3):
        cluster.set_rtt(b, 0)
    assert got and got[0][0] == peer.KafkaError._MSG_TIMED_OUT
    assert 0.9 <= took < 3.9, took


def test_close_returns_true_and_the_producer_refuses_work_after_it(cluster, peer):
    p = peer.Producer(conf(cluster))
    got = []
    p.produce("t", b"v", callback=_report(got))
    assert p.close() is True
    assert [g[0] for g in got] == [None]        # close() flushed and served the report
    for call in (lambda: p.poll(0), lambda: p.poll(0.1), lambda: p.flush(), lambda: p.flush(1),
                 lambda: p.produce("t", b"x"), lambda: p.purge(),
                 lambda: p.produce_batch("t", [{"value": b"x"}])):
        with pytest.raises(RuntimeError, match="^Producer has been closed$"):
            call()
    with pytest.raises(RuntimeError, match="^Handle has been closed$"):
        p.list_topics(timeout=1)
    with pytest.raises(RuntimeError, match="^Handle has been closed$"):
        p.set_sasl_credentials("u", "p")
    assert len(p) == 0
    assert p.close() is True


def test_with_block_flushes_and_closes(cluster, peer):
    got = []
    with peer.Producer(conf(cluster, **{"linger.ms": 1000})) as p:
        p.produce("t", b"v", key=b"k", callback=_report(got))
        assert got == []
    assert [g[:5] for g in got] == [(None, "t", got[0][2], b"k", b"v")]
    with pytest.raises(RuntimeError, match="Producer has been closed"):
        p.produce("t", b"after")


def test_produce_batch_queues_each_message_with_its_callback(cluster, peer):
    p = peer.Producer(conf(cluster))
    default, own = [], []
    messages = [{"value": b"a"}, {"value": "b", "key": "k"}, {"value": b"c", "partition": 1},
                {"value": b"d", "key": b"k2", "callback": _report(own)}]
    assert p.produce_batch("t", messages, on_delivery=_report(default)) == 4
    assert p.flush(10) == 0
    assert sorted(g[4] for g in default) == [b"a", b"b", b"c"]      # str given: bytes back
    assert all(g[0] is None for g in default + own)
    assert [g[4] for g in own] == [b"d"]
    if peer.name == "fastkafka":
        # a message's own partition: confluent-kafka's documentation says it overrides the
        # batch's; confluent-kafka 2.16.1 ignores it (docs/migration.md)
        assert [g[2] for g in default if g[4] == b"c"] == [1]
    assert p.produce_batch("t", []) == 0
    with pytest.raises(TypeError, match="messages must be a list"):
        p.produce_batch("t", ({"value": b"x"},))
    with pytest.raises(TypeError, match="Message at index 1 must be a dict"):
        p.produce_batch("t", [{"value": b"x"}, b"y"])
    with pytest.raises(NotImplementedError):
        p.produce_batch("t", [{"value": b"x", "timestamp": 1234}])
    # a message that cannot be queued gets its error in the dict, and no report
    too_large = [{"value": b"x" * 2_000_000, "callback": _report(own)}, {"value": b"ok"}]
    assert p.produce_batch("t", too_large, on_delivery=_report(default)) == 1
    assert too_large[0]["_error"].code() == peer.KafkaError.MSG_SIZE_TOO_LARGE
    assert "_error" not in too_large[1]
    assert p.flush(10) == 0
    assert [g[4] for g in own] == [b"d"] and sorted(g[4] for g in default)[-1] == b"ok"


@pytest.mark.parametrize("headers", [
    {"a": b"1", "b": "two"},
    [("a", b"1"), ("a", "again"), ("n", None)],
    [("b", b"\x00\xff")],
], ids=["dict", "list", "bytes"])
def test_every_argument_form_of_produce_and_what_the_report_gives_back(cluster, peer, headers):
    p = peer.Producer(conf(cluster))
    got = []
    p.produce("t", value="text \u00e9", key="key", headers=headers, callback=_report(got))
    assert p.flush(10) == 0
    p.produce(topic="t", value=b"kw", partition=2, timestamp=1_700_000_000_000,
              on_delivery=_report(got))
    assert p.flush(10) == 0
    p.produce("t", None, None, 1, _report(got))                         # positional, a tombstone
    assert p.flush(10) == 0
    assert [g[0] for g in got] == [None, None, None]
    # key and value come back as bytes (str as UTF-8); a report carries no headers
    assert got[0][3:6] == (b"key", "text \u00e9".encode(), None)
    assert got[1][2:6] == (2, None, b"kw", None)
    assert got[2][2:6] == (1, None, None, None)


def test_set_sasl_credentials_is_accepted(cluster, peer):
    p = peer.Producer(conf(cluster))
    assert p.set_sasl_credentials("user", "pass") is None
    p.produce("t", b"v")
    assert p.flush(10) == 0


def test_purge_of_a_record_waiting_for_metadata_reports_purge_queue(peer):
    p = peer.Producer({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})
    got = []
    p.produce("t", b"v", callback=_report(got))
    p.purge()
    assert p.poll(2) == 1 or got
    assert [g[0] for g in got] == [peer.KafkaError._PURGE_QUEUE]
    assert p.flush(1) == 0


# ---- KafkaError: confluent-kafka's table --------------------------------------------------------

def test_kafka_error_has_every_code_constant_of_the_installed_confluent_kafka():
    import confluent_kafka

    from fastkafka.compat.confluent._codes import CODES
    theirs = {k: v for k, v in vars(confluent_kafka.KafkaError).items()
              if not k.startswith("__") and type(v) is int}
    ours = {k: getattr(KafkaError, k) for k in theirs if hasattr(KafkaError, k)}
    assert ours == theirs
    assert len(CODES) == len(theirs) >= 188
    for code, name, text in CODES:
        ck = confluent_kafka.KafkaError(code)
        assert (KafkaError(code).name(), KafkaError(code).str()) == (ck.name(), ck.str()) == (
            name, text)


@pytest.mark.parametrize("code", [12345, -12345, 999])
def test_an_unknown_code_is_named_as_confluent_kafka_names_it(peer, code):
    e = peer.KafkaError(code)
    assert (e.code(), e.name(), e.str()) == (code, f"ERR_{code}?", f"Err-{code}?")
    assert str(e) == f'KafkaError{{code=ERR_{code}?,val={code},str="Err-{code}?"}}'


def test_kafka_error_with_a_reason(peer):
    e = peer.KafkaError(peer.KafkaError.UNKNOWN_TOPIC_OR_PART, "custom")
    assert (e.name(), e.str(), str(e)) == (
        "UNKNOWN_TOPIC_OR_PART", "custom",
        'KafkaError{code=UNKNOWN_TOPIC_OR_PART,val=3,str="custom"}')
    assert peer.KafkaException(e).args[0] == e


# ---- the settings: every property librdkafka documents has the layer's answer --------------------

def _librdkafka_properties() -> dict[str, str]:
    """{property: C/P} of the installed librdkafka's own CONFIGURATION.md
    (rd_kafka_conf_properties_show), read through ctypes."""
    import ctypes
    import os
    import tempfile

    from mockcluster import load_librdkafka
    lib = load_librdkafka()
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_conf_properties_show.argtypes = [ctypes.c_void_p]
    fd, path = tempfile.mkstemp()
    os.close(fd)
    try:
        f = libc.fopen(path.encode(), b"w")
        lib.rd_kafka_conf_properties_show(f)
        libc.fclose(f)
        text = open(path).read()
    finally:
        os.unlink(path)
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 2 and cells[1] in ("P", "C", "*") and cells[0]:
            out[cells[0]] = cells[1]
    assert len(out) > 150, "librdkafka's property table was not read"
    return out


def test_every_property_librdkafka_documents_has_the_layers_answer_in_the_docs():
    import os

    from fastkafka.compat.confluent._config import settings_markdown, settings_table
    answered = {k for key, _ in settings_table() for k in key.split(", ")}
    props = _librdkafka_properties()
    assert sorted(set(props) - answered) == []
    docs = open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "docs",
                             "migration.md")).read()
    assert settings_markdown() in docs, "docs/migration.md: paste settings_markdown() again"


def test_accepted_properties_are_accepted_by_confluent_kafka_too(peer):
    """Each property the layer accepts with no effect is one confluent-kafka accepts (so the
    table is about real properties), with the value given here."""
    from fastkafka.compat.confluent._config import IGNORED
    values = {"debug": "msg", "log_level": 3, "batch.num.messages": 10, "builtin.features": "gzip",
              "sasl.kerberos.service.name": "kafka", "sasl.kerberos.kinit.cmd": "true",
              "sasl.kerberos.principal": "kafkaclient", "sasl.kerberos.keytab": "/nonexistent",
              "ssl.ca.certificate.stores": "Root", "group.id": "g",
              "partition.assignment.strategy": "range", "group.protocol.type": "consumer",
              "group.protocol": "classic", "group.remote.assignor": "uniform",
              "offset.store.method": "broker", "isolation.level": "read_committed",
              "auto.offset.reset": "earliest", "offset.store.path": ".",
              "client.rack": "r1", "share.acknowledgement.mode": "implicit",
              "group.instance.id": "i1", "consume_cb": None, "rebalance_cb": None,
              "offset_commit_cb": None}
    bools = {"topic.metadata.refresh.sparse", "socket.keepalive.enable", "socket.nagle.disable",
             "log.queue", "log.thread.name", "enable.random.seed", "log.connection.close",
             "allow.auto.create.topics", "enable.metrics.push", "produce.offset.report",
             "enable.auto.commit", "enable.auto.offset.store", "enable.partition.eof",
             "check.crcs", "auto.commit.enable"}
    skip_in_confluent = {"consume_cb", "rebalance_cb", "offset_commit_cb", "enabled_events",
                         "sasl.kerberos.kinit.cmd", "sasl.kerberos.keytab",
                         "sasl.kerberos.min.time.before.relogin", "share.acknowledgement.mode",
                         "internal.termination.signal", "ssl.ca.certificate.stores"}
    for key in IGNORED:
        if peer.name == "confluent_kafka" and key in skip_in_confluent:
            continue    # consumer callbacks, a kinit or signal set up at construction, Windows-only
        value = values.get(key, True if key in bools else 1000)
        if value is None:
            continue
        p = peer.Producer({"bootstrap.servers": "127.0.0.1:1", "log_level": 0, key: value})
        del p


def test_records_produced_while_every_broker_is_down_go_out_in_order_when_they_are_back(
        mock_cluster, peer):
    mock_cluster.create_topic("t", 2)
    for b in (1, 2, 3):
        mock_cluster.broker_down(b)
    p = peer.Producer({"bootstrap.servers": mock_cluster.bootstraps, "log_level": 0,
                       "message.timeout.ms": 30000, "reconnect.backoff.max.ms": 200})
    got = []
    t0 = time.monotonic()
    for i in range(50):
        p.produce("t", b"%d" % i, key=b"k%d" % (i % 2),
                  callback=lambda err, msg: got.append((err, msg.partition(), msg.value())))
    assert time.monotonic() - t0 < 0.5               # produce() did not wait for the brokers
    p.poll(0.5)                                      # (librdkafka serves an error event here)
    assert got == []
    for b in (1, 2, 3):
        mock_cluster.broker_up(b)
    assert p.flush(30) == 0
    assert [e for e, _, _ in got] == [None] * 50
    for part in {q for _, q, _ in got}:                # per partition, in produce order
        values = [int(v) for _, q, v in got if q == part]
        assert values == sorted(values)


def test_a_topic_the_brokers_say_does_not_exist_fails_after_the_propagation_time(mock_cluster,
                                                                                  peer):
    mock_cluster.set_topic_error("nope", 3)               # UNKNOWN_TOPIC_OR_PART in metadata
    p = peer.Producer({"bootstrap.servers": mock_cluster.bootstraps, "log_level": 0,
                       "topic.metadata.propagation.max.ms": 1000, "message.timeout.ms": 20000})
    got = []
    t0 = time.monotonic()
    p.produce("nope", b"v", callback=lambda err, msg: got.append(err.code()))
    assert p.flush(10) == 0
    assert got == [peer.KafkaError.UNKNOWN_TOPIC_OR_PART]
    assert 0.9 <= time.monotonic() - t0 < 5
    with pytest.raises(peer.KafkaException) as ei:       # now known not to exist: at once
        p.produce("nope", b"w")
    assert ei.value.args[0].code() == peer.KafkaError._UNKNOWN_TOPIC


def test_oauth_cb_is_called_with_sasl_oauthbearer_config_for_each_token():
    calls = []

    def oauth_cb(config):
        calls.append(config)
        return "token-for-" + config, time.time() + 3600, "principal", {"ext": "1"}

    p = Producer({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.config": "scope=write",
                  "oauth_cb": oauth_cb})
    token, expiry = p._p.config.sasl_oauth_token_provider()
    assert calls == ["scope=write"] and token == "token-for-scope=write"
    assert expiry > time.time()
    p.close(0)
    with pytest.raises(KafkaException) as ei:
        Producer({"acks": "bogus"})
    assert ei.value.args[0].code() == KafkaError._INVALID_ARG
    assert ei.value.args[0].str() == "acks must be an integer, got str 'bogus'"


def test_a_record_too_large_is_refused_at_once_even_while_its_topic_waits_for_metadata(peer):
    p = peer.Producer({"bootstrap.servers": "127.0.0.1:1", "log_level": 0,
                       "message.max.bytes": 10000, "message.timeout.ms": 1000})
    p.produce("t", b"small")                               # waits for metadata
    with pytest.raises(peer.KafkaException) as ei:
        p.produce("t", b"x" * 20000)
    assert ei.value.args[0].code() == peer.KafkaError.MSG_SIZE_TOO_LARGE
    assert p.flush(5) == 0


def test_close_in_a_transaction_aborts_it_and_reports_the_records_purged(mock_cluster, peer):
    mock_cluster.create_topic("t", 2)
    p = peer.Producer({"bootstrap.servers": mock_cluster.bootstraps, "log_level": 0,
                       "transactional.id": "close-in-txn"})
    p.init_transactions(10)
    p.begin_transaction()
    got = []
    p.produce("t", b"v", callback=lambda err, msg: got.append(err.code()))
    assert p.close() is True
    assert got == [peer.KafkaError._PURGE_QUEUE]


@pytest.mark.parametrize("args,kwargs", [
    (("t", 5), {}),                                              # a value not bytes or str
    (("t", b"v"), {"key": 5}),
    ((None, b"v"), {}),
    (("t", b"v"), {"headers": {"a": 5}}),
    (("t", b"v"), {"headers": [("a",)]}),
    (("t", b"v"), {"headers": "x"}),
    (("t", b"v"), {"foo": 1}),
], ids=["value", "key", "topic", "header-value", "header-pair", "headers", "keyword"])
def test_produce_arguments_of_the_wrong_type_raise_type_error_at_once(peer, args, kwargs):
    """Also while the topic waits for metadata (nobody listens here)."""
    p = peer.Producer({"bootstrap.servers": "127.0.0.1:1", "log_level": 0,
                       "message.timeout.ms": 1000})
    p.produce("t", b"first")                                     # the topic waits for metadata
    with pytest.raises(TypeError):
        p.produce(*args, **kwargs)
    assert p.flush(5) == 0


def test_the_transactional_api_without_transactional_id_is_not_configured(cluster, peer):
    p = peer.Producer(conf(cluster))
    for call in (lambda: p.init_transactions(1), p.begin_transaction,
                 lambda: p.commit_transaction(1), lambda: p.abort_transaction(1)):
        with pytest.raises(peer.KafkaException) as ei:
            call()
        assert ei.value.args[0].code() == peer.KafkaError._NOT_CONFIGURED


def test_error_cb_hears_of_every_broker_down_from_poll(peer):
    events = []
    p = peer.Producer({"bootstrap.servers": "127.0.0.1:1", "log_level": 0,
                       "error_cb": lambda err: events.append((err.code(), threading.get_ident()))})
    deadline = time.monotonic() + 10
    while not any(c == peer.KafkaError._ALL_BROKERS_DOWN for c, _ in events) and \
            time.monotonic() < deadline:
        p.poll(0.2)
    assert peer.KafkaError._ALL_BROKERS_DOWN in [c for c, _ in events]
    assert {t for _, t in events} == {threading.get_ident()}       # served on this thread
