# cython: language_level=3
# path:
#   send:   Poller wait -> gil_free_turn -> scan_c -> drain_c -> _send -> produce_request_c
#   answer: gil_free_turn -> _read_answers -> parse_produce_response_c -> _match (entry answered)

# Contract of fastkafka._producer.gil_free_turn: the I/O thread's GIL-free steady-state turn (see the
# .pyx docstring). The sender owns one GilFreeTurn and hands its state to the network client's
# wait; the requests it sends are built by the sender's ProduceRequestBuilder.
cimport cython
from libc.stdint cimport int64_t

from fastkafka._producer.accumulator cimport AccState, DrainedBatch, NodeSlot, RecordAccumulator
from fastkafka._producer.produce_request cimport ProduceRequestBuilder, RequestBuilderCore
from fastkafka._net.ioloop cimport epoll_event
from fastkafka._net.network cimport NetCore, NetworkClient
from fastkafka.protocol.produce_codec cimport ProducePartAnswer


# What the GIL-free turn works with between two GIL turns: set by the GIL turn before it waits
# (GilFreeTurn.prepare_c), read and written by the GIL-free turns of that wait, collected after it
# (GilFreeTurn.collect_c).
cdef struct GilFreeState:
    AccState *acc
    NetCore *net
    RequestBuilderCore *builder # the sender's Produce request builder
    NodeSlot *nodes             # the brokers it may send to: id, room (re-read every turn),
    Py_ssize_t nnodes           # connection, frame reader, Produce version
    Py_ssize_t nodes_cap
    int max_in_flight
    int64_t max_request_size
    int64_t gil_turn_ms         # when the GIL turn that set this table ran
    int64_t gil_deadline_ms     # the GIL turn's own next deadline (set by the network client)
    DrainedBatch *out
    ProducePartAnswer *answers  # scratch: a Produce answer's partitions, parsed without the GIL
    Py_ssize_t answers_cap
    # since the GIL turn last looked
    int64_t requests
    int64_t batches
    int64_t answers_read        # answers read and matched without the GIL
    DrainedBatch *stranded      # taken out but not queued (no memory): the GIL turn sends them
    Py_ssize_t nstranded


# The GIL-free turn (a gil_free_fn of fastkafka._net.ioloop): ``ctx`` is a GilFreeTurn's
# GilFreeState.
# thread: io · lock: takes acc · gil: no
cdef int gil_free_turn(void *ctx, int64_t now, const epoll_event *evs, int n,
                      int64_t *wait_ms) noexcept nogil


@cython.final
@cython.no_gc_clear
cdef class GilFreeTurn:
    cdef GilFreeState st
    cdef RecordAccumulator acc
    cdef NetworkClient client
    cdef ProduceRequestBuilder builder
    cdef list _conns                   # the table's connections (and TLS pipes), kept alive while it is set
    cdef readonly int64_t turns_sent   # requests sent by GIL-free turns (for metrics and tests)
    cdef readonly int64_t answers_read # their answers read and matched by GIL-free turns

    cdef int init_c(self, RecordAccumulator acc, NetworkClient client, object config,
                    ProduceRequestBuilder builder) except -1
    cdef int _untable_c(self) except -1
    cdef bint prepare_c(self, int64_t now) except -1
    cdef void *ctx_c(self) noexcept
    cdef int64_t *gil_deadline_c(self) noexcept
    cdef list collect_c(self, dict stats)
