# cython: language_level=3
# path:
#   produce: PollCore.produce -> Message -> ProducerCore._send(sink=LoopSink) -> future (I/O thread)
#            (no metadata yet: -> _held[topic] -> _send_held at the next produce/poll/flush, or
#             _MSG_TIMED_OUT when message.timeout.ms passes: _producer.py _drain_held)
#   report:  _fire -> LoopSink.push_c (I/O thread) -> _Waker.call_soon_threadsafe -> wake the poller
#   serve:   poll()/flush() -> _serve_reports: the sink's list taken whole -> each Message filled -> callback

# Contract of fastkafka.compat.confluent._fast (its .pyx): the C types of the confluent-kafka
# compatibility layer (fastkafka.compat.confluent), a Message and the compiled produce/poll.
from libc.stdint cimport int32_t, int64_t

from fastkafka._producer.batch cimport FutureRecordMetadata, LoopSink
from fastkafka._producer.sendpath cimport ProducerCore


cdef class Message:
    cdef object _topic
    cdef object _key
    cdef object _value
    cdef object _headers
    cdef object _error
    cdef object _cb                 # the delivery callback, until the report is served
    cdef int32_t _partition
    cdef int _ts_type
    cdef int64_t _offset
    cdef int64_t _ts
    cdef int64_t _t0                # produce(): CLOCK_MONOTONIC ns
    cdef double _latency            # seconds; < 0: none
    cdef bint _untracked            # left out of the cyclic GC until its report is served


cdef class _Waker:
    cdef public bint sleeping
    cdef object _set
    cdef LoopSink _sink
    cdef bint _detached             # its producer is gone: what completes is dropped


cdef class PollCore:
    cdef ProducerCore _core
    cdef LoopSink _sink
    cdef readonly _Waker _waker
    cdef object _default_cb
    cdef object _to_error               # fastkafka exception -> KafkaError
    cdef object _events                 # error_cb events (the subclass fills it), a deque
    cdef bint _only_error
    cdef bint _fast_poll                # poll(0) may skip the subclass (no stats_cb)
    cdef int64_t _max_messages
    cdef public int64_t _produced       # (public: the subclass counts a held record)
    cdef int64_t _served
    cdef list _taken                    # the list last taken from the sink ...
    cdef Py_ssize_t _pos                # ... and how far it has been served
    cdef list _failed                   # Messages (None: no callback) failed before a batch
    cdef public bint _closed            # close() was called: produce/poll/flush raise RuntimeError
    cdef public dict _held              # topic -> deque of records waiting for its metadata
    cdef public bint _holding           # _held is not empty
    cdef public bint _metadata_first    # interceptors: hold a record of an unknown topic before
                                        # they see it (they see each record once)

    cpdef Py_ssize_t _serve_reports(self) except -1
    cdef int _track(self, FutureRecordMetadata f, Message m) except -1
