"""Fakes shared by the unit tests of the producer's modules (the batch, the column reader, the
network client, the sender, the router): a clock the test moves by hand, cluster views and
metadata built from a short description, and a broker the test scripts request by request.

Import them as ``from unit.fastkafka.fakes import FakeClock, ...`` (``tests/`` is on
``sys.path``, see ``tests/conftest.py``).

- :class:`FakeClock`: ``clock() -> int`` milliseconds, moved only by :meth:`FakeClock.advance`;
  pass it where the code takes ``clock=`` (``NetworkClient``) or read it for ``now_ms``
  arguments (``RecordAccumulator``).
- :func:`make_cluster` / :func:`make_metadata`: a real ``Cluster`` / ``Metadata`` from
  ``{topic: [leader of partition 0, of partition 1, ...]}``.
- :class:`ScriptedBroker`: a listening socket on the loopback; :meth:`ScriptedBroker.accept`
  gives a :class:`Peer` that reads the client's requests one by one and sends back what the
  test says (answers, raw bytes, a close). Nothing runs in the background: the test alternates
  between the client's ``poll`` and the peer, so every step happens in the order written.
- :func:`api_versions_body`, :func:`metadata_body`: answer bodies for those two requests.
"""
from __future__ import annotations

import select
import socket
import struct
import time
from dataclasses import dataclass

from fastkafka._net.cluster import BrokerInfo, Cluster, Metadata, PartitionInfo, TopicInfo
from faultbroker.protocol import decode_request, encode_response
from fastkafka.protocol import SUPPORTED_VERSIONS, ApiKey

__all__ = ["FakeClock", "make_cluster", "make_metadata", "ScriptedBroker", "Peer", "Request",
           "api_versions_body", "metadata_body", "wait_for"]

#: How long (real seconds) a helper waits for bytes that the other side has already been told to
#: send before it calls the test a failure. Only an upper bound: nothing is timed against it.
WAIT_S = 5.0


class FakeClock:
    """Milliseconds that move only when the test says so.

    >>> clock = FakeClock(1_000)
    >>> clock(), clock.advance(250), clock()
    (1000, 1250, 1250)
    """

    def __init__(self, start_ms: int = 1_000_000):
        self.now = int(start_ms)

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        """Move the clock ``ms`` forward (never back); returns the new time."""
        if ms < 0:
            raise ValueError("a clock does not go back")
        self.now += int(ms)
        return self.now


def make_cluster(topics: dict | None = None, brokers: dict | None = None) -> Cluster:
    """A ``Cluster`` with ``brokers`` (``{node_id: (host, port)}``; default: one ``localhost``
    broker per leader named in ``topics``) and ``topics`` (``{name: [leader per partition]}``,
    -1 for a partition without a leader).

    >>> c = make_cluster({"t": [1, 2, -1]})
    >>> c.leader_for("t", 1), c.available_partitions("t")
    (2, [0, 1])
    """
    topics = topics or {}
    if brokers is None:
        nodes = sorted({n for leaders in topics.values() for n in leaders if n >= 0})
        brokers = {n: ("localhost", 9092 + n) for n in nodes}
    infos = [BrokerInfo(n, h, p) for n, (h, p) in sorted(brokers.items())]
    tinfos = [TopicInfo(name, 0, tuple(PartitionInfo(name, i, leader)
                                       for i, leader in enumerate(leaders)))
              for name, leaders in topics.items()]
    return Cluster(infos, tinfos)


def make_metadata(bootstrap=(("127.0.0.1", 9092),), topics: dict | None = None,
                  brokers: dict | None = None, now_ms: int = 0, **kw) -> Metadata:
    """A ``Metadata`` for ``bootstrap`` (``[(host, port)]``); with ``topics`` it already holds
    :func:`make_cluster` of them (updated at ``now_ms``, the topics tracked). ``kw`` goes to
    ``Metadata`` (``metadata_max_age_ms``, ``refresh_backoff_ms``, ``refresh_backoff_max_ms``)."""
    md = Metadata(list(bootstrap), **kw)
    if topics is not None:
        for t in topics:
            md.add_topic(t)
        md.update(make_cluster(topics, brokers), now_ms)
    return md


def api_versions_body(versions: dict | None = None, error_code: int = 0) -> dict:
    """An ApiVersions answer listing ``versions`` (``{ApiKey: (min, max)}``; default: every API
    and version this client speaks)."""
    versions = SUPPORTED_VERSIONS if versions is None else versions
    return {"error_code": error_code, "throttle_time_ms": 0,
            "api_keys": [{"api_key": int(k), "min_version": lo, "max_version": hi}
                         for k, (lo, hi) in sorted(versions.items())]}


def metadata_body(brokers: dict, topics: dict | None = None, throttle_ms: int = 0,
                  controller_id: int = -1) -> dict:
    """A Metadata answer: ``brokers`` ``{node_id: (host, port)}``, ``topics``
    ``{name: [leader per partition]}``."""
    return {"throttle_time_ms": throttle_ms, "cluster_id": "fake", "controller_id": controller_id,
            "brokers": [{"node_id": n, "host": h, "port": p, "rack": None}
                        for n, (h, p) in sorted(brokers.items())],
            "topics": [{"error_code": 0, "name": name, "topic_id": bytes(16), "is_internal": False,
                        "partitions": [{"error_code": 0, "partition_index": i, "leader_id": leader,
                                        "leader_epoch": 0, "replica_nodes": [leader],
                                        "isr_nodes": [leader], "offline_replicas": []}
                                       for i, leader in enumerate(leaders)]}
                       for name, leaders in (topics or {}).items()]}


def wait_for(cond, pump=None, what="condition") -> None:
    """Call ``pump()`` (e.g. ``lambda: client.poll(0)``) until ``cond()`` holds; fail after
    :data:`WAIT_S` real seconds. For steps that need the kernel to move bytes between two
    sockets of this process, never to let time pass: time is the fake clock's."""
    deadline = time.monotonic() + WAIT_S
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {WAIT_S} s")
        if pump is not None:
            pump()
        else:
            time.sleep(0.001)


@dataclass
class Request:
    """One request the client sent, as a peer read it."""
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: object


class Peer:
    """The broker's end of one accepted connection, driven by the test."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._buf = b""

    def readable(self, timeout: float = 0.0) -> bool:
        """Bytes (or the client's close) are waiting to be read."""
        if self._buf:
            return True
        r, _, _ = select.select([self.sock], [], [], timeout)
        return bool(r)

    def _fill(self, n: int, pump) -> None:
        deadline = time.monotonic() + WAIT_S
        while len(self._buf) < n:
            if time.monotonic() > deadline:
                raise AssertionError(f"peer: expected {n} bytes, have {len(self._buf)}")
            if pump is not None:
                pump()
            r, _, _ = select.select([self.sock], [], [], 0.005)
            if r:
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    raise AssertionError("peer: the client closed the connection")
                self._buf += chunk

    def read_request(self, pump=None) -> Request:
        """The next request the client wrote (``pump()`` is called while waiting for it, e.g.
        ``lambda: client.poll(0)``, which writes what the client queued)."""
        self._fill(4, pump)
        size = struct.unpack(">i", self._buf[:4])[0]
        self._fill(4 + size, pump)
        payload, self._buf = self._buf[4:4 + size], self._buf[4 + size:]
        header, body = decode_request(payload)
        return Request(header["api_key"], header["api_version"], header["correlation_id"],
                       header.get("client_id"), body)

    def has_request(self, pump=None) -> bool:
        """Whether a request (or part of one) is waiting, after ``pump()`` once."""
        if pump is not None:
            pump()
        return self.readable(0.0)

    @staticmethod
    def frame(request: Request, body: dict, correlation_id: int | None = None) -> bytes:
        """The framed answer to ``request`` (its api and version), with its correlation id
        unless another is given."""
        return encode_response(request.api_key, request.api_version,
                               request.correlation_id if correlation_id is None else correlation_id,
                               body)

    def answer(self, request: Request, body: dict, correlation_id: int | None = None) -> bytes:
        """Send the answer to ``request``; returns the bytes sent."""
        data = self.frame(request, body, correlation_id)
        self.sock.sendall(data)
        return data

    def send(self, data: bytes) -> None:
        """Send raw bytes (part of a frame, several frames, garbage)."""
        self.sock.sendall(data)

    def closed_by_client(self, pump=None) -> bool:
        """True once the client has closed its end (after ``pump()`` once)."""
        if pump is not None:
            pump()
        if not self.readable(0.0):
            return False
        try:
            data = self.sock.recv(1 << 20, socket.MSG_PEEK)
        except ConnectionResetError:
            return True
        return data == b""

    def close(self) -> None:
        """Close the broker's end (the client reads end of stream)."""
        self.sock.close()


class ScriptedBroker:
    """A listening socket on 127.0.0.1 whose connections the test accepts and drives.

    >>> with ScriptedBroker() as b:
    ...     b.bootstrap.startswith("127.0.0.1:")
    True
    """

    host = "127.0.0.1"

    def __init__(self):
        self.listener = socket.create_server((self.host, 0))
        self.port = self.listener.getsockname()[1]
        self.peers: list[Peer] = []

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def address(self) -> tuple:
        return (self.host, self.port)

    def pending_connection(self, timeout: float = 0.0) -> bool:
        """A client connection waits to be accepted."""
        r, _, _ = select.select([self.listener], [], [], timeout)
        return bool(r)

    def accept(self) -> Peer:
        """The next connection (fails after :data:`WAIT_S` s without one)."""
        if not self.pending_connection(WAIT_S):
            raise AssertionError("no connection to accept")
        sock, _ = self.listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = Peer(sock)
        self.peers.append(peer)
        return peer

    def close(self) -> None:
        for p in self.peers:
            p.close()
        self.listener.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
