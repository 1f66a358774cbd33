"""Producer code written the way aiokafka's documentation teaches it (``async with``, ``fut = await
producer.send(...)`` then ``await asyncio.gather(*futs)``, ``send_and_wait``, ``create_batch`` /
``send_batch``, ``partitions_for``, ``transaction()``, serializers, ``acks=0``, ``max_request_size``),
run in the same test with ``aiokafka.AIOKafkaProducer`` and with
``fastkafka.compat.aiokafka.AIOKafkaProducer`` (only the class differs), each to its own topic on
Apache Kafka, under asyncio's loop and uvloop's. What each returns (RecordMetadata fields, batch
metadata, exception classes) is compared, and confluent-kafka's consumer reads both topics back."""
from __future__ import annotations

import asyncio
import base64
import gc
import json
import ssl
import time
import warnings

import pytest

aiokafka = pytest.importorskip("aiokafka")    # the peer: the whole module compares against it

from aiokafka.errors import (IllegalOperation, KafkaConnectionError,  # noqa: E402
                             MessageSizeTooLargeError, ProducerClosed)
from aiokafka.structs import RecordMetadata, TopicPartition  # noqa: E402

from aioloops import LOOPS, run  # noqa: E402
from brokers import committed_offsets, read_all, read_back, unique_name  # noqa: E402
from fastkafka.compat import aiokafka as layer  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.parametrize("loop_kind", LOOPS)]

#: The two producers every test runs: the peer and the layer (only the class differs).
CLASSES = {"aiokafka": aiokafka.AIOKafkaProducer, "fastkafka": layer.AIOKafkaProducer}


def both(loop_kind, program, *args):
    """``program(AIOKafkaProducer, *args)`` run once per class, each on a fresh loop of
    ``loop_kind``: ``{"aiokafka": result, "fastkafka": result}``."""
    return {name: run(loop_kind, lambda cls=cls: program(cls, *args)) for name, cls in CLASSES.items()}


def topics(broker, partitions=1, config=None):
    """One fresh topic per class."""
    out = {}
    for name in CLASSES:
        t = unique_name(f"aiok-{name}")
        broker.create_topic(t, partitions, config=config)
        out[name] = t
    return out


def test_awaited_sends_gathered_are_read_back_alike(kafka_broker, loop_kind):
    """aiokafka's idiom: ``fut = await producer.send(...)`` for each record, then gather."""
    ts = topics(kafka_broker, 3)
    n = 600

    async def program(cls):
        async with cls(bootstrap_servers=kafka_broker.bootstrap, linger_ms=2) as producer:
            topic = ts["aiokafka" if cls is aiokafka.AIOKafkaProducer else "fastkafka"]
            futs = []
            for i in range(n):
                fut = await producer.send(topic, b"v%d" % i, key=b"k%d" % (i % 17),
                                          headers=[("h", b"%d" % i)])
                futs.append(fut)
            mds = await asyncio.gather(*futs)
            return topic, mds

    got = both(loop_kind, program)
    placement = {}
    for name, (topic, mds) in got.items():
        assert all(type(md) is RecordMetadata for md in mds), name
        # the broker's log start offset: aiokafka's from the produce response; not kept here
        assert {md.log_start_offset for md in mds} == ({0} if name == "aiokafka" else {None})
        assert all(md.topic == topic and md.topic_partition == TopicPartition(topic, md.partition)
                   and md.timestamp_type == 0 and isinstance(md.timestamp, int) for md in mds), name
        back = read_back(kafka_broker.bootstrap, topic, 3, n)
        where = {(m.partition, m.offset): m for msgs in back.values() for m in msgs}
        for i, md in enumerate(mds):
            m = where[(md.partition, md.offset)]
            assert (m.value, m.key, m.headers) == (b"v%d" % i, b"k%d" % (i % 17), [("h", b"%d" % i)])
            if name == "fastkafka":
                assert m.timestamp == md.timestamp
            else:   # aiokafka gives every record of a batch its first record's timestamp
                assert md.timestamp <= m.timestamp
        placement[name] = [md.partition for md in mds]
        # each partition's offsets in the order of the sends: 0, 1, 2, ...
        for p in range(3):
            assert [md.offset for md in mds if md.partition == p] == \
                list(range(sum(1 for md in mds if md.partition == p))), name
    # keyed records land in the same partitions (murmur2 of the key, as the Java client)
    assert placement["fastkafka"] == placement["aiokafka"]


def test_send_and_wait_returns_the_same_record_metadata(kafka_broker, loop_kind):
    ts = topics(kafka_broker, 3)

    async def program(cls):
        async with cls(bootstrap_servers=[kafka_broker.bootstrap], compression_type="gzip",
                       client_id="compat-test") as producer:
            topic = ts["aiokafka" if cls is aiokafka.AIOKafkaProducer else "fastkafka"]
            a = await producer.send_and_wait(topic, b"one", key=b"k", partition=2,
                                             timestamp_ms=1_700_000_000_123)
            b = await producer.send_and_wait(topic, value=b"two", partition=2)
            c = await producer.send_and_wait(topic, key=b"tombstone", partition=1)
            parts = await producer.partitions_for(topic)
            return [(md.partition, md.offset, md.timestamp_type, md.topic_partition.partition)
                    for md in (a, b, c)], a.timestamp, type(parts), parts

    got = both(loop_kind, program)
    assert got["fastkafka"] == got["aiokafka"]
    assert got["fastkafka"][0] == [(2, 0, 0, 2), (2, 1, 0, 2), (1, 0, 0, 1)]
    assert got["fastkafka"][1:] == (1_700_000_000_123, set, {0, 1, 2})
    assert [m.value for m in read_back(kafka_broker.bootstrap, ts["fastkafka"], [1], 1)[1]] == [None]


def test_a_custom_partitioner_and_idempotence(kafka_broker, loop_kind):
    """aiokafka's partitioner signature ``(key_bytes, all_partitions, available_partitions)``,
    called with the serialized key; an idempotent producer with acks='all'."""
    ts = topics(kafka_broker, 4)

    def by_first_byte(key_bytes, all_partitions, available_partitions):
        return sorted(all_partitions)[key_bytes[0] % len(all_partitions)]

    async def program(cls):
        topic = ts["aiokafka" if cls is aiokafka.AIOKafkaProducer else "fastkafka"]
        async with cls(bootstrap_servers=kafka_broker.bootstrap, partitioner=by_first_byte,
                       key_serializer=str.encode, enable_idempotence=True, acks="all") as producer:
            futs = [await producer.send(topic, b"v", key=k) for k in ("a", "b", "c", "d", "e")]
            return [(md.partition, md.offset) for md in await asyncio.gather(*futs)]

    got = both(loop_kind, program)
    assert got["fastkafka"] == got["aiokafka"] == [(1, 0), (2, 0), (3, 0), (0, 0), (1, 1)]


def test_log_append_time_topic_gives_the_brokers_time(kafka_broker, loop_kind):
    ts = topics(kafka_broker, 1, config={"message.timestamp.type": "LogAppendTime"})

    async def program(cls):
        async with cls(bootstrap_servers=kafka_broker.bootstrap) as producer:
            topic = ts["aiokafka" if cls is aiokafka.AIOKafkaProducer else "fastkafka"]
            md = await producer.send_and_wait(topic, b"x", timestamp_ms=1000)
            return md.timestamp_type, md.timestamp > 1_600_000_000_000

    got = both(loop_kind, program)
    assert got["fastkafka"] == got["aiokafka"] == (1, True)


def test_serializers_and_acks_0(kafka_broker, loop_kind):
    ts = topics(kafka_broker, 1)

    async def program(cls):
        topic = ts["aiokafka" if cls is aiokafka.AIOKafkaProducer else "fastkafka"]
        producer = cls(bootstrap_servers=kafka_broker.bootstrap, acks=0,
                       value_serializer=lambda v: json.dumps(v).encode(),
                       key_serializer=lambda k: k.encode() if k is not None else None)
        await producer.start()
        try:
            futs = [await producer.send(topic, {"n": i}, key=f"user-{i}") for i in range(20)]
            await producer.flush()
            assert all(f.done() for f in futs)          # flush() awaited every record
            results = await asyncio.gather(*futs)
        finally:
            await producer.stop()
        return results

    got = both(loop_kind, program)
    assert got["fastkafka"] == got["aiokafka"] == [None] * 20
    for name, topic in ts.items():
        back = read_back(kafka_broker.bootstrap, topic, 1, 20)[0]
        assert [(m.key, json.loads(m.value)) for m in back] == \
            [(f"user-{i}".encode(), {"n": i}) for i in range(20)], name


def test_batches_fill_alike_and_land_in_one_partition(kafka_broker, loop_kind):
    ts = topics(kafka_broker, 2)

    async def program(cls):
        async with cls(bootstrap_servers=kafka_broker.bootstrap, max_batch_size=1024) as producer:
            topic = ts["aiokafka" if cls is aiokafka.AIOKafkaProducer else "fastkafka"]
            batch = producer.create_batch()
            appended = []
            i = 0
            while True:
                md = batch.append(key=b"k%d" % i, value=b"x" * 50, timestamp=1_700_000_000_000 + i,
                                  headers=[("i", b"%d" % i)])
                if md is None:
                    break
                appended.append((md.offset, md.size, md.timestamp, md.crc))
                i += 1
            count, size = batch.record_count(), batch.size()
            fut = await producer.send_batch(batch, topic, partition=1)
            bmd = await fut
            second = producer.create_batch()
            second.append(key=None, value=b"after", timestamp=None)
            bmd2 = await (await producer.send_batch(second, topic, partition=1))
            return (appended, count, size, (bmd.partition, bmd.offset, bmd.timestamp,
                                            bmd.timestamp_type, bmd.topic_partition.partition),
                    (bmd2.offset, bmd2.timestamp))

    got = both(loop_kind, program)
    assert got["fastkafka"] == got["aiokafka"]
    appended, count, size, bmd, bmd2 = got["fastkafka"]
    assert count == len(appended) > 5 and size <= 1024
    assert bmd == (1, 0, -1, 0, 1) and bmd2 == (count, -1)
    for name, topic in ts.items():
        back = read_back(kafka_broker.bootstrap, topic, 2, count + 1)
        assert back[0] == [], name
        assert [(m.key, m.timestamp) for m in back[1][:count]] == \
            [(b"k%d" % i, 1_700_000_000_000 + i) for i in range(count)], name
        assert back[1][count].value == b"after"


def test_max_request_size_bounds_a_record_at_send(kafka_broker, loop_kind):
    ts = topics(kafka_broker, 1)

    async def program(cls):
        async with cls(bootstrap_servers=kafka_broker.bootstrap, max_request_size=2000) as producer:
            topic = ts["aiokafka" if cls is aiokafka.AIOKafkaProducer else "fastkafka"]
            # aiokafka's bound: 61 (batch header) + 21 (record overhead) + key, value and headers
            # with their varint lengths: a 1914-byte value, no key, no headers: 82 + 2 + 1914 + 1 + 1
            ok = await producer.send_and_wait(topic, b"x" * 1914)
            outcomes = []
            for value, headers in ((b"x" * 1915, None), (b"x" * 100, [("h", b"y" * 1900)])):
                try:
                    await producer.send(topic, value, headers=headers)
                    outcomes.append("sent")
                except MessageSizeTooLargeError as e:
                    outcomes.append(str(e))
            return ok.offset, outcomes

    got = both(loop_kind, program)
    assert got["fastkafka"] == got["aiokafka"]
    assert got["fastkafka"][1][0].startswith(
        "[Error 10] MessageSizeTooLargeError: The message is 2001 bytes")


def test_records_the_broker_refuses_fail_with_the_same_class(kafka_broker, loop_kind):
    ts = topics(kafka_broker, 1, config={"max.message.bytes": 1000})

    async def program(cls):
        async with cls(bootstrap_servers=kafka_broker.bootstrap) as producer:
            topic = ts["aiokafka" if cls is aiokafka.AIOKafkaProducer else "fastkafka"]
            fut = await producer.send(topic, b"x" * 5000)
            try:
                await fut
            except Exception as e:
                return type(e).__mro__[1 if type(e).__module__ == "aiokafka.errors" and
                                       type(e) is not aiokafka.errors.MessageSizeTooLargeError
                                       else 0].__name__, isinstance(e, MessageSizeTooLargeError)
            return "delivered"

    got = both(loop_kind, program)
    assert got["fastkafka"] == got["aiokafka"] == ("MessageSizeTooLargeError", True)


def test_bad_calls_raise_the_same_errors(kafka_broker, loop_kind):
    ts = topics(kafka_broker, 2)

    async def program(cls):
        out = []
        producer = cls(bootstrap_servers=kafka_broker.bootstrap)
        await producer.start()
        topic = ts["aiokafka" if cls is aiokafka.AIOKafkaProducer else "fastkafka"]
        calls = [
            lambda: producer.send(topic, b"v", partition=2),
            lambda: producer.send(topic),
            lambda: producer.send(topic, "a str"),
            lambda: producer.begin_transaction(),
            lambda: producer.send_offsets_to_transaction({TopicPartition(topic, 0): 1}, "g"),
        ]
        for call in calls:
            try:
                await call()
                out.append("ok")
            except (AssertionError, TypeError, ValueError, IllegalOperation) as e:
                kind = next(k for k in (AssertionError, TypeError, ValueError, IllegalOperation)
                            if isinstance(e, k))
                out.append((kind.__name__, str(e)))
        await producer.stop()
        await producer.stop()           # a second stop does nothing
        try:
            await producer.send(topic, b"late")
            out.append("sent after stop")
        except ProducerClosed:
            out.append("ProducerClosed")
        return out

    got = both(loop_kind, program)
    assert got["fastkafka"] == got["aiokafka"] == [
        ("AssertionError", "Unrecognized partition"),
        ("AssertionError", "Need at least one: key or value"),
        ("TypeError", "a bytes-like object is required, not 'str'"),
        ("IllegalOperation", "You need to configure transaction_id to use transactions"),
        ("IllegalOperation", "You need to configure transaction_id to use transactions"),
        "ProducerClosed"]


def test_start_fails_when_no_bootstrap_server_answers(loop_kind):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()

    async def program(cls):
        producer = cls(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=5000)
        try:
            await producer.start()
            return "started"
        except KafkaConnectionError as e:
            return str(e).split(" from ")[0]
        finally:
            await producer.stop()

    got = both(loop_kind, program)
    assert got["fastkafka"] == got["aiokafka"] == "KafkaConnectionError: Unable to bootstrap"


def test_transactions_commit_abort_and_offsets(kafka_broker, loop_kind):
    ts = topics(kafka_broker, 1)
    source = unique_name("aiok-src")
    kafka_broker.create_topic(source, 1)

    async def program(cls):
        name = "aiokafka" if cls is aiokafka.AIOKafkaProducer else "fastkafka"
        topic, group = ts[name], unique_name(f"grp-{name}")
        async with cls(bootstrap_servers=kafka_broker.bootstrap,
                       transactional_id=unique_name(f"txn-{name}")) as producer:
            out = [await producer.partitions_for(topic)]     # outside a transaction too
            try:
                await producer.send(topic, b"outside")
            except IllegalOperation as e:
                out.append(str(e))
            async with producer.transaction():
                mds = await asyncio.gather(*[await producer.send(topic, b"c%d" % i)
                                             for i in range(3)])
                await producer.send_offsets_to_transaction({TopicPartition(source, 0): 42}, group)
            out.append([md.offset for md in mds])
            try:
                async with producer.transaction():
                    await producer.send(topic, b"aborted")
                    raise RuntimeError("the block fails")
            except RuntimeError as e:
                out.append(str(e))
            await producer.begin_transaction()
            await producer.send(topic, b"last")
            await producer.commit_transaction()
            for wrong_state in (producer.commit_transaction, producer.abort_transaction):
                try:
                    await wrong_state()             # no transaction open: aiokafka asserts
                except AssertionError:
                    out.append("AssertionError")
            return out, group

    got = both(loop_kind, program)
    assert got["fastkafka"][0] == got["aiokafka"][0] == [
        {0}, "Can't send messages while not in transaction", [0, 1, 2], "the block fails",
        "AssertionError", "AssertionError"]
    for name, topic in ts.items():
        assert read_all(kafka_broker.bootstrap, topic, 1) == [b"c0", b"c1", b"c2", b"last"], name
        assert committed_offsets(kafka_broker.bootstrap, got[name][1], [(source, 0)]) == \
            {(source, 0): 42}, name


def test_unclosed_producer_and_loop_argument_warn(kafka_broker, loop_kind):
    async def program(cls):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            loop = asyncio.get_running_loop()
            handled = []
            loop.set_exception_handler(lambda loop, ctx: handled.append(ctx["message"]))
            producer = cls(bootstrap_servers=kafka_broker.bootstrap, loop=loop)
            await producer.start()
            del producer
            gc.collect()
            return sorted({(x.category.__name__, str(x.message).split(" ")[0]) for x in w}), handled

    got = both(loop_kind, program)
    for name, (warned, handled) in got.items():
        assert warned == [("DeprecationWarning", "The"), ("ResourceWarning", "Unclosed")], name
        # (aiokafka's loop also reports its sender's tasks destroyed while pending)
        assert handled[0] == "Unclosed AIOKafkaProducer", name


def test_aiokafkas_idiom_on_async_producer_says_to_use_the_layer(kafka_broker, loop_kind):
    """On fastkafka.aio.AsyncProducer, ``await p.send()`` already waits for the delivery: the
    idiom's gather then fails with a TypeError that names the layer (not asyncio's bare one)."""
    from fastkafka.aio import AsyncProducer

    topic = unique_name("aiok-async")
    kafka_broker.create_topic(topic, 1)

    async def program():
        async with AsyncProducer(bootstrap_servers=kafka_broker.bootstrap, linger_ms=0) as p:
            futs = [await p.send(topic, b"v%d" % i) for i in range(3)]
            assert [md.offset for md in futs] == [0, 1, 2]      # each await gave the metadata
            with pytest.raises(TypeError) as ei:
                await asyncio.gather(*futs)
            return str(ei.value)

    text = run(loop_kind, program)
    assert "fastkafka.compat.aiokafka.AIOKafkaProducer" in text and "awaited already" in text


def _unsecured_jws(sub: str) -> str:
    """An unsecured JWS (alg none), as the broker's unsecured OAUTHBEARER validator takes it."""
    def b64(obj) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    now = int(time.time())
    return b64({"alg": "none"}) + "." + b64({"sub": sub, "iat": now - 1, "exp": now + 600}) + "."


class _TokenProvider(aiokafka.abc.AbstractTokenProvider):
    """aiokafka's documented shape: an async token()."""

    async def token(self):
        await asyncio.sleep(0)
        return _unsecured_jws("dave")


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"])
def test_sasl_ssl_with_an_ssl_context(tls_kafka, pki, loop_kind, mechanism):
    """security_protocol="SASL_SSL", an ssl.SSLContext trusting the test CA, and each SASL
    mechanism aiokafka documents (users of tests/tlskafka.py; OAUTHBEARER through an
    AbstractTokenProvider)."""
    from tlskafka import SASL_USERS

    bootstrap = tls_kafka.bootstrap_for("SASLSSL")
    ts = topics(tls_kafka, 1)

    async def program(cls):
        topic = ts["aiokafka" if cls is aiokafka.AIOKafkaProducer else "fastkafka"]
        context = ssl.create_default_context(cafile=pki.ca)
        if mechanism == "OAUTHBEARER":
            auth = {"sasl_oauth_token_provider": _TokenProvider()}
        else:
            user, password = SASL_USERS[mechanism]
            auth = {"sasl_plain_username": user, "sasl_plain_password": password}
        async with cls(bootstrap_servers=bootstrap, security_protocol="SASL_SSL",
                       ssl_context=context, sasl_mechanism=mechanism, **auth) as producer:
            md = await producer.send_and_wait(topic, b"over " + mechanism.encode(), key=b"k")
            return md.offset, md.topic_partition.partition

    got = both(loop_kind, program)
    assert got["fastkafka"] == got["aiokafka"] == (0, 0)
    for name, topic in ts.items():
        back = read_back(tls_kafka.bootstrap, topic, 1, 1)[0]
        assert [(m.key, m.value) for m in back] == [(b"k", b"over " + mechanism.encode())], name


def test_sasl_with_a_wrong_password_fails_alike(tls_kafka, pki, loop_kind):
    ts = topics(tls_kafka, 1)

    async def program(cls):
        topic = ts["aiokafka" if cls is aiokafka.AIOKafkaProducer else "fastkafka"]
        producer = cls(bootstrap_servers=tls_kafka.bootstrap_for("SASLSSL"),
                       security_protocol="SASL_SSL", request_timeout_ms=5000,
                       ssl_context=ssl.create_default_context(cafile=pki.ca),
                       sasl_mechanism="PLAIN", sasl_plain_username="alice",
                       sasl_plain_password="not-the-secret")
        try:
            await producer.start()
            await producer.send_and_wait(topic, b"x")
            return "sent"
        except aiokafka.errors.KafkaError as e:
            assert "not-the-secret" not in str(e) and "not-the-secret" not in repr(e)
            return [k.__name__ for k in (aiokafka.errors.KafkaConnectionError,
                                         aiokafka.errors.AuthenticationFailedError)
                    if isinstance(e, k)]
        finally:
            await producer.stop()

    got = both(loop_kind, program)
    assert got["aiokafka"] != "sent" and got["fastkafka"] != "sent"
    assert got["fastkafka"] == got["aiokafka"] == ["KafkaConnectionError"], got
