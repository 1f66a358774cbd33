# cython: language_level=3
"""Test seams of the compiled core: entry points into its C functions that only the tests call.

The shipping modules hold none of these. Each runs one C function of the core the way the I/O
thread calls it (without the GIL where it runs without it), and returns what it did as Python
objects for the tests to check:

- :func:`drain_nogil`: the one drain in its GIL-free mode, and the readiness scan before it
  (``fastkafka._producer.accumulator``);
- :func:`hold_gil`: hold the GIL for a while, to see what the GIL-free turn does meanwhile;
- :func:`poke_storm`: the I/O thread's pokes of an event loop (``Poller._poke_c``), one turn
  after another without the GIL, as fast as they go;
- :class:`GilFreeProbe`: a GIL-free turn that only counts its calls (``Poller.set_gil_free``);
- :func:`send_produce`: a Produce request queued and written the way the GIL-free turn does
  (``produce_send_c``);
- :func:`route`: the router's placement of one record, as ``send()`` asks it
  (``fastkafka._producer.router``);
- :func:`set_waiter`: a record's waiter on the event loop, as fastkafka.aio's ``send()`` sets it
  (``fastkafka._producer.batch.LoopSink``);
- :func:`set_sender_failpoint`: the sender's fault-injection hook (``fastkafka._producer.sender``);
- :func:`is_muted`, :func:`mute`, :func:`flush_in_progress`, :func:`has_incomplete`,
  :func:`is_stale`: the accumulator's and the idempotence state's internals, read or set;
- :func:`encode_segments`, :func:`parse_answer`: the Produce request encoder and answer parser
  of the GIL-free turn (``fastkafka.protocol.produce_codec``), with guard pages and guard entries.
"""

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_RawFree, PyMem_RawMalloc
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t, uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset
from posix.mman cimport (MAP_ANONYMOUS, MAP_FAILED, MAP_PRIVATE, PROT_NONE, PROT_READ, PROT_WRITE,
                         mmap, mprotect, munmap)
from posix.unistd cimport _SC_PAGESIZE, sysconf

from fastkafka._producer.accumulator cimport (DrainedBatch, IdempotenceState, NodeSlot, Readiness,
                                              RecordAccumulator, _PartitionQueue, drain_c,
                                              take_drained_batch, scan_c)
from fastkafka._producer.batch cimport FutureRecordMetadata, LoopSink, ProducerBatch
from fastkafka._net.clock cimport monotonic_ms
from fastkafka._producer.router cimport Router
from fastkafka._producer.sender cimport set_failpoint_c
from fastkafka._net.connection cimport READY, Connection
from fastkafka._wire.segment cimport Segment
from fastkafka._net.ioloop cimport Poller, epoll_event
from fastkafka._net.network cimport PRODUCE_NO_MEMORY, NetworkClient, produce_send_c
from fastkafka.protocol.produce_codec cimport (ProduceAnswerInfo, ProducePart, ProducePartAnswer, _parse,
                                            encode_produce_c, parse_produce_response_c,
                                            produce_answer_error, produce_glue_bound,
                                            produce_segs_bound)

from fastkafka.errors import NetworkError

cdef extern from "Python.h":
    int PyGILState_Check() nogil


def drain_nogil(RecordAccumulator acc, nodes, int64_t max_request_size, int64_t now_ms,
                Py_ssize_t out_cap=64):
    """drain_c in its GIL-free mode (without the GIL) for ``nodes`` (a list
    of (node_id, room)) and return its output as a list of (node_id, batch); the batches' owned
    references move into the list. Also returns scan_c's ``next_nogil`` for the same nodes before
    the drain: ``(deadline, [(node_id, batch), ...])``."""
    cdef Py_ssize_t n = len(nodes), i, got
    cdef NodeSlot *ns = <NodeSlot *>PyMem_RawMalloc((n if n else 1) * sizeof(NodeSlot))
    cdef DrainedBatch *out = <DrainedBatch *>PyMem_RawMalloc((out_cap if out_cap > 0 else 1)
                                                             * sizeof(DrainedBatch))
    cdef int64_t deadline
    cdef Readiness r
    cdef list res = []
    if ns == NULL or out == NULL:
        PyMem_RawFree(ns)
        PyMem_RawFree(out)
        raise MemoryError()
    try:
        for i in range(n):
            ns[i].node_id = nodes[i][0]
            ns[i].room = nodes[i][1]
            ns[i].conn = NULL
            ns[i].rd = NULL
            ns[i].version = -1
        r.ready = NULL
        r.ready_cap = 0
        with nogil:
            scan_c(&acc.st, ns, n, False, now_ms, now_ms, &r)
            got = drain_c(&acc.st, ns, n, max_request_size, False, True, now_ms, out, out_cap)
        deadline = r.next_nogil
        for i in range(got):
            res.append((out[i].node_id, take_drained_batch(&out[i])))
    finally:
        PyMem_RawFree(ns)
        PyMem_RawFree(out)
    return deadline, res


def hold_gil(NetworkClient client, int ms):
    """Busy-wait ``ms`` milliseconds holding the GIL (no Python code runs, so no
    GIL turn of the I/O thread either), and return how many Produce requests the GIL-free turn
    queued meanwhile (the network client's count not yet folded into its stats: only a GIL turn
    folds it)."""
    cdef long long before = client.st.produce_requests
    cdef int64_t end = monotonic_ms() + ms
    while monotonic_ms() < end:
        pass
    return client.st.produce_requests - before


def poke_storm(Poller poller, double seconds):
    """For ``seconds``, without the GIL: end a turn and start the next one, poking the event loop
    (``Poller._poke_c``) each time, as the I/O thread does after each wait. Returns the pokes
    written meanwhile."""
    cdef long long before = poller.gil_pokes
    cdef int64_t end = monotonic_ms() + <int64_t>(seconds * 1000)
    with nogil:
        while True:                      # at least once
            poller._turn_active = 0
            poller._poke_c()
            if monotonic_ms() >= end:
                break
    return poller.gil_pokes - before


cdef struct _ProbeState:
    int calls
    int calls_holding_gil
    int sockets_seen
    int gil_after
    int64_t wait_ms
    int64_t first_ms
    int64_t last_ms


# thread: io · lock: none · gil: no
cdef int _probe_turn(void *ctx, int64_t now_ms, const epoll_event *evs, int n,
                     int64_t *wait_ms) noexcept nogil:
    cdef _ProbeState *st = <_ProbeState *>ctx
    st.calls += 1
    if PyGILState_Check():
        st.calls_holding_gil += 1
    if n > 0:
        st.sockets_seen += n
        return 1             # a socket: the GIL turn's
    if st.calls == 1:
        st.first_ms = now_ms
    st.last_ms = now_ms
    wait_ms[0] = st.wait_ms
    return 1 if st.calls >= st.gil_after else 0


@cython.final
@cython.no_gc_clear
cdef class GilFreeProbe:
    """For tests of :meth:`Poller.set_gil_free`: a GIL-free turn that counts its calls, asks to
    wait ``wait_ms`` more each time, and ends the wait (takes the GIL) on its ``gil_after``-th call
    or when it is given a ready socket.
    Installed on ``poller`` until :meth:`remove`."""
    cdef _ProbeState st
    cdef Poller poller

    def __cinit__(self, Poller poller, int gil_after, int64_t wait_ms):
        self.st.calls = 0
        self.st.calls_holding_gil = 0
        self.st.sockets_seen = 0
        self.st.gil_after = gil_after
        self.st.wait_ms = wait_ms
        self.poller = poller
        poller.set_gil_free(_probe_turn, &self.st)

    @property
    def calls(self):
        return self.st.calls

    @property
    def calls_holding_gil(self):
        """Calls made while the calling thread held the GIL (a turn must never hold it)."""
        return self.st.calls_holding_gil

    @property
    def sockets_seen(self):
        """Ready sockets the turns were given (the probe leaves each to the GIL turn)."""
        return self.st.sockets_seen

    @property
    def span_ms(self):
        """Milliseconds between the first and the last call."""
        return self.st.last_ms - self.st.first_ms

    def remove(self):
        self.poller.set_gil_free(NULL, NULL)

    def __dealloc__(self):
        if self.poller is not None:
            self.poller.set_gil_free(NULL, NULL)


def send_produce(NetworkClient client, int32_t node_id, list batches, frame, int version,
                 int64_t now):
    """Queue and write a Produce request of batches the way both turns of the I/O thread do
    (``produce_send_c``, see network.pxd), with the GIL: ``frame`` (bytes, or a list
    of buffers) is the whole request, size prefix included, its correlation id (bytes 8..12)
    overwritten with the one allocated here; it is copied into one glue buffer the connection
    frees. The connection owns references to ``batches`` until the answer, or a failure,
    reaches ``produce_handler(node_id, batches, body, error)`` from ``client.poll``. What the
    socket does not take now is written by ``client.poll``. Returns the correlation id."""
    cdef Connection conn
    cdef Segment seg
    cdef char *glue
    cdef PyObject **arr
    cdef Py_ssize_t i, nb = len(batches)
    cdef int32_t corr
    cdef uint32_t u
    cdef Py_ssize_t r
    c = client.connections.get(node_id)
    if c is None or (<Connection>c).st.status != READY:
        raise NetworkError(f"node {node_id} is not ready")
    if client.produce_handler is None:
        raise ValueError("set produce_handler before sending Produce requests")
    conn = <Connection>c
    data = bytes(frame) if not isinstance(frame, (list, tuple)) else b"".join(
        [bytes(b) for b in frame])
    if len(data) < 12 or data[4:6] != b"\x00\x00" or int.from_bytes(data[6:8], "big") != version:
        raise ValueError(f"not a Produce v{version} request frame")
    glue = <char *>malloc(len(data))
    arr = <PyObject **>malloc((nb if nb else 1) * sizeof(PyObject *))
    if glue == NULL or arr == NULL:
        free(glue)
        free(arr)
        raise MemoryError()
    memcpy(glue, PyBytes_AS_STRING(data), len(data))
    corr = client._next_correlation_id()
    u = <uint32_t>corr
    glue[8] = <char>(u >> 24)
    glue[9] = <char>(u >> 16)
    glue[10] = <char>(u >> 8)
    glue[11] = <char>u
    for i in range(nb):
        b = batches[i]
        Py_INCREF(b)
        arr[i] = <PyObject *>b
    seg.p = glue
    seg.n = len(data)
    r = produce_send_c(&client.st, &conn.st, corr, now, <int16_t>version, arr, nb, glue, &seg, 1)
    if r == PRODUCE_NO_MEMORY:
        for i in range(nb):
            Py_XDECREF(arr[i])
        free(arr)
        free(glue)
        raise MemoryError()
    # What the socket did not take (or a socket error: the write fails again and closes the
    # connection) is left to poll(), which writes queued bytes before it waits.
    client._fold_produce_stats()
    return corr


def encode_segments(int version, int32_t correlation_id, client_id, transactional_id, int16_t acks,
                    int32_t timeout_ms, list parts, Py_ssize_t glue_cap, Py_ssize_t segs_cap):
    """``encode_produce_c`` called as the GIL-free turn calls it, with buffers of
    ``glue_cap`` bytes and ``segs_cap`` segments. ``client_id`` / ``transactional_id``: bytes or
    None; ``parts``: ``(topic bytes, partition, records, records2)`` with records bytes or None
    (null) and records2 bytes or None (no second piece). Returns a dict: ``result`` and ``nsegs``
    (what the function returned and set), ``segments`` (``(is_glue, bytes)`` each, when it
    succeeded), ``glue_bound`` / ``segs_bound`` (produce_glue_bound / produce_segs_bound)."""
    cdef Py_ssize_t n = len(parts), i, r, nsegs = -7, topic_bytes = 0
    cdef ProducePart *pp = <ProducePart *>malloc((n + 1) * sizeof(ProducePart))
    cdef char *glue = <char *>malloc(glue_cap + 1 if glue_cap > 0 else 1)
    cdef Segment *segs = <Segment *>malloc((segs_cap + 1 if segs_cap > 0 else 1) * sizeof(Segment))
    cdef const char *cid = NULL
    cdef const char *tid = NULL
    cdef Py_ssize_t cid_n = -1, tid_n = -1
    cdef uintptr_t lo, hi, at
    try:
        if pp == NULL or glue == NULL or segs == NULL:
            raise MemoryError()
        if client_id is not None:
            cid = PyBytes_AS_STRING(client_id)
            cid_n = PyBytes_GET_SIZE(client_id)
        if transactional_id is not None:
            tid = PyBytes_AS_STRING(transactional_id)
            tid_n = PyBytes_GET_SIZE(transactional_id)
        for i in range(n):
            topic, partition, records, records2 = parts[i]
            pp[i].topic = PyBytes_AS_STRING(topic)
            pp[i].topic_len = PyBytes_GET_SIZE(topic)
            topic_bytes += pp[i].topic_len
            pp[i].partition = partition
            pp[i].records = NULL if records is None else PyBytes_AS_STRING(records)
            pp[i].records_len = -1 if records is None else PyBytes_GET_SIZE(records)
            pp[i].records2 = NULL if records2 is None else PyBytes_AS_STRING(records2)
            pp[i].records2_len = 0 if records2 is None else PyBytes_GET_SIZE(records2)
        with nogil:
            r = encode_produce_c(version, correlation_id, cid, cid_n, tid, tid_n, acks, timeout_ms,
                                 pp, n, glue, glue_cap, segs, segs_cap, &nsegs)
        out = {"result": r, "nsegs": nsegs, "segments": None,
               "glue_bound": produce_glue_bound(n, topic_bytes, cid_n, tid_n),
               "segs_bound": produce_segs_bound(n)}
        if r > 0:
            lo = <uintptr_t>glue
            hi = <uintptr_t>(glue + r)
            out["segments"] = [
                (lo <= <uintptr_t>segs[i].p < hi, PyBytes_FromStringAndSize(segs[i].p, segs[i].n))
                for i in range(nsegs)]
        return out
    finally:
        free(pp)
        free(glue)
        free(segs)


def parse_answer(int version, frame, out_cap=None, bint validate_utf8=False):
    """``parse_produce_response_c`` (with ``validate_utf8``: decode_frame's pass,
    which also validates strings as UTF-8) over a copy of ``frame`` that ends right before an
    unreadable page (a read past its end crashes), into ``out_cap`` answers (None: as many as the
    frame could hold) followed by guard entries checked to be left untouched. Returns a dict:
    ``result`` (what it returned), ``answers`` (a dict per answer written, with the topic and the
    error message as bytes and their offsets), ``info`` (ProduceAnswerInfo's fields, err_field as
    str) and ``error`` (the exception decode_frame raises for the frame, or None)."""
    cdef Py_buffer view
    cdef Py_ssize_t size, page = sysconf(_SC_PAGESIZE), span, cap, i, n, written
    cdef unsigned char *region
    cdef const unsigned char *data
    cdef ProducePartAnswer *out
    cdef ProduceAnswerInfo info
    cdef const ProducePartAnswer *a
    cdef const unsigned char *guard
    cdef int GUARD = 4
    PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
    size = view.len
    cap = (size // 22 + 1) if out_cap is None else <Py_ssize_t>out_cap
    if cap < 0:
        PyBuffer_Release(&view)
        raise ValueError("out_cap < 0")
    span = (size + page - 1) // page * page
    region = <unsigned char *>mmap(NULL, span + page, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
    if <void *>region == MAP_FAILED:
        PyBuffer_Release(&view)
        raise MemoryError()
    out = <ProducePartAnswer *>malloc((cap + GUARD) * sizeof(ProducePartAnswer))
    try:
        if out == NULL:
            raise MemoryError()
        memset(out, 0xA5, (cap + GUARD) * sizeof(ProducePartAnswer))
        if mprotect(region + span, page, PROT_NONE) != 0:
            raise OSError("mprotect failed")
        data = region + span - size
        memcpy(<void *>data, view.buf, size)
        with nogil:
            if validate_utf8:
                n = _parse(version, data, size, out, cap, &info, True)
            else:
                n = parse_produce_response_c(version, data, size, out, cap, &info)
        guard = <const unsigned char *>(out + cap)
        for i in range(GUARD * <Py_ssize_t>sizeof(ProducePartAnswer)):
            if guard[i] != 0xA5:
                raise AssertionError(f"parse_produce_response_c wrote past out_cap={cap}")
        written = min(n if n >= 0 else info.nparts, cap)
        answers = []
        for i in range(written):
            a = &out[i]
            answers.append({
                "topic": PyBytes_FromStringAndSize(<const char *>a.topic, a.topic_len),
                "topic_at": a.topic - data, "topic_len": a.topic_len,
                "partition": a.partition, "error_code": a.error_code, "base_offset": a.base_offset,
                "log_append_time_ms": a.log_append_time_ms, "log_start_offset": a.log_start_offset,
                "error_message": (None if a.error_message_at < 0 else PyBytes_FromStringAndSize(
                    <const char *>data + a.error_message_at, a.error_message_len)),
                "error_message_at": a.error_message_at, "error_message_len": a.error_message_len,
                "record_errors_at": a.record_errors_at, "record_errors_count": a.record_errors_count,
                "leader_id": a.leader_id, "leader_epoch": a.leader_epoch})
        return {
            "result": n, "answers": answers,
            "info": {"correlation_id": info.correlation_id, "throttle_time_ms": info.throttle_time_ms,
                     "nparts": info.nparts, "ntopics": info.ntopics, "all_plain": bool(info.all_plain),
                     "node_endpoints_at": info.node_endpoints_at,
                     "node_endpoints_count": info.node_endpoints_count, "end": info.end,
                     "error": info.error,
                     "err_field": None if info.err_field == NULL else (<bytes>info.err_field).decode(),
                     "err_at": info.err_at},
            "error": produce_answer_error(version, data, size, &info) if n < 0 else None}
    finally:
        free(out)
        munmap(region, span + page)
        PyBuffer_Release(&view)


def route(Router router not None, topic, key=None, partition=None):
    """route(router, topic, key=None, partition=None) -> (partition, max_block_ms)

    The partition ``send(topic, key=key, partition=partition)`` gives the record (-1: the topic's
    sticky partition, chosen by the accumulator) through ``Router.route_c``, and what is left of
    max_block_ms for its append."""
    cdef Py_buffer view
    cdef const char *kp = NULL
    cdef Py_ssize_t kl = -1
    cdef int64_t max_block = -1
    cdef int32_t p
    if key is not None:
        PyObject_GetBuffer(key, &view, PyBUF_SIMPLE)
        kp = <const char *>view.buf
        kl = view.len
    try:
        p = router.route_c(topic, partition, key, kp, kl, &max_block)
    finally:
        if key is not None:
            PyBuffer_Release(&view)
    return p, max_block


def set_waiter(FutureRecordMetadata f not None, LoopSink sink not None, waiter):
    """Give a record appended with ``sink`` as its callback the waiter fastkafka.aio gives it (a
    LoopFuture, an asyncio future or a callable(err, metadata)), as ``send()`` does."""
    f.waiter = waiter
    sink.pending += 1


def set_sender_failpoint(fn):
    """Install ``fn(stage, sender)`` as the sender's fault-injection hook (stages ``"run_once"``,
    ``"produce_response"``; it may raise), or None to remove it."""
    set_failpoint_c(fn)


def is_muted(RecordAccumulator acc, str topic, int32_t partition):
    """Whether ``topic``-``partition`` is muted in ``acc`` (none of it is drained until the batch
    it waits for lands)."""
    cdef _PartitionQueue pq
    acc._acquire()
    try:
        pq = acc._find_locked(topic, partition)
        return pq is not None and pq.q.muted
    finally:
        acc._release()


def mute(RecordAccumulator acc, str topic, int32_t partition):
    """Mute ``topic``-``partition`` in ``acc`` (made if need be), as a batch in flight does."""
    acc._acquire()
    try:
        acc._pq_locked(acc._topic_locked(topic), partition).q.muted = True
    finally:
        acc._release()


def flush_in_progress(RecordAccumulator acc):
    """Whether a flush of ``acc`` is running (begin_flush without its end_flush)."""
    return acc.st.flushes > 0


def has_incomplete(RecordAccumulator acc):
    """Whether ``acc`` still tracks a batch without an outcome."""
    return len(acc._incomplete) > 0


def is_stale(IdempotenceState idem, ProducerBatch batch):
    """Whether ``batch`` was sequenced under an older epoch of ``idem``'s producer id."""
    return (batch.s.base_sequence >= 0 and batch.s.producer_id == idem.st.producer_id
            and batch.s.producer_epoch != idem.st.producer_epoch)
