# cython: language_level=3
# path:
#   GIL turn:      Sender._send_produce -> ProduceRequestBuilder.send_c -> produce_request_c -> produce_send_c
#   GIL-free turn: gil_free_turn -> drain_c -> _send -> produce_request_c -> produce_send_c

# Contract of fastkafka._producer.produce_request: the one Produce request builder of both I/O
# turns (see the .pyx docstring). The sender owns one ProduceRequestBuilder; its GilFreeTurn builds
# with the same core.
cimport cython
from cpython.ref cimport PyObject
from libc.stdint cimport int16_t, int32_t, int64_t

from fastkafka._producer.accumulator cimport DrainedBatch, NodeSlot, QueueState, RecordAccumulator
from fastkafka._net.network cimport NetCore, NetworkClient
from fastkafka._wire.segment cimport Segment
from fastkafka.protocol.produce_codec cimport ProducePart


# What a Produce request is built with: the producer's request settings and the scratch one
# request is encoded in. Read and written only by the I/O thread (with or without the GIL).
cdef struct RequestBuilderCore:
    NetCore *net
    int16_t acks
    int32_t timeout_ms
    const char *client_id
    Py_ssize_t client_id_len
    const char *txn_id          # the transactional id (NULL: none)
    Py_ssize_t txn_id_len       # -1: none
    int64_t *in_flight_batches  # the sender's count of batches in unanswered requests
    bint write_pending          # bytes wait on a send queue: the GIL turn writes them
    Py_ssize_t scratch_cap      # batches the scratch below has room for (placed, parts, order)
    ProducePart *parts          # scratch: the request's partitions, grouped by topic
    PyObject **order            # scratch: batches in request order
    QueueState **order_qs       # scratch: their partitions
    unsigned char *placed       # scratch: placed in order yet
    Segment *segs
    Py_ssize_t segs_cap


# With or without the GIL: one Produce request of the ``n`` batches of ``b`` (drained, closed and
# stamped; all for the broker of ``node``, whose conn and version are set), encoded (parts grouped
# by topic, batches by reference), queued on the connection's in-flight ring (produce_send_c) and
# written when conn_gil_free_c allows. The entry takes over the references of b[i].batch on success (0); -1:
# not queued (no memory, or more than rb.scratch_cap batches), nothing changed. The one Produce
# request builder of both turns.
# thread: io · lock: none · gil: any
cdef int produce_request_c(RequestBuilderCore *rb, const NodeSlot *node, DrainedBatch *b,
                           Py_ssize_t n, int64_t now) noexcept nogil


@cython.final
cdef class ProduceRequestBuilder:
    cdef RequestBuilderCore c
    cdef RecordAccumulator acc
    cdef NetworkClient client
    cdef bytes _client_id
    cdef bytes _txn_id
    cdef readonly int min_version     # the lowest Produce version the producer's batches allow

    cdef int init_c(self, RecordAccumulator acc, NetworkClient client, object config,
                    int min_version, int64_t *in_flight_batches) except -1
    cdef int reserve_c(self, Py_ssize_t n) except -1
    cdef int send_c(self, int32_t node, list batches, int64_t now) except -1
