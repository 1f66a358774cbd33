"""The errors a new user meets first, and misuse that must not leave the producer half-open.

* ``close()``/``flush()`` from a delivery callback (the I/O thread) raise ``IllegalStateError`` and
  change nothing; a later ``close()`` from the application thread really stops the I/O thread.
* Bootstrap servers that refuse connections or do not resolve: the metadata-wait timeout names every
  address tried and its last connection error, instead of only "topic not present in metadata".

Timeouts are small (``max_block_ms``) so every test runs in about a second.
"""
from __future__ import annotations

import socket
import sys
import threading
import time

import pytest

from fastkafka import Producer
from fastkafka.errors import IllegalStateError, KafkaTimeoutError

pytestmark = pytest.mark.faultbroker

FAST = dict(request_timeout_ms=2000, delivery_timeout_ms=15000, retry_backoff_ms=20,
            reconnect_backoff_ms=20, reconnect_backoff_max_ms=200, linger_ms=2, max_block_ms=5000)


# ------------------------------------------------------------------ close/flush from a callback
def test_close_and_flush_from_a_delivery_callback_raise_and_leave_the_producer_open(fb):
    fb.create_topic("t", 1)
    p = Producer(bootstrap_servers=fb.bootstrap, **FAST)
    try:
        io_thread = p._sender._thread
        raised: dict = {}
        done = threading.Event()

        def on_delivery(err, md):
            for name, call in (("close", p.close), ("flush", p.flush)):
                try:
                    call()
                except Exception as e:  # noqa: BLE001 - the test inspects it
                    raised[name] = e
            done.set()

        p.send("t", b"first", on_delivery=on_delivery).get(timeout=10)
        assert done.wait(10)
        for name in ("close", "flush"):
            assert isinstance(raised.get(name), IllegalStateError), raised
            msg = str(raised[name])
            assert f"{name}() called from a delivery callback" in msg and "I/O thread" in msg
        # Nothing changed: the producer is open, its I/O thread runs, and it still delivers.
        assert repr(p).endswith(" open>")
        assert io_thread.is_alive()
        assert p.send("t", b"second").get(timeout=10).offset == 1
        assert p.flush(5) == 0
    finally:
        # A close() from the application thread really stops the I/O thread.
        p.close(5)
    assert not io_thread.is_alive()
    assert repr(p).endswith(" closed>")
    assert fb.cluster.record_count("t") == 2


# ------------------------------------------------------------------------ unreachable brokers
@pytest.fixture
def closed_port():
    """A local port nothing listens on: bound, then closed."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def make_producer(no_leaks):
    made = []

    def make(bootstrap, **kw):
        p = Producer(bootstrap_servers=bootstrap, **{**FAST, "max_block_ms": 400, **kw})
        made.append(p)
        return p

    yield make
    for p in made:
        p.close(5)


def metadata_timeout(p, call=None) -> KafkaTimeoutError:
    start = time.monotonic()
    with pytest.raises(KafkaTimeoutError) as exc:
        (call or (lambda: p.send("t", b"x")))()
    assert time.monotonic() - start < 5
    msg = str(exc.value)
    # The message existing handling (and the Spark sink's tests) match on is still there.
    assert f"topic 't' not present in metadata after {p.config.max_block_ms} ms" in msg
    return exc.value


def test_refused_connection_is_named_in_the_metadata_timeout(make_producer, closed_port):
    p = make_producer(f"127.0.0.1:{closed_port}")
    e = metadata_timeout(p)
    assert f"could not connect to any broker; tried 127.0.0.1:{closed_port} (connection refused)" \
        in str(e)
    assert e.connection_errors == {f"127.0.0.1:{closed_port}": "connection refused"}


def test_unresolvable_name_is_named_in_the_metadata_timeout(make_producer):
    p = make_producer("no-such-host.invalid:9092")
    e = metadata_timeout(p)
    assert "could not connect to any broker; tried no-such-host.invalid:9092 (name resolution failed" \
        in str(e)
    assert e.connection_errors["no-such-host.invalid:9092"].startswith("name resolution failed: ")


def test_every_bootstrap_address_is_named_with_its_own_error(make_producer, closed_port):
    p = make_producer(f"no-such-host.invalid:9092,127.0.0.1:{closed_port}")
    e = metadata_timeout(p, lambda: p.partitions_for("t"))
    assert list(e.connection_errors) == ["no-such-host.invalid:9092", f"127.0.0.1:{closed_port}"]
    assert e.connection_errors[f"127.0.0.1:{closed_port}"] == "connection refused"
    assert "name resolution failed" in e.connection_errors["no-such-host.invalid:9092"]
    assert str(e).endswith(
        f"tried no-such-host.invalid:9092 ({e.connection_errors['no-such-host.invalid:9092']}), "
        f"127.0.0.1:{closed_port} (connection refused)")


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="relies on Linux dropping SYNs to a listener whose accept queue is full")
def test_connection_setup_timeout_is_named_in_the_metadata_timeout(make_producer):
    # A listener that never accepts, its accept queue filled: connection attempts hang.
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    port = srv.getsockname()[1]
    fillers = []
    try:
        for _ in range(3):
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex(("127.0.0.1", port))
            fillers.append(c)
        time.sleep(0.1)
        p = make_producer(f"127.0.0.1:{port}", max_block_ms=1200,
                          socket_connection_setup_timeout_ms=200)
        e = metadata_timeout(p)
        assert e.connection_errors == {
            f"127.0.0.1:{port}":
                "connection timed out: no connection within socket_connection_setup_timeout_ms=200"}
        assert f"127.0.0.1:{port} (connection timed out" in str(e)
    finally:
        for c in fillers:
            c.close()
        srv.close()


def test_a_reachable_broker_is_not_reported(fb, make_producer, closed_port):
    # One bootstrap address refuses, the other works: records are delivered, and only the broken
    # address is left among the connection errors.
    fb.create_topic("t", 1)
    p = make_producer(f"127.0.0.1:{closed_port},{fb.bootstrap}", max_block_ms=5000)
    assert p.send("t", b"v").get(timeout=10).offset == 0
    errors = p._metadata.connection_errors()
    assert fb.bootstrap not in errors
    assert set(errors) <= {f"127.0.0.1:{closed_port}"}


def test_every_address_a_name_resolves_to_is_tried(fb, make_producer, closed_port, monkeypatch):
    # A name resolving to a dead address first and the broker second (as "localhost" -> ::1,
    # 127.0.0.1 with a broker listening on IPv4 only): the producer moves on to the next address.
    fb.create_topic("t", 1)
    fb_port = int(fb.bootstrap.rsplit(":", 1)[1])
    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host == "two-addresses.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", p))
                    for p in (closed_port, fb_port)]
        return real_getaddrinfo(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    p = make_producer("two-addresses.test:9092", max_block_ms=5000, client_dns_lookup="use_all_dns_ips")
    assert p.send("t", b"v").get(timeout=10).offset == 0


def test_a_name_resolving_to_several_loopback_addresses_reaches_the_one_with_a_broker(
        no_leaks, make_producer, monkeypatch):
    # Real distinct addresses (Linux routes all of 127/8 to loopback): the name resolves to
    # 127.0.0.2, where nothing listens on the broker's port, then to 127.0.0.3, where the fault
    # broker listens. The broker advertises the same name, so the connection to it (after
    # metadata) goes through the same two addresses again.
    from faultbroker import FaultBroker

    name = "multi-loopback.test"
    broker = FaultBroker(host="127.0.0.3", advertised_host=name)
    try:
        broker.create_topic("t", 1)
        port = broker.port
        probe = socket.socket()
        try:
            assert probe.connect_ex(("127.0.0.2", port)) != 0, "something listens on 127.0.0.2"
        finally:
            probe.close()
        real_getaddrinfo = socket.getaddrinfo
        resolved = []

        def getaddrinfo(host, p, *args, **kwargs):
            if host == name:
                resolved.append(p)
                return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (ip, p))
                        for ip in ("127.0.0.2", "127.0.0.3")]
            return real_getaddrinfo(host, p, *args, **kwargs)

        tried = []
        real_connect_ex = socket.socket.connect_ex

        def connect_ex(sock, address):
            if isinstance(address, tuple) and address[1] == port:
                tried.append(address[0])
            return real_connect_ex(sock, address)

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
        monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
        p = make_producer(f"{name}:{port}", max_block_ms=5000, client_dns_lookup="use_all_dns_ips")
        assert p.send("t", b"v").get(timeout=10).offset == 0
        assert p.send("t", b"w").get(timeout=10).offset == 1
        assert resolved, "the producer never resolved the name"
        assert tried[:2] == ["127.0.0.2", "127.0.0.3"], tried
        assert "127.0.0.3" in tried and set(tried) <= {"127.0.0.2", "127.0.0.3"}
        assert broker.cluster.record_count("t") == 2
        p.close(5)
    finally:
        broker.close()
    assert broker.crashed == [] and broker.handler_errors == []
