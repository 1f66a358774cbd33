# cython: language_level=3
# Contract of fastkafka._core.network: the client that owns the sockets, the poller and the
# connections (fastkafka._core.connection), and runs the network part of each I/O turn.
from libc.stdint cimport int32_t, int64_t

from fastkafka._core.connection cimport Connection, InFlightRequest
from fastkafka._core.ioloop cimport Poller


cdef class NetworkClient:
    cdef readonly object config
    cdef readonly tuple required_apis      # a node whose ApiVersions lacks one is closed
    cdef readonly object metadata
    cdef public object clock               # () -> int ms; monotonic_ms unless a test passes one
    cdef bint _default_clock               # clock is monotonic_ms: read it in C
    cdef readonly bint manage_metadata
    cdef readonly int max_in_flight
    cdef readonly int64_t request_timeout_ms
    cdef int64_t _setup_timeout_ms
    cdef int64_t _max_idle_ms
    cdef int64_t _reconnect_backoff_ms
    cdef bint _rebootstrap                 # metadata_recovery_strategy == "rebootstrap"
    cdef readonly object client_id
    cdef readonly dict connections         # node id -> Connection
    cdef readonly Poller poller
    cdef int32_t _correlation
    cdef list _completions                 # (callback, body, error) to run after the I/O
    cdef bint _metadata_in_flight
    cdef tuple _last_metadata_problems
    cdef bint _closed
    cdef object _tls_context               # None: plaintext connections
    cdef readonly dict stats
    cdef object _unreachable_since         # every known broker failing since (rebootstrap)
    cdef readonly object sasl              # SaslSettings, None for PLAINTEXT/SSL
    cdef readonly dict auth_errors         # node -> its last authentication error

    cdef int64_t now_c(self) except? -1
    cdef Connection conn_for(self, int32_t node_id)
    cdef bint ready_c(self, int32_t node_id, int64_t now) except -1
    cdef int update_interest(self, Connection conn) except -1
    cdef InFlightRequest send_c(self, int32_t node_id, int api_key, object body, int64_t now,
                                object callback, bint expect_response, int min_version,
                                object max_version, object codec)
    cdef int poll_c(self, int64_t timeout_ms, int64_t now) except -1
    cdef int32_t _next_correlation_id(self) noexcept
    cdef int _enqueue(self, Connection conn, InFlightRequest req, object body, int64_t now) except -1
    cdef int64_t _maybe_update_metadata(self, int64_t now) except? -1
    cdef int _io(self, Connection conn, int mask, int64_t now) except -1
    cdef int _write_all(self, int64_t now) except -1
    cdef int _write(self, Connection conn, int64_t now) except -1
    cdef int _read(self, Connection conn, int64_t now) except -1
    cdef int _io_failed(self, Connection conn, int64_t now, error, str what) except -1
    cdef bint _handle_frame(self, Connection conn, const char *p, Py_ssize_t n, object frame,
                            int64_t now) except -1
    cdef int64_t _time_to_next_timeout(self, int64_t now) except? -1
    cdef int _handle_timeouts(self, int64_t now) except -1
