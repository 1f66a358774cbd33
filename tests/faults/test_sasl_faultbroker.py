"""SASL against the fault broker: the cases a real broker does not produce on demand (a server that
cannot prove it knows the password, a connection closed mid-handshake, slow answers, a short
session lifetime), plus each mechanism end to end. The broker's SCRAM side is ``scramp``; what the
broker stored is checked record by record (CRC, each value exactly once, in order)."""
from __future__ import annotations

import base64
import time

import pytest
from kafka.record.default_records import DefaultRecordBatch

from faultbroker import FaultBroker, SaslServer, delay, disconnect_before_response, rewrite_response
from fastkafka import Producer
from fastkafka.admin import Admin
from fastkafka.errors import KafkaTimeoutError, SaslAuthenticationError
from fastkafka.protocol import ApiKey

pytestmark = pytest.mark.faultbroker

SECRET = "alice-Secret-1"
USERS = {"PLAIN": {"alice": SECRET}, "SCRAM-SHA-256": {"alice": SECRET},
         "SCRAM-SHA-512": {"alice": SECRET}}
FAST = dict(request_timeout_ms=2000, delivery_timeout_ms=30000, retry_backoff_ms=20,
            reconnect_backoff_ms=20, reconnect_backoff_max_ms=300, linger_ms=2, max_block_ms=10000)


def values_stored(broker, topic, partition=0):
    out = []
    for sb in broker.cluster.batches(topic, partition):
        batch = DefaultRecordBatch(sb.data)
        assert batch.validate_crc()
        out.extend(r.value for r in batch)
    return out


def sasl(mech, user="alice", password=SECRET, **kw):
    if mech == "OAUTHBEARER":
        return dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism=mech, **kw)
    return dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism=mech, sasl_plain_username=user,
                sasl_plain_password=password, **kw)


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_each_mechanism_authenticates_and_delivers(mech):
    calls = []

    def provider():
        calls.append(1)
        return "tok-1", time.time() + 3600

    extra = {"sasl_oauth_token_provider": provider} if mech == "OAUTHBEARER" else {}
    with FaultBroker(sasl=SaslServer(USERS, tokens={"tok-1"})) as b:
        b.create_topic("t", 1)
        with Producer(bootstrap_servers=b.bootstrap, **sasl(mech, **extra), **FAST) as p:
            futs = [p.send("t", b"v%d" % i) for i in range(20)]
            assert [f.get(10).offset for f in futs] == list(range(20))
        assert values_stored(b, "t") == [b"v%d" % i for i in range(20)]
        assert b.protocol_errors == []
        ok = [entry for entry in b.sasl.log if entry[3]]
        assert ok and all(m == mech for _, m, _, _ in ok)
    if mech == "OAUTHBEARER":
        assert len(calls) == 1            # one token for every connection while it is valid


def _assert_fails_fast(p, match, bound=5.0):
    t0 = time.monotonic()
    with pytest.raises(SaslAuthenticationError, match=match) as exc:
        p.send("t", b"x").get(30)
    assert time.monotonic() - t0 < bound, "an authentication failure must not wait max_block_ms"
    assert exc.value.retriable is False
    return exc.value


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password_fails_the_send_promptly_naming_broker_and_mechanism(mech):
    with FaultBroker(sasl=SaslServer(USERS)) as b:
        b.create_topic("t", 1)
        with Producer(bootstrap_servers=b.bootstrap, **sasl(mech, password="WRONG-pass-9"),
                      **{**FAST, "max_block_ms": 30000}) as p:
            err = _assert_fails_fast(p, "SASL_AUTHENTICATION_FAILED")
            text = str(err)
            assert mech in text and b.bootstrap in text and "WRONG-pass-9" not in text
            assert f"node -1 ({b.bootstrap})" in text
            assert (err.mechanism, err.broker_code, err.port) == (mech, 58, b.port)
            assert p.metrics()["net_authentication_failures"] >= 1


def test_unknown_user_fails():
    with FaultBroker(sasl=SaslServer(USERS)) as b:
        b.create_topic("t", 1)
        with Producer(bootstrap_servers=b.bootstrap, **sasl("SCRAM-SHA-256", user="mallory"),
                      **{**FAST, "max_block_ms": 30000}) as p:
            _assert_fails_fast(p, "SCRAM-SHA-256")


def test_unsupported_mechanism_names_what_the_broker_offers():
    with FaultBroker(sasl=SaslServer({"PLAIN": {"alice": SECRET}})) as b:
        b.create_topic("t", 1)
        with Producer(bootstrap_servers=b.bootstrap, **sasl("SCRAM-SHA-512"),
                      **{**FAST, "max_block_ms": 30000}) as p:
            err = _assert_fails_fast(p, r"does not offer SCRAM-SHA-512 \(it offers: PLAIN\)")
            assert f"node -1 ({b.bootstrap})" in str(err)
            assert (err.broker_code, err.mechanism, err.node) == (33, "SCRAM-SHA-512", -1)


def _tamper_signature(resp, header, body):
    data = bytes(resp["auth_bytes"])
    if data.startswith(b"v="):
        sig = bytearray(base64.b64decode(data[2:]))
        sig[-1] ^= 0x40
        resp["auth_bytes"] = b"v=" + base64.b64encode(bytes(sig))
    return resp


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_server_that_cannot_prove_the_password_is_refused(mech):
    with FaultBroker(sasl=SaslServer(USERS)) as b:
        b.create_topic("t", 1)
        b.script.on(ApiKey.SASL_AUTHENTICATE, rewrite_response(_tamper_signature), times=None)
        with Producer(bootstrap_servers=b.bootstrap, **sasl(mech), **{**FAST, "max_block_ms": 30000}) as p:
            _assert_fails_fast(p, "signature is wrong")
            # The server did accept the client's proof: only the client's check refuses it.
            assert [ok for *_, ok in b.sasl.log][:1] == [True]
            assert not b.received(ApiKey.METADATA), "no request may follow a refused server"
            # The I/O thread lives on: once the server behaves, the same producer delivers.
            b.script.clear()
            deadline = time.monotonic() + 10
            while True:
                try:
                    assert p.send("t", b"after").get(10).offset == 0
                    break
                except SaslAuthenticationError:
                    assert time.monotonic() < deadline
                    time.sleep(0.1)
        assert values_stored(b, "t") == [b"after"]


def test_a_send_after_a_failure_tries_again_and_works_once_the_credentials_are_accepted():
    server = SaslServer({"PLAIN": {"alice": "old-password"}})
    with FaultBroker(sasl=server) as b:
        b.create_topic("t", 1)
        with Producer(bootstrap_servers=b.bootstrap, **sasl("PLAIN"),
                      **{**FAST, "max_block_ms": 30000}) as p:
            _assert_fails_fast(p, "SASL_AUTHENTICATION_FAILED")
            _assert_fails_fast(p, "SASL_AUTHENTICATION_FAILED")   # still refused: fails again
            server.users["PLAIN"]["alice"] = SECRET
            t0 = time.monotonic()
            assert p.send("t", b"now").get(10).offset == 0         # no retry loop needed
            assert time.monotonic() - t0 < 5
        assert values_stored(b, "t") == [b"now"]


def test_connection_closed_mid_handshake_is_retried():
    with FaultBroker(sasl=SaslServer(USERS)) as b:
        b.create_topic("t", 1)
        b.script.on(ApiKey.SASL_AUTHENTICATE, disconnect_before_response(), times=2)
        b.script.on(ApiKey.SASL_HANDSHAKE, disconnect_before_response(), times=1)
        with Producer(bootstrap_servers=b.bootstrap, **sasl("SCRAM-SHA-256"), **FAST) as p:
            assert p.send("t", b"x").get(15).offset == 0
        assert not b.script.pending()
        assert values_stored(b, "t") == [b"x"]


def test_slow_sasl_answers_time_out_and_are_retried():
    with FaultBroker(sasl=SaslServer(USERS)) as b:
        b.create_topic("t", 1)
        b.script.on(ApiKey.SASL_AUTHENTICATE, delay(1.5), times=1)
        with Producer(bootstrap_servers=b.bootstrap, **sasl("PLAIN"),
                      **{**FAST, "request_timeout_ms": 500, "delivery_timeout_ms": 20000}) as p:
            t0 = time.monotonic()
            assert p.send("t", b"x").get(15).offset == 0
            assert time.monotonic() - t0 >= 0.5
        assert values_stored(b, "t") == [b"x"]


def test_a_broker_that_never_answers_the_handshake_bounds_the_wait():
    with FaultBroker(sasl=SaslServer(USERS)) as b:
        b.create_topic("t", 1)
        b.script.on(ApiKey.SASL_HANDSHAKE, delay(30), times=None)
        with Producer(bootstrap_servers=b.bootstrap, **sasl("PLAIN"),
                      **{**FAST, "request_timeout_ms": 300, "max_block_ms": 1500}) as p:
            t0 = time.monotonic()
            with pytest.raises(KafkaTimeoutError):
                p.send("t", b"x")
            assert time.monotonic() - t0 < 5
            p.close(0)


def test_queued_records_fail_promptly_when_the_broker_stops_accepting_the_credentials():
    """Authenticated and delivering; then the broker drops the user and the connection: the records
    queued for it fail with the authentication error, long before delivery_timeout_ms."""
    server = SaslServer({"PLAIN": {"alice": SECRET}})
    with FaultBroker(sasl=server) as b:
        b.create_topic("t", 1)
        with Producer(bootstrap_servers=b.bootstrap, **sasl("PLAIN"),
                      **{**FAST, "delivery_timeout_ms": 60000, "linger_ms": 200}) as p:
            assert p.send("t", b"first").get(10).offset == 0
            server.users["PLAIN"] = {}
            b.disconnect_all()
            t0 = time.monotonic()
            futs = [p.send("t", b"q%d" % i) for i in range(5)]
            for f in futs:
                with pytest.raises(SaslAuthenticationError, match="SASL_AUTHENTICATION_FAILED") as exc:
                    f.get(30)
                e = exc.value
                assert (e.mechanism, e.broker_code, e.host, e.port) == ("PLAIN", 58, b.host, b.port)
                assert e.node == b.node_id and f"node {b.node_id}" in str(e)
            assert time.monotonic() - t0 < 10
        assert values_stored(b, "t") == [b"first"]


def test_admin_authentication_failure_is_prompt_and_the_admin_recovers():
    server = SaslServer(USERS)
    with FaultBroker(sasl=server) as b:
        with Admin(bootstrap_servers=b.bootstrap, **sasl("SCRAM-SHA-512", password="nope-nope"),
                   request_timeout_ms=20000, reconnect_backoff_max_ms=300) as a:
            for _ in range(2):    # again: a second call tries again and fails the same way
                t0 = time.monotonic()
                with pytest.raises(SaslAuthenticationError, match="SCRAM-SHA-512") as exc:
                    a.create_topic("t", 1)
                assert time.monotonic() - t0 < 5
                assert exc.value.mechanism == "SCRAM-SHA-512" and exc.value.broker_code == 58
            # The broker now takes that password: the same Admin works without being recreated.
            server.users["SCRAM-SHA-512"]["alice"] = "nope-nope"
            a.create_topic("t", 1)
            assert "t" in a.list_topics()


def test_reauthentication_before_the_session_ends_loses_and_duplicates_nothing():
    """A 1-second session: the broker closes a connection that sends a request after it (as Kafka
    does). The producer reconnects and authenticates before that, between requests, while records
    flow; every record is stored exactly once, in order, and no request hit an expired session."""
    server = SaslServer(USERS, session_lifetime_ms=1000)
    with FaultBroker(sasl=server) as b:
        b.create_topic("t", 1)
        with Producer(bootstrap_servers=b.bootstrap, **sasl("SCRAM-SHA-256"), **FAST) as p:
            futs = []
            t_end = time.monotonic() + 4.0
            i = 0
            while time.monotonic() < t_end:
                futs.append(p.send("t", b"r%d" % i))
                i += 1
                time.sleep(0.003)
            p.flush(20)
            assert [f.get(1).offset for f in futs] == list(range(i))
            assert p.metrics()["net_reauthentications"] >= 3
        assert values_stored(b, "t") == [b"r%d" % k for k in range(i)]
        assert b.protocol_errors == [], "a request reached the broker after its session ended"
        assert sum(1 for *_, ok in server.log if ok) >= 4   # one per connection, >= 3 re-auths
