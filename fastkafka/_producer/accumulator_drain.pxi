# The one readiness scan and the one drain of the accumulator (included by accumulator.pyx; the
# contract is in accumulator.pxd, the explanation in docs/internals.md, "One send pipeline").
#
#   GIL turn:      ready() -> scan_c            drain() -> drain_c(nogil_only=False)
#   GIL-free turn: gil_free_turn -> scan_c       gil_free_turn -> drain_c(nogil_only=True)
#
# Both walk only the partitions with queued batches (AccState.act_head, in drain order), so their
# cost follows the partitions that have data, not every partition known.


# ---------------------------------------------------------------------------------------------
# The partitions with queued batches. Lock held.
# ---------------------------------------------------------------------------------------------

# thread: app+io · lock: acc held · gil: any
cdef inline void _act_link_tail(AccState *st, QueueState *q) noexcept nogil:
    q.act_next = NULL
    q.act_prev = st.act_tail
    if st.act_tail != NULL:
        st.act_tail.act_next = q
    else:
        st.act_head = q
    st.act_tail = q
    q.active = True
    st.nactive += 1


# thread: io · lock: acc held · gil: no
cdef inline void _act_unlink(AccState *st, QueueState *q) noexcept nogil:
    if q.act_prev != NULL:
        q.act_prev.act_next = q.act_next
    else:
        st.act_head = q.act_next
    if q.act_next != NULL:
        q.act_next.act_prev = q.act_prev
    else:
        st.act_tail = q.act_prev
    q.act_prev = NULL
    q.act_next = NULL
    q.active = False
    st.nactive -= 1


# thread: app+io · lock: acc held · gil: held
cdef inline void act_join(AccState *st, QueueState *q) noexcept nogil:
    """A batch was queued on ``q``: it joins the list at the tail unless it is in it already."""
    if not q.active:
        _act_link_tail(st, q)


# thread: io · lock: acc held · gil: no
cdef inline void _act_drained(AccState *st, QueueState *q) noexcept nogil:
    """``q``'s head was drained: it goes to the tail (its next batch waits behind the others'),
    or leaves the list when it has no batch left."""
    _act_unlink(st, q)
    if q.count > 0:
        _act_link_tail(st, q)


# ---------------------------------------------------------------------------------------------
# The rules on a partition's head batch (lock held)
# ---------------------------------------------------------------------------------------------

# thread: io · lock: acc held · gil: any
cdef inline bint queue_drainable_c(AccState *st, QueueState *q) noexcept nogil:
    """A batch of ``q`` may be drained: it has one, is not muted, (transactional) the partition
    was added to the transaction, and (idempotent) none of its batches is in flight to a node other
    than its leader.

    The last rule keeps a partition's batches in sequence order across a leader move: a batch the
    old leader wrote and replicated may still be answered NOT_LEADER_OR_FOLLOWER (it was waiting
    for acks=all when leadership moved). Were later batches sent to the new leader meanwhile, it
    would accept them after that batch, and once more than the five batches a broker remembers
    per producer followed it, the batch's retry could be neither recognised as a duplicate nor
    written: OUT_OF_ORDER_SEQUENCE_NUMBER for ever. So new batches wait until the old leader has
    answered for every batch sent to it (at most request_timeout_ms)."""
    return (q.count > 0 and not q.muted and not (st.transactional and not q.txn_added)
            and not (st.idem != NULL and q.inflight > 0 and q.inflight_node != q.leader))


# thread: io · lock: acc held · gil: no
cdef int64_t head_sendable_at_c(AccState *st, QueueState *q, bint always) noexcept nogil:
    """When the head batch of ``q`` becomes sendable: a retried batch once its retry backoff has
    passed; a first attempt at once (INT64_MIN) when it is full, is not the only batch, or
    ``always`` (the accumulator closing or flushing, or memory waited for), else once its linger
    has passed. INT64_MAX for an empty queue. Muting is not looked at."""
    cdef BatchState *h
    cdef int64_t since
    if q.count == 0:
        return INT64_MAX
    h = q_bs(q, 0)
    if h.attempts > 0:
        # (reenqueue without backoff sets last_attempt_ms one backoff back: sendable at once)
        return h.last_attempt_ms + st.retry_backoff_ms
    since = h.last_attempt_ms if h.last_attempt_ms > h.created_ms else h.created_ms
    if always or q.count > 1 or bs_full_c(h):
        return INT64_MIN
    return since + st.linger_ms


# thread: io · lock: acc held · gil: no
cdef QEntry take_head_c(AccState *st, QueueState *q, int64_t now_ms) noexcept nogil:
    """Drain the head of ``q`` (it has one): it leaves the queue (its owned reference moves to the
    caller), is closed for appends, ``drained_ms`` = ``now_ms``; with ``ordered`` the partition is
    muted."""
    cdef QEntry e = q_pop_front(q)
    if e.bs.bc != NULL:
        q.last_batch_len = e.bs.bc.len
    e.bs.full = True
    e.bs.drained_ms = now_ms
    if st.ordered:
        q.muted = True
    return e


# thread: io · lock: acc held · gil: no
cdef inline bint _idem_steady(AccState *st) noexcept nogil:
    return st.idem == NULL or (st.idem.producer_id >= 0 and not st.idem.bump_required)


# thread: io · lock: acc held · gil: no
cdef inline bint nogil_sendable_c(AccState *st, BatchState *h) noexcept nogil:
    """The one rule for what may go without the GIL: a batch on its first attempt, never stamped
    nor closed, of a builder with its buffer whose codec needs no Python (none, or one compressed
    in C: ``BuilderCore.c_codec``), from an accumulator whose idempotence state (if any) is steady
    (a producer id, no epoch bump pending). Retries, split pieces and codecs without their C
    library take the GIL turn; a transactional producer's batches go without the GIL once their
    partition is in the transaction (queue_drainable_c), which only the GIL turn can do."""
    cdef BuilderCore *bc = h.bc
    return (_idem_steady(st) and h.attempts == 0 and not h.in_retry
            and h.base_sequence < 0 and bc != NULL and not bc.closed
            and (bc.compression == 0 or bc.c_codec) and bc.buf != NULL)


# thread: io · lock: acc held · gil: no
cdef inline int64_t _head_due(AccState *st, QueueState *q, bint always, int64_t now_ms) noexcept nogil:
    """When the head of ``q`` may be drained (INT64_MIN: now); INT64_MAX when not by a drain: not
    drainable, no known leader, or expired (or expiring before it is sendable: the expiry fails
    it)."""
    cdef int64_t at, expiry
    if not queue_drainable_c(st, q) or q.leader < 0:
        return INT64_MAX
    expiry = q_bs(q, 0).created_ms + st.delivery_timeout_ms
    at = head_sendable_at_c(st, q, always)
    if now_ms >= expiry or at >= expiry:
        return INT64_MAX
    return at


# thread: io · lock: none · gil: no
cdef inline Py_ssize_t _node_index(const NodeSlot *nodes, Py_ssize_t nnodes,
                                   int32_t node) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(nnodes):
        if nodes[k].node_id == node:
            return k
    return -1


# ---------------------------------------------------------------------------------------------
# The scan and the drain
# ---------------------------------------------------------------------------------------------

# thread: io · lock: takes acc · gil: no
cdef void scan_c(AccState *st, const NodeSlot *nodes, Py_ssize_t nnodes, bint force,
                 int64_t now_ms, int64_t after_ms, Readiness *r) noexcept nogil:
    cdef QueueState *q
    cdef QueueState *nxt
    cdef BatchState *h
    cdef int64_t at, expiry, g
    cdef Py_ssize_t k, j
    cdef bint always, nogil_side, seen
    r.next_ready = INT64_MAX
    r.next_nogil = INT64_MAX
    r.next_gil = INT64_MAX
    r.first_expiry = INT64_MAX
    r.unknown = 0
    r.nready = 0
    pthread_mutex_lock(&st.lock)
    always = force or st.closed or st.flushes > 0
    q = st.act_head
    while q != NULL:
        nxt = q.act_next
        if q.count == 0:
            _act_unlink(st, q)
            q = nxt
            continue
        h = q_bs(q, 0)
        expiry = h.created_ms + st.delivery_timeout_ms
        if expiry < r.first_expiry:
            r.first_expiry = expiry
        if after_ms <= expiry < r.next_gil:
            r.next_gil = expiry
        if now_ms >= expiry or not queue_drainable_c(st, q):
            # expired: the GIL turn fails it; muted (or not in the transaction): a completion
            # unmutes it
            q = nxt
            continue
        at = head_sendable_at_c(st, q, always)
        k = -1
        if q.leader < 0:
            r.unknown += 1
        else:
            k = _node_index(nodes, nnodes, q.leader)
            if at < expiry:
                if at <= now_ms:
                    seen = False
                    for j in range(min(r.nready, r.ready_cap)):
                        if r.ready[j] == q.leader:
                            seen = True
                            break
                    if not seen:
                        if r.nready < r.ready_cap:
                            r.ready[r.nready] = q.leader
                        r.nready += 1
                elif at < r.next_ready:
                    r.next_ready = at
        nogil_side = k >= 0 and at < expiry and nogil_sendable_c(st, h)
        if nogil_side:
            if nodes[k].room > 0 and at < r.next_nogil:
                r.next_nogil = at
        else:
            # ``after_ms`` is a whole millisecond: a batch started in the millisecond the GIL
            # turn ran, after its scan (linger_ms=0), is due at exactly ``after_ms`` and was not
            # seen by it; counted (at worst the GIL turn runs once more within that millisecond)
            g = at if at > after_ms else h.created_ms + st.linger_ms
            if after_ms <= g < r.next_gil:
                r.next_gil = g
        q = nxt
    pthread_mutex_unlock(&st.lock)
    if r.next_nogil < 0:
        r.next_nogil = 0


# thread: io · lock: takes acc · gil: no
cdef Py_ssize_t drain_c(AccState *st, const NodeSlot *nodes, Py_ssize_t nnodes,
                        int64_t max_request_size, bint force, bint nogil_only, int64_t now_ms,
                        DrainedBatch *out, Py_ssize_t out_cap) noexcept nogil:
    cdef Py_ssize_t count = 0, k, taken, i
    cdef Py_ssize_t deferred = 0       # compressed batches taken, closed and stamped after the lock
    cdef int32_t node
    cdef int64_t size, bsize
    cdef bint always, last, took
    cdef QueueState *q
    cdef QueueState *nxt
    cdef QueueState *end
    cdef BatchState *h
    cdef BuilderCore *bc
    cdef QEntry e
    if nnodes <= 0 or out_cap <= 0:
        return 0
    pthread_mutex_lock(&st.lock)
    if nogil_only and not _idem_steady(st):
        pthread_mutex_unlock(&st.lock)
        return 0
    always = force or st.closed or st.flushes > 0
    for k in range(nnodes):
        if nodes[k].room <= 0 or count == out_cap:
            continue
        node = nodes[k].node_id
        size = 0
        taken = 0
        # One pass over the list as it stands: a partition drained goes to the tail, behind
        # ``end``, and is not met again in this pass; one left (its request full) is first next time.
        q = st.act_head
        end = st.act_tail
        while q != NULL and count < out_cap:
            nxt = q.act_next
            last = q == end
            if q.count == 0:
                _act_unlink(st, q)
            elif q.leader == node and _head_due(st, q, always, now_ms) <= now_ms:
                h = q_bs(q, 0)
                bc = h.bc
                if not nogil_only or nogil_sendable_c(st, h):
                    bsize = 0 if bc == NULL else (bc.final_len if bc.closed else bc.len)
                    if taken and size + bsize > max_request_size:
                        break
                    took = False
                    if nogil_only and bc.compression != 0:
                        # compressed without the lock (below): popped now, so no append reaches it
                        e = take_head_c(st, q, now_ms)
                        deferred += 1
                        took = True
                    elif not nogil_only or builder_close_plain_c(bc) == 0:
                        e = take_head_c(st, q, now_ms)
                        if nogil_only:
                            if stamp_for_send_c(st, q, e.bs) > 0:
                                q.muted = True
                            bsize = bc.final_len
                        took = True
                    if took:
                        e.bs.in_flight = True
                        q.inflight += 1
                        q.inflight_node = node
                        out[count].batch = e.batch
                        out[count].bs = e.bs
                        out[count].qs = q
                        out[count].node_id = node
                        count += 1
                        size += bsize
                        taken += 1
                        _act_drained(st, q)
            if last:
                break
            q = nxt
    pthread_mutex_unlock(&st.lock)
    if deferred:
        # Compress the batches taken above (in C, without the lock: appends go on meanwhile), then
        # stamp them under the lock, in the order taken. Nothing else drains or stamps between:
        # both turns run on the I/O thread, and these batches are in no queue.
        for i in range(count):
            if not out[i].bs.bc.closed:
                builder_close_c(out[i].bs.bc)
        pthread_mutex_lock(&st.lock)
        for i in range(count):
            if not out[i].bs.bc.stamped:
                if stamp_for_send_c(st, out[i].qs, out[i].bs) > 0:
                    out[i].qs.muted = True
        pthread_mutex_unlock(&st.lock)
    return count
