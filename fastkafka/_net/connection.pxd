# cython: language_level=3
# path:
#   request: NetworkClient.send_c -> enqueue_c (a ring entry, the frame on the send queue)
#   produce: produce_send_c -> conn_produce_enqueue_c (a ring entry owning the batches) -> conn_write_c
#   answer:  frame -> receive_frame_c (the ring's head) -> take_head_c -> InFlightRequest / ProduceRequest
#   close:   reset_c -> take_head_c for every entry, oldest first, then the unwritten tokens

# Contract of fastkafka._net.connection: one connection to one broker as a state machine fed
# frames and time (see the .pyx docstring). The network client (fastkafka._net.network) reads
# and writes these fields directly.
cimport cython
from cpython.ref cimport PyObject
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t

from fastkafka._wire.segment cimport Segment
from fastkafka._net.sampled cimport NodeSampled
from fastkafka._net.transport cimport (FrameReader, SendQueue, SendQueueCore, TlsCore,
                                      tls_out_pending_c)

cdef enum:
    # Connection.status (the State enum's values)
    DISCONNECTED = 0
    CONNECTING = 1
    HANDSHAKE = 2      # TLS, ApiVersions, SASL steps in progress
    READY = 3

cdef enum:
    # Connection.due_c(): which deadline has passed (the Due enum's members, in this order)
    DUE_NONE = 0
    DUE_CONNECT = 1
    DUE_TLS_HANDSHAKE = 2
    DUE_REQUEST = 3
    DUE_REAUTHENTICATE = 4
    DUE_IDLE = 5

@cython.final
cdef class InFlightRequest:
    cdef readonly int32_t correlation_id
    cdef readonly int api_key
    cdef readonly int version
    cdef readonly bint expect_response
    cdef readonly int64_t created_ms
    cdef readonly object callback        # callback(body or None, error or None)
    cdef readonly int32_t node_id
    cdef readonly bint internal          # handshake requests are allowed before READY
    cdef readonly object codec           # None: the generic schema codec


cdef enum:
    # conn_write_c(): the connection cannot be written without the GIL (conn_gil_free_c is false)
    CONN_WRITE_REFUSED = -1000000


# One request in flight on a connection: the connection's one in-flight ring holds these, in the
# order the requests were queued (their correlation ids increase), whichever turn queued them.
# Two kinds share the struct:
# - a Produce request of batches (``request`` NULL), queued by conn_produce_enqueue_c from either
#   turn: ``batches`` owns its batch references (moved in; moved out into ProduceRequest.batches)
#   followed by ``nbatches`` pointers of the producer layer's own (what it matches an answer by);
#   ``glue``, the request's non-batch bytes (libc malloc by the enqueuer, freed by the connection
#   once the entry is finished and the send queue no longer references it);
# - any other request (``request``: its InFlightRequest, an owned reference; the other pointers NULL).
cdef struct InFlightEntry:
    int32_t correlation_id
    int16_t version
    int64_t created_ms
    int64_t created_us         # monotonic_us() when queued: its latency (request-latency-*)
    long long end_pos          # the send queue's queued_bytes after its last byte
    PyObject *request          # InFlightRequest, or NULL for a Produce request of batches
    PyObject **batches
    Py_ssize_t nbatches
    char *glue
    # Answered without the GIL (all success): ``results`` holds each batch's base offset and log
    # append time (2 per batch, libc malloc, freed with the entry); NULL until then.
    bint answered
    int64_t *results


# The fields of a Connection that code without the GIL reads or writes: take ``&conn.st`` with the
# GIL while the connection is known alive. Python sees them as the Connection's attributes.
cdef struct ConnCore:
    int status                 # DISCONNECTED / CONNECTING / HANDSHAKE / READY
    int fd                     # the socket's descriptor while there is one, else -1
    bint tls                   # a TLS session is attached (GIL-free: only with ``tlsd``)
    int unacked_writes         # requests expecting no response, not yet fully written
    int64_t throttle_until_ms  # broker quota (KIP-219)
    int64_t reauth_at_ms       # SASL session: no new requests from then on
    int64_t last_activity_ms
    int16_t produce_version    # Produce version negotiated with the broker, -1 before
    SendQueueCore *sq          # &send_queue.core (the queue lives as long as the connection)
    InFlightEntry *ring        # the in-flight ring (libc malloc): ring_len entries from ring_head
    Py_ssize_t ring_cap
    Py_ssize_t ring_head
    Py_ssize_t ring_len
    NodeSampled *nm            # its node's windowed statistics (set by the network client), or NULL
    # The TLS data phase's C core (its TlsPipe's), set only while the connection is in the
    # GIL-free turn's table (GilFreeTurn.prepare_c to collect_c; cleared by set_tls_c), NULL
    # otherwise and for the ssl module's fallback (no TlsPipe): see conn_gil_free_c.
    TlsCore *tlsd


# The i-th request in flight (0: the oldest); i < c.ring_len.
# thread: io · lock: none · gil: any
cdef inline InFlightEntry *conn_entry_c(const ConnCore *c, Py_ssize_t i) noexcept nogil:
    return &c.ring[(c.ring_head + i) % c.ring_cap]


# Without the GIL (or with it). Queue a Produce request of batches: its segments (raw: glue and
# batch buffers) go on the send queue, an in-flight entry takes ownership of ``batches``
# (references moved in) and ``glue``. Returns 0, or -1 (no memory: nothing changed, the caller
# keeps both).
# thread: io · lock: none · gil: any
cdef int conn_produce_enqueue_c(ConnCore *c, int32_t correlation_id, int64_t now, int16_t version,
                                PyObject **batches, Py_ssize_t nbatches, char *glue,
                                const Segment *segs, Py_ssize_t nsegs) noexcept nogil
# Without the GIL. Write the send queue of a connection conn_gil_free_c() allows: plaintext with
# writev; TLS (tlsd) encrypted by tls_write_c, its ciphertext written as far as the socket takes it.
# The bytes written (TLS: encrypted; 0: the socket takes nothing now; what is left is
# conn_unwritten_c()), -errno for a socket error (the GIL path closes the connection: its next
# write fails the same way, or its read sees the close), TLS_FAILED (kept in the TlsCore; the GIL
# turn's next write raises it typed), or CONN_WRITE_REFUSED (conn_gil_free_c() is false).
# thread: io · lock: none · gil: any
cdef Py_ssize_t conn_write_c(ConnCore *c) noexcept nogil
# A frame's big-endian int32 at ``p`` (its correlation id at offset 0).
# thread: any · lock: none · gil: any
cdef inline int32_t be32_c(const char *p) noexcept nogil:
    cdef const unsigned char *u = <const unsigned char *>p
    return <int32_t>((<uint32_t>u[0] << 24) | (<uint32_t>u[1] << 16) | (<uint32_t>u[2] << 8) | u[3])


# The one predicate of what may be written and read without the GIL (the GIL-free turn's table,
# conn_write_c): a READY connection with a socket and a send queue, plaintext, or TLS through the
# OpenSSL-direct data phase (tlsd set: a TlsPipe, owned by the GIL-free turn while set). The ssl
# module's fallback (no TlsPipe), handshakes and connection set-up stay on the GIL turn.
# thread: io · lock: none · gil: any
cdef inline bint conn_gil_free_c(const ConnCore *c) noexcept nogil:
    return c.status == READY and c.fd >= 0 and c.sq != NULL and (not c.tls or c.tlsd != NULL)


# Bytes queued but not yet on the socket: the send queue's, and, over TLS, ciphertext the pipe
# holds (the GIL turn writes them once the socket takes them).
# thread: io · lock: none · gil: any
cdef inline bint conn_unwritten_c(ConnCore *c) noexcept nogil:
    return c.sq.head != c.sq.tail or (c.tlsd != NULL and tls_out_pending_c(c.tlsd))


# Without the GIL: requests in flight (the ring and unacked writes), as in_flight_count_c().
# thread: io · lock: none · gil: any
cdef inline int conn_in_flight_c(const ConnCore *c) noexcept nogil:
    return <int>c.ring_len + c.unacked_writes


# A connection's admission, the one rule of both I/O turns (Connection.can_send_c for the GIL
# turn, the GIL-free turn's node table): how many more requests it may take now, 0 when none: it
# must be READY, with fewer than ``max_in_flight`` requests in flight, no SASL re-authentication
# due and no broker throttle (KIP-219) running.
# thread: io · lock: none · gil: any
cdef inline int conn_room_c(const ConnCore *c, int64_t now, int max_in_flight) noexcept nogil:
    cdef int room
    if (c.status != READY or (c.reauth_at_ms and now >= c.reauth_at_ms)
            or (c.throttle_until_ms and now < c.throttle_until_ms)):
        return 0
    room = max_in_flight - conn_in_flight_c(c)
    return room if room > 0 else 0


@cython.final
cdef class ProduceRequest:
    """A Produce request of batches handed back by the connection (answered, failed, or written
    when it expects no answer): the ``batches`` list holds the references the entry owned."""
    cdef readonly int32_t correlation_id
    cdef readonly int64_t created_ms
    cdef readonly int64_t created_us
    cdef readonly int version
    cdef readonly int32_t node_id
    cdef readonly list batches
    cdef public object handler           # set by the network client: handler(node, batches, body, error)
    # answered without the GIL: [(base_offset, log_append_time), ...] per batch, else None
    cdef readonly list results
    cdef char *glue                      # acks=0: the request's glue, owned until written (freed here)


@cython.final
cdef class Connection:
    cdef ConnCore st                     # status, fd, counts, deadlines: see ConnCore
    cdef readonly int32_t node_id
    cdef public object host
    cdef public int port
    cdef public object sock              # owned by the client
    cdef readonly Py_ssize_t max_frame_size
    cdef readonly SendQueue send_queue
    cdef public FrameReader reader
    cdef public bint unconfirmed         # such a request was written and no response came after it
    cdef public dict api_versions
    cdef public dict versions            # negotiated version per api key
    cdef public object handshake         # deque of handshake steps
    cdef public int64_t connect_started_ms
    cdef public int failures
    cdef public int address_index        # which resolved address the next attempt uses
    cdef public int64_t next_attempt_ms
    cdef public int registered_events
    cdef object _tls                     # TlsSession (SSL / SASL_SSL), once connected: .tls

    cdef inline int in_flight_count_c(self) noexcept:
        return conn_in_flight_c(&self.st)

    cdef inline bint can_send_c(self, int64_t now, int max_in_flight) noexcept:
        return conn_room_c(&self.st, now, max_in_flight) > 0

    cdef int set_tls_c(self, object tls) except -1
    cdef str oldest_text_c(self)                  # the oldest request in flight, as text
    cdef object take_head_c(self)                 # the oldest leaves the ring: InFlightRequest / ProduceRequest
    cdef int push_token_c(self, object token) except -1   # a token done once everything queued is written
    cdef int64_t _oldest_created_ms(self) noexcept
    cpdef int version_for(self, int api_key, int min_version=*, object max_version=*) except -1
    cdef int enqueue_c(self, InFlightRequest req, object frame, int64_t now) except -1
    cdef list written_c(self, list done, int64_t now)
    cdef tuple receive_c(self, object frame, int64_t now)
    cdef tuple receive_frame_c(self, const char *p, Py_ssize_t n, object frame, int64_t now)
    cdef int64_t deadline_c(self, int64_t now, int64_t setup_timeout_ms, int64_t request_timeout_ms,
                            int64_t max_idle_ms) noexcept
    # (INT64_MAX: no deadline)
    cdef int due_c(self, int64_t now, int64_t setup_timeout_ms, int64_t request_timeout_ms,
                   int64_t max_idle_ms) except -1
    cdef list reset_c(self)
