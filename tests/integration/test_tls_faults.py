"""TLS connections broken in the middle of the data phase, on Apache Kafka, while the I/O thread's
GIL-free turn encrypts, writes, reads and decrypts: cut at random, and a TLS record corrupted on its
way from the broker. An idempotent stream delivers every record exactly once, in order, at the
offset its future reported; a corrupted record is a typed, retried TlsError, never a crash.

One Kafka node (one JVM) with an SSL listener that advertises a proxy on 127.0.0.1 (so every
connection of the producer goes through it); the proxy passes bytes through, cuts connections after
a random 150-600 KB (time for GIL-free turns between cuts), or flips one byte of the last TLS application-data record it forwards after the
broker's first 30 (past the handshake and the first answers; the record's authentication tag: it
cannot decrypt).
"""
from __future__ import annotations

import logging
import random
import socket
import threading
import time

import pytest

from brokers import assert_exactly_once_in_order, read_back, unique_name
from fastkafka import Producer
from fastkafka.errors import TlsError
from fastkafka_tools.apachekafka import KafkaCluster
from fastkafka_tools.tlsrig import kafka_ssl_listener
from tlskafka import tls_reader_config

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]

APPLICATION_DATA = 23


class TlsFaultProxy:
    """A TCP proxy in front of one TLS listener. ``mode``: "pass", "cut" (close both sides after a
    random ``low``-``high`` bytes) or "corrupt" (flip a byte of a broker's application-data record on up to
    ``corruptions`` connections)."""

    def __init__(self, target_port: int, seed: int = 11):
        self.target = ("127.0.0.1", target_port)
        self.rng = random.Random(seed)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.mode = "pass"
        self.low, self.high = 150_000, 600_000     # "cut": bytes a connection carries
        self.cuts = 0
        self.corrupted = 0
        self.corruptions = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._socks: set = set()
        threading.Thread(target=self._accept, name="tls-fault-proxy", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self.listener.close()
        for s in list(self._socks):
            s.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                continue
            upstream.settimeout(None)
            self._socks |= {client, upstream}
            state = {"budget": self.rng.randint(self.low, self.high), "closed": False,
                     "corrupt": False}
            with self._lock:
                if self.mode == "corrupt" and self.corrupted < self.corruptions:
                    state["corrupt"] = True
            for src, dst, from_broker in ((client, upstream, False), (upstream, client, True)):
                threading.Thread(target=self._pump, args=(src, dst, state, from_broker),
                                 daemon=True).start()

    def _close(self, state, *socks) -> None:
        state["closed"] = True
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
            self._socks.discard(s)

    def _pump(self, src, dst, state, from_broker) -> None:
        records = _RecordWalker() if from_broker else None
        while not state["closed"]:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                self._close(state, src, dst)
                return
            if self.mode == "cut":
                state["budget"] -= len(data)
                if state["budget"] <= 0:
                    data = data[:len(data) + state["budget"]]   # pass part of it, then cut
                    try:
                        dst.sendall(data)
                    except OSError:
                        pass
                    self.cuts += 1
                    self._close(state, src, dst)
                    return
            if records is not None:
                ends = records.feed(data)        # offsets (in data) of records' last bytes
                if state["corrupt"] and records.count > 30 and ends:
                    with self._lock:
                        go = self.corrupted < self.corruptions
                        if go:
                            self.corrupted += 1
                    if go:
                        state["corrupt"] = False
                        i = ends[-1]
                        data = data[:i] + bytes([data[i] ^ 0x5A]) + data[i + 1:]
            try:
                dst.sendall(data)
            except OSError:
                self._close(state, src, dst)
                return


class _RecordWalker:
    """Follows TLS record boundaries in one direction of a stream."""

    def __init__(self):
        self.header = b""
        self.left = 0           # body bytes of the current record still to come
        self.kind = 0
        self.count = 0          # application-data records completed

    def feed(self, data: bytes) -> list:
        """Offsets in ``data`` of the last byte of each application-data record it completes."""
        ends, i = [], 0
        while i < len(data):
            if self.left == 0:
                take = min(5 - len(self.header), len(data) - i)
                self.header += data[i:i + take]
                i += take
                if len(self.header) == 5:
                    self.kind = self.header[0]
                    self.left = int.from_bytes(self.header[3:5], "big")
                    self.header = b""
                continue
            take = min(self.left, len(data) - i)
            i += take
            self.left -= take
            if self.left == 0 and self.kind == APPLICATION_DATA:
                ends.append(i - 1)
                self.count += 1
        return ends


@pytest.fixture(scope="module")
def proxied_tls_kafka(pki):
    kc = KafkaCluster(nodes=1, listeners={"SSL": "SSL"},
                      properties=kafka_ssl_listener("SSL", pki.server, pki.ca))
    node = kc.nodes[1]
    proxy = TlsFaultProxy(node.listener_ports["SSL"])
    kc.extra_properties["advertised.listeners"] = (
        f"PLAINTEXT://127.0.0.1:{node.port},SSL://127.0.0.1:{proxy.port}")
    try:
        kc.start()
        yield kc, proxy
    finally:
        kc.stop()
        proxy.stop()


def _stream(p, topic, n, pause_every=100):
    sent = []
    for i in range(n):
        v = b"%08d" % i + b"x" * 92
        sent.append(p.send(topic, v, key=b"k%d" % (i % 97)))
        if i % pause_every == 0:
            time.sleep(0.01)      # linger deadlines in the I/O thread's wait: GIL-free turns
    return sent


def _check_exactly_once_in_order(bootstrap, pki, topic, partitions, n, mds):
    got = read_back(bootstrap, topic, partitions, n, timeout=120, extra_config=tls_reader_config(pki))
    assert_exactly_once_in_order(got, mds, n)


FAST = dict(linger_ms=2, batch_size=16_384, request_timeout_ms=5000, retry_backoff_ms=20,
            reconnect_backoff_ms=10)


def test_tls_idempotent_stream_through_random_cuts_exactly_once_in_order(proxied_tls_kafka, pki):
    kc, proxy = proxied_tls_kafka
    bootstrap = f"127.0.0.1:{proxy.port}"
    topic = unique_name("tls-cut")
    kc.create_topic(topic, 3)
    n = 20_000
    proxy.mode = "cut"
    cuts = proxy.cuts
    try:
        with Producer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_cafile=pki.ca,
                      **FAST) as p:
            futs = _stream(p, topic, n)
            assert p.flush(120) == 0
            mds = [f.get(1) for f in futs]
            m = p.metrics()
    finally:
        proxy.mode = "pass"       # the independent reader goes through the proxy, uncut
    assert proxy.cuts - cuts >= 3, f"the proxy cut only {proxy.cuts - cuts} connections"
    assert m["net_disconnects"] >= 3
    # between the cuts the steady state went without the GIL, requests and answers
    assert m["gil_free_requests"] >= 10 and m["gil_free_answers"] >= 10, m
    _check_exactly_once_in_order(bootstrap, pki, topic, 3, n, mds)


def test_tls_corrupted_record_is_a_typed_retried_error(proxied_tls_kafka, pki, caplog):
    """A record from the broker that does not decrypt (read with or without the GIL) closes the
    connection with a TlsError naming the broker; its requests are retried and every record is
    delivered exactly once, in order; the I/O thread lives on."""
    kc, proxy = proxied_tls_kafka
    bootstrap = f"127.0.0.1:{proxy.port}"
    topic = unique_name("tls-corrupt")
    kc.create_topic(topic, 3)
    n = 8_000
    caplog.set_level(logging.DEBUG, logger="fastkafka")
    proxy.corrupted, proxy.corruptions = 0, 2
    proxy.mode = "corrupt"
    try:
        with Producer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_cafile=pki.ca,
                      **FAST) as p:
            futs = _stream(p, topic, n)
            assert p.flush(120) == 0
            mds = [f.get(1) for f in futs]
            m = p.metrics()
            assert p._sender._thread.is_alive()
    finally:
        proxy.mode = "pass"
    assert proxy.corrupted >= 1
    closes = [r for r in caplog.records if r.getMessage().startswith("closed connection to node")]
    errors = [r.args[1] for r in closes if isinstance(r.args[1], TlsError)]
    assert errors, [r.getMessage() for r in closes]
    text = str(errors[0])
    assert f"127.0.0.1:{proxy.port}" in text and "could not be read" in text, text
    assert m["net_disconnects"] >= 1
    assert m["gil_free_requests"] >= 10, m     # the stream around it went without the GIL
    _check_exactly_once_in_order(bootstrap, pki, topic, 3, n, mds)
