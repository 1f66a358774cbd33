"""Producer code written the way kafka-python's documentation teaches it (a json value_serializer,
a str key_serializer, ``future.get(timeout=10)``, ``add_callback``/``add_errback``, a custom
partitioner, ``api_version``), run once with ``kafka.KafkaProducer`` and once with
``fastkafka.compat.kafka_python.KafkaProducer`` (only the class differs), each to its own topics
on Apache Kafka; confluent-kafka's consumer reads both back: the same records in the same
partitions, and the same callback observations.

Also confluent-kafka's AvroSerializer bound to a context by a lambda (code written before
fastkafka.schema_registry) as a fastkafka value_serializer, read back by its DeserializingConsumer
with the AvroDeserializer of the same (mock://) registry."""
from __future__ import annotations

import json

import pytest

from brokers import read_back, unique_name

pytestmark = pytest.mark.broker

PARTITIONS = 6
#: What kafka-python's documentation passes to skip the version probe. Kafka 4 no longer takes
#: the Produce versions of 0.10, so kafka-python itself needs a version the broker still speaks;
#: fastkafka accepts any (it negotiates with ApiVersions and logs the argument at DEBUG).
API_VERSION = (2, 6)
USERS = [f"user-{i}" for i in range(12)]


def custom_partitioner():
    """A partitioner in the shape the installed kafka-python documents: a ``Partitioner`` with
    ``partition(topic, key, serialized_key, value, serialized_value, cluster)`` (kafka-python 3),
    else ``partitioner(key_bytes, all_partitions, available_partitions)`` (kafka-python 2)."""
    def pick(key_bytes, all_partitions):
        return sorted(all_partitions)[sum(key_bytes) % len(all_partitions)]

    try:
        from kafka.partitioner import Partitioner
    except ImportError:
        return lambda key_bytes, all_partitions, available: pick(key_bytes, all_partitions)

    class ByteSum(Partitioner):
        def partition(self, topic, key, serialized_key, value, serialized_value, cluster):
            return pick(serialized_key, cluster.partitions_for_topic(topic))

    return ByteSum()


def kafka_python_program(KafkaProducer, bootstrap, topic, custom_topic):
    """Producer code as kafka-python's documentation writes it; returns what its callbacks saw
    and what ``get`` returned."""
    observed = []

    def on_send_success(record_metadata):
        observed.append(("success", record_metadata.topic == topic, record_metadata.partition,
                         record_metadata.offset >= 0))

    def on_send_error(excp):
        observed.append(("error", type(excp).__name__))

    producer = KafkaProducer(bootstrap_servers=[bootstrap],
                             value_serializer=lambda m: json.dumps(m).encode("ascii"),
                             key_serializer=str.encode,
                             api_version=API_VERSION)
    got = []
    for i, user in enumerate(USERS):
        future = producer.send(topic, {"user": user, "n": i}, key=user)
        record_metadata = future.get(timeout=10)
        got.append((record_metadata.topic == topic, record_metadata.partition,
                    record_metadata.serialized_key_size, record_metadata.serialized_value_size,
                    record_metadata.topic_partition.partition == record_metadata.partition))
    for i, user in enumerate(USERS):
        producer.send(topic, {"async": i}, key=user).add_callback(on_send_success) \
            .add_errback(on_send_error)
    producer.flush()
    producer.close()

    custom = KafkaProducer(bootstrap_servers=bootstrap, key_serializer=str.encode,
                           partitioner=custom_partitioner(), api_version=API_VERSION)
    for user in USERS:
        custom.send(custom_topic, b"custom", key=user)
    custom.flush()
    partitions = custom.partitions_for(custom_topic)
    custom.close()
    return got, sorted(observed), partitions


def read_records(bootstrap, topic, n):
    by_part = read_back(bootstrap, topic, PARTITIONS, n)
    return sorted((part, m.key, m.value) for part, msgs in by_part.items() for m in msgs)


def test_kafka_python_code_behaves_the_same_on_the_compat_producer(kafka_broker):
    from kafka import KafkaProducer as KafkaPythonProducer

    from fastkafka.compat.kafka_python import KafkaProducer as CompatProducer

    results, records = {}, {}
    for name, cls in (("kafka-python", KafkaPythonProducer), ("fastkafka", CompatProducer)):
        topic, custom_topic = unique_name(f"kp-{name}"), unique_name(f"kp-{name}-custom")
        kafka_broker.create_topic(topic, PARTITIONS)
        kafka_broker.create_topic(custom_topic, PARTITIONS)
        results[name] = kafka_python_program(cls, kafka_broker.bootstrap, topic, custom_topic)
        records[name] = (read_records(kafka_broker.bootstrap, topic, 2 * len(USERS)),
                         read_records(kafka_broker.bootstrap, custom_topic, len(USERS)))
    theirs, ours = results["kafka-python"], results["fastkafka"]
    assert ours == theirs
    got, observed, partitions = ours
    assert len(got) == len(USERS) and all(g[0] and g[4] for g in got)
    assert len(observed) == len(USERS) and all(o[0] == "success" for o in observed)
    assert partitions == set(range(PARTITIONS))
    assert records["fastkafka"] == records["kafka-python"]
    plain, custom = records["fastkafka"]
    assert len({part for part, _, _ in plain}) > 1           # keys spread over partitions
    for part, key, _ in custom:
        assert part == sum(key) % PARTITIONS


def test_schema_registry_avro_serializer_as_value_serializer(kafka_broker):
    from confluent_kafka import DeserializingConsumer, TopicPartition
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext, StringDeserializer

    from fastkafka import Producer

    topic = unique_name("avro")
    kafka_broker.create_topic(topic, 1)
    registry = SchemaRegistryClient.new_client({"url": "mock://recipe"})
    schema = """{"type": "record", "name": "User", "fields": [
                  {"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}"""
    to_avro = AvroSerializer(registry, schema)
    ctx = SerializationContext(topic, MessageField.VALUE)
    users = [{"name": "ada", "age": 36}, {"name": "alan", "age": 41}, None]
    with Producer(bootstrap_servers=kafka_broker.bootstrap,
                  value_serializer=lambda user: to_avro(user, ctx)) as producer:
        for user in users:
            producer.send(topic, user, key=b"k").get(timeout=10)
    # -- read back by confluent-kafka against the same registry --
    consumer = DeserializingConsumer({
        "bootstrap.servers": kafka_broker.bootstrap, "group.id": unique_name("avro-g"),
        "key.deserializer": StringDeserializer("utf_8"),
        "value.deserializer": AvroDeserializer(registry), "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = []
        for _ in range(200):
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append((msg.key(), msg.value()))
            if len(got) == len(users):
                break
    finally:
        consumer.close()
    assert got == [("k", u) for u in users]


def metrics_reading_program(KafkaProducer, bootstrap, topic, n):
    """Monitoring code as written for kafka-python: send ``n`` records and read ``metrics()`` by
    kafka-python's group keys and Java names."""
    p = KafkaProducer(bootstrap_servers=bootstrap, api_version=API_VERSION, linger_ms=5)
    try:
        for i in range(n):
            p.send(topic, b"m-%d" % i, partition=i % 2)
        p.flush(timeout=30)
        m = p.metrics()
    finally:
        p.close()
    return m


def test_metrics_read_as_kafka_python_code_reads_them(kafka_broker):
    from kafka import KafkaProducer as KafkaPythonProducer

    from fastkafka.compat.kafka_python import KafkaProducer as CompatProducer

    n = 40
    got = {}
    for name, cls in (("kafka-python", KafkaPythonProducer), ("fastkafka", CompatProducer)):
        topic = unique_name(f"kpm-{name}")
        kafka_broker.create_topic(topic, 2)
        got[name] = (topic, metrics_reading_program(cls, kafka_broker.bootstrap, topic, n))
    read_back(kafka_broker.bootstrap, got["fastkafka"][0], 2, n)      # all were delivered
    theirs_topic, theirs = got["kafka-python"]
    topic, ours = got["fastkafka"]
    # the names kafka-python has in each kind of group are there, as floats
    for group, their_group in (("producer-metrics", "producer-metrics"),
                               (f"producer-topic-metrics.{topic}",
                                f"producer-topic-metrics.{theirs_topic}")):
        shared = set(theirs[their_group]) & set(ours[group])
        for name in ("record-send-rate", "record-error-rate", "record-retry-rate"):
            assert name in shared and isinstance(ours[group][name], float)
        assert all(isinstance(ours[group][k], float) for k in shared if k != "metadata-age")
    for name in ("batch-size-avg", "records-per-request-avg", "request-latency-avg",
                 "record-queue-time-max", "compression-rate-avg", "requests-in-flight",
                 "outgoing-byte-rate", "connection-count"):
        assert name in theirs["producer-metrics"] and name in ours["producer-metrics"], name
    theirs_nodes = {g for g in theirs if g.startswith("producer-node-metrics.node-")}
    our_nodes = {g for g in ours if g.startswith("producer-node-metrics.node-")}
    assert theirs_nodes & our_nodes, (theirs_nodes, our_nodes)     # the broker's node id
    node = sorted(theirs_nodes & our_nodes)[0]
    assert ours[node]["request-latency-avg"] > 0
    assert {"request-latency-avg", "request-rate", "outgoing-byte-rate"} <= set(theirs[node]) & set(ours[node])
    # and the values describe the workload
    pm = ours["producer-metrics"]
    assert pm["record-send-total"] == n and ours[f"producer-topic-metrics.{topic}"]["record-send-total"] == n
    assert pm["record-send-rate"] > 0 and pm["record-error-total"] == 0
    assert 61 < pm["batch-size-avg"] <= pm["batch-size-max"]
    assert 1 <= pm["records-per-request-avg"] <= n


# -- one test per behaviour, run on each class (parametrized): the same observable result --------
import kafka.errors as kafka_errors  # noqa: E402
from kafka import KafkaProducer as KafkaPythonProducer  # noqa: E402
from kafka.structs import OffsetAndMetadata, TopicPartition  # noqa: E402

from brokers import read_all  # noqa: E402
from fastkafka.compat.kafka_python import KafkaProducer as CompatProducer  # noqa: E402

BOTH = pytest.mark.parametrize("Producer", [KafkaPythonProducer, CompatProducer],
                               ids=["kafka-python", "fastkafka"])
TS = 1_700_000_000_123


@BOTH
def test_send_returns_record_metadata_and_runs_callbacks_as_kafka_python(Producer, kafka_broker):
    topic = unique_name("kp-md")
    kafka_broker.create_topic(topic, 3)
    # kafka-python's documented first steps: no api_version, so the constructor bootstraps
    producer = Producer(bootstrap_servers=kafka_broker.bootstrap)
    try:
        partitions = producer.partitions_for(topic)
        assert partitions == {0, 1, 2} and type(partitions) is set
        seen = []
        future = producer.send(topic, b"value", key=b"key", headers=[("h1", b"x"), ("h2", b"")],
                               partition=1, timestamp_ms=TS)
        future.add_callback(lambda tag, md, n=None: seen.append(("ok", tag, md, n)), "cb", n=7)
        future.add_errback(lambda e: seen.append(("error", e)))
        md = future.get(timeout=30)
        assert type(md).__name__ == "RecordMetadata" and isinstance(md, tuple)
        assert md == (topic, 1, TopicPartition(topic, 1), 0, TS, None, 3, 5, 5)
        assert md._fields == ("topic", "partition", "topic_partition", "offset", "timestamp",
                              "checksum", "serialized_key_size", "serialized_value_size",
                              "serialized_header_size")
        assert (future.is_done, future.succeeded(), future.failed(), future.exception,
                future.value) == (True, True, False, None, md)
        producer.flush()
        assert seen == [("ok", "cb", md, 7)]
        late = []
        future.add_both(late.append)                  # already done: called at once, here
        assert late == [md]
        # key None: size -1; value None (a tombstone, key required): size -1; no headers: -1
        md2 = producer.send(topic, b"v2", partition=2).get(timeout=30)
        md3 = producer.send(topic, None, key=b"gone", partition=2).get(timeout=30)
        assert (md2.serialized_key_size, md2.serialized_value_size, md2.serialized_header_size) == (-1, 2, -1)
        assert (md3.serialized_key_size, md3.serialized_value_size, md3.offset) == (4, -1, 1)
    finally:
        producer.close()
    got = read_back(kafka_broker.bootstrap, topic, 3, 3)
    (m1,), (m2, m3) = got[1], got[2]
    assert (m1.key, m1.value, m1.headers, m1.timestamp) == (b"key", b"value", [("h1", b"x"), ("h2", b"")], TS)
    assert (m2.key, m2.value, m3.key, m3.value) == (None, b"v2", b"gone", None)


@BOTH
def test_too_large_records_are_message_size_too_large(Producer, kafka_broker):
    topic = unique_name("kp-big")
    kafka_broker.create_topic(topic, 1, config={"max.message.bytes": 2000})
    producer = Producer(bootstrap_servers=kafka_broker.bootstrap, max_request_size=100_000)
    try:
        with pytest.raises(kafka_errors.MessageSizeTooLargeError):       # client side, at once
            producer.send(topic, b"x" * 200_000)
        errors = []
        future = producer.send(topic, b"y" * 50_000)                     # the broker refuses it
        future.add_errback(errors.append)
        with pytest.raises(kafka_errors.MessageSizeTooLargeError) as exc:
            future.get(timeout=30)
        producer.flush()
        assert future.failed() and not future.succeeded() and future.value is None
        assert future.exception is exc.value and errors == [exc.value]
        assert exc.value.errno == 10 and future.retriable() is False
    finally:
        producer.close()


@BOTH
def test_an_unknown_partition_is_a_value_error(Producer, kafka_broker):
    topic = unique_name("kp-part")
    kafka_broker.create_topic(topic, 2)
    producer = Producer(bootstrap_servers=kafka_broker.bootstrap)
    try:
        producer.partitions_for(topic)
        for partition in (2, -1):
            with pytest.raises(ValueError) as exc:
                producer.send(topic, b"v", partition=partition)
            assert not isinstance(exc.value, kafka_errors.KafkaError)
        assert producer.send(topic, b"v", partition=1).get(timeout=30).partition == 1
    finally:
        producer.close()


def consume_one(bootstrap, topic):
    """The record of ``topic`` partition 0 as a consumer sees it: (offset, leader_epoch)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer
    from confluent_kafka import TopicPartition as CTP

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("kp-peek"),
                  "enable.auto.commit": False, "log_level": 3})
    try:
        c.assign([CTP(topic, 0, OFFSET_BEGINNING)])
        for _ in range(100):
            m = c.poll(0.3)
            if m is not None and m.error() is None:
                return m.offset(), m.leader_epoch()
    finally:
        c.close()
    raise AssertionError(f"nothing read from {topic}")


def committed(bootstrap, group, topic):
    """The group's committed (offset, metadata, leader_epoch) of ``topic`` partition 0, read by
    kafka-python's admin client (OffsetFetch) and by confluent-kafka's consumer (its leader
    epoch; confluent-kafka 2.16 returns the metadata string with trailing bytes, so not that)."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        om = admin.list_group_offsets(group)[group][TopicPartition(topic, 0)]
    finally:
        admin.close()
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False, "log_level": 3})
    try:
        (tp,) = c.committed([CTP(topic, 0)], timeout=15)
    finally:
        c.close()
    assert (tp.offset, tp.leader_epoch) == (om.offset, om.leader_epoch), (tp, om)
    return om.offset, om.metadata, om.leader_epoch


@BOTH
def test_transactions_and_offsets_with_leader_epoch(Producer, kafka_broker):
    """Consume-transform-produce as kafka-python teaches it: the consumed record's offset + 1
    and leader epoch committed in the transaction; an aborted transaction leaves nothing."""
    source, sink = unique_name("kp-src"), unique_name("kp-sink")
    kafka_broker.create_topic(source, 1)
    kafka_broker.create_topic(sink, 1)
    group = unique_name("kp-group")
    with CompatProducer(bootstrap_servers=kafka_broker.bootstrap) as seed:
        seed.send(source, b"input").get(timeout=30)
    offset, epoch = consume_one(kafka_broker.bootstrap, source)
    assert epoch is not None and epoch >= 0

    producer = Producer(bootstrap_servers=kafka_broker.bootstrap,
                        transactional_id=unique_name("kp-txn"))
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(sink, b"committed-1")
        producer.send(sink, b"committed-2")
        producer.send_offsets_to_transaction(
            {TopicPartition(source, 0): OffsetAndMetadata(offset + 1, "meta", epoch)}, group)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(sink, b"aborted")
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close()
    assert read_all(kafka_broker.bootstrap, sink, 1) == [b"committed-1", b"committed-2"]
    assert committed(kafka_broker.bootstrap, group, source) == (offset + 1, "meta", epoch)


@BOTH
def test_a_transaction_call_out_of_order_is_a_kafka_error(Producer, kafka_broker):
    """commit_transaction() with no transaction begun: kafka-python raises KafkaError (invalid
    transition READY -> COMMITTING_TRANSACTION), the layer its subclass IllegalStateError; the
    producer stays usable in both."""
    topic = unique_name("kp-txn-order")
    kafka_broker.create_topic(topic, 1)
    producer = Producer(bootstrap_servers=kafka_broker.bootstrap,
                        transactional_id=unique_name("kp-txn-order"))
    try:
        producer.init_transactions()
        with pytest.raises(kafka_errors.KafkaError):
            producer.commit_transaction()             # no transaction begun
        producer.begin_transaction()
        producer.send(topic, b"after")
        producer.commit_transaction()
    finally:
        producer.close()
    assert read_all(kafka_broker.bootstrap, topic, 1) == [b"after"]


def test_bootstrap_connected_as_kafka_python_documents_it(kafka_broker):
    """``bootstrap_connected()``: "Return True if the bootstrap is connected". kafka-python 3.0.12
    returns the opposite (True while its bootstrap is still in progress, False once done: it
    tests ``not bootstrap_future.is_done``); the layer gives the documented meaning
    (docs/migration.md)."""
    producer = CompatProducer(bootstrap_servers=kafka_broker.bootstrap)
    try:
        assert producer.bootstrap_connected() is True
    finally:
        producer.close()
    offline = CompatProducer(bootstrap_servers="127.0.0.1:1", api_version=(2, 6))
    try:
        assert offline.bootstrap_connected() is False
    finally:
        offline.close(0)


@BOTH
def test_get_with_a_timeout_and_linger_as_kafka_python(Producer, kafka_broker):
    """A record lingering (linger_ms) is not done: ``get(timeout)`` raises KafkaTimeoutError and
    leaves it queued; ``flush()`` sends it at once, whatever linger_ms says; the context manager
    closes the producer."""
    topic = unique_name("kp-linger")
    kafka_broker.create_topic(topic, 1)
    with Producer(bootstrap_servers=kafka_broker.bootstrap, linger_ms=60_000,
                  batch_size=1_000_000) as producer:
        producer.partitions_for(topic)
        future = producer.send(topic, b"late")
        with pytest.raises(kafka_errors.KafkaTimeoutError):
            future.get(timeout=0.3)
        assert (future.is_done, future.succeeded(), future.failed()) == (False, False, False)
        producer.flush(timeout=30)
        assert future.is_done and future.succeeded() and future.get(timeout=0).offset == 0
    with pytest.raises(kafka_errors.IllegalStateError):
        producer.send(topic, b"after close")
    assert [m.value for m in read_back(kafka_broker.bootstrap, topic, 1, 1)[0]] == [b"late"]


@BOTH
@pytest.mark.parametrize("acks", [1, "all"])
def test_acks_as_kafka_python_documents_them(Producer, kafka_broker, acks):
    """acks=1 and 'all' give each record's offset; acks=1 turns default idempotence off
    (kafka-python 3, with a WARNING)."""
    topic = unique_name("kp-acks")
    kafka_broker.create_topic(topic, 1)
    with Producer(bootstrap_servers=kafka_broker.bootstrap, acks=acks) as producer:
        mds = [producer.send(topic, b"r%d" % i).get(timeout=30) for i in range(3)]
        assert producer.config["enable_idempotence"] is (acks == "all")
    assert [md.offset for md in mds] == [0, 1, 2]
    assert [m.value for m in read_back(kafka_broker.bootstrap, topic, 1, 3)[0]] == [b"r0", b"r1", b"r2"]


def test_acks_zero_gives_offset_minus_one_as_kafka_python_documents(kafka_broker):
    """kafka-python's documentation of acks=0: "The offset given back for each record will always
    be set to -1". kafka-python 3.0.12 gives 0 for every record instead (the unknown base offset
    read as 0); the layer gives the documented -1, as the Java client (docs/migration.md)."""
    topic = unique_name("kp-acks0")
    kafka_broker.create_topic(topic, 1)
    with CompatProducer(bootstrap_servers=kafka_broker.bootstrap, acks=0) as producer:
        mds = [producer.send(topic, b"r%d" % i).get(timeout=30) for i in range(3)]
        assert producer.config["enable_idempotence"] is False
    assert [md.offset for md in mds] == [-1, -1, -1]
    assert [m.value for m in read_back(kafka_broker.bootstrap, topic, 1, 3)[0]] == [b"r0", b"r1", b"r2"]


@BOTH
@pytest.mark.parametrize("codec", ["gzip", "lz4"])   # the codecs kafka-python has here
def test_compressed_records_read_back_the_same(Producer, kafka_broker, codec):
    topic = unique_name(f"kp-{codec}")
    kafka_broker.create_topic(topic, 1)
    values = [b"compressible " * 50 + b"%d" % i for i in range(20)]
    with Producer(bootstrap_servers=kafka_broker.bootstrap, compression_type=codec,
                  linger_ms=20) as producer:
        futures = [producer.send(topic, v, key=b"k") for v in values]
        producer.flush()
        assert [f.get(timeout=0).offset for f in futures] == list(range(20))
    got = read_back(kafka_broker.bootstrap, topic, 1, 20)[0]
    assert [(m.key, m.value) for m in got] == [(b"k", v) for v in values]


def test_snappy_and_zstd_need_no_library():
    """kafka-python raises RuntimeError('Libraries for snappy compression codec not found')
    without python-snappy (zstd likewise); the layer has every codec built in."""
    for codec in ("snappy", "zstd"):
        CompatProducer(bootstrap_servers="127.0.0.1:1", api_version=(2, 6),
                       compression_type=codec).close(0)
