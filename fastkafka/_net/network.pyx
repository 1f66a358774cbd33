# cython: language_level=3
"""NetworkClient: the sockets and the poller, connections to brokers, metadata refresh.

Each connection's state machine (state, negotiated versions, requests in flight, deadlines, what a
response frame means) is :class:`fastkafka._net.connection.Connection`, which does no I/O; this
client owns the sockets and the poller (fastkafka/_net/ioloop.pyx), connects, drives the TLS
handshake, moves bytes between sockets and each connection's send queue and frame reader, and acts
on what the connections report.

Compiled, with the connections' C fields read directly: one turn of :meth:`poll` costs a few
microseconds of interpreter-free code on top of its system calls.

Single-threaded by design: only the thread that owns the client (the producer's sender thread, or the
caller of an admin request) calls its methods; :meth:`NetworkClient.wakeup` is the one call that is safe
from any thread. ``send`` only queues a request; ``poll`` does the network work in the order the
design gives: send what can be sent, poll the sockets, handle disconnects, expire requests that waited
too long, then run the completion handlers — after the I/O, with no lock held.

Produce requests of batches: both turns of the producer's I/O thread queue them with
``produce_send_c`` (network.pxd: raw segments on the connection's send queue, an entry of its one
in-flight ring owning the batches, the correlation id from the client's C counter
``next_correlation_c``, which every request uses); their answers are read here, like any other
(or, all success, by the GIL-free turn), and go, with failures (disconnect, request timeout,
garbled answer), to ``produce_handler(node_id, batches, body, error)`` from the completions,
where an InFlightRequest's callback would run.
"""

import errno
import logging
import os
import random
import socket
import ssl
from collections import deque

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from libc.stdint cimport INT64_MAX, int16_t, int32_t, int64_t, uint32_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

from fastkafka._net.clock cimport monotonic_ms as c_monotonic_ms, ms_since_us
from fastkafka._net.connection cimport (
    CONNECTING, DISCONNECTED, DUE_CONNECT, DUE_IDLE, DUE_NONE, DUE_REAUTHENTICATE, DUE_REQUEST,
    DUE_TLS_HANDSHAKE, HANDSHAKE, READY, Connection, InFlightRequest, ProduceRequest,
    conn_entry_c, conn_write_c)
from fastkafka._wire.segment cimport Segment
from fastkafka._net.ioloop cimport Poller
from fastkafka._net.transport cimport FrameReader, SendQueue
from fastkafka._net.sampled cimport ProducerSampled, SampledRegistry, sampled_record_c

from fastkafka._net.ioloop import READ as _READ, WRITE as _WRITE
from fastkafka._net.cells import monotonic_ms as now_ms  # the producer's one clock
from fastkafka._net.connection import State
from fastkafka._net.cluster import cluster_from_response
from fastkafka._net.metadata_answer import LargeMetadataAnswer, MetadataCodec, MetadataDecodeJob
from fastkafka.errors import (CorruptFrameError, DisconnectedError, InvalidBrokerResponseError,
                              KafkaError, NetworkError, RequestTimedOutError, TlsError,
                              UnsupportedVersionError)
from fastkafka.protocol import SUPPORTED_VERSIONS, ApiKey, encode_request

log = logging.getLogger("fastkafka")

cdef int EV_READ = _READ
cdef int EV_WRITE = _WRITE
cdef int API_METADATA = int(ApiKey.METADATA)
cdef int UNSUPPORTED_VERSION = UnsupportedVersionError.code

# Tests make a stage of the I/O loop fail once to prove the failure is contained: a callable
# ``(stage, client, conn)`` that may raise, None normally (one pointer test per stage). Only the
# test-only module fastkafka._net.failpoints sets it.
cdef object _failpoint = None


cdef void set_failpoint_c(object fn) noexcept:
    global _failpoint
    _failpoint = fn


include "network_setup.pxi"


cdef class NetworkClient:
    def __init__(self, config, metadata, *, clock=now_ms, manage_metadata=True,
                 required_apis=(ApiKey.METADATA,)):
        self.config = config
        self.required_apis = tuple(required_apis)
        self.metadata = metadata
        self.clock = clock
        self._default_clock = clock is now_ms
        self.manage_metadata = manage_metadata
        self.max_in_flight = config.max_in_flight_requests_per_connection
        self.request_timeout_ms = config.request_timeout_ms
        self._setup_timeout_ms = config.socket_connection_setup_timeout_ms
        self._max_idle_ms = config.connections_max_idle_ms
        self._reconnect_backoff_ms = config.reconnect_backoff_ms
        self._rebootstrap = getattr(config, "metadata_recovery_strategy", "none") == "rebootstrap"
        self.client_id = config.client_id
        self.connections = {}
        # epoll + eventfd, waiting without the GIL (see fastkafka/_net/ioloop.pyx)
        self.poller = Poller()
        self.st.correlation = 0
        self.st.produce_requests = self.st.produce_bytes = 0
        # windowed statistics (the Java client's metrics, fastkafka._net.sampled)
        self.sampled = SampledRegistry(getattr(config, "metrics_sample_window_ms", 30_000),
                                       getattr(config, "metrics_num_samples", 2))
        self.st.metrics = &self.sampled.g
        self.produce_handler = None
        self._completions = []
        self._metadata_in_flight = False
        self._metadata_codec = MetadataCodec()
        self._metadata_job = None
        self._last_metadata_problems = ()
        self._closed = False
        self._tls_context = getattr(config, "tls_context", None)
        self.stats = {"requests": 0, "responses": 0, "disconnects": 0, "timeouts": 0, "bytes_sent": 0,
                      "contained_failures": 0, "authentication_failures": 0, "reauthentications": 0,
                      "throttled_responses": 0, "throttle_time_ms_total": 0, "rebootstraps": 0,
                      "tls_openssl_direct": 0, "tls_ssl_module": 0}
        self._unreachable_since = None
        self._refresh_due = metadata.refresh_due if manage_metadata else None
        # SASL (fastkafka._net.sasl): None for PLAINTEXT/SSL. A node whose last authentication failed
        # keeps its error here until one of its connections authenticates.
        from fastkafka._net.sasl import SaslSettings
        self.sasl = SaslSettings.from_config(config)
        self.auth_errors = {}
        self.error_hook = None
        self._all_down_since = None

    cdef int64_t now_c(self) except? -1:
        if self._default_clock:
            return c_monotonic_ms()
        return self.clock()

    # -- any thread ------------------------------------------------------------------------
    def wakeup(self):
        self.poller.wakeup()   # no system call when a wake-up is already pending

    def call_soon(self, callback):
        """Any thread: run ``callback(None, None)`` on the I/O thread after its turn's I/O."""
        self._completions.append((callback, None, None))   # atomic (GIL); GSSAPI's KDC step
        self.poller.wakeup()

    # -- connection management -------------------------------------------------------------
    def _address(self, int32_t node_id):
        b = self.metadata.cluster.broker(node_id)
        if b is not None:
            return b.host, b.port
        if node_id < 0 and -node_id <= len(self.metadata.bootstrap_servers):
            return self.metadata.bootstrap_servers[-node_id - 1]
        return None

    cdef Connection conn_for(self, int32_t node_id):
        conn = self.connections.get(node_id)
        if conn is None:
            addr = self._address(node_id)
            if addr is None:
                return None
            conn = Connection(node_id, addr[0], addr[1], self.config.max_response_size)
            (<Connection>conn).st.nm = self.sampled.node_c(node_id)
            self.connections[node_id] = conn
        return <Connection>conn

    def is_ready(self, int32_t node_id):
        conn = self.connections.get(node_id)
        return conn is not None and (<Connection>conn).can_send_c(self.now_c(), self.max_in_flight)

    def ready(self, int32_t node_id, int64_t now):
        """True when a request can go to ``node_id`` now; otherwise starts connecting if allowed."""
        return self.ready_c(node_id, now)

    cdef bint ready_c(self, int32_t node_id, int64_t now) except -1:
        cdef Connection conn
        c = self.connections.get(node_id)
        if c is not None:
            conn = <Connection>c
            if conn.can_send_c(now, self.max_in_flight):
                return True
        conn = self.conn_for(node_id)
        if conn is not None and conn.st.status == DISCONNECTED and now >= conn.next_attempt_ms:
            _connect(self, conn, now)
            return conn.can_send_c(now, self.max_in_flight)
        return False

    def connection_delay(self, int32_t node_id, int64_t now):
        cdef Connection conn
        c = self.connections.get(node_id)
        if c is None:
            return 0
        conn = <Connection>c
        if conn.st.status == READY and conn.st.throttle_until_ms > now:
            return conn.st.throttle_until_ms - now   # throttled by the broker (KIP-219)
        if conn.st.status != DISCONNECTED:
            return self.request_timeout_ms
        return max(conn.next_attempt_ms - now, 0)

    # Connection set-up (network_setup.pxi): the steps the handshake modules call back.
    def _connect(self, Connection conn, int64_t now):
        _connect(self, conn, now)

    def _next_handshake_step(self, Connection conn, int64_t now):
        _next_handshake_step(self, conn, now)

    def _on_api_versions(self, Connection conn, step, body, error):
        _on_api_versions(self, conn, step, body, error)

    def _authentication_failed(self, Connection conn, int64_t now, error):
        _authentication_failed(self, conn, now, error)

    def _tls_handshake(self, Connection conn, int64_t now):
        _tls_handshake(self, conn, now)

    def authentication_error(self, int32_t node_id):
        """The error of ``node_id``'s last failed authentication, while no connection to it has
        authenticated since."""
        return self.auth_errors.get(node_id)

    def api_version(self, int32_t node_id, int api_key):
        conn = self.connections.get(node_id)
        return None if conn is None else (<Connection>conn).versions.get(api_key)

    cdef int update_interest(self, Connection conn) except -1:
        cdef int events
        if conn.st.fd < 0:
            return 0
        events = EV_READ
        if (conn.st.status == CONNECTING or conn.send_queue.has_pending_c()
                or (conn._tls is not None and conn._tls.wants_write())):
            events |= EV_WRITE
        if events == conn.registered_events:
            return 0
        if conn.registered_events:
            self.poller.modify(conn.st.fd, events, conn)
        else:
            self.poller.register(conn.st.fd, events, conn)
        conn.registered_events = events
        return 0

    def _close(self, Connection conn, int64_t now, error, failure=None, record=True):
        """Close the connection; every request in flight on it fails with ``error``.

        A connection closed before it was ready is a failed connection attempt: ``failure`` (else
        the error's text) is recorded as the last connection error of its address, unless
        ``record`` is False (the client itself is closing it)."""
        cdef InFlightRequest req
        if record and (conn.st.status == CONNECTING or conn.st.status == HANDSHAKE):
            conn.address_index += 1  # the next attempt tries the host's next address
            if failure is None:
                failure = (f"handshake failed: {getattr(error, 'message', error)}"
                           if conn.st.status == HANDSHAKE else str(getattr(error, "message", error)))
            self.metadata.connection_failed(conn.host, conn.port, failure)
        if conn.sock is not None:
            if conn.registered_events:
                self.poller.unregister(conn.st.fd)
            conn.registered_events = 0
            conn.sock.close()
            conn.sock = None
            conn.st.fd = -1
        was_ready = conn.st.status == READY
        pending = conn.reset_c()
        self.stats["disconnects"] += 1
        if was_ready:
            sampled_record_c(&self.sampled.g.connections_closed, &self.sampled.g.conf, 1, now)
        if was_ready:
            # A connection that worked is retried after the base backoff.
            conn.next_attempt_ms = now + self._reconnect_backoff_ms
        else:
            _schedule_reconnect(self, conn, now)
            if record and self.error_hook is not None:
                _attempt_failed(self, now)
        for r in pending:
            if type(r) is ProduceRequest:
                (<ProduceRequest>r).handler = self.produce_handler
                if (<ProduceRequest>r).results is not None:
                    # answered (and read) without the GIL before the close: delivered
                    self._completions.append((r, (<ProduceRequest>r).results, None))
                else:
                    self._completions.append((r, None, error))
                continue
            req = <InFlightRequest>r
            if req.api_key == API_METADATA:
                self._metadata_in_flight = False
            self._completions.append((req.callback, None, error))
        log.debug("closed connection to node %s: %s", conn.node_id, error)
        if self.manage_metadata:
            self.metadata.request_update()

    def close(self, node_id=None):
        now = self.now_c()
        if node_id is not None:
            conn = self.connections.get(node_id)
            if conn is not None:
                self._close(conn, now, DisconnectedError(f"connection to node {node_id} closed"),
                            record=False)
            self._run_completions()
            return
        if self._metadata_job is not None:   # a large answer being decoded: no longer wanted
            self._metadata_job.cancel()
        for conn in list(self.connections.values()):
            self._close(conn, now, DisconnectedError("client closed"), record=False)
        self._run_completions()
        self._closed = True
        self.poller.close()

    # -- requests --------------------------------------------------------------------------
    cdef int32_t _next_correlation_id(self) noexcept:
        return next_correlation_c(&self.st)

    cdef int _fold_produce_stats(self) except -1:
        """Count the Produce requests produce_send_c queued, and the bytes it wrote, in ``stats``."""
        if self.st.produce_requests or self.st.produce_bytes:
            self.stats["requests"] += self.st.produce_requests
            self.stats["bytes_sent"] += self.st.produce_bytes
            self.st.produce_requests = self.st.produce_bytes = 0
        return 0

    cdef int _enqueue(self, Connection conn, InFlightRequest req, object body, int64_t now) except -1:
        cdef long long before = conn.send_queue.core.queued_bytes
        if req.codec is None:
            frame = encode_request(req.api_key, req.version, req.correlation_id, self.client_id, body)
        else:
            frame = req.codec.encode(req.version, req.correlation_id, self.client_id, body)
        conn.enqueue_c(req, frame, now)
        self.stats["requests"] += 1
        _record_io(self, conn, False, conn.send_queue.core.queued_bytes - before, now)
        # No poller change here: poll() writes queued requests before it waits, and asks for
        # write readiness only for bytes the socket did not take (two epoll_ctl calls per
        # request spared).
        return 0

    def _send_internal(self, Connection conn, api_key, int version, body, int64_t now, callback,
                       codec=None):
        req = InFlightRequest(self._next_correlation_id(), int(api_key), version, True, now, callback,
                              conn.node_id, internal=True, codec=codec)
        self._enqueue(conn, req, body, now)

    def send(self, int32_t node_id, api_key, body, int64_t now, callback, *,
             bint expect_response=True, int min_version=0, max_version=None, codec=None):
        """Queue a request to a READY node. ``callback(body, error)`` runs from ``poll``.
        The version is the highest both sides support within [min_version, max_version].
        ``codec`` replaces the generic schema codec for this request (see InFlightRequest)."""
        return self.send_c(node_id, int(api_key), body, now, callback, expect_response, min_version,
                           max_version, codec)

    cdef InFlightRequest send_c(self, int32_t node_id, int api_key, object body, int64_t now,
                                object callback, bint expect_response, int min_version,
                                object max_version, object codec):
        cdef Connection conn
        c = self.connections.get(node_id)
        if c is None or (<Connection>c).status != READY:
            raise NetworkError(f"node {node_id} is not ready")
        conn = <Connection>c
        version = conn.version_for(api_key, min_version, max_version)
        req = InFlightRequest(self._next_correlation_id(), api_key, version, expect_response,
                              now, callback, node_id, False, codec)
        self._enqueue(conn, req, body, now)
        return req

    def confirm_writes(self, int64_t now):
        """Send an ApiVersions request on every ready connection that wrote requests expecting no
        response (acks=0 Produce) since its last response. A broker handles a connection's
        requests in order, so the answer proves the earlier ones were processed; closing the
        socket right after writing them can make the broker drop the last ones unprocessed.
        Returns the set of node ids waited on; each leaves the set when its answer (or an error)
        arrives."""
        from fastkafka._net.handshake import API_VERSIONS_BODY, API_VERSIONS_CODEC
        waiting = set()
        for c in list(self.connections.values()):
            conn = <Connection>c
            if conn.st.status == READY and (conn.unconfirmed or conn.st.unacked_writes):
                self.send(conn.node_id, ApiKey.API_VERSIONS, API_VERSIONS_BODY, now,
                          lambda _body, _err, node=conn.node_id: waiting.discard(node),
                          codec=API_VERSIONS_CODEC)
                waiting.add(conn.node_id)
        return waiting

    def in_flight_count(self, node_id=None):
        if node_id is not None:
            conn = self.connections.get(node_id)
            return 0 if conn is None else (<Connection>conn).in_flight_count_c()
        return sum((<Connection>c).in_flight_count_c() for c in self.connections.values())

    def least_loaded_node(self, int64_t now):
        """A READY node with the fewest requests in flight; else a connecting one; else one that
        may be connected to now. Bootstrap addresses are used until the first metadata arrives."""
        cdef Connection conn
        cluster = self.metadata.cluster
        nodes = list(cluster.brokers)
        if not nodes:
            nodes = [-(i + 1) for i in range(len(self.metadata.bootstrap_servers))]
        random.shuffle(nodes)
        best, best_load = None, None
        connecting = None
        can_connect = None
        for node in nodes:
            c = self.connections.get(node)
            conn = <Connection>c if c is not None else None
            if conn is not None and conn.st.status == READY:
                load = conn.in_flight_count_c()
                if load < self.max_in_flight and (best_load is None or load < best_load):
                    best, best_load = node, load
            elif conn is not None and (conn.st.status == CONNECTING or conn.st.status == HANDSHAKE):
                connecting = node
            elif conn is None or now >= conn.next_attempt_ms:
                can_connect = node
        if best is not None:
            return best
        if connecting is not None:
            return connecting
        return can_connect

    # -- metadata --------------------------------------------------------------------------
    cdef int64_t maybe_update_metadata_c(self, int64_t now) except? -1:
        """Send a Metadata request when one is due; returns ms until it should be looked at again."""
        cdef int64_t wait
        if not self.manage_metadata:
            return 1 << 30
        job = self._metadata_job
        if job is not None and job.outcome is not None:   # a large answer, decoded off the turn
            self._metadata_job = None
            self._on_metadata(*job.outcome)
        if self._rebootstrap:
            self._maybe_rebootstrap(now)
        wait = self._refresh_due.at_ms - now     # Metadata.time_to_next_update, read from C
        if wait > 0 or self._metadata_in_flight:
            return wait if wait > 0 else self.request_timeout_ms
        node = self.least_loaded_node(now)
        if node is None:
            return self._reconnect_backoff_ms
        if self.ready_c(node, now):
            topics = [{"name": t} for t in self.metadata.request_topics()]
            body = {"topics": topics, "allow_auto_topic_creation": True,
                    "include_topic_authorized_operations": False}
            self._metadata_in_flight = True
            try:
                self.send(node, ApiKey.METADATA, body, now, self._on_metadata,
                          codec=self._metadata_codec)
            except KafkaError as e:
                self._metadata_in_flight = False
                self.metadata.failed_update(now, e)
                return self._reconnect_backoff_ms
            return self.request_timeout_ms
        return self._reconnect_backoff_ms

    cdef int _maybe_rebootstrap(self, int64_t now) except -1:
        """metadata_recovery_strategy=rebootstrap: once every broker known from metadata has been
        unreachable (its connection attempts failing) for metadata_recovery_rebootstrap_trigger_ms,
        the next Metadata request goes to the bootstrap addresses again."""
        cdef bint known = False
        cdef dict brokers = self.metadata.cluster.brokers
        for node in brokers:              # (every turn: no list, no generator)
            if node >= 0:
                known = True
            conn = self.connections.get(node)
            if conn is None or (<Connection>conn).failures == 0:   # (0 again once it is ready)
                self._unreachable_since = None
                return 0
        if not known:
            self._unreachable_since = None   # the bootstrap addresses are in use already
            return 0
        if self._unreachable_since is None:
            self._unreachable_since = now
            return 0
        if now - self._unreachable_since < self.config.metadata_recovery_rebootstrap_trigger_ms:
            return 0
        log.warning("every known broker (%s) has been unreachable for %d ms: asking the bootstrap "
                    "addresses for metadata again", ", ".join(map(str, sorted(brokers))),
                    now - self._unreachable_since)
        self._unreachable_since = None
        self.stats["rebootstraps"] += 1
        self.metadata.rebootstrap()
        return 0

    def _on_metadata(self, body, error, problems=None):
        """A Metadata answer; or (``problems`` given) the Cluster a MetadataDecodeJob built."""
        now = self.now_c()
        if error is None and type(body) is LargeMetadataAnswer and not self._closed:
            # decoded on a thread of its own (fastkafka._net.metadata_answer): in flight until done
            self._metadata_job = MetadataDecodeJob(body, self.wakeup).start()
            return
        self._metadata_in_flight = False
        if error is not None or type(body) is LargeMetadataAnswer:   # (the latter: closed)
            self.metadata.failed_update(now, error)
            return
        if problems is None:
            problems = []
            body = cluster_from_response(body, problems)
        cluster = body
        if problems:
            key = tuple(problems[:20])
            if key != self._last_metadata_problems:   # once per distinct answer, not per refresh
                self._last_metadata_problems = key
                log.warning("metadata answer with problems (%d): %s", len(problems),
                            "; ".join(problems[:5]) + (" ..." if len(problems) > 5 else ""))
        if not cluster.brokers:
            self.metadata.failed_update(now, InvalidBrokerResponseError(
                "metadata response listed no usable broker"
                + (f": {problems[0]}" if problems else "")))
            return
        self.metadata.update(cluster, now)

    # -- the poll loop ---------------------------------------------------------------------
    def poll(self, int64_t timeout_ms, now=None):
        """Do the network work for up to ``timeout_ms``, then run completion handlers."""
        self.poll_c(timeout_ms, self.now_c() if now is None else now)

    cdef int set_gil_free_c(self, gil_free_fn fn, void *ctx, int64_t *until_ms,
                           int64_t python_timeout_ms) except -1:
        """For the next poll only: let ``fn(ctx, ...)`` (the sender's GIL-free turn) run inside
        its wait (Poller.set_gil_free), which then lasts until the GIL turn's next deadline at
        most: the network's own, or ``python_timeout_ms`` from now (the caller's, e.g. connection
        back-offs); that deadline is written to ``until_ms[0]`` before the wait."""
        self._xfn = fn
        self._xctx = ctx
        self._x_until = until_ms
        self._x_python_timeout = python_timeout_ms
        return 0

    cdef int poll_c(self, int64_t timeout_ms, int64_t now) except -1:
        cdef int64_t t, net
        cdef Connection conn
        cdef int fd, mask
        cdef gil_free_fn xfn = self._xfn
        self._xfn = NULL                 # set_gil_free_c() holds for this poll only
        self._fold_produce_stats()
        net = self.maybe_update_metadata_c(now)
        if self.request_timeout_ms < net:
            net = self.request_timeout_ms
        t = self._time_to_next_timeout(now)
        if t < net:
            net = t
        if net < timeout_ms:
            timeout_ms = net
        if timeout_ms < 0:
            timeout_ms = 0
        self._write_all(now)
        if self._completions:
            # e.g. acks=0 requests completed by the write above: run them without waiting
            timeout_ms = 0
        if xfn != NULL and timeout_ms != 0:
            # The GIL-free turn may run inside the wait until the GIL turn's own next deadline:
            # the network's (metadata, connection and request deadlines) or the caller's.
            t = self._x_python_timeout if self._x_python_timeout < net else net
            self._x_until[0] = now + (t if t > 0 else 0)
            self.poller.set_gil_free(xfn, self._xctx)
            try:
                events = self.poller.poll(timeout_ms)
            finally:
                self.poller.set_gil_free(NULL, NULL)
            self._fold_produce_stats()
        else:
            events = self.poller.poll(timeout_ms)
        if timeout_ms or events:
            now = self.now_c()   # after a wait: deadlines are judged by the time it ended
        if events:
            for ev in events:
                conn = <Connection>ev[0]
                fd = ev[1]
                mask = ev[2]
                if conn.st.fd != fd:
                    continue   # closed (or reconnected) while handling an earlier event
                try:
                    self._io(conn, mask, now)
                except Exception as e:
                    # Nothing a broker sends may stop the I/O loop: a failure while handling one
                    # connection's bytes closes that connection, and its requests fail (and are
                    # retried) as on a disconnect.
                    self._contain(conn, now, e)
            self._write_all(now)
        self._handle_timeouts(now)
        self._run_completions()
        return 0

    cdef int _io(self, Connection conn, int mask, int64_t now) except -1:
        if conn.st.status == CONNECTING:
            err = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                self._close(conn, now, DisconnectedError(
                    f"connect to node {conn.node_id} ({conn.host}:{conn.port}) failed: "
                    f"{errno.errorcode.get(err, err)}"), failure=errno_text(err))
                return 0
            _connected(self, conn, now)
            if conn._tls is not None:
                return 0  # the TLS handshake's first flight was just written
        if conn._tls is not None and not conn._tls.established:
            _tls_handshake(self, conn, now)
            return 0
        if mask & EV_READ and conn.st.fd >= 0:
            self._read(conn, now)
        if mask & EV_WRITE and conn.st.fd >= 0:
            self._write(conn, now)
        return 0

    def _contain(self, Connection conn, int64_t now, error):
        """Close ``conn`` after an unexpected failure while handling it (logged with its stack)."""
        log.error("closing the connection to node %s (%s:%s) after an unexpected failure while "
                  "handling it", conn.node_id, conn.host, conn.port, exc_info=error)
        self.stats["contained_failures"] += 1
        if conn.st.status != DISCONNECTED or conn.sock is not None:
            self._close(conn, now, InvalidBrokerResponseError(
                f"connection to node {conn.node_id} closed after an unexpected failure while "
                f"handling it: {type(error).__name__}: {error}"))

    cdef int _write_all(self, int64_t now) except -1:
        cdef Connection conn
        cdef list writers = None
        for c in self.connections.values():
            conn = <Connection>c
            if conn.st.fd >= 0 and conn.st.status != CONNECTING and (
                    conn.send_queue.has_pending_c()
                    or (conn._tls is not None and conn._tls.established and conn._tls.wants_write())):
                if writers is None:
                    writers = []
                writers.append(conn)
        if writers is not None:          # usually none: no list is made
            for c in writers:
                self._write(<Connection>c, now)
        return 0

    cdef int _write(self, Connection conn, int64_t now) except -1:
        cdef SendQueue q = conn.send_queue
        cdef Py_ssize_t wr
        cdef long long before = q.core.written_bytes
        try:
            if conn._tls is not None:
                done = conn._tls.write(conn.sock, q)
            elif conn.st.status == READY:
                # the GIL-free turn's write (produce_send_c), then the GIL's part: release
                # written buffers, complete the requests expecting no answer
                wr = conn_write_c(&conn.st)
                done = q._finished()
                if wr < 0:
                    raise OSError(-wr, "writev failed")
            else:
                done = q.write_to(conn.st.fd)
            self.stats["bytes_sent"] += q.core.written_bytes - before
        except OSError as e:       # ssl.SSLError included
            return self._io_failed(conn, now, e, "write to")
        if done:
            for r in conn.written_c(done, now):   # requests that expect no response: complete
                if type(r) is ProduceRequest:     # acks=0 Produce: handler(node, batches, None, None)
                    (<ProduceRequest>r).handler = self.produce_handler
                    self._completions.append((r, None, None))
                else:
                    self._completions.append(((<InFlightRequest>r).callback, None, None))
        else:
            conn.st.last_activity_ms = now
        self.update_interest(conn)
        return 0

    cdef int _io_failed(self, Connection conn, int64_t now, error, str what) except -1:
        """Close ``conn`` after a failed read or write: a garbled frame and a TLS failure keep
        their typed errors, any other socket error is a disconnect."""
        if isinstance(error, CorruptFrameError):
            self._close(conn, now, error)
        elif isinstance(error, ssl.SSLError):
            _tls_close(self, conn, now, error)
        else:
            self._close(conn, now, DisconnectedError(f"{what} node {conn.node_id} failed: {error}"))
        return 0

    cdef int _read(self, Connection conn, int64_t now) except -1:
        cdef FrameReader reader = conn.reader  # kept alive here even if a handler resets conn
        cdef const char *p
        cdef Py_ssize_t n
        cdef list frames = None
        cdef bint got
        if _failpoint is not None:
            _failpoint("read", self, conn)
        # Answers the GIL-free turn read and matched (all success: completed from C results)
        # come first: they were the oldest requests, and their frames are consumed.
        while conn.st.ring_len and conn_entry_c(&conn.st, 0).answered:
            r = conn.take_head_c()
            (<ProduceRequest>r).handler = self.produce_handler
            self.stats["responses"] += 1
            self._completions.append((r, (<ProduceRequest>r).results, None))
        try:
            if conn._tls is not None:
                frames, eof = conn._tls.read(conn.sock, reader)   # decrypted frames, as bytes
            else:
                eof = reader.fill_c(conn.st.fd)   # plaintext: frames are taken where they lie
        except (CorruptFrameError, OSError) as e:   # ssl.SSLError included
            return self._io_failed(conn, now, e, "read from")
        if frames is not None:
            if frames:
                conn.st.last_activity_ms = now
            for frame in frames:
                if not self._handle_frame(conn, PyBytes_AS_STRING(frame), PyBytes_GET_SIZE(frame),
                                          frame, now):
                    return 0
        else:
            # A Produce answer is decoded in the reader's buffer; other answers are copied once,
            # into the bytes their decoder reads.
            while True:
                try:
                    got = reader.next_frame_c(&p, &n)
                except CorruptFrameError as e:   # a bad size prefix
                    return self._io_failed(conn, now, e, "read from")
                if not got:
                    break
                conn.st.last_activity_ms = now
                if not self._handle_frame(conn, p, n, None, now):
                    return 0
        if eof:
            self._close(conn, now, DisconnectedError(
                f"node {conn.node_id} ({conn.host}:{conn.port}) closed the connection"))
        return 0

    cdef bint _handle_frame(self, Connection conn, const char *p, Py_ssize_t n, object frame,
                            int64_t now) except -1:
        cdef InFlightRequest req
        try:
            r, body, throttle = conn.receive_frame_c(p, n, frame, now)
        except KafkaError as e:
            self._close(conn, now, e)
            return False
        self.stats["responses"] += 1
        _record_io(self, conn, True, n + 4, now)
        if throttle:
            self.stats["throttled_responses"] += 1
            self.stats["throttle_time_ms_total"] += throttle
        if type(r) is ProduceRequest:
            _record_produce_answer(self, conn, ms_since_us((<ProduceRequest>r).created_us), throttle, now)
            # runs produce_handler(node_id, batches, body, None) with the other completions
            (<ProduceRequest>r).handler = self.produce_handler
            self._completions.append((r, body, None))
            return True
        req = <InFlightRequest>r
        if req.internal:
            # Handshake steps run at once, before anything else is read on this connection; a
            # step that fails on what the broker sent closes the connection (see _io).
            req.callback(body, None)
            return conn.st.fd >= 0
        self._completions.append((req.callback, body, None))
        return True

    cdef int64_t _time_to_next_timeout(self, int64_t now) except? -1:
        """Milliseconds until the earliest connect, request, idle or throttle deadline has passed,
        so the poll wakes up in time to act on it."""
        cdef int64_t nearest = 1 << 30, d
        for c in self.connections.values():
            d = (<Connection>c).deadline_c(now, self._setup_timeout_ms, self.request_timeout_ms,
                                           self._max_idle_ms)
            if d < nearest:
                nearest = d
        return nearest if nearest > 0 else 0

    cdef int _handle_timeouts(self, int64_t now) except -1:
        cdef Connection conn
        cdef int due
        cdef list expired = None
        setup = self._setup_timeout_ms
        for c in self.connections.values():
            due = (<Connection>c).due_c(now, self._setup_timeout_ms, self.request_timeout_ms,
                                        self._max_idle_ms)
            if due != DUE_NONE:
                if expired is None:
                    expired = []
                expired.append((c, due))
        if expired is None:              # usually nothing is due: no list is made
            return 0
        for c, d in expired:
            conn = <Connection>c
            due = d
            if due == DUE_CONNECT:
                self._close(conn, now, DisconnectedError(
                    f"connect to node {conn.node_id} ({conn.host}:{conn.port}) timed out"),
                    failure=f"connection timed out: no connection within "
                            f"socket_connection_setup_timeout_ms={setup}")
            elif due == DUE_TLS_HANDSHAKE:
                self._close(conn, now, TlsError(
                    f"TLS handshake with node {conn.node_id} ({conn.host}:{conn.port}) did not "
                    f"complete within socket_connection_setup_timeout_ms={setup} (is this a TLS "
                    f"listener?)"))
            elif due == DUE_REQUEST:
                self.stats["timeouts"] += 1
                self._close(conn, now, RequestTimedOutError(
                    f"request {conn.oldest_text_c()} got no response within {self.request_timeout_ms} ms"))
            elif due == DUE_REAUTHENTICATE:
                # The SASL session nears its end and nothing is in flight: reconnect (and so
                # re-authenticate) at once; no request is cut off (see fastkafka._net.sasl).
                self.stats["reauthentications"] += 1
                log.debug("re-authenticating node %s: new connection", conn.node_id)
                self._close(conn, now, DisconnectedError(
                    f"connection to node {conn.node_id} closed to re-authenticate"), record=False)
                conn.next_attempt_ms = now
                conn.failures = 0
            else:
                self._close(conn, now, DisconnectedError(f"connection to node {conn.node_id} idle"))
        return 0

    def _run_completions(self):
        cdef list batch
        while self._completions:
            batch, self._completions = self._completions, []
            for callback, body, error in batch:
                try:
                    callback(body, error)
                except Exception:  # a handler bug must not stop the I/O loop
                    log.exception("request completion handler raised")
