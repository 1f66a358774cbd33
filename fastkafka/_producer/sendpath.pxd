# cython: language_level=3
# path:
#   record: send / produce -> _send -> [_send_intercepted: on_send] -> _put -> [_serialized] -> check_timestamp -> route_c (the partition: Router)
#           -> RecordAccumulator.append_c -> wake_at / wake_gil_free / wakeup -> give_way

# Contract of fastkafka._producer.sendpath: the compiled half of fastkafka.Producer (send() and
# produce() as one C call).
cimport cython
from libc.stdint cimport int32_t, int64_t

from fastkafka._producer.accumulator cimport RecordAccumulator
from fastkafka._producer.batch cimport LoopSink
from fastkafka._producer.router cimport Router
from fastkafka._net.ioloop cimport Poller


# A record's timestamp: now (wall clock, ms) for None; a typed error for anything but an int >= 0.
cdef int64_t check_timestamp(object timestamp_ms) except -1


# Base class of fastkafka.Producer: the state send() touches per record, on top of the router's
# (fastkafka._producer.router.Router: the topic cache, the partitioner, max_block_ms).
#   send / produce -> _send: checks -> route_c (router.pxd) -> append_c (accumulator.pxd) -> wake-up
cdef class ProducerCore(Router):
    cdef RecordAccumulator _acc
    cdef Poller _poller                   # the I/O thread's: wake-ups and linger timers
    cdef readonly Py_ssize_t _max_record_size
    cdef public bint _closed
    # A transactional producer outside a transaction: send() raises _closed_error() (the subclass
    # names the transaction state), at the cost of one flag test per record.
    cdef public bint _txn_blocked
    # key_serializer / value_serializer (None: not set); _serializing is set when either is, so
    # a producer without them pays one flag test per record.
    cdef object _key_serializer
    cdef object _value_serializer
    cdef bint _serializing
    # set when that serializer is called as serializer(topic, obj) (a schema registry's, bound to
    # its field: fastkafka/schema_registry/_serializers.py topic_serializer)
    cdef bint _key_takes_topic
    cdef bint _value_takes_topic
    # fastkafka.interceptors.InterceptorChain, or None: a producer without interceptors pays one
    # field test per record in _send (and _send_waiter).
    cdef readonly object _interceptors

    # Hooks the compiled front door calls on fastkafka.Producer, which overrides them (rare paths),
    # besides the router's _topic_info (the metadata wait):
    # the error a send on a closed (or transaction-blocked) producer raises.
    cpdef object _closed_error(self)
    # the RecordTooLargeError for a record of ``size`` bytes with its batch overhead.
    cpdef object _too_large(self, Py_ssize_t size)
    # (router.pxd's hook) the accumulator's sticky partition of ``topic``.
    cpdef int32_t _sticky_partition(self, str topic, list available) except -2

    # ``obj`` through ``serializer`` (the one of ``field``, "key" or "value"): its output checked
    # (bytes-like, str or None), any failure a SerializationError naming the field and the topic.
    # (``index``: the record's in a send_batch column, -1 for send / produce.)
    cdef object _serialized(self, object serializer, str field, object topic, object obj,
                            Py_ssize_t index)

    cdef object _send(self, object topic, object value, object key, object partition,
                      object timestamp_ms, object headers, object on_delivery, bint want_future,
                      bint serialize)
    # _send with interceptors: on_send, then the record with its acknowledgement (the
    # interceptors' on_acknowledgement before ``on_delivery``); a send that raises is
    # acknowledged to them with its error.
    cdef object _send_intercepted(self, object topic, object value, object key, object partition,
                                  object timestamp_ms, object headers, object on_delivery,
                                  bint want_future, bint serialize)


# Base class of fastkafka.aio.AsyncProducer: send() and produce() on the event loop as one C call
# on the common path; the subclass sets these fields (its _bind, __init__, close) and provides
# _send_general, _produce_general and _park for the rest.
#   send -> [_send_general] -> _put -> LoopFuture (the record's waiter, resolved by the LoopSink)
cdef class LoopSender:
    cdef public object _loop              # the loop it belongs to (None until first used)
    cdef public LoopSink _sink            # that loop's, None until bound
    cdef public ProducerCore _p           # the producer whose sends never wait
    cdef public object _backlog           # calls waiting for metadata or memory (a deque)
    cdef public bint _closing
    cdef public object _chain             # interceptors (an InterceptorChain) or None
    cdef public bint _serializing         # a key or value serializer is set
