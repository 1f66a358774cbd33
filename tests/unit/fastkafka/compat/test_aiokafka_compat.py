"""fastkafka.compat.aiokafka.AIOKafkaProducer without a broker: aiokafka's arguments and defaults
(each works, warns as aiokafka does, or is refused naming what to use), its errors (aiokafka's
classes that are also fastkafka's), BatchBuilder's accounting and max_request_size's bound compared
with aiokafka's own code; and fastkafka.aio.AsyncProducer naming the layer when aiokafka's idiom
is used on it."""
from __future__ import annotations

import asyncio
import gc
import pickle
import warnings

import pytest

from fastkafka import errors as fk
from fastkafka.aio import AsyncProducer
from fastkafka.compat import aiokafka as layer
from fastkafka.compat.aiokafka import AIOKafkaProducer
from fastkafka.producer import RecordMetadata as FkRecordMetadata

aiokafka = pytest.importorskip("aiokafka")

CLOSED = "127.0.0.1:1"
CLASSES = {"aiokafka": aiokafka.AIOKafkaProducer, "fastkafka": AIOKafkaProducer}


def run(coro_fn):
    return asyncio.run(coro_fn())


async def _make(cls=AIOKafkaProducer, **kw):
    kw.setdefault("bootstrap_servers", CLOSED)
    return cls(**kw)


def built(**kw):
    """A layer producer made (and closed) on a loop: its fastkafka settings."""
    async def main():
        p = await _make(**kw)
        await p.stop()
        return p._ap.config
    return run(main)


def test_aiokafkas_defaults():
    async def main():
        p = AIOKafkaProducer()
        await p.stop()
        return p
    p = run(main)
    c = p._ap.config
    assert c.bootstrap_servers == [("localhost", 9092)]          # aiokafka's 'localhost'
    assert (c.acks, c.enable_idempotence, c.linger_ms, c.batch_size) == (1, False, 0, 16384)
    assert (c.request_timeout_ms, c.max_block_ms, c.compression_type) == (40000, 40000, "none")
    assert c.client_id.startswith("aiokafka-producer-") and c.partitioner == "murmur2"
    assert p._max_request_size == 1048576


@pytest.mark.parametrize("kw,check", [
    ({"acks": "all"}, ("acks", -1)), ({"acks": 0}, ("acks", 0)), ({"acks": -1}, ("acks", -1)),
    ({"enable_idempotence": True}, ("acks", -1)),
    ({"enable_idempotence": True}, ("enable_idempotence", True)),
    ({"transactional_id": "t"}, ("enable_idempotence", True)),
    ({"transactional_id": "t", "transaction_timeout_ms": 5000}, ("transaction_timeout_ms", 5000)),
    ({"compression_type": "gzip"}, ("compression_type", "gzip")),
    ({"compression_type": "zstd"}, ("compression_type", "zstd")),
    ({"max_batch_size": 1000}, ("batch_size", 1000)), ({"linger_ms": 7}, ("linger_ms", 7)),
    ({"client_id": "app"}, ("client_id", "app")),
    ({"bootstrap_servers": "a,b:1"}, ("bootstrap_servers", [("a", 9092), ("b", 1)])),
    ({"bootstrap_servers": ["a", "b:1"]}, ("bootstrap_servers", [("a", 9092), ("b", 1)])),
    ({"request_timeout_ms": 5000, "linger_ms": 10}, ("delivery_timeout_ms", 10010)),
    ({"metadata_max_age_ms": 1000}, ("metadata_max_age_ms", 1000)),
    ({"retry_backoff_ms": 7}, ("retry_backoff_ms", 7)),
    ({"connections_max_idle_ms": None}, ("connections_max_idle_ms", 2**40)),
    ({"max_request_size": 5000}, ("max_request_size", 5256)),
])
def test_arguments_that_map(kw, check):
    name, value = check
    assert getattr(built(**kw), name) == value


def test_a_custom_partitioner_gets_aiokafkas_arguments():
    seen = []

    def partitioner(key_bytes, all_partitions, available_partitions):
        seen.append((key_bytes, all_partitions, available_partitions))
        return all_partitions[-1]

    fn = built(partitioner=partitioner).partitioner
    assert fn(b"k", 3, [0, 2]) == 2 and seen == [(b"k", [0, 1, 2], [0, 2])]
    # aiokafka's own DefaultPartitioner is fastkafka's murmur2 (the Java client's placement)
    assert built(partitioner=aiokafka.partitioner.DefaultPartitioner()).partitioner == "murmur2"


@pytest.mark.parametrize("kw,message", [
    ({"acks": 2}, "Invalid ACKS parameter"),
    ({"acks": "1"}, "Invalid ACKS parameter"),
    ({"compression_type": "brotli"}, "Invalid compression type!"),
    ({"enable_idempotence": True, "acks": 1}, "acks=1 not supported if enable_idempotence=True"),
    ({"transactional_id": "t", "acks": 0}, "acks=0 not supported if enable_idempotence=True"),
    ({"security_protocol": "TLS"}, "`security_protocol` should be SSL or PLAINTEXT"),
    ({"security_protocol": "SSL"}, "`ssl_context` is mandatory if security_protocol=='SSL'"),
    ({"security_protocol": "SASL_SSL", "sasl_plain_username": "u", "sasl_plain_password": "p"},
     "`ssl_context` is mandatory if security_protocol=='SSL'"),
    ({"security_protocol": "SASL_PLAINTEXT"},
     "sasl_plain_username and sasl_plain_password required for PLAIN sasl"),
    ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "KERBEROS"},
     "only `PLAIN`, `GSSAPI`, `SCRAM-SHA-256`, `SCRAM-SHA-512` and `OAUTHBEARER`sasl_mechanism "
     "are supported at the moment"),
])
@pytest.mark.parametrize("impl", CLASSES)
def test_bad_arguments_raise_aiokafkas_value_errors(impl, kw, message):
    async def main():
        with pytest.raises(ValueError) as ei:
            await _make(CLASSES[impl], **kw)
        return str(ei.value)
    assert run(main) == message


@pytest.mark.parametrize("kw,names", [
    ({"sasl_kerberos_service_name": "other"}, "sasl_kerberos_service_name"),
    ({"partitioner": 3}, "partitioner must be a callable"),
    ({"max_request_size": 0}, "max_request_size"),
])
def test_arguments_refused_name_what_to_use(kw, names):
    async def main():
        with pytest.raises(fk.ConfigError) as ei:
            await _make(**kw)
        return str(ei.value)
    assert names in run(main)


def test_gssapi_takes_aiokafkas_kerberos_names():
    cfg = built(security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI",
                sasl_kerberos_service_name="kafka2", sasl_kerberos_domain_name="b.example")
    assert cfg.sasl_mechanism == "GSSAPI"
    assert (cfg.sasl_kerberos_service_name, cfg.sasl_kerberos_domain_name) == ("kafka2", "b.example")


def test_ssl_context_is_the_producers():
    import ssl

    ctx = ssl.create_default_context()
    c = built(security_protocol="SSL", ssl_context=ctx)
    assert c.security_protocol == "SSL" and c.ssl_context is ctx


def test_sasl_settings_reach_the_producer_and_the_password_no_repr():
    c = built(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
              sasl_plain_username="u", sasl_plain_password="s3cret-pw")
    assert (c.sasl_mechanism, c.sasl_plain_username, c.sasl_plain_password) == \
        ("SCRAM-SHA-256", "u", "s3cret-pw")
    assert "s3cret-pw" not in repr(c)

    async def main():
        p = await _make(security_protocol="SASL_PLAINTEXT", sasl_plain_username="u",
                        sasl_plain_password="s3cret-pw")
        text = repr(p)
        await p.stop()
        return text, p._ap.config.sasl_mechanism
    text, mech = run(main)
    assert "s3cret-pw" not in text and mech == "PLAIN"     # aiokafka's default mechanism


def test_oauth_token_provider_runs_its_coroutine_on_the_producers_loop():
    class Provider(aiokafka.abc.AbstractTokenProvider):
        async def token(self):
            return "tok-" + type(asyncio.get_running_loop()).__name__

    async def main():
        p = await _make(security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                        sasl_oauth_token_provider=Provider())
        await p._ap.start()
        loop = asyncio.get_running_loop()
        # the I/O thread's call: a thread other than the loop's
        token, expiry = await loop.run_in_executor(None, p._ap.config.sasl_oauth_token_provider)
        await p.stop()
        return token, type(loop).__name__
    token, loop_name = run(main)
    assert token == f"tok-{loop_name}"

    class WithExtensions(Provider):
        def extensions(self):
            return {"traceId": "x"}

    async def sent():
        from fastkafka._net.sasl import SaslSettings

        p = await _make(security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                        sasl_oauth_token_provider=WithExtensions())
        extensions = SaslSettings(p._ap.config).extensions()
        await p.stop()
        return extensions
    assert run(sent) == {"traceId": "x"}      # sent with the token, as aiokafka sends them


@pytest.mark.parametrize("impl", CLASSES)
def test_loop_and_api_version_warn_as_aiokafka(impl):
    async def main():
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            p = await _make(CLASSES[impl], loop=asyncio.get_running_loop(), api_version="2.6")
            await p.stop()
        return [(x.category, str(x.message)) for x in w if x.category is DeprecationWarning]
    assert run(main) == [
        (DeprecationWarning, "The `loop` parameter has been deprecated since 0.7.1 and will be "
                             "removed in a future release."),
        (DeprecationWarning, "The `api_version` parameter has been deprecated since 0.13.0. It is "
                             "now a no-op and will be removed in a future release. ")]


@pytest.mark.parametrize("impl", CLASSES)
def test_a_producer_never_stopped_warns(impl):
    async def main():
        handled = []
        asyncio.get_running_loop().set_exception_handler(lambda _l, ctx: handled.append(ctx))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            p = await _make(CLASSES[impl])
            del p
            gc.collect()
            stopped = await _make(CLASSES[impl])
            await stopped.stop()
            del stopped
            gc.collect()
        return ([str(x.message).split(" <")[0] for x in w if x.category is ResourceWarning],
                [c["message"] for c in handled])
    warned, handled = run(main)
    assert warned == ["Unclosed AIOKafkaProducer"] and handled == ["Unclosed AIOKafkaProducer"]


# -- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize("fk_error,peer", [
    (fk.DeliveryTimeoutError("expired"), "KafkaTimeoutError"),
    (fk.BufferExhaustedError("full"), "KafkaTimeoutError"),
    (fk.RecordTooLargeError("big"), "MessageSizeTooLargeError"),
    (fk.ProducerClosedError("closed"), "ProducerClosed"),
    (fk.DisconnectedError("gone"), "KafkaConnectionError"),
    (fk.IllegalStateError("state"), "IllegalStateError"),
    (fk.error_for_code(3), "UnknownTopicOrPartitionError"),
    (fk.error_for_code(10), "MessageSizeTooLargeError"),
    (fk.error_for_code(29), "TopicAuthorizationFailedError"),
    (fk.error_for_code(90), "ProducerFenced"),
])
def test_fastkafka_errors_become_aiokafkas_classes_and_stay_fastkafkas(fk_error, peer):
    e = layer._convert(fk_error)
    assert isinstance(e, getattr(aiokafka.errors, peer)) and isinstance(e, type(fk_error))
    assert type(e).__name__ == peer and e.args == fk_error.args
    assert getattr(e, "code", None) == fk_error.code
    if isinstance(e, aiokafka.errors.BrokerResponseError):
        assert str(e) == f"[Error {e.errno}] {peer}: {fk_error.args[0]}"
    elif isinstance(e, aiokafka.errors.KafkaError):
        assert str(e) == f"{peer}: {fk_error.args[0]}"
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is type(e) and again.args == e.args


def test_type_and_config_errors_are_left_as_they_are():
    for e in (fk.InvalidRecordError("bad"), fk.ConfigError("bad"), ValueError("x")):
        assert layer._convert(e) is e


def test_layer_module_names_the_peer_classes():
    assert layer.errors is aiokafka.errors
    assert layer.RecordMetadata is aiokafka.structs.RecordMetadata
    assert layer.TopicPartition is aiokafka.structs.TopicPartition


# -- record sizes as aiokafka counts them --------------------------------------------------------
RECORDS = [
    (b"k", b"v" * 10, None, []), (None, b"v" * 300, 1_700_000_000_000, [("h", b"x")]),
    (b"key" * 50, None, 1_700_000_000_500, [("a", None), ("bé", b"y" * 200)]),
    (b"k2", b"v" * 5000, 1_699_999_999_000, []),
]


def test_batch_builder_counts_as_aiokafkas():
    from aiokafka.producer.message_accumulator import BatchBuilder as PeerBuilder

    for batch_size in (200, 1000, 16384):
        ours, theirs = layer.BatchBuilder(batch_size), PeerBuilder(batch_size, 0)
        for key, value, ts, headers in RECORDS * 3:
            a = ours.append(key=key, value=value, timestamp=ts or 1_700_000_000_001,
                            headers=headers)
            b = theirs.append(key=key, value=value, timestamp=ts or 1_700_000_000_001,
                              headers=headers)
            assert (a is None) == (b is None), batch_size
            if a is not None:
                assert (a.offset, a.size, a.timestamp, a.crc) == \
                    (b.offset, b.size, b.timestamp, b.crc)
            assert (ours.record_count(), ours.size(), ours.closed()) == \
                (theirs.record_count(), theirs.size(), theirs.closed())


def test_batch_builder_serializes_and_refuses_what_aiokafkas_refuses():
    b = layer.BatchBuilder(16384, key_serializer=str.encode, value_serializer=str.encode)
    md = b.append(key="k", value="v", timestamp=None)
    assert md.offset == 0 and isinstance(md.timestamp, int) and b._records[0][:2] == (b"k", b"v")
    with pytest.raises(TypeError):
        layer.BatchBuilder(16384).append(key=None, value="str", timestamp=None)
    with pytest.raises(TypeError):
        layer.BatchBuilder(16384).append(key=None, value=b"v", timestamp=1.5)
    b.close()
    assert b.append(key="k", value="v", timestamp=None) is None and b.closed()


def test_max_request_size_bound_is_aiokafkas_estimate():
    from aiokafka.record.default_records import DefaultRecordBatchBuilder as Peer

    async def main():
        p = await _make(max_request_size=1500)
        out = []
        for key, value, _ts, headers in RECORDS:
            expected = Peer.estimate_size_in_bytes(key, value, headers)
            try:
                p._check_size(key, value, headers or None)
                out.append((expected, "ok"))
            except aiokafka.errors.MessageSizeTooLargeError as e:
                assert isinstance(e, fk.RecordTooLargeError)
                out.append((expected, str(e).split(" bytes")[0]))
        await p.stop()
        return out
    for expected, outcome in run(main):
        assert outcome == ("ok" if expected <= 1500 else
                           f"[Error 10] MessageSizeTooLargeError: The message is {expected}")


def test_varint_sizes():
    from aiokafka.util import NO_EXTENSIONS  # noqa: F401 - aiokafka importable
    from aiokafka.record.util import size_of_varint

    for v in (0, 1, 63, 64, 8191, 8192, -1, -64, -65, 2**31, -(2**31), 2**62):
        assert layer._varint_size(v) == size_of_varint(v), v


# -- AsyncProducer and aiokafka's idiom ------------------------------------------------------------
def test_awaiting_a_record_metadata_names_the_aiokafka_layer():
    md = FkRecordMetadata("t", 0, 5, 1000)

    async def gather_them():
        await asyncio.gather(md)

    with pytest.raises(TypeError) as ei:
        asyncio.run(gather_them())
    text = str(ei.value)
    assert "fastkafka.compat.aiokafka.AIOKafkaProducer" in text and "gather" in text

    async def await_it():
        await md

    with pytest.raises(TypeError, match="already"):
        asyncio.run(await_it())


def test_async_producer_send_returns_the_future_itself():
    async def main():
        p = AsyncProducer(bootstrap_servers=CLOSED, max_block_ms=50)
        fut = p.send("t", b"v")
        assert asyncio.isfuture(fut) and not fut.done()
        with pytest.raises(fk.KafkaTimeoutError):
            await fut
        await p.close(0)
    asyncio.run(main())


def test_without_aiokafka_the_layers_own_classes_are_raised():
    """aiokafka not installed (hidden here): the layer's classes of aiokafka's names, each a
    fastkafka class; RecordMetadata and TopicPartition named tuples with aiokafka's fields."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import asyncio, sys
        sys.modules["aiokafka"] = None          # import aiokafka -> ImportError
        from fastkafka import errors as fk
        from fastkafka.compat import aiokafka as layer
        from fastkafka.compat._aiokafka_errors import _OwnErrors, _convert
        assert layer.errors is _OwnErrors
        e = _convert(fk.DeliveryTimeoutError("expired"))
        assert isinstance(e, _OwnErrors.KafkaTimeoutError) and isinstance(e, fk.DeliveryTimeoutError)
        e = _convert(fk.error_for_code(3))
        assert type(e) is type(fk.error_for_code(3))      # broker codes: fastkafka's own class
        assert layer.RecordMetadata._fields == ("topic", "partition", "topic_partition", "offset",
                                                "timestamp", "timestamp_type", "log_start_offset")
        assert layer.TopicPartition("t", 1).partition == 1

        async def main():
            p = layer.AIOKafkaProducer(bootstrap_servers="127.0.0.1:1", max_request_size=100)
            try:
                p._check_size(None, b"x" * 200, None)       # what send() checks
            except _OwnErrors.MessageSizeTooLargeError as err:
                assert isinstance(err, fk.RecordTooLargeError)
                print("OK", str(err).split(":")[0])
            await p.stop()
        asyncio.run(main())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("OK "), out.stdout


def test_send_waits_for_buffer_memory_through_async_producers_send(caplog):
    """No buffer memory at once: produce() raises BufferExhaustedError and the record goes through
    AsyncProducer.send(), which waits for room on the loop; its outcome still resolves the
    layer's future (metadata or aiokafka's error). A failure nobody awaits is logged."""
    async def main():
        p = await _make()
        p._counts["t"] = 2                      # metadata known: no wait for it
        loop = asyncio.get_running_loop()
        inners = []

        def produce(*args):
            raise fk.BufferExhaustedError("full")

        def send(*args):
            inners.append((args, loop.create_future()))
            return inners[-1][1]

        p._ap.produce, p._ap.send = produce, send
        ok = await p.send("t", b"v", partition=1, timestamp_ms=1234)
        bad = await p.send("t", b"w")
        dropped = await p.send("t", b"x")
        dropped.cancel()
        assert not ok.done() and [a[:4] for a, _ in inners][0] == ("t", b"v", None, 1)
        inners[0][1].set_result(FkRecordMetadata("t", 1, 7, 1234))
        inners[1][1].set_exception(fk.DeliveryTimeoutError("expired"))
        inners[2][1].set_exception(fk.DeliveryTimeoutError("expired too"))
        md = await ok
        with pytest.raises(aiokafka.errors.KafkaTimeoutError):
            await bad
        await asyncio.sleep(0)
        p._closed = True                        # (the fakes cannot close a producer)
        await p._ap.close(0)
        return md
    md = run(main)
    assert md == aiokafka.structs.RecordMetadata("t", 1, aiokafka.structs.TopicPartition("t", 1),
                                                 7, 1234, 0, None)
    assert any("expired too" in r.getMessage() for r in caplog.records)
