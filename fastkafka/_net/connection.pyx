# cython: language_level=3
"""One connection to one broker as a state machine that is fed frames and time.

:class:`Connection` knows the connection's state, its negotiated API versions, the requests it
has in flight (in order), the bytes queued for it and the frames read from it, its deadlines
(connection set-up, the oldest request, SASL re-authentication, idleness, a broker's throttle) and
what to do with a response frame (match it to the oldest request, decode it, note the throttle).
It owns no socket and does no I/O: :class:`~fastkafka._net.network.NetworkClient` owns the sockets and
the poller, moves bytes between them and each connection's send queue and frame reader, and acts
on what the connection reports (close it, complete a request, start the next handshake step).

Compiled, with C-typed fields the network client reads directly; :mod:`fastkafka._net.handshake`
re-exports it with the handshake steps.
"""

from collections import deque
from enum import Enum, IntEnum

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from libc.stdint cimport INT64_MAX, int16_t, int32_t, int64_t, uint32_t
from libc.stdlib cimport free, malloc

from fastkafka._net.clock cimport monotonic_us
from fastkafka._wire.segment cimport Segment
from fastkafka._net.transport cimport (SendQueue, SendQueueCore, sq_clear_c, sq_push_raw_c,
                                        sq_reserve_c, sq_write_c, tls_write_c)

from fastkafka.protocol.produce_codec cimport ProduceCodec, decode_frame

from fastkafka.errors import CorrelationIdMismatchError, CorruptFrameError, UnsupportedVersionError
from fastkafka.protocol import SUPPORTED_VERSIONS, ApiKey, decode_response

UNSUPPORTED_VERSION = UnsupportedVersionError.code
cdef int _UNSUPPORTED_VERSION = UnsupportedVersionError.code
cdef int _API_VERSIONS = int(ApiKey.API_VERSIONS)
cdef int _API_PRODUCE = int(ApiKey.PRODUCE)

cdef extern from "Python.h":
    # the list takes the reference (moved: no INCREF)
    void PyList_SET_ITEM_moved "PyList_SET_ITEM"(PyObject *lst, Py_ssize_t i, PyObject *o)
    object PyList_New(Py_ssize_t n)


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


# -- the in-flight ring -------------------------------------------------------------------------------

# thread: io · lock: none · gil: any
cdef InFlightEntry *_ring_push(ConnCore *c) noexcept nogil:
    """A new entry at the ring's tail (its fields unset; ring_len counts it), or NULL (no
    memory: nothing changed)."""
    cdef InFlightEntry *ring
    cdef Py_ssize_t i, ncap
    if c.ring_len == c.ring_cap:
        ncap = c.ring_cap * 2 if c.ring_cap else 8
        ring = <InFlightEntry *>malloc(ncap * sizeof(InFlightEntry))
        if ring == NULL:
            return NULL
        for i in range(c.ring_len):
            ring[i] = c.ring[(c.ring_head + i) % c.ring_cap]
        free(c.ring)
        c.ring = ring
        c.ring_cap = ncap
        c.ring_head = 0
    c.ring_len += 1
    return &c.ring[(c.ring_head + c.ring_len - 1) % c.ring_cap]


cdef void _entry_free(InFlightEntry *e) noexcept:
    """Drop what an entry owns (with the GIL)."""
    cdef Py_ssize_t k
    Py_XDECREF(e.request)
    e.request = NULL
    if e.batches != NULL:
        for k in range(e.nbatches):
            Py_XDECREF(e.batches[k])
    free(e.batches)
    free(e.glue)
    free(e.results)
    e.batches = NULL
    e.glue = NULL
    e.results = NULL


# thread: io · lock: none · gil: any
cdef int conn_produce_enqueue_c(ConnCore *c, int32_t correlation_id, int64_t now, int16_t version,
                                PyObject **batches, Py_ssize_t nbatches, char *glue,
                                const Segment *segs, Py_ssize_t nsegs) noexcept nogil:
    cdef InFlightEntry *e
    cdef Py_ssize_t i
    if c.sq == NULL or sq_reserve_c(c.sq, nsegs) < 0:
        return -1
    e = _ring_push(c)
    if e == NULL:
        return -1
    for i in range(nsegs):
        sq_push_raw_c(c.sq, segs[i].p, segs[i].n)   # room reserved: cannot fail
    e.correlation_id = correlation_id
    e.version = version
    e.created_ms = now
    e.created_us = monotonic_us()
    e.end_pos = c.sq.queued_bytes
    e.request = NULL
    e.batches = batches
    e.nbatches = nbatches
    e.glue = glue
    e.answered = False
    e.results = NULL
    c.last_activity_ms = now
    return 0


# thread: io · lock: none · gil: any
cdef Py_ssize_t conn_write_c(ConnCore *c) noexcept nogil:
    if not conn_gil_free_c(c):
        return CONN_WRITE_REFUSED
    if c.tlsd != NULL:
        return tls_write_c(c.tlsd, c.sq, c.fd)
    return sq_write_c(c.sq, c.fd)


cdef class ProduceRequest:
    """A Produce request of batches, once answered, failed, or (acks=0) written: what the sender
    needs to complete it. ``batches`` holds the references its in-flight entry owned."""

    def __dealloc__(self):
        free(self.glue)
        self.glue = NULL

    def __call__(self, body, error):
        """Run the network client's produce handler: handler(node_id, batches, body, error)."""
        self.handler(self.node_id, self.batches, body, error)

    def __repr__(self):
        return (f"ProduceRequest(node={self.node_id}, api=PRODUCE, v{self.version}, "
                f"corr={self.correlation_id})")


@cython.no_gc_clear   # __dealloc__ clears the send queue before it frees what it references
cdef class Connection:
    """One connection to one broker: state, send queue, frame reader and in-flight requests.

    The requests in flight are one ring (``st.ring``, see connection.pxd), answered in the order
    they were queued: Produce requests of batches (``conn_produce_enqueue_c``, from either turn of
    the I/O thread), whose answers come back as :class:`ProduceRequest`, and every other request,
    an :class:`InFlightRequest`."""

    def __cinit__(self):
        self.st.status = DISCONNECTED
        self.st.fd = -1
        self.st.tls = False
        self.st.tlsd = NULL
        self.st.unacked_writes = 0
        self.st.throttle_until_ms = self.st.reauth_at_ms = self.st.last_activity_ms = 0
        self.st.produce_version = -1
        self.st.sq = NULL
        self.st.ring = NULL
        self.st.ring_cap = self.st.ring_head = self.st.ring_len = 0

    def __dealloc__(self):
        cdef Py_ssize_t i
        if self.st.ring == NULL:
            return
        if self.st.sq != NULL:
            # No raw segment may point into the glue and batches freed below. (The queue object is
            # alive: this connection holds it, and no_gc_clear keeps that reference until here.)
            sq_clear_c(self.st.sq)
        for i in range(self.st.ring_len):
            _entry_free(conn_entry_c(&self.st, i))
        free(self.st.ring)
        self.st.ring = NULL
        self.st.ring_len = 0

    def __init__(self, int32_t node_id, host, int port, Py_ssize_t max_frame_size):
        self.node_id = node_id
        self.host = host
        self.port = port
        self.st.status = DISCONNECTED
        self.sock = None
        self.st.fd = -1
        self.max_frame_size = max_frame_size
        self.send_queue = SendQueue()
        self.st.sq = &self.send_queue.core
        self.reader = FrameReader(max_frame_size)
        self.st.unacked_writes = 0
        self.unconfirmed = False
        self.api_versions = {}
        self.versions = {}
        self.handshake = deque()
        self.connect_started_ms = 0
        self.st.last_activity_ms = 0
        self.failures = 0
        self.address_index = 0
        self.next_attempt_ms = 0
        self.registered_events = 0
        self.st.reauth_at_ms = 0
        self.st.throttle_until_ms = 0
        self.set_tls_c(None)

    # -- the fields in ``st`` (ConnCore), as attributes ------------------------------------
    @property
    def status(self):
        """DISCONNECTED / CONNECTING / HANDSHAKE / READY (the State's value)."""
        return self.st.status

    @status.setter
    def status(self, int value):
        self.st.status = value

    @property
    def fd(self):
        """sock.fileno() while sock is set, else -1."""
        return self.st.fd

    @fd.setter
    def fd(self, int value):
        self.st.fd = value

    @property
    def unacked_writes(self):
        """Requests expecting no response, not yet fully written."""
        return self.st.unacked_writes

    @unacked_writes.setter
    def unacked_writes(self, int value):
        self.st.unacked_writes = value

    @property
    def last_activity_ms(self):
        return self.st.last_activity_ms

    @last_activity_ms.setter
    def last_activity_ms(self, int64_t value):
        self.st.last_activity_ms = value

    @property
    def reauth_at_ms(self):
        """SASL session: no new requests from then on (0: none)."""
        return self.st.reauth_at_ms

    @reauth_at_ms.setter
    def reauth_at_ms(self, int64_t value):
        self.st.reauth_at_ms = value

    @property
    def throttle_until_ms(self):
        """Broker quota (KIP-219): no new request before then."""
        return self.st.throttle_until_ms

    @throttle_until_ms.setter
    def throttle_until_ms(self, int64_t value):
        self.st.throttle_until_ms = value

    @property
    def tls(self):
        """The TlsSession (SSL / SASL_SSL) once connected, else None."""
        return self._tls

    @tls.setter
    def tls(self, value):
        self.set_tls_c(value)

    cdef int set_tls_c(self, object tls) except -1:
        self._tls = tls
        self.st.tls = tls is not None
        self.st.tlsd = NULL          # the GIL-free turn's table sets it again (prepare_c)
        return 0

    @property
    def produce_version(self):
        """The Produce version negotiated with the broker, -1 before."""
        return self.st.produce_version

    @property
    def produce_count(self):
        """Produce requests of batches in flight."""
        cdef Py_ssize_t i, n = 0
        for i in range(self.st.ring_len):
            if conn_entry_c(&self.st, i).request == NULL:
                n += 1
        return n

    def produce_batches(self):
        """The batches of the Produce requests in flight, oldest first (new references: the
        requests keep theirs)."""
        cdef list out = []
        cdef Py_ssize_t i, j
        cdef InFlightEntry *e
        for i in range(self.st.ring_len):
            e = conn_entry_c(&self.st, i)
            if e.request == NULL:
                for j in range(e.nbatches):
                    out.append(<object>e.batches[j])
        return out

    def requests_in_flight(self):
        """The requests in flight that are not Produce requests of batches (InFlightRequest),
        oldest first."""
        cdef Py_ssize_t i
        cdef InFlightEntry *e
        cdef list out = []
        for i in range(self.st.ring_len):
            e = conn_entry_c(&self.st, i)
            if e.request != NULL:
                out.append(<object>e.request)
        return out

    def in_flight_ids(self):
        """The correlation ids of every request in flight, oldest first (the ring's order)."""
        return [conn_entry_c(&self.st, i).correlation_id for i in range(self.st.ring_len)]

    @property
    def state(self):
        """The connection's :class:`State`."""
        return State(self.st.status)

    @state.setter
    def state(self, value):
        self.st.status = int(State(value))

    def in_flight_count(self) -> int:
        return self.in_flight_count_c()

    def __repr__(self):
        return (f"Connection(node={self.node_id}, {self.host}:{self.port}, {State(self.st.status).name}, "
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
        self.st.produce_version = self.versions.get(_API_PRODUCE, -1)
        return [ApiKey(k).name for k in required_apis if int(k) not in self.versions]

    def enqueue(self, InFlightRequest req, frame, int64_t now) -> None:
        """Queue ``frame`` (buffers) for writing; ``req`` waits for its response, or, when it
        expects none, completes once written (:meth:`written`)."""
        self.enqueue_c(req, frame, now)

    cdef int enqueue_c(self, InFlightRequest req, object frame, int64_t now) except -1:
        cdef InFlightEntry *e
        if req.expect_response:
            e = _ring_push(&self.st)
            if e == NULL:
                raise MemoryError()
            try:
                self.send_queue.push(frame, None)
            except BaseException:
                self.st.ring_len -= 1
                raise
            Py_INCREF(req)
            e.correlation_id = req.correlation_id
            e.version = req.version
            e.created_ms = now
            e.created_us = monotonic_us()
            e.end_pos = self.send_queue.core.queued_bytes
            e.request = <PyObject *>req
            e.batches = NULL
            e.nbatches = 0
            e.glue = NULL
            e.answered = False
            e.results = NULL
        else:
            self.st.unacked_writes += 1
            self.send_queue.push(frame, req)
        self.st.last_activity_ms = now
        return 0

    cdef int push_token_c(self, object token) except -1:
        """``token`` (a request expecting no answer, whose bytes were queued raw) comes back from
        written_c() once everything queued so far is written."""
        self.send_queue._tokens.append((self.send_queue.core.queued_bytes, token))
        self.st.unacked_writes += 1
        return 0

    def written(self, done, int64_t now) -> list:
        """The send queue wrote the requests whose tokens are ``done``: those expecting no response
        are complete (returned)."""
        return self.written_c(list(done), now)

    cdef list written_c(self, list done, int64_t now):
        cdef list complete = None
        for req in done:
            if req is not None:
                self.st.unacked_writes -= 1
                self.unconfirmed = True
                if complete is None:
                    complete = []
                complete.append(req)
        self.st.last_activity_ms = now
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
        object, or None to make one only if needed): a Produce answer is decoded where it lies.
        The frame answers the ring's oldest request; a Produce request of batches comes back as a
        ProduceRequest."""
        cdef InFlightRequest req
        cdef InFlightEntry *e
        cdef int32_t corr
        if self.st.ring_len == 0:
            raise CorruptFrameError(f"node {self.node_id} sent a response with no request in flight")
        if n < 4:
            raise CorruptFrameError(f"response of {n} bytes from node {self.node_id}")
        corr = be32_c(p)
        e = conn_entry_c(&self.st, 0)
        if corr != e.correlation_id:
            raise CorrelationIdMismatchError(
                f"node {self.node_id} answered correlation id {corr}, expected {e.correlation_id}")
        if e.request == NULL:
            if self.send_queue.core.written_bytes < e.end_pos:
                raise CorruptFrameError(
                    f"node {self.node_id} answered correlation id {corr} before the request "
                    f"was fully written")
            body = decode_frame(e.version, <const unsigned char *>p, n)
        else:
            req = <InFlightRequest>e.request
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
        r = self.take_head_c()
        self.unconfirmed = False  # a broker answers a connection's requests in order
        self.st.last_activity_ms = now
        throttle = (body.get("throttle_time_ms", 0) if type(body) is dict
                    else getattr(body, "throttle_time_ms", 0))
        if type(throttle) is int and throttle > 0:
            # KIP-219: the broker answered at once but asks for no new request on this
            # connection for throttle_time_ms; answers to requests in flight are still read.
            if now + throttle > self.st.throttle_until_ms:
                self.st.throttle_until_ms = now + throttle
        else:
            throttle = 0
        return r, body, throttle

    cdef object take_head_c(self):
        """The ring's oldest request leaves it: its InFlightRequest, or for a Produce request of
        batches a ProduceRequest (the batch references move into its list; the glue is freed:
        the send queue must no longer reference it)."""
        cdef InFlightEntry *e = conn_entry_c(&self.st, 0)
        cdef ProduceRequest r
        cdef Py_ssize_t i
        cdef object req
        self.st.ring_head = (self.st.ring_head + 1) % self.st.ring_cap
        self.st.ring_len -= 1
        if e.request != NULL:
            req = <object>e.request        # a new reference...
            Py_XDECREF(e.request)          # ...and the entry's is dropped: it moved into ``req``
            e.request = NULL
            return req
        r = ProduceRequest.__new__(ProduceRequest)
        batches = PyList_New(e.nbatches)
        for i in range(e.nbatches):
            PyList_SET_ITEM_moved(<PyObject *>batches, i, e.batches[i])
        r.correlation_id = e.correlation_id
        r.created_ms = e.created_ms
        r.created_us = e.created_us
        r.version = e.version
        r.node_id = self.node_id
        r.batches = batches
        if e.answered:
            r.results = [(e.results[2 * i], e.results[2 * i + 1]) for i in range(e.nbatches)]
        e.nbatches = 0                     # the references moved into ``batches``
        _entry_free(e)                     # the glue too: the send queue no longer points into it
        return r

    cdef str oldest_text_c(self):
        cdef InFlightEntry *e
        if self.st.ring_len == 0:
            return "(none)"
        e = conn_entry_c(&self.st, 0)
        if e.request != NULL:
            return repr(<object>e.request)
        return (f"ProduceRequest(node={self.node_id}, api=PRODUCE, v{e.version}, "
                f"corr={e.correlation_id})")

    cdef int64_t _oldest_created_ms(self) noexcept:
        """created_ms of the oldest request in flight; call with one in flight."""
        return conn_entry_c(&self.st, 0).created_ms

    def oldest_request(self):
        """The oldest request in flight as text, for messages and tests."""
        return self.oldest_text_c()

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
        if self.st.status == CONNECTING or (self._tls is not None and not self._tls.established):
            due = self.connect_started_ms + setup_timeout_ms
        elif self.st.ring_len:
            due = self._oldest_created_ms() + request_timeout_ms
        elif self.st.status == READY and self.st.reauth_at_ms:
            due = min(self.st.reauth_at_ms, self.st.last_activity_ms + max_idle_ms)
        elif self.st.status == READY and not self.st.unacked_writes:
            due = self.st.last_activity_ms + max_idle_ms
        else:
            has_due = False
            due = 0
        nearest = due - now + 1 if has_due else INT64_MAX
        if self.st.throttle_until_ms > now:   # wake when a throttled connection may send again
            t = self.st.throttle_until_ms - now + 1
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
        if self.st.status == CONNECTING and now - self.connect_started_ms > setup_timeout_ms:
            return DUE_CONNECT
        if (self._tls is not None and not self._tls.established
                and now - self.connect_started_ms > setup_timeout_ms):
            return DUE_TLS_HANDSHAKE
        if self.st.ring_len and now - self._oldest_created_ms() > request_timeout_ms:
            return DUE_REQUEST
        quiet = not self.st.ring_len and not self.st.unacked_writes
        if (self.st.status == READY and self.st.reauth_at_ms and now >= self.st.reauth_at_ms
                and quiet and not self.send_queue.has_pending()):
            return DUE_REAUTHENTICATE
        if self.st.status == READY and quiet and now - self.st.last_activity_ms > max_idle_ms:
            return DUE_IDLE
        return DUE_NONE

    # -- closing ---------------------------------------------------------------------------
    def reset(self) -> list:
        """Forget the connection's traffic after its socket closed: returns every request that now
        fails (those in flight, InFlightRequest and ProduceRequest in the order they were queued,
        then those expecting no response that were not fully written). The send queue is cleared
        before the Produce entries' glue is freed. The state, handshake and buffers start afresh."""
        return self.reset_c()

    cdef list reset_c(self):
        # TLS: requests already encrypted whose ciphertext was not all written were not written.
        unwritten = self._tls.held_tokens if self._tls is not None else []
        self.set_tls_c(None)
        self.st.status = DISCONNECTED
        self.handshake.clear()
        # The send queue first: its raw segments point into the Produce entries' glue and batches.
        unwritten = unwritten + self.send_queue.clear_c()
        cdef list pending = []
        while self.st.ring_len:          # oldest first
            pending.append(self.take_head_c())
        for token in unwritten:
            if token is None:
                continue
            if type(token) is ProduceRequest or not (<InFlightRequest>token).expect_response:
                pending.append(token)
        self.st.unacked_writes = 0
        self.reader = FrameReader(self.max_frame_size)
        return pending


cdef list _NONE_WRITTEN = []
