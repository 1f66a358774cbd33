"""One connection to one broker as a state machine that is fed frames and time.

:class:`Connection` knows the connection's state, its negotiated API versions, the requests it
has in flight (in order), the bytes queued for it and the frames read from it, its deadlines
(connection set-up, the oldest request, SASL re-authentication, idleness, a broker's throttle) and
what to do with a response frame (match it to the oldest request, decode it, note the throttle).
It owns no socket and does no I/O: :class:`~fastkafka.network.NetworkClient` owns the sockets and
the poller, moves bytes between them and each connection's send queue and frame reader, and acts
on what the connection reports (close it, complete a request, start the next handshake step).
"""

from __future__ import annotations

import abc
from collections import deque
from enum import Enum

from . import __version__
from ._core.transport import FrameReader, SendQueue
from .errors import (CorrelationIdMismatchError, CorruptFrameError, UnsupportedVersionError)
from .protocol import SUPPORTED_VERSIONS, ApiKey, decode_response

UNSUPPORTED_VERSION = UnsupportedVersionError.code

#: The ApiVersions request this client sends (handshake, and the acks=0 close barrier).
API_VERSIONS_BODY = {"client_software_name": "fastkafka", "client_software_version": __version__}


class State(Enum):
    DISCONNECTED = 0
    CONNECTING = 1
    HANDSHAKE = 2      # TLS, ApiVersions, SASL steps in progress
    READY = 3


class Due(Enum):
    """What :meth:`Connection.due` found past its deadline."""
    CONNECT = "connect"          # no TCP connection within socket_connection_setup_timeout_ms
    TLS_HANDSHAKE = "tls"        # no TLS handshake within the same limit
    REQUEST = "request"          # the oldest request got no response within request_timeout_ms
    REAUTHENTICATE = "reauth"    # the SASL session nears its end and nothing is in flight
    IDLE = "idle"                # nothing sent or received for connections_max_idle_ms


class InFlightRequest:
    __slots__ = ("correlation_id", "api_key", "version", "expect_response", "created_ms",
                 "callback", "node_id", "internal", "codec")

    def __init__(self, correlation_id, api_key, version, expect_response, created_ms, callback,
                 node_id, internal=False, codec=None):
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.version = version
        self.expect_response = expect_response
        self.created_ms = created_ms
        self.callback = callback          # callback(body or None, error or None)
        self.node_id = node_id
        self.internal = internal          # handshake requests are allowed before READY
        # None: the generic schema codec (fastkafka.protocol); otherwise an object with
        # encode(version, correlation_id, client_id, body) -> frame buffers and
        # decode(version, frame) -> body (a compiled codec of one API, e.g. Produce).
        self.codec = codec

    def __repr__(self):
        return (f"InFlightRequest(node={self.node_id}, api={ApiKey(self.api_key).name}, "
                f"v{self.version}, corr={self.correlation_id})")


class HandshakeStep(abc.ABC):
    """One step of bringing a new connection to READY: TLS, ApiVersions, then the SASL steps
    (fastkafka.sasl), each a subclass."""

    @abc.abstractmethod
    def start(self, client, conn: "Connection", now: int) -> None:
        """Queue this step's request(s) on ``conn``; call ``client._next_handshake_step`` when done."""


class ApiVersionsStep(HandshakeStep):
    def __init__(self, version: int | None = None):
        self.version = version if version is not None else SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1]

    def start(self, client, conn, now):
        client._send_internal(conn, ApiKey.API_VERSIONS, self.version, API_VERSIONS_BODY, now,
                              lambda resp, err: client._on_api_versions(conn, self, resp, err))


class TlsHandshakeStep(HandshakeStep):
    """The TLS handshake (security_protocol SSL / SASL_SSL): first of the steps, driven by the
    poller's events on the I/O thread (``NetworkClient._tls_handshake``); the next step starts
    when it completes."""

    def __init__(self, context):
        self.context = context

    def start(self, client, conn, now):
        from .tls import TlsSession
        conn.tls = TlsSession(self.context, conn.host, f"node {conn.node_id} ({conn.host}:{conn.port})")
        client._tls_handshake(conn, now)


class Connection:
    """One connection to one broker: state, send queue, frame reader and in-flight requests."""

    def __init__(self, node_id: int, host: str, port: int, max_frame_size: int):
        self.node_id = node_id
        self.host = host
        self.port = port
        self.state = State.DISCONNECTED
        self.sock = None              # owned by the client
        self.max_frame_size = max_frame_size
        self.send_queue = SendQueue()
        self.reader = FrameReader(max_frame_size)
        self.in_flight: deque[InFlightRequest] = deque()  # requests awaiting a response, oldest first
        self.unacked_writes = 0       # requests expecting no response, not yet fully written
        self.unconfirmed = False      # such a request was written and no response came after it
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.versions: dict[int, int] = {}  # negotiated version per api key
        self.handshake: deque[HandshakeStep] = deque()
        self.connect_started_ms = 0
        self.last_activity_ms = 0
        self.failures = 0
        self.address_index = 0        # which of the host's resolved addresses the next attempt uses
        self.next_attempt_ms = 0
        self.registered_events = 0
        self.reauth_at_ms = 0         # SASL session: no new requests from then on (fastkafka.sasl)
        self.throttle_until_ms = 0    # broker quota (KIP-219): no new requests before this time
        self.tls = None               # TlsSession (security_protocol SSL / SASL_SSL), once connected

    def in_flight_count(self) -> int:
        return len(self.in_flight) + self.unacked_writes

    def __repr__(self):
        return (f"Connection(node={self.node_id}, {self.host}:{self.port}, {self.state.name}, "
                f"in_flight={self.in_flight_count()})")

    # -- sending ---------------------------------------------------------------------------
    def can_send(self, now: int, max_in_flight: int) -> bool:
        """READY, with room for another request, not due to re-authenticate, not throttled."""
        return (self.state is State.READY
                and self.in_flight_count() < max_in_flight
                and not (self.reauth_at_ms and now >= self.reauth_at_ms)
                and not (self.throttle_until_ms and now < self.throttle_until_ms))

    def version_for(self, api_key: int, min_version: int = 0, max_version: int | None = None) -> int:
        """The highest version of ``api_key`` both sides support within [min_version,
        max_version]; UnsupportedVersionError naming both ranges when there is none."""
        version = self.versions.get(int(api_key))
        if max_version is not None and version is not None:
            theirs = self.api_versions.get(int(api_key))
            version = min(version, max_version)
            if theirs is not None and version < theirs[0]:
                version = None
        if version is None or version < min_version:
            theirs = self.api_versions.get(int(api_key))
            raise UnsupportedVersionError(
                f"node {self.node_id} supports {ApiKey(api_key).name} versions {theirs}, "
                f"this client needs {max(min_version, SUPPORTED_VERSIONS[ApiKey(api_key)][0])}"
                f"..{SUPPORTED_VERSIONS[ApiKey(api_key)][1]}")
        return version

    def negotiate(self, api_keys: list, required_apis) -> list[str]:
        """Take the broker's ApiVersions ranges; the negotiated version of each API is the highest
        both sides speak. Returns the names of ``required_apis`` left without a version."""
        self.api_versions = {e["api_key"]: (e["min_version"], e["max_version"]) for e in api_keys}
        self.versions = {}
        for key, (lo, hi) in SUPPORTED_VERSIONS.items():
            theirs = self.api_versions.get(int(key))
            if theirs is not None and theirs[0] <= hi and lo <= theirs[1]:
                self.versions[int(key)] = min(hi, theirs[1])
        return [ApiKey(k).name for k in required_apis if int(k) not in self.versions]

    def enqueue(self, req: InFlightRequest, frame, now: int) -> None:
        """Queue ``frame`` (buffers) for writing; ``req`` waits for its response, or, when it
        expects none, completes once written (:meth:`written`)."""
        if req.expect_response:
            self.in_flight.append(req)
            self.send_queue.push(frame, None)
        else:
            self.unacked_writes += 1
            self.send_queue.push(frame, req)
        self.last_activity_ms = now

    def written(self, done, now: int) -> list[InFlightRequest]:
        """The send queue wrote the requests whose tokens are ``done``: those expecting no response
        are complete (returned)."""
        complete = []
        for req in done:
            if req is not None:
                self.unacked_writes -= 1
                self.unconfirmed = True
                complete.append(req)
        self.last_activity_ms = now
        return complete

    # -- receiving -------------------------------------------------------------------------
    def receive(self, frame, now: int) -> tuple[InFlightRequest, object, int]:
        """A response frame (without its size prefix): ``(request, body, throttle_time_ms)`` for
        the oldest request in flight, which leaves the in-flight queue. Raises a KafkaError (the
        connection must be closed; the request stays in flight, to fail with the error) for a
        frame with no request waiting, too short, answering another correlation id, or that does
        not decode."""
        if not self.in_flight:
            raise CorruptFrameError(f"node {self.node_id} sent a response with no request in flight")
        req = self.in_flight[0]
        if len(frame) < 4:
            raise CorruptFrameError(f"response of {len(frame)} bytes from node {self.node_id}")
        corr = int.from_bytes(frame[:4], "big", signed=True)
        if corr != req.correlation_id:
            raise CorrelationIdMismatchError(
                f"node {self.node_id} answered correlation id {corr}, expected {req.correlation_id}")
        if req.api_key == ApiKey.API_VERSIONS and len(frame) >= 6 and \
                int.from_bytes(frame[4:6], "big", signed=True) == UNSUPPORTED_VERSION:
            # Brokers answer an ApiVersions version they do not support with error 35 and,
            # usually, a v0 body listing their range; some send a body in another layout.
            # The range is a hint only: without it, fall back to v0, which every broker has.
            try:
                _, body = decode_response(req.api_key, 0, frame)
            except CorruptFrameError:
                body = {"error_code": UNSUPPORTED_VERSION, "api_keys": []}
        elif req.codec is not None:
            body = req.codec.decode(req.version, frame)
        else:
            _, body = decode_response(req.api_key, req.version, frame)
        self.in_flight.popleft()
        self.unconfirmed = False  # a broker answers a connection's requests in order
        self.last_activity_ms = now
        throttle = (body.get("throttle_time_ms", 0) if isinstance(body, dict)
                    else getattr(body, "throttle_time_ms", 0))
        if isinstance(throttle, int) and throttle > 0:
            # KIP-219: the broker answered at once but asks for no new request on this
            # connection for throttle_time_ms; answers to requests in flight are still read.
            self.throttle_until_ms = max(self.throttle_until_ms, now + throttle)
        else:
            throttle = 0
        return req, body, throttle

    # -- time ------------------------------------------------------------------------------
    def deadline(self, now: int, setup_timeout_ms: int, request_timeout_ms: int,
                 max_idle_ms: int) -> int | None:
        """Milliseconds until this connection's nearest deadline has passed (exclusive: +1), or
        None when it has none."""
        if self.state is State.CONNECTING or (self.tls is not None and not self.tls.established):
            due = self.connect_started_ms + setup_timeout_ms
        elif self.in_flight:
            due = self.in_flight[0].created_ms + request_timeout_ms
        elif self.state is State.READY and self.reauth_at_ms:
            due = min(self.reauth_at_ms, self.last_activity_ms + max_idle_ms)
        elif self.state is State.READY and not self.unacked_writes:
            due = self.last_activity_ms + max_idle_ms
        else:
            due = None
        nearest = None if due is None else due - now + 1
        if self.throttle_until_ms > now:   # wake when a throttled connection may send again
            t = self.throttle_until_ms - now + 1
            nearest = t if nearest is None else min(nearest, t)
        return nearest

    def due(self, now: int, setup_timeout_ms: int, request_timeout_ms: int,
            max_idle_ms: int) -> Due | None:
        """Which of this connection's deadlines has passed, if any (the first that applies)."""
        if self.state is State.CONNECTING and now - self.connect_started_ms > setup_timeout_ms:
            return Due.CONNECT
        if (self.tls is not None and not self.tls.established
                and now - self.connect_started_ms > setup_timeout_ms):
            return Due.TLS_HANDSHAKE
        if self.in_flight and now - self.in_flight[0].created_ms > request_timeout_ms:
            return Due.REQUEST
        quiet = not self.in_flight and not self.unacked_writes
        if (self.state is State.READY and self.reauth_at_ms and now >= self.reauth_at_ms
                and quiet and not self.send_queue.has_pending()):
            return Due.REAUTHENTICATE
        if self.state is State.READY and quiet and now - self.last_activity_ms > max_idle_ms:
            return Due.IDLE
        return None

    # -- closing ---------------------------------------------------------------------------
    def reset(self) -> list[InFlightRequest]:
        """Forget the connection's traffic after its socket closed: returns every request that now
        fails (those in flight, and those expecting no response that were not fully written),
        oldest first. The state, handshake and buffers start afresh."""
        # TLS: requests already encrypted whose ciphertext was not all written were not written.
        unwritten = self.tls.held_tokens if self.tls is not None else []
        self.tls = None
        self.state = State.DISCONNECTED
        self.handshake.clear()
        pending = list(self.in_flight)
        self.in_flight.clear()
        for token in unwritten + self.send_queue.clear():
            if token is not None and not token.expect_response:
                pending.append(token)
        self.unacked_writes = 0
        self.reader = FrameReader(self.max_frame_size)
        return pending
