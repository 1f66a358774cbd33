# cython: language_level=3
# Contract of fastkafka._core.connection: one connection to one broker as a state machine fed
# frames and time (see the .pyx docstring). The network client (fastkafka._core.network) reads
# and writes these fields directly.
cimport cython
from libc.stdint cimport int32_t, int64_t

from fastkafka._core.transport cimport FrameReader, SendQueue

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


@cython.final
cdef class Connection:
    cdef readonly int32_t node_id
    cdef public object host
    cdef public int port
    cdef public int status               # DISCONNECTED / CONNECTING / HANDSHAKE / READY
    cdef public object sock              # owned by the client
    cdef public int fd                   # sock.fileno() while sock is set, else -1
    cdef readonly Py_ssize_t max_frame_size
    cdef readonly SendQueue send_queue
    cdef public FrameReader reader
    cdef readonly object in_flight       # deque of InFlightRequest awaiting a response, oldest first
    cdef public int unacked_writes       # requests expecting no response, not yet fully written
    cdef public bint unconfirmed         # such a request was written and no response came after it
    cdef public dict api_versions
    cdef public dict versions            # negotiated version per api key
    cdef public object handshake         # deque of handshake steps
    cdef public int64_t connect_started_ms
    cdef public int64_t last_activity_ms
    cdef public int failures
    cdef public int address_index        # which resolved address the next attempt uses
    cdef public int64_t next_attempt_ms
    cdef public int registered_events
    cdef public int64_t reauth_at_ms     # SASL session: no new requests from then on
    cdef public int64_t throttle_until_ms  # broker quota (KIP-219)
    cdef public object tls               # TlsSession (SSL / SASL_SSL), once connected

    cdef inline int in_flight_count_c(self) noexcept:
        return len(self.in_flight) + self.unacked_writes

    cdef inline bint can_send_c(self, int64_t now, int max_in_flight) noexcept:
        return (self.status == READY
                and len(self.in_flight) + self.unacked_writes < max_in_flight
                and not (self.reauth_at_ms and now >= self.reauth_at_ms)
                and not (self.throttle_until_ms and now < self.throttle_until_ms))

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
