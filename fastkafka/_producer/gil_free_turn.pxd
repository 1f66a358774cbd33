# cython: language_level=3
# path:
#   GIL turn:      Sender._send_produce -> GilFreeTurn.send_c -> produce_request_c -> produce_send_c
#   GIL-free turn: Poller wait -> gil_free_turn -> scan_c -> drain_c -> _send -> produce_request_c
#   answer:        gil_free_turn -> _read_answers -> parse_produce_response_c -> _match (entry answered)

# Contract of fastkafka._producer.gil_free_turn: the I/O thread's GIL-free steady-state turn (see the
# .pyx docstring). The sender owns one GilFreeTurn and hands its context to the network client's
# wait.
cimport cython
from cpython.ref cimport PyObject
from libc.stdint cimport int16_t, int32_t, int64_t

from fastkafka._producer.accumulator cimport (AccState, DrainedBatch, DrainNode, QueueState,
                                              RecordAccumulator)
from fastkafka._net.connection cimport ConnCore
from fastkafka._net.ioloop cimport epoll_event
from fastkafka.protocol.produce_codec cimport ProduceAnswerInfo, ProducePart, ProducePartAnswer
from fastkafka._net.transport cimport ReaderCore
from fastkafka._wire.segment cimport Segment
from fastkafka._net.network cimport NetCore, NetworkClient


# A broker in the table the GIL turn left: its connection and the Produce version it speaks.
cdef struct XNode:
    ConnCore *conn
    ReaderCore *rd              # its frame reader (answers are read without the GIL)
    int16_t version


cdef struct XCtx:
    AccState *acc
    NetCore *net
    DrainNode *nodes          # node ids and room (room re-read every turn)
    XNode *xnodes               # the same index: connection and version
    Py_ssize_t nnodes
    Py_ssize_t nodes_cap
    int max_in_flight
    int64_t max_request_size
    int16_t acks
    int32_t timeout_ms
    const char *client_id
    Py_ssize_t client_id_len
    const char *txn_id          # the transactional id (NULL: none)
    Py_ssize_t txn_id_len       # -1: none
    int64_t gil_now             # when the GIL turn that set this table ran
    int64_t python_until        # the GIL turn's own next deadline (set by the network client)
    int64_t *in_flight_batches  # the sender's count of batches in unanswered requests
    DrainedBatch *out
    ProducePart *parts
    Py_ssize_t scratch_cap      # batches the scratch below has room for (placed, parts, order)
    PyObject **order            # scratch: batches in request order
    QueueState **order_qs       # scratch: their partitions
    unsigned char *placed       # scratch: placed in order yet
    Segment *segs
    Py_ssize_t segs_cap
    ProducePartAnswer *answers  # scratch: a Produce answer's partitions, parsed without the GIL
    Py_ssize_t answers_cap
    # since the GIL turn last looked
    int64_t requests
    int64_t batches
    int64_t answers_read        # answers read and matched without the GIL
    DrainedBatch *stranded      # taken out but not queued (no memory): the GIL turn sends them
    Py_ssize_t nstranded
    bint write_pending          # bytes wait on a send queue: the GIL turn writes them



# With or without the GIL: one Produce request of the ``n`` batches of ``b`` (drained, closed and
# stamped; all for the broker of ``xn``), encoded (parts grouped by topic, batches by reference),
# queued on the connection's in-flight ring (produce_send_c) and written when plaintext. The entry
# takes over the references of b[i].batch on success (0); -1: not queued (no memory), nothing
# changed. The one Produce request builder of both turns.
# thread: io · lock: none · gil: any
cdef int produce_request_c(XCtx *x, XNode *xn, DrainedBatch *b, Py_ssize_t n,
                           int64_t now) noexcept nogil


# The GIL-free turn (an gil_free_fn of fastkafka._net.ioloop): ``ctx`` is an GilFreeTurn's XCtx.
# thread: io · lock: takes acc · gil: no
cdef int gil_free_turn(void *ctx, int64_t now, const epoll_event *evs, int n,
                      int64_t *wait_ms) noexcept nogil


@cython.final
@cython.no_gc_clear
cdef class GilFreeTurn:
    cdef XCtx x
    cdef RecordAccumulator acc
    cdef NetworkClient client
    cdef bytes _client_id
    cdef bytes _txn_id
    cdef int _min_version
    cdef list _conns                   # the table's connections, kept alive while it is set
    cdef readonly int64_t turns_sent   # requests sent by GIL-free turns (for metrics and tests)
    cdef readonly int64_t answers_read # their answers read and matched by GIL-free turns

    cdef int init_c(self, RecordAccumulator acc, NetworkClient client, object config,
                    int min_version, int64_t *in_flight_batches) except -1
    cdef int _reserve_c(self, Py_ssize_t n) except -1
    cdef int send_c(self, int32_t node, list batches, int64_t now) except -1
    cdef bint prepare_c(self, int64_t now) except -1
    cdef void *ctx_c(self) noexcept
    cdef int64_t *until_c(self) noexcept
    cdef list collect_c(self, dict stats)
