# cython: language_level=3
"""The one Produce request builder of both I/O turns: ``produce_request_c`` (with or without the
GIL) encodes a request of drained batches, queues it on the connection's in-flight ring and
counts it; :meth:`ProduceRequestBuilder.send_c` is the GIL turn's way in (and its acks=0
requests, which wait for no answer). The GIL-free turn (``fastkafka._producer.gil_free_turn``)
calls ``produce_request_c`` with the same core.

How and why: docs/internals.md, "One in-flight ring per connection, one Produce request builder".
"""

cimport cython
from cpython.ref cimport PyObject, Py_INCREF
from libc.stdint cimport int16_t, int32_t, int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp

from fastkafka._producer.accumulator cimport (DrainedBatch, NodeSlot, QueueState,
                                              RecordAccumulator)
from fastkafka._producer.batch cimport BatchState, ProducerBatch
from fastkafka._wire.records cimport BuilderCore
from fastkafka._wire.segment cimport Segment
from fastkafka._net.connection cimport (READY, ConnCore, Connection, ProduceRequest,
                                        conn_unwritten_c)
from fastkafka._net.network cimport (PRODUCE_NO_MEMORY, NetCore, NetworkClient, produce_send_c,
                                     next_correlation_c)
from fastkafka._net.sampled cimport ProducerSampled, TopicSampled, sampled_record_c
from fastkafka._net.transport cimport sq_push_raw_c, sq_reserve_c
from fastkafka.protocol.produce_codec cimport (ProducePart, encode_produce_c, produce_glue_bound,
                                               produce_segs_bound)

from fastkafka.errors import KafkaError, NetworkError
from fastkafka.protocol import ApiKey

cdef int API_PRODUCE = int(ApiKey.PRODUCE)


# thread: any · lock: none · gil: any
cdef inline bint _topic_eq(const QueueState *a, const QueueState *b) noexcept nogil:
    return a == b or (a.topic_len == b.topic_len and memcmp(a.topic, b.topic, a.topic_len) == 0)


# thread: io · lock: none · gil: any
cdef Py_ssize_t _build(RequestBuilderCore *rb, const NodeSlot *node, DrainedBatch *b, Py_ssize_t n,
                       char **glue_out, PyObject ***owned_out, int32_t *corr_out) noexcept nogil:
    """Encode one Produce request to ``node`` with the ``n`` batches of ``b`` (parts grouped by
    topic, in the order each topic first appears): the glue (malloc), the entry's block of batch
    references and partitions (malloc; the references are b's, moved only when the caller queues
    it), the correlation id, the segments in rb.segs (the count returned). -1: no memory or not
    encodable (nothing allocated is left)."""
    cdef Py_ssize_t i, j, k = 0, topic_bytes = 0, nsegs = 0, used, glue_cap
    cdef BatchState *bs
    cdef BuilderCore *bc
    cdef char *glue
    cdef PyObject **owned
    cdef int32_t corr
    if n > rb.scratch_cap:
        return -1
    for i in range(n):
        rb.placed[i] = 0
    for i in range(n):
        if rb.placed[i]:
            continue
        for j in range(i, n):
            if not rb.placed[j] and _topic_eq(b[i].qs, b[j].qs):
                rb.placed[j] = 1
                bs = b[j].bs
                bc = bs.bc
                rb.parts[k].topic = b[j].qs.topic
                rb.parts[k].topic_len = b[j].qs.topic_len
                rb.parts[k].partition = b[j].qs.partition
                if bc.payload != NULL:
                    # compressed records apart from the header (BatchBuilder.pieces_c)
                    rb.parts[k].records = bc.buf
                    rb.parts[k].records_len = bc.final_len - bc.payload_len
                    rb.parts[k].records2 = bc.payload
                    rb.parts[k].records2_len = bc.payload_len
                else:
                    rb.parts[k].records = bc.buf
                    rb.parts[k].records_len = bc.final_len
                    rb.parts[k].records2 = NULL
                    rb.parts[k].records2_len = 0
                rb.order[k] = b[j].batch
                rb.order_qs[k] = b[j].qs
                topic_bytes += b[j].qs.topic_len
                k += 1
    glue_cap = produce_glue_bound(n, topic_bytes, rb.client_id_len, rb.txn_id_len)
    glue = <char *>malloc(glue_cap)
    # The request entry's batches, then each one's partition (QueueState *, read when its answer
    # is matched without the GIL): one block, freed with the entry.
    owned = <PyObject **>malloc(n * (sizeof(PyObject *) + sizeof(QueueState *)))
    if glue == NULL or owned == NULL:
        free(glue)
        free(owned)
        return -1
    for i in range(n):
        owned[i] = rb.order[i]
        (<QueueState **>(owned + n))[i] = rb.order_qs[i]
    corr = next_correlation_c(rb.net)
    used = encode_produce_c(node.version, corr, rb.client_id, rb.client_id_len, rb.txn_id,
                            rb.txn_id_len, rb.acks, rb.timeout_ms, rb.parts, n, glue, glue_cap,
                            rb.segs, rb.segs_cap, &nsegs)
    if used <= 0:
        free(glue)
        free(owned)
        return -1
    glue_out[0] = glue
    owned_out[0] = owned
    corr_out[0] = corr
    return nsegs


# thread: io · lock: none · gil: any
cdef void _count_request_c(ProducerSampled *g, DrainedBatch *b, Py_ssize_t n,
                           int64_t now) noexcept nogil:
    """The windowed statistics of a Produce request of the ``n`` batches of ``b`` (closed), as
    the Java producer counts them when it sends one (Sender.updateProduceRequestMetrics): per
    batch its bytes, compression ratio, queue time and largest record, per topic its records,
    bytes and ratio; per request its records."""
    cdef Py_ssize_t i
    cdef BatchState *bs
    cdef BuilderCore *bc
    cdef TopicSampled *t
    cdef double records = 0, ratio, size
    if g == NULL:
        return
    for i in range(n):
        bs = b[i].bs
        bc = bs.bc
        if bc == NULL:
            continue
        size = bc.final_len
        ratio = size / bc.len if bc.len > 0 else 1.0
        records += bc.count
        sampled_record_c(&g.batch_size, &g.conf, size, now)
        sampled_record_c(&g.compression, &g.conf, ratio, now)
        sampled_record_c(&g.queue_time, &g.conf,
                         (bs.drained_ms if bs.drained_ms >= 0 else now) - bs.created_ms, now)
        sampled_record_c(&g.record_size, &g.conf, bc.max_record, now)
        if b[i].qs != NULL and b[i].qs.tm != NULL:
            t = b[i].qs.tm
            sampled_record_c(&t.records, &g.conf, bc.count, now)
            sampled_record_c(&t.bytes, &g.conf, size, now)
            sampled_record_c(&t.compression, &g.conf, ratio, now)
    sampled_record_c(&g.records_per_request, &g.conf, records, now)


# thread: io · lock: none · gil: any
cdef int produce_request_c(RequestBuilderCore *rb, const NodeSlot *node, DrainedBatch *b,
                           Py_ssize_t n, int64_t now) noexcept nogil:
    cdef char *glue
    cdef PyObject **owned
    cdef int32_t corr
    cdef Py_ssize_t nsegs = _build(rb, node, b, n, &glue, &owned, &corr)
    if nsegs < 0:
        return -1
    if produce_send_c(rb.net, node.conn, corr, now, node.version, owned, n, glue, rb.segs,
                      nsegs) == PRODUCE_NO_MEMORY:
        free(glue)
        free(owned)
        return -1
    # the entry owns the batches now; only this thread completes them
    _count_request_c(rb.net.metrics, b, n, now)
    rb.in_flight_batches[0] += n
    if conn_unwritten_c(node.conn):
        rb.write_pending = True           # the rest (or an error) is the GIL turn's
    return 0


# thread: io · lock: none · gil: any
cdef void _count_acks0_request_c(NetCore *net, ConnCore *c, const Segment *segs, Py_ssize_t nsegs,
                                 int64_t now) noexcept nogil:
    """An acks=0 Produce request's bytes (the others are counted by produce_send_c)."""
    cdef Py_ssize_t i
    cdef double size = 0
    if net.metrics == NULL:
        return
    for i in range(nsegs):
        size += segs[i].n
    sampled_record_c(&net.metrics.requests, &net.metrics.conf, size, now)
    if c.nm != NULL:
        sampled_record_c(&c.nm.requests, &net.metrics.conf, size, now)


cdef bytes _wire_string(object v):
    """A request string as bytes (UTF-8 for str), None for null."""
    if v is None:
        return None
    return v.encode() if isinstance(v, str) else bytes(v)


cdef inline const char *_chars(bytes b):
    return NULL if b is None else <const char *>b


@cython.final
@cython.no_gc_clear
cdef class ProduceRequestBuilder:
    """The sender's Produce request builder (see the module docstring): the request settings and
    the scratch of :c:func:`produce_request_c`, for both turns."""
    def __cinit__(self):
        self.c.scratch_cap = 0
        self.c.write_pending = False

    def __dealloc__(self):
        free(self.c.placed)
        free(self.c.parts)
        free(self.c.order)
        free(self.c.order_qs)
        free(self.c.segs)

    cdef int init_c(self, RecordAccumulator acc, NetworkClient client, object config,
                    int min_version, int64_t *in_flight_batches) except -1:
        """Bind to the sender's accumulator, network client and settings; ``in_flight_batches``
        is the sender's count, kept alive by the sender (which owns this object)."""
        self.acc = acc
        self.client = client
        # the strings the request header and body carry (the bytes kept alive here; -1: null)
        self._txn_id = _wire_string(config.transactional_id)
        self.c.txn_id = _chars(self._txn_id)
        self.c.txn_id_len = -1 if self._txn_id is None else len(self._txn_id)
        self._client_id = _wire_string(client.client_id)
        self.c.client_id = _chars(self._client_id)
        self.c.client_id_len = -1 if self._client_id is None else len(self._client_id)
        self.c.net = &client.st
        self.c.acks = config.acks
        self.c.timeout_ms = min(config.request_timeout_ms, 2**31 - 1)
        self.c.in_flight_batches = in_flight_batches
        self.min_version = min_version
        return 0

    cdef int reserve_c(self, Py_ssize_t n) except -1:
        """Room in the request scratch (parts, order, segments) for ``n`` batches (GIL held, no
        turn running: the GIL-free turn only runs inside the GIL turn's wait)."""
        if n <= self.c.scratch_cap:
            return 0
        free(self.c.placed)
        free(self.c.parts)
        free(self.c.order)
        free(self.c.order_qs)
        free(self.c.segs)
        self.c.scratch_cap = 0
        self.c.segs_cap = produce_segs_bound(n)
        self.c.placed = <unsigned char *>malloc(n)
        self.c.parts = <ProducePart *>malloc(n * sizeof(ProducePart))
        self.c.order = <PyObject **>malloc(n * sizeof(PyObject *))
        self.c.order_qs = <QueueState **>malloc(n * sizeof(QueueState *))
        self.c.segs = <Segment *>malloc(self.c.segs_cap * sizeof(Segment))
        if (self.c.parts == NULL or self.c.order == NULL or self.c.segs == NULL
                or self.c.placed == NULL or self.c.order_qs == NULL):
            raise MemoryError()
        self.c.scratch_cap = n
        return 0

    cdef int send_c(self, int32_t node, list batches, int64_t now) except -1:
        """The GIL turn's Produce request to ``node`` with ``batches`` (drained, closed and
        stamped): built by the same code as the GIL-free turn's (produce_request_c), queued on the
        connection's in-flight ring and written at once when plaintext (TLS: by the network's next
        write). With acks=0 the request waits for no answer: it completes once written (a token on
        the send queue). Raises KafkaError (nothing queued; the batches are the caller's) when
        the node is not ready, speaks no Produce version we send, or there is no memory."""
        cdef Connection conn
        cdef NodeSlot slot
        cdef Py_ssize_t n = len(batches), i, nsegs
        cdef DrainedBatch *arr
        cdef ProducerBatch pb
        cdef char *glue
        cdef PyObject **owned
        cdef int32_t corr
        cdef int rc
        cdef ProduceRequest token
        c = self.client.connections.get(node)
        if c is None or (<Connection>c).st.status != READY:
            raise NetworkError(f"node {node} is not ready")
        conn = <Connection>c
        slot.node_id = node
        slot.room = 0
        slot.conn = &conn.st
        slot.rd = &conn.reader.c
        slot.version = <int16_t>conn.version_for(API_PRODUCE, self.min_version)
        if n == 0:
            return 0
        self.reserve_c(n)
        arr = <DrainedBatch *>malloc(n * sizeof(DrainedBatch))
        if arr == NULL:
            raise MemoryError()
        try:
            for i in range(n):
                pb = <ProducerBatch?>batches[i]
                if pb.s.bc == NULL or not pb.s.bc.closed:
                    raise ValueError(f"{pb!r} is not closed: it cannot be sent")
                arr[i].batch = <PyObject *>pb
                arr[i].bs = &pb.s
                arr[i].qs = self.acc.qstate(pb.topic, pb.partition)
                arr[i].node_id = node
            if self.c.acks != 0:
                rc = produce_request_c(&self.c, &slot, arr, n, now)
                if rc == 0:
                    for i in range(n):
                        Py_INCREF(<object>arr[i].batch)   # the entry owns a reference of each
                    return 0
            else:
                nsegs = _build(&self.c, &slot, arr, n, &glue, &owned, &corr)
                if nsegs >= 0:
                    free(owned)
                    if sq_reserve_c(conn.st.sq, nsegs) == 0:
                        _count_request_c(self.c.net.metrics, arr, n, now)
                        _count_acks0_request_c(self.c.net, &conn.st, self.c.segs, nsegs, now)
                        token = ProduceRequest.__new__(ProduceRequest)
                        token.glue = glue
                        token.correlation_id = corr
                        token.created_ms = now
                        token.version = slot.version
                        token.node_id = node
                        token.batches = list(batches)
                        for i in range(nsegs):
                            sq_push_raw_c(conn.st.sq, self.c.segs[i].p, self.c.segs[i].n)
                        conn.push_token_c(token)
                        conn.st.last_activity_ms = now
                        self.c.in_flight_batches[0] += n
                        self.client.st.produce_requests += 1
                        return 0
                    free(glue)
        finally:
            free(arr)
        raise KafkaError(f"no memory to queue a Produce request of {n} batch(es) to node {node}")
