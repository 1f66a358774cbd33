"""Connections cut at random, on Apache Kafka: an idempotent stream survives every cut with nothing
lost, nothing twice, and each partition in send order.

A proxy on 127.0.0.1 forwards to one Kafka node, which advertises the proxy's address (so every
connection of the producer goes through it), and closes both sides of a connection after a random
20-300 KB has passed through it.
"""
from __future__ import annotations

import random
import selectors
import socket
import threading
import time

from fastkafka import Producer
from fastkafka_tools.apachekafka import KafkaCluster

from brokers import assert_exactly_once_in_order, read_back, unique_name


class CuttingProxy:
    def __init__(self, target_port: int, seed: int = 7, low: int = 20_000, high: int = 300_000):
        self.target = ("127.0.0.1", target_port)
        self.rng = random.Random(seed)
        self.low, self.high = low, high
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cuts = 0
        self.cutting = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cutting-proxy", daemon=True)

    def start(self) -> "CuttingProxy":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.listener.close()

    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        self.listener.setblocking(False)
        sel.register(self.listener, selectors.EVENT_READ, None)
        pairs = {}                      # socket -> [peer, pair state]
        while not self._stop.is_set():
            for key, _ in sel.select(0.05):
                if key.data is None:
                    try:
                        client, _ = self.listener.accept()
                        upstream = socket.create_connection(self.target, timeout=5)
                    except OSError:
                        continue
                    state = {"budget": self.rng.randint(self.low, self.high)}
                    for s, peer in ((client, upstream), (upstream, client)):
                        s.setblocking(True)
                        pairs[s] = (peer, state)
                        sel.register(s, selectors.EVENT_READ, "conn")
                    continue
                s = key.fileobj
                if s not in pairs:
                    continue
                peer, state = pairs[s]
                try:
                    data = s.recv(65536)
                except OSError:
                    data = b""
                cut = False
                if data:
                    state["budget"] -= len(data)
                    if state["budget"] <= 0 and self.cutting:
                        data = data[:len(data) + state["budget"]]   # pass part of it, then cut
                        cut = True
                    try:
                        if data:
                            peer.sendall(data)
                    except OSError:
                        cut = True
                if not data or cut:
                    if cut:
                        self.cuts += 1
                    for x in (s, peer):
                        if x in pairs:
                            sel.unregister(x)
                            del pairs[x]
                        x.close()
        for s in list(pairs):
            s.close()
        sel.close()


def test_idempotent_stream_through_random_cuts_exactly_once_in_order():
    kc = KafkaCluster(nodes=1)
    proxy = CuttingProxy(kc.nodes[1].port).start()
    kc.extra_properties["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{proxy.port}"
    try:
        kc.start()
        topic = unique_name("cut")
        kc.create_topic(topic, 3)
        n = 30_000
        sent = []
        with Producer(bootstrap_servers=f"127.0.0.1:{proxy.port}", linger_ms=2, batch_size=16_384,
                      request_timeout_ms=5000, retry_backoff_ms=20, reconnect_backoff_ms=10) as p:
            for i in range(n):
                key = b"k%d" % (i % 97)
                sent.append(p.send(topic, b"%08d" % i + b"x" * 92, key=key))
                if i % 2000 == 0:
                    time.sleep(0.02)
            assert p.flush(120) == 0
            mds = [f.get(1) for f in sent]
            metrics = p.metrics()
        assert proxy.cuts >= 10, f"the proxy cut only {proxy.cuts} connections"
        assert metrics["net_disconnects"] >= 10
        proxy.cutting = False      # the independent reader goes through the proxy, uncut
        assert_exactly_once_in_order(read_back(kc.bootstrap, topic, 3, n, timeout=120), mds, n)
    finally:
        kc.stop()
        proxy.stop()
