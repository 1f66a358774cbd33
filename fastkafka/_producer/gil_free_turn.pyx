# cython: language_level=3
"""The I/O thread's GIL-free steady-state turn (``gil_free_turn``), which runs inside the poller's
wait: it reads all-success answers, drains what may go without the GIL (``drain_c`` in its
GIL-free mode) and sends it (``produce_request_c`` of :mod:`fastkafka._producer.produce_request`,
the one request builder of both turns), then says how long to wait. Everything the GIL turn must
do (retries, splits, errors, metadata, connection set-up, TLS handshakes and the ssl module's
fallback, batches of a codec not compressed in C) ends the wait. TLS connections on the
OpenSSL-direct data phase (a TlsPipe) are in its table like plaintext ones: their requests are
encrypted and written, their answers read and decrypted here (``conn_write_c``, ``tls_fill_c``).

How and why: docs/internals.md, "The I/O thread and the GIL: the GIL-free turn".
"""

cimport cython
from libc.stdint cimport int16_t, int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp

from fastkafka._producer.accumulator cimport (DrainedBatch, NodeSlot, QueueState, Readiness,
                                              RecordAccumulator, drain_c, take_drained_batch,
                                              scan_c)
from fastkafka._producer.produce_request cimport ProduceRequestBuilder, produce_request_c
from fastkafka._net.clock cimport ms_since_us
from fastkafka._net.connection cimport (ConnCore, Connection, InFlightEntry, be32_c,
                                        conn_entry_c, conn_gil_free_c, conn_room_c,
                                        conn_unwritten_c)
from fastkafka._net.ioloop cimport EPOLLIN, epoll_event
from fastkafka._net.network cimport NetworkClient
from fastkafka._net.sampled cimport ProducerSampled, sampled_record_c
from fastkafka._net.transport cimport (ReaderCore, TlsPipe, rd_consume_c, rd_fill_c, rd_peek_c,
                                       tls_fill_c)
from fastkafka.protocol.produce_codec cimport (ProduceAnswerInfo, ProducePartAnswer,
                                               parse_produce_response_c)

from fastkafka.errors import KafkaError
from fastkafka.protocol import ApiKey

cdef int API_PRODUCE = int(ApiKey.PRODUCE)
# Batches one turn takes out at most (per drain; the turn drains again while it makes progress).
cdef Py_ssize_t OUT_CAP = 256
# Partitions of one answer parsed without the GIL at most (a larger answer is the GIL turn's).
cdef Py_ssize_t ANSWERS_CAP = 1024


# thread: io · lock: none · gil: no
cdef void _rooms(GilFreeState *x, int64_t now) noexcept nogil:
    """Each broker's room for requests now: the connection's admission (conn_room_c, as the GIL
    turn's), and 0 while it may not go without the GIL (conn_gil_free_c) or bytes still wait on
    its socket, plaintext or ciphertext (the GIL turn writes them)."""
    cdef Py_ssize_t i
    cdef ConnCore *c
    cdef int room
    for i in range(x.nnodes):
        c = x.nodes[i].conn
        room = conn_room_c(c, now, x.max_in_flight)
        if room > 0 and (not conn_gil_free_c(c) or conn_unwritten_c(c)):
            room = 0
        x.nodes[i].room = room


# thread: io · lock: none · gil: no
cdef void _strand(GilFreeState *x, DrainedBatch *b, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        x.stranded[x.nstranded] = b[i]
        x.nstranded += 1


# thread: io · lock: none · gil: no
cdef void _send(GilFreeState *x, DrainedBatch *b, Py_ssize_t n, int64_t now) noexcept nogil:
    """The GIL-free turn's request to ``b[0].node_id`` with the ``n`` batches of ``b``; when it
    cannot be queued the batches are stranded for the GIL turn."""
    cdef Py_ssize_t i
    for i in range(x.nnodes):
        if x.nodes[i].node_id == b[0].node_id:
            if produce_request_c(x.builder, &x.nodes[i], b, n, now) == 0:
                x.requests += 1
                x.batches += n
                return
            break
    _strand(x, b, n)


# thread: io · lock: none · gil: no
cdef int _match(GilFreeState *x, InFlightEntry *e, Py_ssize_t nparts) noexcept nogil:
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
cdef Py_ssize_t _read_answers(GilFreeState *x, const NodeSlot *node, int64_t now) noexcept nogil:
    """Read what the socket of ``node`` has (over TLS: decrypted by tls_fill_c) and take, in order,
    the complete answers to its GIL-free
    requests that are plain success (every partition written, no throttle): each request is marked
    answered with its batches' offsets, its frame consumed. Stops at anything else (an error, a
    throttle, an answer to a request queued with the GIL, a garbled frame), which the GIL turn
    reads as it always did. The number of answers taken, or -1 when the GIL turn must read this
    socket now (end of stream, a socket error, a frame left to it; over TLS also a close_notify,
    a record that does not decrypt, post-handshake records to answer: the GIL turn's TlsPipe.read
    takes the frames decrypted here first, then raises what tls_fill_c kept, typed)."""
    cdef ConnCore *c = node.conn
    cdef ReaderCore *rd = node.rd
    cdef InFlightEntry *e
    cdef ProduceAnswerInfo info
    cdef const char *p
    cdef Py_ssize_t r, size, k, nparts, taken = 0
    if c.tlsd != NULL:
        r = tls_fill_c(c.tlsd, rd, c.fd)
    else:
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
    cdef GilFreeState *x = <GilFreeState *>ctx
    cdef Py_ssize_t n, i, j, got
    cdef int64_t nogil_next, gil_next, until
    cdef int rounds
    cdef bint gil = False
    cdef Readiness r
    r.ready = NULL
    r.ready_cap = 0
    for i in range(nev):
        got = -1
        if evs[i].events == EPOLLIN:
            for j in range(x.nnodes):
                if x.nodes[j].conn.fd == evs[i].data.fd:
                    got = _read_answers(x, &x.nodes[j], now)
                    break
        if got != 0:
            gil = True                   # answers to complete, or the socket is the GIL turn's
    if now >= x.gil_deadline_ms:
        return 1
    # A deadline only the GIL turn can act on, passed since it ran: it runs now, and drains what
    # is due here with it (one request, as without the GIL-free turn).
    _rooms(x, now)
    scan_c(x.acc, x.nodes, x.nnodes, False, now, x.gil_turn_ms, &r)
    gil_next = r.next_gil
    if gil_next <= now:
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
        if x.nstranded or x.builder.write_pending:
            return 1
    if gil:
        return 1
    _rooms(x, now)
    scan_c(x.acc, x.nodes, x.nnodes, False, now, x.gil_turn_ms, &r)
    nogil_next = r.next_nogil
    if nogil_next <= now:
        return 1                         # could not take it (the turn's output was full)
    until = x.gil_deadline_ms
    if gil_next < until:
        until = gil_next
    if nogil_next < until:
        until = nogil_next
    wait_ms[0] = until - now if until - now > 0 else 1
    return 0


@cython.final
@cython.no_gc_clear
cdef class GilFreeTurn:
    """The GIL-free turn's state for one sender (see the module docstring). The GIL turn calls
    :meth:`prepare_c` before it waits (the table of brokers it may use) and :meth:`collect_c`
    after (its counts and anything it left)."""
    def __cinit__(self):
        self.st.out = <DrainedBatch *>malloc(OUT_CAP * sizeof(DrainedBatch))
        self.st.stranded = <DrainedBatch *>malloc(OUT_CAP * sizeof(DrainedBatch))
        self.st.answers_cap = ANSWERS_CAP
        self.st.answers = <ProducePartAnswer *>malloc(ANSWERS_CAP * sizeof(ProducePartAnswer))
        if self.st.out == NULL or self.st.stranded == NULL or self.st.answers == NULL:
            raise MemoryError()
        self._conns = []

    def __dealloc__(self):
        free(self.st.out)
        free(self.st.stranded)
        free(self.st.answers)
        free(self.st.nodes)

    cdef int init_c(self, RecordAccumulator acc, NetworkClient client, object config,
                    ProduceRequestBuilder builder) except -1:
        """Bind to the sender's accumulator, network client, settings and Produce request
        builder (its scratch made room for a whole turn's output)."""
        self.acc = acc
        self.client = client
        self.builder = builder
        builder.reserve_c(OUT_CAP)
        self.st.builder = &builder.c
        self.st.acc = &acc.st
        self.st.net = &client.st
        self.st.max_in_flight = client.max_in_flight
        self.st.max_request_size = config.max_request_size
        return 0

    cdef bint prepare_c(self, int64_t now) except -1:
        """Before the GIL turn waits: the brokers the GIL-free turn may send to (connections
        conn_gil_free_c allows: READY, plaintext or TLS through a TlsPipe, that speak a Produce
        version we send). Each TLS one's ``tlsd`` is set to its pipe's core: from here to
        :meth:`collect_c` the GIL-free turn may use its SSL object (the GIL turn only after the
        wait, on the same thread). False when there is none: the wait runs no GIL-free turn."""
        cdef Connection conn
        cdef TlsPipe pipe
        cdef Py_ssize_t n = 0, want = len(self.client.connections)
        cdef int v
        self._untable_c()
        self.st.nnodes = 0
        if self.st.acc.idem != NULL and (
                self.st.acc.idem.producer_id < 0 or self.st.acc.idem.bump_required):
            return False                 # nothing the GIL-free drain may take now
        if want > self.st.nodes_cap:
            free(self.st.nodes)
            self.st.nodes_cap = 0
            self.st.nodes = <NodeSlot *>malloc(want * sizeof(NodeSlot))
            if self.st.nodes == NULL:
                raise MemoryError()
            self.st.nodes_cap = want
        for c in self.client.connections.values():
            conn = <Connection>c
            pipe = None
            conn.st.tlsd = NULL
            if conn.st.tls:
                tls = conn.tls
                p = getattr(tls, "pipe", None) if tls is not None and tls.established else None
                if type(p) is TlsPipe:
                    pipe = <TlsPipe>p
                    conn.st.tlsd = &pipe.c
            if not conn_gil_free_c(&conn.st):
                conn.st.tlsd = NULL
                continue
            try:
                v = conn.version_for(API_PRODUCE, self.builder.min_version)
            except KafkaError:
                conn.st.tlsd = NULL
                continue
            self.st.nodes[n].node_id = conn.node_id
            self.st.nodes[n].room = 0
            self.st.nodes[n].conn = &conn.st
            self.st.nodes[n].rd = &conn.reader.c
            self.st.nodes[n].version = <int16_t>v
            self._conns.append(conn)
            if pipe is not None:
                self._conns.append(pipe)  # its SSL object and buffers live while the table is set
            n += 1
        self.st.nnodes = n
        self.st.builder.write_pending = False
        self.st.gil_turn_ms = now
        self.st.gil_deadline_ms = now
        return n > 0

    cdef int _untable_c(self) except -1:
        """Empty the table: its TLS connections' SSL objects are the GIL turn's again."""
        for c in self._conns:
            if type(c) is Connection:
                (<Connection>c).st.tlsd = NULL
        self._conns.clear()
        return 0

    cdef void *ctx_c(self) noexcept:
        return &self.st

    cdef int64_t *gil_deadline_c(self) noexcept:
        return &self.st.gil_deadline_ms

    cdef list collect_c(self, dict stats):
        """After the wait: the GIL-free turns' counts into ``stats``; the batches they took out
        but could not queue, as ``[(node, [batch, ...]), ...]`` for the GIL turn to send (None
        when there are none)."""
        cdef list out = None
        cdef dict by_node
        cdef Py_ssize_t i
        if self.st.answers_read:
            self.answers_read += self.st.answers_read
            self.st.answers_read = 0
        if self.st.requests:
            stats["produce_requests"] += self.st.requests
            stats["batches_sent"] += self.st.batches
            self.turns_sent += self.st.requests
            self.st.requests = 0
            self.st.batches = 0
        self.st.builder.write_pending = False
        self._untable_c()
        self.st.nnodes = 0
        if self.st.nstranded:
            by_node = {}
            for i in range(self.st.nstranded):
                by_node.setdefault(self.st.stranded[i].node_id, []).append(
                    take_drained_batch(&self.st.stranded[i]))
            self.st.nstranded = 0
            out = list(by_node.items())
        return out
