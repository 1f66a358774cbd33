"""fastkafka.compat.confluent.Producer against confluent_kafka.Producer on Apache Kafka: one
script text, written as confluent-kafka's documentation teaches it, executed twice with only its
import line changed, to two topics; confluent-kafka's consumer reads both back."""
from __future__ import annotations

import textwrap
import threading
import time

import pytest

from brokers import read_back, unique_name

pytestmark = pytest.mark.broker

SCRIPT = textwrap.dedent('''
    {import_line}

    observed = []

    def delivery_report(err, msg):
        observed.append((err, msg.topic(), msg.partition(), msg.key(), msg.value()))

    p = Producer({{"bootstrap.servers": BOOTSTRAP, "linger.ms": 5,
                  "queue.buffering.max.messages": 50}})
    for i, data in enumerate(DATA):
        p.poll(0)
        while True:
            try:
                p.produce(TOPIC, data.encode("utf-8"), key=("key-%d" % (i % 7)).encode(),
                          callback=delivery_report)
                break
            except BufferError:
                p.poll(1)
    left = p.flush(30)
    metadata = p.list_topics(TOPIC, timeout=10)
    all_metadata = p.list_topics(timeout=10)

    t = Producer({{"bootstrap.servers": BOOTSTRAP, "transactional.id": TXN_ID}})
    t.init_transactions(30)
    t.begin_transaction()
    t.produce(TXN_TOPIC, b"committed", callback=delivery_report)
    t.commit_transaction(30)
    txn_errors = []
    try:
        t.commit_transaction(5)          # no transaction open
    except KafkaException as e:
        txn_errors.append(e.args[0].code())
    t.flush(10)
''')

DATA = [f"record {i} " + "x" * (i % 13) for i in range(300)]


def run_script(import_line: str, bootstrap: str, topic: str, txn_topic: str) -> dict:
    scope = {"BOOTSTRAP": bootstrap, "TOPIC": topic, "TXN_TOPIC": txn_topic,
             "TXN_ID": unique_name("compat-txn"), "DATA": DATA}
    exec(compile(SCRIPT.format(import_line=import_line), f"<script {import_line}>", "exec"), scope)
    return scope


def test_same_script_with_confluent_kafka_and_the_compat_layer(kafka_broker):
    results = {}
    for name, import_line in [
            ("confluent", "from confluent_kafka import Producer, KafkaException"),
            ("compat", "from fastkafka.compat.confluent import Producer, KafkaException")]:
        topic, txn_topic = unique_name(f"cc-{name}"), unique_name(f"cc-{name}-txn")
        kafka_broker.create_topic(topic, 6)
        kafka_broker.create_topic(txn_topic, 1)
        results[name] = (topic, run_script(import_line, kafka_broker.bootstrap, topic, txn_topic))

    (ck_topic, ck), (fk_topic, fk) = results["confluent"], results["compat"]
    assert ck["left"] == fk["left"] == 0
    # the same sequence of callback observations, topic name aside
    def shape(observed, topic):
        return [(err, t == topic, part, key, value) for err, t, part, key, value in observed]
    ck_obs = shape(ck["observed"][:-1], ck_topic)
    fk_obs = shape(fk["observed"][:-1], fk_topic)
    assert len(fk_obs) == len(DATA)
    # per partition, the order of reports is the order of production (confluent-kafka's
    # guarantee); across partitions, reports interleave as batches complete
    def by_partition(obs):
        out = {}
        for o in obs:
            out.setdefault(o[2], []).append(o)
        return out
    assert by_partition(fk_obs) == by_partition(ck_obs)
    assert all(o[0] is None and o[1] for o in fk_obs)
    # the transaction's record was reported, and the second commit raised KafkaException
    assert fk["observed"][-1][0] is None and fk["observed"][-1][4] == b"committed"
    assert fk["txn_errors"] == ck["txn_errors"] and len(fk["txn_errors"]) == 1

    # read back: the same records, the same partition per key
    def stored(topic):
        msgs = [m for ms in read_back(kafka_broker.bootstrap, topic, 6, len(DATA)).values() for m in ms]
        return sorted((m.partition, m.key, m.value) for m in msgs)
    assert stored(fk_topic) == stored(ck_topic)
    assert [m.value for m in read_back(kafka_broker.bootstrap, fk["TXN_TOPIC"], 1, 1)[0]] == [b"committed"]

    # list_topics: the same view of the cluster
    for key in ("metadata", "all_metadata"):
        a, b = ck[key], fk[key]
        assert b.cluster_id == a.cluster_id and b.controller_id == a.controller_id
        assert {i: (x.host, x.port) for i, x in b.brokers.items()} == \
            {i: (x.host, x.port) for i, x in a.brokers.items()}
        assert b.orig_broker_id == a.orig_broker_id
    a, b = ck["metadata"].topics[ck_topic], fk["metadata"].topics[fk_topic]
    assert a.error is None and b.error is None
    assert {i: (p.leader, p.replicas, p.isrs, p.error) for i, p in b.partitions.items()} == \
        {i: (p.leader, p.replicas, p.isrs, p.error) for i, p in a.partitions.items()}
    assert {ck_topic, fk_topic} <= set(fk["all_metadata"].topics)
    assert set(ck["all_metadata"].topics) <= set(fk["all_metadata"].topics)


STATS_SCRIPT = textwrap.dedent('''
    import json
    import time
    {import_line}

    docs = []
    p = Producer({{"bootstrap.servers": BOOTSTRAP, "linger.ms": 5, "statistics.interval.ms": 200,
                  "stats_cb": lambda s: docs.append(json.loads(s))}})
    for i in range(N):
        p.produce(TOPIC, b"record-%d" % i, partition=i % 3)
    p.flush(30)
    docs.clear()
    deadline = time.monotonic() + 10
    while not docs and time.monotonic() < deadline:
        p.poll(0.1)
    stats = docs[-1]
''')


def test_stats_fields_a_librdkafka_dashboard_reads(kafka_broker):
    n = 300
    got = {}
    for name, import_line in (("confluent", "from confluent_kafka import Producer"),
                              ("fastkafka", "from fastkafka.compat.confluent import Producer")):
        topic = unique_name(f"stats-{name}")
        kafka_broker.create_topic(topic, 3)
        scope = {"BOOTSTRAP": kafka_broker.bootstrap, "TOPIC": topic, "N": n}
        exec(STATS_SCRIPT.format(import_line=import_line), scope)
        got[name] = (topic, scope["stats"])
    read_back(kafka_broker.bootstrap, got["fastkafka"][0], 3, n)       # all were delivered
    their_topic, theirs = got["confluent"]
    topic, ours = got["fastkafka"]
    # the fields a typical librdkafka dashboard reads are there, as librdkafka has them
    assert ours["txmsgs"] == theirs["txmsgs"] == n
    for key in ("tx", "tx_bytes", "rx", "rx_bytes", "msg_cnt", "msg_size", "age"):
        assert isinstance(ours[key], int) and isinstance(theirs[key], int), key
    assert ours["msg_cnt"] == 0 and ours["tx"] > 0 and ours["tx_bytes"] > n * len(b"record-0")
    brokers = [b for b in ours["brokers"].values() if b["nodeid"] >= 0]
    their_brokers = {b["nodeid"]: b for b in theirs["brokers"].values() if b["nodeid"] >= 0}
    assert {b["nodeid"] for b in brokers} == set(their_brokers)       # the same node id(s)
    for b in brokers:
        tb = their_brokers[b["nodeid"]]
        assert b["name"] == tb["name"] and b["nodename"] == tb["nodename"]
        assert b["state"] == tb["state"] == "UP"
        # round-trip time in µs: above 0, below a second on a local broker
        assert 0 < b["rtt"]["avg"] <= b["rtt"]["max"] < 1_000_000
        assert b["tx"] > 0 and b["txbytes"] > 0
    t = ours["topics"][topic]
    assert set(theirs["topics"][their_topic]) >= set(t)
    # records 8-10 bytes: a batch is its 61-byte header plus up to n records
    assert 61 < t["batchsize"]["avg"] <= t["batchsize"]["max"] < 61 + n * 30
    assert 1 <= t["batchcnt"]["avg"] <= t["batchcnt"]["max"] <= n


# ---- side by side on Apache Kafka: one test body, confluent_kafka.Producer and the layer --------

@pytest.fixture(params=["confluent_kafka", "fastkafka"])
def peer_module(request):
    """confluent_kafka, then fastkafka.compat.confluent: the module a program imports."""
    if request.param == "confluent_kafka":
        import confluent_kafka as mod
    else:
        import fastkafka.compat.confluent as mod
    return mod


# (value, key, headers, partition, timestamp) as programs written for confluent-kafka pass them
PRODUCE_CALLS = [
    ("text \u00e9", "key-\u043a", {"source": "web", "bin": b"\x00\xff"}, -1, 0),
    (b"bytes", b"key-2", [("a", b"1"), ("a", "again"), ("n", None)], -1, 0),
    (b"to partition 2", None, None, 2, 0),
    (b"with a timestamp", b"key-3", None, -1, 1_700_000_000_123),
    (None, b"tombstone", None, -1, 0),
]


def _calls(p, topic, reports):
    def report(err, msg):
        reports.append((None if err is None else err.code(), msg.topic() == topic,
                        msg.partition(), msg.key(), msg.value(), msg.offset() is not None))
    for value, key, headers, partition, ts in PRODUCE_CALLS:
        if headers is None and ts == 0:
            p.produce(topic, value, key, partition, report)                 # positional
        else:
            p.produce(topic, value=value, key=key, headers=headers, partition=partition,
                      timestamp=ts, on_delivery=report)
    return report


def _stored(bootstrap, topic, n):
    msgs = [m for ms in read_back(bootstrap, topic, 3, n).values() for m in ms]
    return sorted(((m.key, m.value, m.headers,
                    m.partition if m.key or m.value == b"to partition 2" else None,
                    m.timestamp if m.timestamp == 1_700_000_000_123 else None) for m in msgs),
                  key=lambda t: (t[0] or b"", t[1] or b""))


def test_every_produce_form_reads_back_as_confluent_kafka_writes_it(kafka_broker, peer_module):
    """The same calls through each producer: the delivery reports and what confluent-kafka's
    consumer reads back are the same (keyed records on librdkafka's partition)."""
    topic, ref = unique_name("ck-forms"), unique_name("ck-forms-ref")
    kafka_broker.create_topic(topic, 3)
    kafka_broker.create_topic(ref, 3)
    reports = []
    with peer_module.Producer({"bootstrap.servers": kafka_broker.bootstrap,
                               "socket.timeout.ms": 10000, "message.timeout.ms": 10000}) as p:
        report = _calls(p, topic, reports)
        assert p.produce_batch(topic, [{"value": b"batch-1", "key": b"bk"},
                                       {"value": "batch-2"}], on_delivery=report) == 2
    assert [r[0] for r in reports] == [None] * (len(PRODUCE_CALLS) + 2)
    assert all(r[1] and r[5] for r in reports)
    from confluent_kafka import Producer as Reference
    r = Reference({"bootstrap.servers": kafka_broker.bootstrap})
    _calls(r, ref, [])
    r.produce_batch(ref, [{"value": b"batch-1", "key": b"bk"}, {"value": "batch-2"}])
    assert r.flush(30) == 0
    n = len(PRODUCE_CALLS) + 2
    assert _stored(kafka_broker.bootstrap, topic, n) == _stored(kafka_broker.bootstrap, ref, n)


def test_produce_to_a_topic_not_there_yet_does_not_block_and_delivers(kafka_broker, peer_module):
    """A topic the broker creates on first use (auto.create.topics.enable): produce() returns at
    once and the records are delivered once its metadata is there."""
    topic = unique_name("ck-new")
    got = []
    p = peer_module.Producer({"bootstrap.servers": kafka_broker.bootstrap})
    t0 = time.monotonic()
    for i in range(20):
        p.produce(topic, b"%d" % i, callback=lambda err, msg: got.append(err))
    assert time.monotonic() - t0 < 0.5
    assert len(p) == 20
    assert p.flush(60) == 0
    assert got == [None] * 20
    assert sorted(m.value for m in read_back(kafka_broker.bootstrap, topic, 1, 20)[0]) == sorted(
        b"%d" % i for i in range(20))
    assert p.close() is True


def _set_producer_byte_rate(bootstrap: str, client_id: str, rate: float) -> None:
    """A client quota (KIP-13/546) on Apache Kafka, through kafka-python's AlterClientQuotas
    request (neither confluent-kafka nor fastkafka has the admin call)."""
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest as Req

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        entry = Req.EntryData(entity=[Req.EntryData.EntityData(entity_type="client-id",
                                                               entity_name=client_id)],
                              ops=[Req.EntryData.OpData(key="producer_byte_rate", value=rate,
                                                        remove=False)])
        resp = admin._manager.run(admin._manager.send, Req(entries=[entry], validate_only=False))
        assert [e.error_code for e in resp.entries] == [0], resp
    finally:
        admin.close()


def test_throttle_cb_gets_the_brokers_throttle_from_poll(kafka_broker, peer_module):
    client_id = unique_name("throttled")
    _set_producer_byte_rate(kafka_broker.bootstrap, client_id, 1024.0)
    topic = unique_name("ck-throttle")
    kafka_broker.create_topic(topic, 1)
    events, threads = [], set()

    def throttle_cb(event):
        threads.add(threading.get_ident())
        events.append(event)

    p = peer_module.Producer({"bootstrap.servers": kafka_broker.bootstrap, "client.id": client_id,
                              "throttle_cb": throttle_cb, "linger.ms": 0})
    for _ in range(3):
        p.produce(topic, b"x" * 4000)              # 12 kB at 1 kB/s: the answers are throttled
    deadline = time.monotonic() + 30
    while not events and time.monotonic() < deadline:
        p.poll(0.2)
    assert events, "no throttle event"
    e = events[0]
    host, port = kafka_broker.bootstrap.rsplit(":", 1)
    assert (e.broker_name, e.broker_id) == (f"{host}:{port}", 1)
    assert e.throttle_time > 0.5
    assert str(e) == f"{e.broker_name}/1 throttled for {int(e.throttle_time * 1000)} ms"
    assert threads == {threading.get_ident()}      # served by poll(), on this thread
    p.purge()
    p.flush(0)
