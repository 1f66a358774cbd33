# cython: language_level=3
"""The Produce request builder of both I/O turns (``produce_request_c``, ``GilFreeTurn.send_c``)
and the I/O thread's GIL-free steady-state turn (``gil_free_turn``), which runs inside the
poller's wait: it reads all-success answers, drains what may go without the GIL (``drain_c`` in its
GIL-free mode) and sends it, then says how long to wait. Everything the GIL turn must do (retries,
splits, errors, metadata, connection set-up, TLS, batches of a codec not compressed in C) ends the
wait.

How and why: docs/internals.md, "One in-flight ring per connection, one Produce request builder"
and "The I/O thread and the GIL: the GIL-free turn".
"""

cimport cython
from cpython.ref cimport PyObject
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t, INT64_MAX
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp

from fastkafka._producer.accumulator cimport (AccState, DrainedBatch, QueueState, Readiness,
                                          RecordAccumulator, drain_c, take_drained_batch, scan_c)
from fastkafka._producer.batch cimport BatchState, ProducerBatch
from fastkafka._wire.records cimport BuilderCore
from fastkafka._net.clock cimport monotonic_ms, ms_since_us
from fastkafka._net.connection cimport (READY, ConnCore, Connection, InFlightEntry, ProduceRequest,
                                         be32_c, conn_entry_c,
                                         conn_in_flight_c)
from fastkafka._wire.segment cimport Segment
from fastkafka._net.ioloop cimport EPOLLIN, epoll_event, gil_free_fn
from fastkafka._net.network cimport (PRODUCE_NO_MEMORY, NetCore, NetworkClient, produce_send_c,
                                      next_correlation_c)
from fastkafka._net.sampled cimport ProducerSampled, TopicSampled, sampled_record_c
from fastkafka.protocol.produce_codec cimport (ProduceAnswerInfo, ProducePartAnswer, encode_produce_c,
                                            parse_produce_response_c, produce_glue_bound,
                                            produce_segs_bound)
from fastkafka._net.transport cimport (RD_EOF, ReaderCore, rd_consume_c, rd_fill_c, rd_peek_c,
                                       sq_push_raw_c, sq_reserve_c)
from cpython.ref cimport Py_INCREF, Py_XDECREF

from fastkafka.errors import KafkaError, NetworkError
from fastkafka.protocol import ApiKey

cdef int API_PRODUCE = int(ApiKey.PRODUCE)
# Batches one turn takes out at most (per drain; the turn drains again while it makes progress).
cdef Py_ssize_t OUT_CAP = 256
# Partitions of one answer parsed without the GIL at most (a larger answer is the GIL turn's).
cdef Py_ssize_t ANSWERS_CAP = 1024


# thread: any · lock: none · gil: any
cdef inline bint _topic_eq(const QueueState *a, const QueueState *b) noexcept nogil:
    return a == b or (a.topic_len == b.topic_len and memcmp(a.topic, b.topic, a.topic_len) == 0)


# thread: io · lock: none · gil: no
cdef void _rooms(XCtx *x, int64_t now) noexcept nogil:
    """Each broker's room for requests now (0 when it may not take one: closed, throttled, a
    re-authentication due, or bytes still waiting on its socket)."""
    cdef Py_ssize_t i
    cdef ConnCore *c
    cdef int room
    for i in range(x.nnodes):
        c = x.xnodes[i].conn
        room = 0
        if (c.status == READY and c.fd >= 0 and not c.tls and c.sq.head == c.sq.tail
                and not (c.reauth_at_ms and now >= c.reauth_at_ms)
                and not (c.throttle_until_ms and now < c.throttle_until_ms)):
            room = x.max_in_flight - conn_in_flight_c(c)
        x.nodes[i].room = room if room > 0 else 0


# thread: io · lock: none · gil: no
cdef void _strand(XCtx *x, DrainedBatch *b, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        x.stranded[x.nstranded] = b[i]
        x.nstranded += 1


# thread: io · lock: none · gil: any
cdef Py_ssize_t _build(XCtx *x, XNode *xn, DrainedBatch *b, Py_ssize_t n, char **glue_out,
                       PyObject ***owned_out, int32_t *corr_out) noexcept nogil:
    """Encode one Produce request to ``xn`` with the ``n`` batches of ``b`` (parts grouped by
    topic, in the order each topic first appears): the glue (malloc), the entry's block of batch
    references and partitions (malloc; the references are b's, moved only when the caller queues
    it), the correlation id, the segments in x.segs (the count returned). -1: no memory or not
    encodable (nothing allocated is left)."""
    cdef Py_ssize_t i, j, k = 0, topic_bytes = 0, nsegs = 0, used, glue_cap
    cdef BatchState *bs
    cdef BuilderCore *bc
    cdef char *glue
    cdef PyObject **owned
    cdef int32_t corr
    if n > x.scratch_cap:
        return -1
    for i in range(n):
        x.placed[i] = 0
    for i in range(n):
        if x.placed[i]:
            continue
        for j in range(i, n):
            if not x.placed[j] and _topic_eq(b[i].qs, b[j].qs):
                x.placed[j] = 1
                bs = b[j].bs
                bc = bs.bc
                x.parts[k].topic = b[j].qs.topic
                x.parts[k].topic_len = b[j].qs.topic_len
                x.parts[k].partition = b[j].qs.partition
                if bc.payload != NULL:
                    # compressed records apart from the header (BatchBuilder.pieces_c)
                    x.parts[k].records = bc.buf
                    x.parts[k].records_len = bc.final_len - bc.payload_len
                    x.parts[k].records2 = bc.payload
                    x.parts[k].records2_len = bc.payload_len
                else:
                    x.parts[k].records = bc.buf
                    x.parts[k].records_len = bc.final_len
                    x.parts[k].records2 = NULL
                    x.parts[k].records2_len = 0
                x.order[k] = b[j].batch
                x.order_qs[k] = b[j].qs
                topic_bytes += b[j].qs.topic_len
                k += 1
    glue_cap = produce_glue_bound(n, topic_bytes, x.client_id_len, x.txn_id_len)
    glue = <char *>malloc(glue_cap)
    # The request entry's batches, then each one's partition (QueueState *, read when its answer
    # is matched without the GIL): one block, freed with the entry.
    owned = <PyObject **>malloc(n * (sizeof(PyObject *) + sizeof(QueueState *)))
    if glue == NULL or owned == NULL:
        free(glue)
        free(owned)
        return -1
    for i in range(n):
        owned[i] = x.order[i]
        (<QueueState **>(owned + n))[i] = x.order_qs[i]
    corr = next_correlation_c(x.net)
    used = encode_produce_c(xn.version, corr, x.client_id, x.client_id_len, x.txn_id, x.txn_id_len,
                            x.acks, x.timeout_ms, x.parts, n, glue, glue_cap, x.segs,
                            x.segs_cap, &nsegs)
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
cdef int produce_request_c(XCtx *x, XNode *xn, DrainedBatch *b, Py_ssize_t n,
                           int64_t now) noexcept nogil:
    cdef char *glue
    cdef PyObject **owned
    cdef int32_t corr
    cdef Py_ssize_t nsegs = _build(x, xn, b, n, &glue, &owned, &corr)
    if nsegs < 0:
        return -1
    if produce_send_c(x.net, xn.conn, corr, now, xn.version, owned, n, glue, x.segs,
                      nsegs) == PRODUCE_NO_MEMORY:
        free(glue)
        free(owned)
        return -1
    # the entry owns the batches now; only this thread completes them
    _count_request_c(x.net.metrics, b, n, now)
    x.in_flight_batches[0] += n
    if xn.conn.sq.head != xn.conn.sq.tail:
        x.write_pending = True           # the rest (or an error) is the GIL turn's
    return 0


# thread: io · lock: none · gil: no
cdef void _send(XCtx *x, DrainedBatch *b, Py_ssize_t n, int64_t now) noexcept nogil:
    """The GIL-free turn's request to ``b[0].node_id`` with the ``n`` batches of ``b``; when it
    cannot be queued the batches are stranded for the GIL turn."""
    cdef Py_ssize_t i
    for i in range(x.nnodes):
        if x.nodes[i].node_id == b[0].node_id:
            if produce_request_c(x, &x.xnodes[i], b, n, now) == 0:
                x.requests += 1
                x.batches += n
                return
            break
    _strand(x, b, n)


# thread: io · lock: none · gil: no
cdef int _match(XCtx *x, InFlightEntry *e, Py_ssize_t nparts) noexcept nogil:
    """Each batch of ``e`` its partition's result among the ``nparts`` parsed answers (a
    partition listed twice: its last entry) into a new ``e.results``: 0, or -1 when one has none
    or there is no memory (nothing set: the GIL turn decodes the answer)."""
    cdef QueueState **qs = <QueueState **>(e.batches + e.nbatches)
    cdef QueueState *q
    cdef ProducePartAnswer *a
    cdef int64_t *res = <int64_t *>malloc(2 * e.nbatches * sizeof(int64_t))
    cdef Py_ssize_t i, j, found
    if res == NULL:
        return -1
    for i in range(e.nbatches):
        q = qs[i]
        found = -1
        for j in range(nparts):
            a = &x.answers[j]
            if (a.partition == q.partition and a.topic_len == q.topic_len
                    and memcmp(a.topic, q.topic, q.topic_len) == 0):
                found = j
        if found < 0:
            free(res)
            return -1
        res[2 * i] = x.answers[found].base_offset
        res[2 * i + 1] = x.answers[found].log_append_time_ms
    e.results = res
    e.answered = True
    return 0


# thread: io · lock: none · gil: no
cdef void _count_answer_c(ProducerSampled *g, ConnCore *c, double nbytes, double latency,
                          int64_t now) noexcept nogil:
    """The windowed statistics of a Produce answer read without the GIL (never throttled)."""
    if g == NULL:
        return
    sampled_record_c(&g.responses, &g.conf, nbytes, now)
    sampled_record_c(&g.latency, &g.conf, latency, now)
    sampled_record_c(&g.throttle, &g.conf, 0, now)
    if c.nm != NULL:
        sampled_record_c(&c.nm.responses, &g.conf, nbytes, now)
        sampled_record_c(&c.nm.latency, &g.conf, latency, now)


# thread: io · lock: none · gil: no
cdef Py_ssize_t _read_answers(XCtx *x, XNode *xn, int64_t now) noexcept nogil:
    """Read what the socket of ``xn`` has and take, in order, the complete answers to its GIL-free
    requests that are plain success (every partition written, no throttle): each request is marked
    answered with its batches' offsets, its frame consumed. Stops at anything else (an error, a
    throttle, an answer to a request queued with the GIL, a garbled frame), which the GIL turn
    reads as it always did. The number of answers taken, or -1 when the GIL turn must read this
    socket now (end of stream, a socket error, a frame left to it)."""
    cdef ConnCore *c = xn.conn
    cdef ReaderCore *rd = xn.rd
    cdef InFlightEntry *e
    cdef ProduceAnswerInfo info
    cdef const char *p
    cdef Py_ssize_t r, size, k, nparts, taken = 0
    r = rd_fill_c(rd, c.fd)
    if r != 0:
        return -1
    while True:
        size = rd_peek_c(rd, &p)
        if size == -1:
            return taken                 # no complete frame yet
        if size < 4:
            return -1                    # garbled
        k = 0
        while k < c.ring_len and conn_entry_c(c, k).answered:
            k += 1
        if k == c.ring_len:
            return -1
        e = conn_entry_c(c, k)
        if e.request != NULL or be32_c(p) != e.correlation_id or c.sq.written_bytes < e.end_pos:
            return -1                    # another request's answer (the GIL turn's), or garbled
        nparts = parse_produce_response_c(e.version, <const unsigned char *>p, size, x.answers,
                                          x.answers_cap, &info)
        if nparts < 0 or nparts > x.answers_cap or not info.all_plain or info.throttle_time_ms != 0:
            return -1
        if _match(x, e, nparts) < 0:
            return -1
        rd_consume_c(rd, size)
        c.last_activity_ms = now
        x.answers_read += 1
        _count_answer_c(x.net.metrics, c, size + 4, ms_since_us(e.created_us), now)
        taken += 1


# thread: io · lock: takes acc · gil: no
cdef int gil_free_turn(void *ctx, int64_t now, const epoll_event *evs, int nev,
                      int64_t *wait_ms) noexcept nogil:
    """The GIL-free turn (an :data:`fastkafka._net.ioloop.gil_free_fn`): read the answers that
    are there, send what is due, then say how long to wait, or 1 when the GIL turn must run."""
    cdef XCtx *x = <XCtx *>ctx
    cdef Py_ssize_t n, i, j, got
    cdef int64_t xnext, pnext, until
    cdef int rounds
    cdef bint gil = False
    cdef Readiness r
    r.ready = NULL
    r.ready_cap = 0
    for i in range(nev):
        got = -1
        if evs[i].events == EPOLLIN:
            for j in range(x.nnodes):
                if x.xnodes[j].conn.fd == evs[i].data.fd:
                    got = _read_answers(x, &x.xnodes[j], now)
                    break
        if got != 0:
            gil = True                   # answers to complete, or the socket is the GIL turn's
    if now >= x.python_until:
        return 1
    # A deadline only the GIL turn can act on, passed since it ran: it runs now, and drains what
    # is due here with it (one request, as without the GIL-free turn).
    _rooms(x, now)
    scan_c(x.acc, x.nodes, x.nnodes, False, now, x.gil_now, &r)
    pnext = r.next_gil
    if pnext <= now:
        return 1
    for rounds in range(16):
        _rooms(x, now)
        n = drain_c(x.acc, x.nodes, x.nnodes, x.max_request_size, False, True, now, x.out, OUT_CAP)
        if n <= 0:
            break
        i = 0
        while i < n:
            j = i + 1
            while j < n and x.out[j].node_id == x.out[i].node_id:
                j += 1
            _send(x, x.out + i, j - i, now)
            i = j
        if x.nstranded or x.write_pending:
            return 1
    if gil:
        return 1
    _rooms(x, now)
    scan_c(x.acc, x.nodes, x.nnodes, False, now, x.gil_now, &r)
    xnext = r.next_nogil
    if xnext <= now:
        return 1                         # could not take it (the turn's output was full)
    until = x.python_until
    if pnext < until:
        until = pnext
    if xnext < until:
        until = xnext
    wait_ms[0] = until - now if until - now > 0 else 1
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
cdef class GilFreeTurn:
    """The GIL-free turn's state for one sender (see the module docstring). The GIL turn calls
    :meth:`prepare_c` before it waits (the table of brokers it may use) and :meth:`collect_c`
    after (its counts and anything it left)."""
    def __cinit__(self):
        self.x.out = <DrainedBatch *>malloc(OUT_CAP * sizeof(DrainedBatch))
        self.x.stranded = <DrainedBatch *>malloc(OUT_CAP * sizeof(DrainedBatch))
        self.x.answers_cap = ANSWERS_CAP
        self.x.answers = <ProducePartAnswer *>malloc(ANSWERS_CAP * sizeof(ProducePartAnswer))
        if self.x.out == NULL or self.x.stranded == NULL or self.x.answers == NULL:
            raise MemoryError()
        self.x.scratch_cap = 0
        self._reserve_c(OUT_CAP)
        self._conns = []

    cdef int _reserve_c(self, Py_ssize_t n) except -1:
        """Room in the request scratch (parts, order, segments) for ``n`` batches (GIL held, no
        turn running: the GIL-free turn only runs inside the GIL turn's wait)."""
        if n <= self.x.scratch_cap:
            return 0
        free(self.x.placed)
        free(self.x.parts)
        free(self.x.order)
        free(self.x.order_qs)
        free(self.x.segs)
        self.x.scratch_cap = 0
        self.x.segs_cap = produce_segs_bound(n)
        self.x.placed = <unsigned char *>malloc(n)
        self.x.parts = <ProducePart *>malloc(n * sizeof(ProducePart))
        self.x.order = <PyObject **>malloc(n * sizeof(PyObject *))
        self.x.order_qs = <QueueState **>malloc(n * sizeof(QueueState *))
        self.x.segs = <Segment *>malloc(self.x.segs_cap * sizeof(Segment))
        if (self.x.parts == NULL or self.x.order == NULL or self.x.segs == NULL
                or self.x.placed == NULL or self.x.order_qs == NULL):
            raise MemoryError()
        self.x.scratch_cap = n
        return 0

    def __dealloc__(self):
        free(self.x.out)
        free(self.x.stranded)
        free(self.x.parts)
        free(self.x.order)
        free(self.x.order_qs)
        free(self.x.answers)
        free(self.x.placed)
        free(self.x.segs)
        free(self.x.nodes)
        free(self.x.xnodes)

    cdef int init_c(self, RecordAccumulator acc, NetworkClient client, object config,
                    int min_version, int64_t *in_flight_batches) except -1:
        """Bind to the sender's accumulator, network client and settings; ``in_flight_batches``
        is the sender's count, kept alive by the sender (which owns this object)."""
        self.acc = acc
        self.client = client
        # the strings the request header and body carry (the bytes kept alive here; -1: null)
        self._txn_id = _wire_string(config.transactional_id)
        self.x.txn_id = _chars(self._txn_id)
        self.x.txn_id_len = -1 if self._txn_id is None else len(self._txn_id)
        self._client_id = _wire_string(client.client_id)
        self.x.client_id = _chars(self._client_id)
        self.x.client_id_len = -1 if self._client_id is None else len(self._client_id)
        self.x.acc = &acc.st
        self.x.net = &client.st
        self.x.max_in_flight = client.max_in_flight
        self.x.max_request_size = config.max_request_size
        self.x.acks = config.acks
        self.x.timeout_ms = min(config.request_timeout_ms, 2**31 - 1)
        self.x.in_flight_batches = in_flight_batches
        self._min_version = min_version
        return 0

    cdef int send_c(self, int32_t node, list batches, int64_t now) except -1:
        """The GIL turn's Produce request to ``node`` with ``batches`` (drained, closed and
        stamped): built by the same code as the GIL-free turn's (produce_request_c), queued on the
        connection's in-flight ring and written at once when plaintext (TLS: by the network's next
        write). With acks=0 the request waits for no answer: it completes once written (a token on
        the send queue). Raises KafkaError (nothing queued; the batches are the caller's) when
        the node is not ready, speaks no Produce version we send, or there is no memory."""
        cdef Connection conn
        cdef XNode xn
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
        xn.conn = &conn.st
        xn.rd = &conn.reader.c
        xn.version = <int16_t>conn.version_for(API_PRODUCE, self._min_version)
        if n == 0:
            return 0
        self._reserve_c(n)
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
            if self.x.acks != 0:
                rc = produce_request_c(&self.x, &xn, arr, n, now)
                if rc == 0:
                    for i in range(n):
                        Py_INCREF(<object>arr[i].batch)   # the entry owns a reference of each
                    return 0
            else:
                nsegs = _build(&self.x, &xn, arr, n, &glue, &owned, &corr)
                if nsegs >= 0:
                    free(owned)
                    if sq_reserve_c(conn.st.sq, nsegs) == 0:
                        _count_request_c(self.x.net.metrics, arr, n, now)
                        _count_acks0_request_c(self.x.net, &conn.st, self.x.segs, nsegs, now)
                        token = ProduceRequest.__new__(ProduceRequest)
                        token.glue = glue
                        token.correlation_id = corr
                        token.created_ms = now
                        token.version = xn.version
                        token.node_id = node
                        token.batches = list(batches)
                        for i in range(nsegs):
                            sq_push_raw_c(conn.st.sq, self.x.segs[i].p, self.x.segs[i].n)
                        conn.push_token_c(token)
                        conn.st.last_activity_ms = now
                        self.x.in_flight_batches[0] += n
                        self.client.st.produce_requests += 1
                        return 0
                    free(glue)
        finally:
            free(arr)
        raise KafkaError(f"no memory to queue a Produce request of {n} batch(es) to node {node}")

    cdef bint prepare_c(self, int64_t now) except -1:
        """Before the GIL turn waits: the brokers the GIL-free turn may send to (READY plaintext
        connections that speak a Produce version we send). False when there is none: the wait
        runs no GIL-free turn."""
        cdef Connection conn
        cdef Py_ssize_t n = 0, want = len(self.client.connections)
        cdef int v
        self._conns.clear()
        self.x.nnodes = 0
        if self.x.acc.idem != NULL and (
                self.x.acc.idem.producer_id < 0 or self.x.acc.idem.bump_required):
            return False                 # nothing the GIL-free drain may take now
        if want > self.x.nodes_cap:
            free(self.x.nodes)
            free(self.x.xnodes)
            self.x.nodes_cap = 0
            self.x.nodes = <DrainNode *>malloc(want * sizeof(DrainNode))
            self.x.xnodes = <XNode *>malloc(want * sizeof(XNode))
            if self.x.nodes == NULL or self.x.xnodes == NULL:
                raise MemoryError()
            self.x.nodes_cap = want
        for c in self.client.connections.values():
            conn = <Connection>c
            if conn.st.status != READY or conn.st.fd < 0 or conn.st.tls or conn.st.sq == NULL:
                continue
            try:
                v = conn.version_for(API_PRODUCE, self._min_version)
            except KafkaError:
                continue
            self.x.nodes[n].node_id = conn.node_id
            self.x.nodes[n].room = 0
            self.x.xnodes[n].conn = &conn.st
            self.x.xnodes[n].rd = &conn.reader.c
            self.x.xnodes[n].version = <int16_t>v
            self._conns.append(conn)
            n += 1
        self.x.nnodes = n
        self.x.write_pending = False
        self.x.gil_now = now
        self.x.python_until = now
        return n > 0

    cdef void *ctx_c(self) noexcept:
        return &self.x

    cdef int64_t *until_c(self) noexcept:
        return &self.x.python_until

    cdef list collect_c(self, dict stats):
        """After the wait: the GIL-free turns' counts into ``stats``; the batches they took out
        but could not queue, as ``[(node, [batch, ...]), ...]`` for the GIL turn to send (None
        when there are none)."""
        cdef list out = None
        cdef dict by_node
        cdef Py_ssize_t i
        if self.x.answers_read:
            self.answers_read += self.x.answers_read
            self.x.answers_read = 0
        if self.x.requests:
            stats["produce_requests"] += self.x.requests
            stats["batches_sent"] += self.x.batches
            self.turns_sent += self.x.requests
            self.x.requests = 0
            self.x.batches = 0
        self.x.write_pending = False
        self._conns.clear()
        self.x.nnodes = 0
        if self.x.nstranded:
            by_node = {}
            for i in range(self.x.nstranded):
                by_node.setdefault(self.x.stranded[i].node_id, []).append(take_drained_batch(&self.x.stranded[i]))
            self.x.nstranded = 0
            out = list(by_node.items())
        return out
