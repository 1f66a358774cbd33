# cython: language_level=3
# path:
#   send:   run_once -> _send_producer_data -> acc.ready -> acc.drain -> _send_produce -> ProduceRequestBuilder.send_c
#   wait:   run_once -> GilFreeTurn.prepare_c -> NetworkClient.set_gil_free_c -> poll -> collect_c
#   answer: produce_handler -> _on_produce_response -> _handle_produce_response -> _succeed / _retry_or_fail

# Contract of fastkafka._producer.sender: the producer's I/O thread (see the .pyx docstring).
from libc.stdint cimport int32_t, int64_t

from fastkafka._producer.gil_free_turn cimport GilFreeTurn
from fastkafka._producer.produce_request cimport ProduceRequestBuilder


cimport cython


# The fault-injection hook: ``fn(stage, sender)`` (stages ``"run_once"``, ``"produce_response"``)
# may raise to prove a failure there is contained; None removes it. Tests only, through
# fastkafka._producer.testing.set_sender_failpoint.
cdef int set_failpoint_c(object fn) except -1


@cython.final
cdef class Sender:
    cdef readonly object config
    cdef readonly object acc               # RecordAccumulator
    cdef readonly object metadata
    cdef readonly object client            # NetworkClient (or a test's stand-in)
    cdef public object clock
    cdef bint _default_clock
    cdef readonly object idem              # IdempotenceState, None without idempotence
    cdef readonly object transactional_id
    cdef readonly object txn               # TransactionManager, None unless transactional
    cdef readonly int acks
    cdef readonly int min_produce_version
    cdef public bint running
    cdef public bint force_close
    cdef public int64_t in_flight_batches
    cdef int64_t _init_retry_ms
    cdef object _init_backoff
    cdef public object _thread
    cdef public object fatal_error
    cdef readonly object on_error
    cdef readonly object reporter          # ErrorReporter: on_error's rate limit (error_reports.py)
    cdef public object on_fatal            # told when this thread dies of a bug
    cdef list _io_calls                   # call_soon: callables the next turn runs on this thread
    cdef readonly dict stats
    cdef int64_t _max_request_size
    cdef int64_t _delivery_timeout_ms
    cdef int64_t _retry_backoff_ms
    cdef int64_t _request_timeout_ms
    cdef int _retries
    cdef ProduceRequestBuilder _requests # the Produce request builder of both turns
    cdef GilFreeTurn _gil_free           # the GIL-free turn
    cdef bint _gil_free_wait             # the GIL-free turn runs inside the network's wait
    cdef int64_t _other_timeout         # the last turn's timeout apart from linger deadlines
    cdef readonly object sampled         # the network client's SampledRegistry (None: a stand-in client)
    cdef long long _io_wait_seen         # the poller's io_wait_ns already recorded
    cdef object _stats_cb                # stats_cb(dict) every statistics_interval_ms, None: off
    cdef int64_t _stats_interval
    cdef int64_t _stats_next             # when it is next due (0: not yet armed)
    cdef public object stats_source      # () -> the dict stats_cb gets (set by the producer)

    cdef int64_t now_c(self) except? -1
    cdef int64_t _send_producer_data(self, int64_t now) except? -1
    cdef int _succeed(self, batch, int64_t base_offset, int64_t log_append_time) except -1
    cdef int _fail(self, batch, error) except -1
    cdef int _fail_unclosable(self) except -1
    cpdef int _send_produce(self, int32_t node, list batches, int64_t now) except -1
    cdef int _handle_produce_response(self, int32_t node, list batches, body, error,
                                      int64_t now) except -1
    cdef int _unmute(self, batch) except -1
    cdef int64_t _stats_due(self, int64_t now) except? -1
    cdef int _record_io_wait(self) except -1
