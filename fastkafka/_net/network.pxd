# cython: language_level=3
# path:
#   request: send_c -> _enqueue -> Connection.enqueue_c; poll_c -> _write_all -> _write
#   produce: produce_send_c (either turn) -> conn_produce_enqueue_c -> conn_write_c
#   poll:    poll_c -> Poller.poll (the GIL-free turn inside) -> _io -> _read -> _handle_frame -> _run_completions

# Contract of fastkafka._net.network: the client that owns the sockets, the poller and the
# connections (fastkafka._net.connection), and runs the network part of each I/O turn.
from cpython.ref cimport PyObject
from libc.stdint cimport int16_t, int32_t, int64_t

from fastkafka._net.connection cimport (ConnCore, Connection, InFlightRequest,
                                         conn_produce_enqueue_c, conn_write_c)
from fastkafka._wire.segment cimport Segment
from fastkafka._net.ioloop cimport Poller, gil_free_fn
from fastkafka._net.cells cimport DueCell
from fastkafka._net.sampled cimport ProducerSampled, SampledRegistry, sampled_record_c


# The client's fields that code without the GIL reads or writes: take ``&client.st`` with the GIL.
cdef struct NetCore:
    int32_t correlation        # the last correlation id allocated (ids run 1 .. 2**31-1, wrapping)
    long long produce_requests  # Produce requests queued by produce_send_c, not yet in stats
    long long produce_bytes     # bytes produce_send_c wrote, not yet in stats["bytes_sent"]
    ProducerSampled *metrics    # the windowed statistics (&NetworkClient.sampled.g)


# Without the GIL: the next correlation id (every request of the client takes its id here).
# thread: io · lock: none · gil: any
cdef inline int32_t next_correlation_c(NetCore *n) noexcept nogil:
    n.correlation = (n.correlation + 1) & 0x7FFFFFFF
    return n.correlation


cdef enum:
    # produce_send_c(): the request could not be queued (no memory; the caller keeps batches and glue)
    PRODUCE_NO_MEMORY = -1000001


# With or without the GIL: queue a Produce request of batches on a READY connection and, when
# conn_gil_free_c allows (plaintext; TLS while the GIL-free turn's table holds it), write it. The
# caller took ``correlation_id`` from next_correlation_c(n) and encoded it in ``glue``; the
# segments (glue and batch buffers, in order) are the whole request, size prefix included. Returns
# the bytes written now (0: the socket takes nothing now; the rest waits on the send queue or, over
# TLS, as ciphertext: the GIL turn writes it, so go back to it, or ask for write readiness, while
# conn_unwritten_c(c)), PRODUCE_NO_MEMORY (nothing changed), or conn_write_c()'s negative codes
# (queued; CONN_WRITE_REFUSED where the GIL turn writes (TLS outside the table, the ssl module's
# fallback); TLS_FAILED, which the GIL turn's next write raises typed; on a socket error the GIL
# turn's next write or read of this connection closes it).
# thread: io · lock: none · gil: any
cdef inline Py_ssize_t produce_send_c(NetCore *n, ConnCore *c, int32_t correlation_id, int64_t now,
                                      int16_t version, PyObject **batches, Py_ssize_t nbatches,
                                      char *glue, const Segment *segs,
                                      Py_ssize_t nsegs) noexcept nogil:
    cdef Py_ssize_t r, i, size = 0
    if conn_produce_enqueue_c(c, correlation_id, now, version, batches, nbatches, glue,
                              segs, nsegs) < 0:
        return PRODUCE_NO_MEMORY
    n.produce_requests += 1
    if n.metrics != NULL:
        for i in range(nsegs):
            size += segs[i].n
        sampled_record_c(&n.metrics.requests, &n.metrics.conf, size, now)
        if c.nm != NULL:
            sampled_record_c(&c.nm.requests, &n.metrics.conf, size, now)
    r = conn_write_c(c)
    if r > 0:
        n.produce_bytes += r
    return r


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
    cdef NetCore st                        # the correlation id counter, GIL-free counters
    cdef public object produce_handler     # handler(node_id, batches, body, error): Produce answers
    # set_gil_free_c(): the GIL-free turn for the next poll's wait (NULL: none)
    cdef gil_free_fn _xfn
    cdef void *_xctx
    cdef int64_t *_x_until
    cdef int64_t _x_python_timeout
    cdef list _completions                 # (callback, body, error) to run after the I/O
    cdef bint _metadata_in_flight
    cdef tuple _last_metadata_problems
    cdef bint _closed
    cdef object _tls_context               # None: plaintext connections
    cdef readonly dict stats
    cdef object _unreachable_since         # every known broker failing since (rebootstrap)
    cdef DueCell _refresh_due              # the metadata's: when its next refresh is due
    cdef readonly object sasl              # SaslSettings, None for PLAINTEXT/SSL
    cdef readonly dict auth_errors         # node -> its last authentication error
    # error_hook(now, error): errors of no single record (every broker down and back, failed
    # authentication, a broker lacking a needed API), run with the completions; None: not reported
    cdef public object error_hook
    cdef object _all_down_since            # ms since no known broker can be reached, else None
    cdef readonly SampledRegistry sampled  # windowed statistics (fastkafka._net.sampled)
    cdef object _metadata_codec            # MetadataCodec: large answers decode off the turn
    cdef object _metadata_job              # MetadataDecodeJob under way, or None

    cdef int64_t now_c(self) except? -1
    cdef Connection conn_for(self, int32_t node_id)
    cdef bint ready_c(self, int32_t node_id, int64_t now) except -1
    cdef int update_interest(self, Connection conn) except -1
    cdef InFlightRequest send_c(self, int32_t node_id, int api_key, object body, int64_t now,
                                object callback, bint expect_response, int min_version,
                                object max_version, object codec)
    cdef int set_gil_free_c(self, gil_free_fn fn, void *ctx, int64_t *until_ms,
                           int64_t python_timeout_ms) except -1
    cdef int poll_c(self, int64_t timeout_ms, int64_t now) except -1
    cdef int32_t _next_correlation_id(self) noexcept
    cdef int _fold_produce_stats(self) except -1
    cdef int _enqueue(self, Connection conn, InFlightRequest req, object body, int64_t now) except -1
    cdef int64_t maybe_update_metadata_c(self, int64_t now) except? -1
    cdef int _maybe_rebootstrap(self, int64_t now) except -1
    cdef int _io(self, Connection conn, int mask, int64_t now) except -1
    cdef int _write_all(self, int64_t now) except -1
    cdef int _write(self, Connection conn, int64_t now) except -1
    cdef int _read(self, Connection conn, int64_t now) except -1
    cdef int _io_failed(self, Connection conn, int64_t now, error, str what) except -1
    cdef bint _handle_frame(self, Connection conn, const char *p, Py_ssize_t n, object frame,
                            int64_t now) except -1
    cdef int64_t _time_to_next_timeout(self, int64_t now) except? -1
    cdef int _handle_timeouts(self, int64_t now) except -1

# With the GIL: install ``fn(stage, client, conn)`` as the failpoint of the I/O loop's stages
# (``"connected"``, ``"read"``, ``"api_versions"``), or None to remove it; for fault-injection tests
# only, through the test-only module fastkafka._net.failpoints.
cdef void set_failpoint_c(object fn) noexcept
