# cython: language_level=3
"""One connection to one broker as a state machine that is fed frames and time.

:class:`Connection` knows the connection's state, its negotiated API versions, the requests it
has in flight (in order), the bytes queued for it and the frames read from it, its deadlines
(connection set-up, the oldest request, SASL re-authentication, idleness, a broker's throttle) and
what to do with a response frame (match it to the oldest request, decode it, note the throttle).
It owns no socket and does no I/O: :class:`~fastkafka.network.NetworkClient` owns the sockets and
the poller, moves bytes between them and each connection's send queue and frame reader, and acts
on what the connection reports (close it, complete a request, start the next handshake step).

Compiled, with C-typed fields the network client reads directly; :mod:`fastkafka.connection`
re-exports it with the handshake steps.
"""

from collections import deque
from enum import Enum, IntEnum

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport INT64_MAX, int16_t, int32_t, int64_t, uint32_t

from fastkafka._core.produce_codec cimport ProduceCodec, decode_frame

from fastkafka.errors import CorrelationIdMismatchError, CorruptFrameError, UnsupportedVersionError
from fastkafka.protocol import SUPPORTED_VERSIONS, ApiKey, decode_response

UNSUPPORTED_VERSION = UnsupportedVersionError.code
cdef int _UNSUPPORTED_VERSION = UnsupportedVersionError.code
cdef int _API_VERSIONS = int(ApiKey.API_VERSIONS)


class State(IntEnum):
    """Connection.state (``Connection.status`` holds its value; the same numbers as the C enum in
    connection.pxd)."""
    DISCONNECTED = 0
    CONNECTING = 1
    HANDSHAKE = 2      # TLS, ApiVersions, SASL steps in progress
    READY = 3


assert [int(s) for s in State] == [DISCONNECTED, CONNECTING, HANDSHAKE, READY]


class Due(Enum):
    """What :meth:`Connection.due` found past its deadline."""
    CONNECT = "connect"          # no TCP connection within socket_connection_setup_timeout_ms
    TLS_HANDSHAKE = "tls"        # no TLS handshake within the same limit
    REQUEST = "request"          # the oldest request got no response within request_timeout_ms
    REAUTHENTICATE = "reauth"    # the SASL session nears its end and nothing is in flight
    IDLE = "idle"                # nothing sent or received for connections_max_idle_ms


# due_c()'s codes -> Due (index 0: none)
_DUE = (None, Due.CONNECT, Due.TLS_HANDSHAKE, Due.REQUEST, Due.REAUTHENTICATE, Due.IDLE)


cdef class InFlightRequest:
    """A request sent and not yet answered (or, expecting no answer, not yet written).

    ``codec``: None for the generic schema codec (fastkafka.protocol); otherwise an object with
    ``encode(version, correlation_id, client_id, body)`` -> frame buffers and
    ``decode(version, frame)`` -> body (a compiled codec of one API, e.g. Produce)."""

    def __init__(self, int32_t correlation_id, int api_key, int version, bint expect_response,
                 int64_t created_ms, callback, int32_t node_id, bint internal=False, codec=None):
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.version = version
        self.expect_response = expect_response
        self.created_ms = created_ms
        self.callback = callback
        self.node_id = node_id
        self.internal = internal
        self.codec = codec

    def __repr__(self):
        try:
            api = ApiKey(self.api_key).name
        except ValueError:
            api = str(self.api_key)
        return f"InFlightRequest(node={self.node_id}, api={api}, v{self.version}, corr={self.correlation_id})"


cdef inline int32_t _be32(const char *p) noexcept:
    cdef const unsigned char *u = <const unsigned char *>p
    return <int32_t>((<uint32_t>u[0] << 24) | (<uint32_t>u[1] << 16) | (<uint32_t>u[2] << 8) | u[3])


cdef class Connection:
    """One connection to one broker: state, send queue, frame reader and in-flight requests."""

    def __init__(self, int32_t node_id, host, int port, Py_ssize_t max_frame_size):
        self.node_id = node_id
        self.host = host
        self.port = port
        self.status = DISCONNECTED
        self.sock = None
        self.fd = -1
        self.max_frame_size = max_frame_size
        self.send_queue = SendQueue()
        self.reader = FrameReader(max_frame_size)
        self.in_flight = deque()
        self.unacked_writes = 0
        self.unconfirmed = False
        self.api_versions = {}
        self.versions = {}
        self.handshake = deque()
        self.connect_started_ms = 0
        self.last_activity_ms = 0
        self.failures = 0
        self.address_index = 0
        self.next_attempt_ms = 0
        self.registered_events = 0
        self.reauth_at_ms = 0
        self.throttle_until_ms = 0
        self.tls = None

    @property
    def state(self):
        """The connection's :class:`State`."""
        return State(self.status)

    @state.setter
    def state(self, value):
        self.status = int(State(value))

    def in_flight_count(self) -> int:
        return self.in_flight_count_c()

    def __repr__(self):
        return (f"Connection(node={self.node_id}, {self.host}:{self.port}, {State(self.status).name}, "
                f"in_flight={self.in_flight_count_c()})")

    # -- sending ---------------------------------------------------------------------------
    def can_send(self, int64_t now, int max_in_flight) -> bool:
        """READY, with room for another request, not due to re-authenticate, not throttled."""
        return self.can_send_c(now, max_in_flight)

    cpdef int version_for(self, int api_key, int min_version=0, object max_version=None) except -1:
        """The highest version of ``api_key`` both sides support within [min_version,
        max_version]; UnsupportedVersionError naming both ranges when there is none."""
        version = self.versions.get(api_key)
        if max_version is not None and version is not None:
            theirs = self.api_versions.get(api_key)
            version = min(version, max_version)
            if theirs is not None and version < theirs[0]:
                version = None
        if version is None or version < min_version:
            theirs = self.api_versions.get(api_key)
            ours = SUPPORTED_VERSIONS[ApiKey(api_key)]
            raise UnsupportedVersionError(
                f"node {self.node_id} supports {ApiKey(api_key).name} versions {theirs}, "
                f"this client needs {max(min_version, ours[0])}..{ours[1]}")
        return version

    def negotiate(self, api_keys: list, required_apis) -> list:
        """Take the broker's ApiVersions ranges; the negotiated version of each API is the highest
        both sides speak. Returns the names of ``required_apis`` left without a version."""
        self.api_versions = {e["api_key"]: (e["min_version"], e["max_version"]) for e in api_keys}
        self.versions = {}
        for key, (lo, hi) in SUPPORTED_VERSIONS.items():
            theirs = self.api_versions.get(int(key))
            if theirs is not None and theirs[0] <= hi and lo <= theirs[1]:
                self.versions[int(key)] = min(hi, theirs[1])
        return [ApiKey(k).name for k in required_apis if int(k) not in self.versions]

    def enqueue(self, InFlightRequest req, frame, int64_t now) -> None:
        """Queue ``frame`` (buffers) for writing; ``req`` waits for its response, or, when it
        expects none, completes once written (:meth:`written`)."""
        self.enqueue_c(req, frame, now)

    cdef int enqueue_c(self, InFlightRequest req, object frame, int64_t now) except -1:
        if req.expect_response:
            self.in_flight.append(req)
            self.send_queue.push(frame, None)
        else:
            self.unacked_writes += 1
            self.send_queue.push(frame, req)
        self.last_activity_ms = now
        return 0

    def written(self, done, int64_t now) -> list:
        """The send queue wrote the requests whose tokens are ``done``: those expecting no response
        are complete (returned)."""
        return self.written_c(list(done), now)

    cdef list written_c(self, list done, int64_t now):
        cdef list complete = None
        for req in done:
            if req is not None:
                self.unacked_writes -= 1
                self.unconfirmed = True
                if complete is None:
                    complete = []
                complete.append(req)
        self.last_activity_ms = now
        return complete if complete is not None else _NONE_WRITTEN

    # -- receiving -------------------------------------------------------------------------
    def receive(self, frame, int64_t now) -> tuple:
        """A response frame (without its size prefix): ``(request, body, throttle_time_ms)`` for
        the oldest request in flight, which leaves the in-flight queue. Raises a KafkaError (the
        connection must be closed; the request stays in flight, to fail with the error) for a
        frame with no request waiting, too short, answering another correlation id, or that does
        not decode."""
        return self.receive_c(frame, now)

    cdef tuple receive_c(self, object frame, int64_t now):
        if type(frame) is not bytes:
            frame = bytes(frame)
        return self.receive_frame_c(PyBytes_AS_STRING(frame), PyBytes_GET_SIZE(frame), frame, now)

    cdef tuple receive_frame_c(self, const char *p, Py_ssize_t n, object frame, int64_t now):
        """receive_c() of a frame read in place (``p``, ``n``; ``frame``: the same bytes as an
        object, or None to make one only if needed): a Produce answer is decoded where it lies."""
        cdef InFlightRequest req
        cdef int32_t corr
        if not self.in_flight:
            raise CorruptFrameError(f"node {self.node_id} sent a response with no request in flight")
        req = <InFlightRequest>self.in_flight[0]
        if n < 4:
            raise CorruptFrameError(f"response of {n} bytes from node {self.node_id}")
        corr = _be32(p)
        if corr != req.correlation_id:
            raise CorrelationIdMismatchError(
                f"node {self.node_id} answered correlation id {corr}, expected {req.correlation_id}")
        if type(req.codec) is ProduceCodec:
            body = decode_frame(req.version, <const unsigned char *>p, n)
        else:
            if frame is None:
                frame = PyBytes_FromStringAndSize(p, n)
            if req.api_key == _API_VERSIONS and n >= 6 and \
                    <int16_t>((<unsigned char>p[4] << 8) | <unsigned char>p[5]) == _UNSUPPORTED_VERSION:
                # Brokers answer an ApiVersions version they do not support with error 35 and,
                # usually, a v0 body listing their range; some send a body in another layout.
                # The range is a hint only: without it, fall back to v0, which every broker has.
                try:
                    _, body = decode_response(req.api_key, 0, frame)
                except CorruptFrameError:
                    body = {"error_code": _UNSUPPORTED_VERSION, "api_keys": []}
            elif req.codec is not None:
                body = req.codec.decode(req.version, frame)
            else:
                _, body = decode_response(req.api_key, req.version, frame)
        self.in_flight.popleft()
        self.unconfirmed = False  # a broker answers a connection's requests in order
        self.last_activity_ms = now
        throttle = (body.get("throttle_time_ms", 0) if type(body) is dict
                    else getattr(body, "throttle_time_ms", 0))
        if type(throttle) is int and throttle > 0:
            # KIP-219: the broker answered at once but asks for no new request on this
            # connection for throttle_time_ms; answers to requests in flight are still read.
            if now + throttle > self.throttle_until_ms:
                self.throttle_until_ms = now + throttle
        else:
            throttle = 0
        return req, body, throttle

    # -- time ------------------------------------------------------------------------------
    def deadline(self, int64_t now, int64_t setup_timeout_ms, int64_t request_timeout_ms,
                 int64_t max_idle_ms):
        """Milliseconds until this connection's nearest deadline has passed (exclusive: +1), or
        None when it has none."""
        cdef int64_t d = self.deadline_c(now, setup_timeout_ms, request_timeout_ms, max_idle_ms)
        return None if d == INT64_MAX else d

    cdef int64_t deadline_c(self, int64_t now, int64_t setup_timeout_ms, int64_t request_timeout_ms,
                            int64_t max_idle_ms) noexcept:
        cdef int64_t due, nearest, t
        cdef bint has_due = True
        if self.status == CONNECTING or (self.tls is not None and not self.tls.established):
            due = self.connect_started_ms + setup_timeout_ms
        elif self.in_flight:
            due = (<InFlightRequest>self.in_flight[0]).created_ms + request_timeout_ms
        elif self.status == READY and self.reauth_at_ms:
            due = min(self.reauth_at_ms, self.last_activity_ms + max_idle_ms)
        elif self.status == READY and not self.unacked_writes:
            due = self.last_activity_ms + max_idle_ms
        else:
            has_due = False
            due = 0
        nearest = due - now + 1 if has_due else INT64_MAX
        if self.throttle_until_ms > now:   # wake when a throttled connection may send again
            t = self.throttle_until_ms - now + 1
            if t < nearest:
                nearest = t
        return nearest

    def due(self, int64_t now, int64_t setup_timeout_ms, int64_t request_timeout_ms,
            int64_t max_idle_ms):
        """Which of this connection's deadlines has passed (a :class:`Due`), if any (the first
        that applies)."""
        return _DUE[self.due_c(now, setup_timeout_ms, request_timeout_ms, max_idle_ms)]

    cdef int due_c(self, int64_t now, int64_t setup_timeout_ms, int64_t request_timeout_ms,
                   int64_t max_idle_ms) except -1:
        cdef bint quiet
        if self.status == CONNECTING and now - self.connect_started_ms > setup_timeout_ms:
            return DUE_CONNECT
        if (self.tls is not None and not self.tls.established
                and now - self.connect_started_ms > setup_timeout_ms):
            return DUE_TLS_HANDSHAKE
        if self.in_flight and now - (<InFlightRequest>self.in_flight[0]).created_ms > request_timeout_ms:
            return DUE_REQUEST
        quiet = not self.in_flight and not self.unacked_writes
        if (self.status == READY and self.reauth_at_ms and now >= self.reauth_at_ms
                and quiet and not self.send_queue.has_pending()):
            return DUE_REAUTHENTICATE
        if self.status == READY and quiet and now - self.last_activity_ms > max_idle_ms:
            return DUE_IDLE
        return DUE_NONE

    # -- closing ---------------------------------------------------------------------------
    def reset(self) -> list:
        """Forget the connection's traffic after its socket closed: returns every request that now
        fails (those in flight, and those expecting no response that were not fully written),
        oldest first. The state, handshake and buffers start afresh."""
        return self.reset_c()

    cdef list reset_c(self):
        # TLS: requests already encrypted whose ciphertext was not all written were not written.
        unwritten = self.tls.held_tokens if self.tls is not None else []
        self.tls = None
        self.status = DISCONNECTED
        self.handshake.clear()
        cdef list pending = list(self.in_flight)
        self.in_flight.clear()
        for token in unwritten + self.send_queue.clear():
            if token is not None and not (<InFlightRequest>token).expect_response:
                pending.append(token)
        self.unacked_writes = 0
        self.reader = FrameReader(self.max_frame_size)
        return pending


cdef list _NONE_WRITTEN = []
