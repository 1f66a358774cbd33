"""TLS (security_protocol=SSL) against Apache Kafka's own SSL listeners, and against tansu and
noida-db behind stunnel.

The module-scoped ``tls_kafka`` fixture (tests/conftest.py, listeners in tests/tlskafka.py) is one
Kafka node (one JVM) with a PLAINTEXT listener and SSL listeners, all with PEM key and trust stores
made by the ``pki`` fixture (``fastkafka_tools.tlsrig``): ``SSL`` (server certificate for 127.0.0.1 /
localhost), ``MTLS`` (the same, client certificate required), ``EXPIRED`` (an expired server
certificate), ``WRONGHOST`` (a certificate for another host) and ``SASLSSL``. Every record written
over TLS is read back through the same TLS endpoint by confluent-kafka configured for TLS, CRCs
checked. Each failure case: a typed error naming the broker, within a bounded time, the I/O thread
alive.
"""
from __future__ import annotations

import socket
import ssl
import threading
import time

import pytest

from brokers import read_back, unique_name
from fastkafka import KafkaTimeoutError, Producer
from fastkafka.admin import Admin
from fastkafka.errors import TlsAuthenticationError
from stunnel import STUNNEL_KINDS, broker_behind_stunnel
from tlskafka import SASL_USERS, tls_reader_config

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]

def sender_alive(p: Producer) -> bool:
    thread = getattr(p._sender, "_thread", None)
    return thread is not None and thread.is_alive()


def produce_and_check(kc, listener, producer_config, reader_config, n_send=1500, n_batch=4000):
    """Write keyed records with headers through send() and a send_batch() over ``listener``; read
    them all back through the same listener with confluent-kafka (TLS, CRC checks)."""
    topic = unique_name("tls")
    kc.create_topic(topic, 3)
    bootstrap = kc.bootstrap_for(listener)
    with Producer(bootstrap_servers=bootstrap, linger_ms=2, **producer_config) as p:
        futs = [p.send(topic, value=b"v%06d" % i + b"x" * (i % 300), key=b"k%d" % (i % 17),
                       headers=[("h", b"%d" % i)]) for i in range(n_send)]
        values = [b"b%06d" % i + b"y" * (i % 1000) for i in range(n_batch)]
        keys = [b"bk%d" % (i % 29) for i in range(n_batch)]
        batch = p.send_batch(topic, values, keys=keys)
        offsets = {(md.partition, md.offset) for md in (f.get(timeout=60) for f in futs)}
        assert batch.get(timeout=60) == n_batch
        assert p.flush(30) == 0
    assert len(offsets) == n_send
    got = read_back(bootstrap, topic, 3, n_send + n_batch, timeout=60, extra_config=reader_config)
    msgs = [m for part in got.values() for m in part]
    assert len(msgs) == n_send + n_batch
    sent = {(b"k%d" % (i % 17), b"v%06d" % i + b"x" * (i % 300), (("h", b"%d" % i),))
            for i in range(n_send)}
    sent |= {(keys[i], values[i], ()) for i in range(n_batch)}
    assert {(m.key, m.value, tuple(m.headers)) for m in msgs} == sent
    return topic


# ---- the happy paths ---------------------------------------------------------------------------
def test_kafka_tls_send_and_send_batch_are_read_back_over_tls(tls_kafka, pki):
    produce_and_check(tls_kafka, "SSL", {"security_protocol": "SSL", "ssl_cafile": pki.ca},
                      tls_reader_config(pki))


def test_kafka_tls_dotted_keys_and_a_ready_ssl_context(tls_kafka, pki):
    produce_and_check(tls_kafka, "SSL", {"security.protocol": "ssl", "ssl.ca.location": pki.ca,
                                         "ssl.endpoint.identification.algorithm": "https"},
                      tls_reader_config(pki), n_send=300, n_batch=700)
    ctx = ssl.create_default_context(cafile=pki.ca)
    produce_and_check(tls_kafka, "SSL", {"security_protocol": "SSL", "ssl_context": ctx,
                                         # the context wins over the file settings
                                         "ssl_cafile": pki.other_ca},
                      tls_reader_config(pki), n_send=300, n_batch=700)


def test_kafka_tls_mutual_tls_with_an_encrypted_client_key(tls_kafka, pki):
    produce_and_check(
        tls_kafka, "MTLS",
        {"security_protocol": "SSL", "ssl_cafile": pki.ca, "ssl_certfile": pki.client_cert,
         "ssl_keyfile": pki.client_key_encrypted, "ssl_password": pki.client_key_password},
        tls_reader_config(pki, **{"ssl.certificate.location": pki.client_cert,
                                  "ssl.key.location": pki.client_key}),
        n_send=500, n_batch=1000)


def test_kafka_tls_admin(tls_kafka, pki):
    topic = unique_name("tls-admin")
    with Admin(bootstrap_servers=tls_kafka.bootstrap_for("SSL"), security_protocol="SSL",
               ssl_cafile=pki.ca) as admin:
        admin.create_topics({topic: 2}, replication_factor=1, timeout_ms=30000)
        deadline = time.monotonic() + 30
        while True:
            parts = admin.describe_topic(topic, timeout_ms=10000)
            if len(parts) == 2 and all(p.leader >= 0 for p in parts):
                break
            assert time.monotonic() < deadline
            time.sleep(0.1)
        cluster = admin.describe_cluster(timeout_ms=10000)
        # Over the SSL listener, metadata names the brokers' SSL addresses.
        assert {f"{b.host}:{b.port}" for b in cluster.brokers.values()} == {tls_kafka.bootstrap_for("SSL")}


def test_kafka_tls_hostname_check_off_accepts_a_certificate_for_another_host(tls_kafka, pki):
    produce_and_check(tls_kafka, "WRONGHOST",
                      {"security_protocol": "SSL", "ssl_cafile": pki.ca, "ssl_check_hostname": False},
                      tls_reader_config(pki, **{"ssl.endpoint.identification.algorithm": "none"}),
                      n_send=300, n_batch=700)


def test_kafka_tls_large_records_cross_many_tls_records(tls_kafka, pki):
    """Requests and responses far larger than one TLS record (16 KiB) and than one read chunk."""
    topic = unique_name("tls-big")
    tls_kafka.create_topic(topic, 1)
    bootstrap = tls_kafka.bootstrap_for("SSL")
    values = [bytes([i % 251]) * (300_000 + i) for i in range(12)]
    with Producer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_cafile=pki.ca,
                  max_request_size=4_000_000, batch_size=1_000_000) as p:
        assert p.send_batch(topic, values).get(timeout=60) == len(values)
    got = read_back(bootstrap, topic, 1, len(values), timeout=60, extra_config=tls_reader_config(pki))
    assert [m.value for m in got[0]] == values


class _NoPipe:
    """Stands in for transport.TlsPipe where it cannot attach: the SSLObject's own calls carry the
    data (the fallback of fastkafka._net.tls)."""

    @staticmethod
    def attach(sslobj):
        return None


@pytest.mark.parametrize("data_path", ["tls_pipe", "sslobject"])
def test_kafka_tls_both_data_paths_carry_small_and_large_records(tls_kafka, pki, monkeypatch, caplog,
                                                                 data_path):
    """The TLS data phase has two paths, the compiled TlsPipe and the SSLObject fallback used
    where the pipe cannot attach: both deliver records small and far larger than a TLS record, and
    metrics() and a DEBUG log line say which one each connection took."""
    import logging

    import fastkafka._net.tls

    caplog.set_level(logging.DEBUG, logger="fastkafka")
    if data_path == "sslobject":
        monkeypatch.setattr(fastkafka._net.tls, "TlsPipe", _NoPipe)
    topic = unique_name("tls-path")
    tls_kafka.create_topic(topic, 2)
    bootstrap = tls_kafka.bootstrap_for("SSL")
    small = [b"s%d" % i for i in range(3000)]
    large = [bytes([i % 251]) * (100_000 + i) for i in range(6)]
    with Producer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_cafile=pki.ca,
                  max_request_size=2_000_000, batch_size=1_000_000) as p:
        futures = [p.send(topic, v, partition=0) for v in small]
        assert p.send_batch(topic, large, partition=1).get(timeout=60) == len(large)
        assert [f.get(timeout=60).offset for f in futures] == list(range(len(small)))
        pipes = [c.tls.pipe for c in p._client.connections.values() if c.tls is not None]
        assert pipes and all((pipe is None) == (data_path == "sslobject") for pipe in pipes)
        m = p.metrics()
        expected = "ssl_module" if data_path == "sslobject" else "openssl_direct"
        assert m["tls_data_path"] == expected
        assert m[f"net_tls_{expected}"] >= len(pipes)
        other = "openssl_direct" if expected == "ssl_module" else "ssl_module"
        assert m[f"net_tls_{other}"] == 0
    lines = [r.getMessage() for r in caplog.records if "TLS handshake with node" in r.getMessage()]
    assert lines and all(f"data path: {expected}" in line for line in lines)
    got = read_back(bootstrap, topic, 2, len(small) + len(large), timeout=60,
                    extra_config=tls_reader_config(pki))
    assert [m.value for m in got[0]] == small and [m.value for m in got[1]] == large


def test_kafka_tls_batches_go_without_the_gil_and_read_back_exactly_once_in_order(tls_kafka, pki):
    """On the OpenSSL-direct data phase the I/O thread's GIL-free turn encrypts and writes the
    steady state's Produce requests and reads and decrypts their answers: its counters grow, and
    confluent-kafka reads every record back over TLS once, in order, at the offset its future
    reported."""
    topic = unique_name("tls-gilfree")
    tls_kafka.create_topic(topic, 3)
    bootstrap = tls_kafka.bootstrap_for("SSL")
    futs, sent = [], []
    with Producer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_cafile=pki.ca,
                  linger_ms=5, batch_size=16_384) as p:
        for part in range(3):                  # connection, producer id, a first answer each
            sent.append((part, b"warm-%d" % part))
            futs.append(p.send(topic, sent[-1][1], partition=part))
        for f in futs:
            f.get(timeout=60)
        before = p.metrics()
        for w in range(30):                    # send() in waves: linger deadlines in the wait
            for i in range(100):
                v = b"w%02d-%04d" % (w, i) + b"x" * (i % 200)
                sent.append(((w + i) % 3, v))
                futs.append(p.send(topic, v, partition=(w + i) % 3))
            time.sleep(0.01)
        for w in range(6):                     # send_batch() in waves
            values = [b"b%02d-%04d" % (w, i) for i in range(500)]
            part = w % 3
            assert p.send_batch(topic, values, partition=part).get(timeout=60) == len(values)
            sent += [(part, v) for v in values]
            time.sleep(0.01)
        mds = [f.get(timeout=60) for f in futs]
        assert p.flush(30) == 0
        m = p.metrics()
        pipes = [c.tls.pipe for c in p._client.connections.values() if c.tls is not None]
    assert pipes and all(pipe is not None for pipe in pipes)
    assert m["tls_data_path"] == "openssl_direct"
    assert m["gil_free_requests"] - before["gil_free_requests"] >= 10, m
    # most of the steady state's requests, not a few
    assert (m["gil_free_requests"] - before["gil_free_requests"]
            >= (m["produce_requests"] - before["produce_requests"]) // 2), m
    assert m["gil_free_answers"] - before["gil_free_answers"] >= 10, m
    assert m["io_gil_free_turns"] - before["io_gil_free_turns"] >= 10, m
    assert m["errors"] == 0
    got = read_back(bootstrap, topic, 3, len(sent), timeout=60, extra_config=tls_reader_config(pki))
    for part in range(3):
        assert [msg.value for msg in got[part]] == [v for q, v in sent if q == part], part
    where = {msg.value: (part, msg.offset) for part in range(3) for msg in got[part]}
    assert all(where[v] == (md.partition, md.offset)
               for (_, v), md in zip(sent, mds)), "an offset reported is not where the record is"


def test_kafka_tls_ssl_module_fallback_stays_on_the_gil_turn(tls_kafka, pki, monkeypatch):
    """Without a TlsPipe (the ssl module's SSLObject carries the data) nothing goes without the
    GIL, and everything is delivered."""
    import fastkafka._net.tls

    monkeypatch.setattr(fastkafka._net.tls, "TlsPipe", _NoPipe)
    topic = unique_name("tls-fallback")
    tls_kafka.create_topic(topic, 1)
    bootstrap = tls_kafka.bootstrap_for("SSL")
    with Producer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_cafile=pki.ca,
                  linger_ms=2) as p:
        futs = []
        for w in range(10):
            futs += [p.send(topic, b"f%02d-%03d" % (w, i)) for i in range(50)]
            time.sleep(0.01)
        assert [f.get(timeout=60).offset for f in futs] == list(range(len(futs)))
        m = p.metrics()
    assert m["tls_data_path"] == "ssl_module"
    assert m["gil_free_requests"] == 0 and m["gil_free_answers"] == 0


# ---- failures: typed, bounded, the I/O thread alive ---------------------------------------------
def expect_send_error(bootstrap, config, error_type, *, within: float, max_block_ms=60_000):
    """send() on a producer configured with ``config`` raises ``error_type`` within ``within``
    seconds; the I/O thread is still alive afterwards and close() is bounded. Returns the error."""
    p = Producer(bootstrap_servers=bootstrap, max_block_ms=max_block_ms, **config)
    try:
        t0 = time.monotonic()
        with pytest.raises(error_type) as exc:
            p.send(unique_name("never"), b"v").get(timeout=within + 5)
        elapsed = time.monotonic() - t0
        assert elapsed < within, f"{error_type.__name__} after {elapsed:.1f}s"
        assert sender_alive(p)
    finally:
        t0 = time.monotonic()
        p.close(5)
        assert time.monotonic() - t0 < 8
    return exc.value


def test_kafka_tls_untrusted_ca_is_a_typed_error_at_once(tls_kafka, pki):
    bootstrap = tls_kafka.bootstrap_for("SSL")
    err = expect_send_error(bootstrap, {"security_protocol": "SSL", "ssl_cafile": pki.other_ca},
                            TlsAuthenticationError, within=10)
    msg = str(err)
    assert bootstrap in msg and "node -1" in msg
    assert "certificate" in msg and "not in ssl_cafile" in msg
    assert not err.retriable


def test_kafka_tls_hostname_mismatch_is_a_typed_error(tls_kafka, pki):
    bootstrap = tls_kafka.bootstrap_for("WRONGHOST")
    err = expect_send_error(bootstrap, {"security_protocol": "SSL", "ssl_cafile": pki.ca},
                            TlsAuthenticationError, within=10)
    assert bootstrap in str(err) and "another host" in str(err)
    assert "mismatch" in str(err).lower()


def test_kafka_tls_expired_server_certificate_is_a_typed_error(tls_kafka, pki):
    bootstrap = tls_kafka.bootstrap_for("EXPIRED")
    err = expect_send_error(bootstrap, {"security_protocol": "SSL", "ssl_cafile": pki.ca},
                            TlsAuthenticationError, within=10)
    assert bootstrap in str(err) and "expired" in str(err)


def test_kafka_tls_mutual_tls_without_a_client_certificate_is_a_typed_error(tls_kafka, pki):
    bootstrap = tls_kafka.bootstrap_for("MTLS")
    err = expect_send_error(bootstrap, {"security_protocol": "SSL", "ssl_cafile": pki.ca},
                            TlsAuthenticationError, within=10)
    assert bootstrap in str(err) and "client certificate" in str(err)


def test_kafka_tls_client_on_a_plaintext_port_is_a_clear_bounded_error(tls_kafka, pki):
    bootstrap = tls_kafka.bootstrap_for("PLAINTEXT")
    err = expect_send_error(bootstrap, {"security_protocol": "SSL", "ssl_cafile": pki.ca},
                            KafkaTimeoutError, within=9, max_block_ms=4000)
    msg = str(err)
    assert bootstrap in msg and "TLS handshake" in msg and "is this a TLS listener" in msg


def test_kafka_plaintext_client_on_a_tls_port_is_a_clear_bounded_error(tls_kafka, pki):
    bootstrap = tls_kafka.bootstrap_for("SSL")
    err = expect_send_error(bootstrap, {}, KafkaTimeoutError, within=9, max_block_ms=4000)
    msg = str(err)
    assert bootstrap in msg and "is this a TLS port?" in msg


def test_kafka_tls_admin_with_an_untrusted_ca_fails_at_once(tls_kafka, pki):
    t0 = time.monotonic()
    with Admin(bootstrap_servers=tls_kafka.bootstrap_for("SSL"), security_protocol="SSL",
               ssl_cafile=pki.other_ca) as admin:
        with pytest.raises(TlsAuthenticationError, match="not accepted"):
            admin.describe_cluster(timeout_ms=30000)
    assert time.monotonic() - t0 < 10


def test_tls_handshake_is_bounded_by_the_connection_setup_timeout(pki):
    """A listener that accepts and never answers: the TLS handshake ends after
    socket_connection_setup_timeout_ms with an error naming the address."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    accepted = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(srv.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        bootstrap = "127.0.0.1:%d" % srv.getsockname()[1]
        err = expect_send_error(bootstrap, {"security_protocol": "SSL", "ssl_cafile": pki.ca,
                                            "socket_connection_setup_timeout_ms": 500},
                                KafkaTimeoutError, within=6, max_block_ms=2500)
        assert bootstrap in str(err) and "socket_connection_setup_timeout_ms=500" in str(err)
        assert accepted, "the client never connected"
    finally:
        stop.set()
        t.join()
        srv.close()
        for c in accepted:
            c.close()


# ---- stunnel (Debian's stunnel4, installed by scripts/setup.sh) in front of tansu and noida-db ----
@pytest.fixture(scope="module", params=STUNNEL_KINDS)
def stunnel_broker(request, pki, tmp_path_factory):
    """tansu or noida-db behind stunnel (tests/stunnel.py): its TLS bootstrap address."""
    with broker_behind_stunnel(request.param, [pki.server],
                               tmp_path_factory.mktemp(f"stunnel-{request.param}")) as (address,):
        yield address


def test_stunnel_records_are_read_back_over_tls(stunnel_broker, pki):
    bootstrap = stunnel_broker
    topic = unique_name("tls-stunnel")
    tls = {"security_protocol": "SSL", "ssl_cafile": pki.ca}
    with Admin(bootstrap_servers=bootstrap, **tls) as admin:
        admin.create_topics({topic: 2}, replication_factor=1, timeout_ms=30000)
        # Every broker metadata names is the TLS endpoint (noida-db's through the rewriting proxy).
        cluster = admin.describe_cluster(timeout_ms=10000)
        assert {f"{b.host}:{b.port}" for b in cluster.brokers.values()} == {bootstrap}
    n_send, n_batch = 800, 2000
    with Producer(bootstrap_servers=bootstrap, linger_ms=2, **tls) as p:
        futs = [p.send(topic, value=b"s%05d" % i, key=b"k%d" % (i % 7)) for i in range(n_send)]
        values = [b"b%05d" % i + b"z" * (i % 500) for i in range(n_batch)]
        assert p.send_batch(topic, values).get(timeout=60) == n_batch
        for f in futs:
            f.get(timeout=60)
    got = read_back(bootstrap, topic, 2, n_send + n_batch, timeout=60,
                    extra_config=tls_reader_config(pki))
    msgs = [m for part in got.values() for m in part]
    assert sorted(m.value for m in msgs) == sorted([b"s%05d" % i for i in range(n_send)] + values)


def test_stunnel_untrusted_ca_is_a_typed_error(stunnel_broker, pki):
    err = expect_send_error(stunnel_broker, {"security_protocol": "SSL", "ssl_cafile": pki.other_ca},
                            TlsAuthenticationError, within=10)
    assert stunnel_broker in str(err)


@pytest.mark.parametrize("acks", [0, 1])
def test_kafka_tls_acks_0_and_1(tls_kafka, pki, acks):
    """acks=0 requests complete once their ciphertext is written; close() confirms them over TLS."""
    topic = unique_name(f"tls-acks{acks}")
    tls_kafka.create_topic(topic, 2)
    bootstrap = tls_kafka.bootstrap_for("SSL")
    n = 3000
    with Producer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_cafile=pki.ca,
                  acks=acks) as p:
        futs = [p.send(topic, b"a%05d" % i) for i in range(n)]
        mds = [f.get(timeout=60) for f in futs]
    if acks == 0:
        assert all(md.offset == -1 for md in mds)
    got = read_back(bootstrap, topic, 2, n, timeout=60, extra_config=tls_reader_config(pki))
    assert sorted(m.value for m in got[0] + got[1]) == [b"a%05d" % i for i in range(n)]


# ---- SASL over TLS (security_protocol SASL_SSL) -------------------------------------------------
@pytest.mark.parametrize("mechanism", sorted(SASL_USERS))
def test_kafka_sasl_ssl_records_are_read_back_over_sasl_ssl(tls_kafka, pki, mechanism):
    user, password = SASL_USERS[mechanism]
    produce_and_check(
        tls_kafka, "SASLSSL",
        {"security_protocol": "SASL_SSL", "ssl_cafile": pki.ca, "sasl_mechanism": mechanism,
         "sasl_plain_username": user, "sasl_plain_password": password},
        tls_reader_config(pki, **{"security.protocol": "SASL_SSL", "sasl.mechanisms": mechanism,
                                  "sasl.username": user, "sasl.password": password}),
        n_send=300, n_batch=700)


def test_kafka_sasl_ssl_untrusted_ca_fails_before_any_credential_is_sent(tls_kafka, pki):
    bootstrap = tls_kafka.bootstrap_for("SASLSSL")
    err = expect_send_error(bootstrap, {"security_protocol": "SASL_SSL", "ssl_cafile": pki.other_ca,
                                        "sasl_mechanism": "PLAIN", "sasl_plain_username": "alice",
                                        "sasl_plain_password": "alice-secret"},
                            TlsAuthenticationError, within=10)
    assert bootstrap in str(err) and "alice-secret" not in str(err)


def test_records_queued_for_a_broker_whose_certificate_fails_fail_at_once(pki, tmp_path):
    """Metadata comes through a good TLS endpoint; the broker it names presents an expired
    certificate. The records queued for that broker fail with TlsAuthenticationError at once (not
    after delivery_timeout_ms), naming it; the I/O thread stays alive."""
    with broker_behind_stunnel("tansu", [pki.server, pki.expired], tmp_path) as (good, expired):
        p = Producer(bootstrap_servers=good, security_protocol="SSL", ssl_cafile=pki.ca,
                     delivery_timeout_ms=60_000, request_timeout_ms=30_000)
        try:
            t0 = time.monotonic()
            fut = p.send(unique_name("expired-leader"), b"v")   # metadata through the good one
            with pytest.raises(TlsAuthenticationError, match="expired") as exc:
                fut.get(timeout=30)
            assert time.monotonic() - t0 < 15
            assert expired in str(exc.value)
            assert sender_alive(p)
        finally:
            p.close(5)
