# accumulator_split.pxi: a batch the broker refused as too large, split into pieces that take its
# records over.
# Included by accumulator.pyx; the contract is in accumulator.pxd, the explanation in
# docs/internals.md.

cdef object split_and_reenqueue_c(RecordAccumulator self, ProducerBatch batch, int64_t now_ms, int parts):
    """RecordAccumulator.split_and_reenqueue (its docstring has the rules)."""

    cdef list builders, pieces, owners, listeners, thunks, lists
    cdef ProducerBatch c
    cdef BatchBuilder nb
    cdef FutureRecordMetadata f
    cdef BatchListener l, src
    cdef _PartitionQueue pq
    cdef int32_t first, i, k
    cdef Py_ssize_t j, last, li
    if (batch.done or batch.children is not None or batch.builder is None
            or batch.s.record_count < 2 or batch.builder.count_c() != batch.s.record_count):
        return None
    done_acquire()
    owners = record_owners(batch)
    done_release()
    if owners is None:
        return None
    # re-encode and compress outside every lock (the codecs release the GIL)
    builders = batch.builder.split(parts)
    pieces = []
    first = 0
    for nb in builders:
        nb.close()
        c = ProducerBatch.__new__(ProducerBatch)
        init_batch(c, batch.topic, batch.partition, nb, batch.s.created_ms)
        c.topic_partition = batch.topic_partition
        c.s.record_count = nb.count_c()
        c.s.full = True
        c.parent = batch
        c.first_index = first
        if batch.s.base_sequence >= 0:
            c.s.producer_id = batch.s.producer_id
            c.s.producer_epoch = batch.s.producer_epoch
            c.s.base_sequence = (batch.s.base_sequence + first) & 0x7fffffff
        nb.stamp(c.s.producer_id, c.s.producer_epoch, c.s.base_sequence, self.st.transactional)
        first += nb.count_c()
        pieces.append(c)
    # hand callbacks and send_batch counts over to the pieces
    done_acquire()
    try:
        owners = record_owners(batch)   # again: add_callback may have run meanwhile
        if owners is None or batch.done:
            return None
        listeners = batch.listeners
        thunks = batch.thunks
        k = 0
        for c in pieces:
            last = -1
            l = None
            for j in range(c.first_index, c.first_index + c.s.record_count):
                li = <Py_ssize_t>owners[j]
                if li < 0:
                    continue
                if li != last:
                    src = <BatchListener>listeners[li]
                    l = BatchListener.__new__(BatchListener)
                    l.future = src.future
                    l.count = 0
                    if c.listeners is None:
                        c.listeners = [l]
                    else:
                        c.listeners.append(l)
                    last = li
                l.count += 1
        if thunks is not None:
            for f in thunks:
                i = f.index
                resolve_batch(f.batch, &i)
                k = len(pieces) - 1
                while k > 0 and (<ProducerBatch>pieces[k]).first_index > i:
                    k -= 1
                c = <ProducerBatch>pieces[k]
                if c.thunks is None:
                    c.thunks = [f]
                else:
                    c.thunks.append(f)
        batch.thunks = None
        batch.listeners = None
        batch.last_listener = None
        batch.children_left = len(pieces)
        batch.children = pieces
    finally:
        done_release()
    # queue them where the batch would be retried; the batch's memory went to the pieces
    # (BatchBuilder.split), or goes back once its builder is freed
    self._acquire()
    try:
        pq = self._pq_locked(self._topic_locked(batch.topic), batch.partition)
        j = _retry_position(&pq.q, batch.s.base_sequence)
        for c in pieces:
            q_insert(&pq.q, j, c)
            act_join(&self.st, &pq.q)
            j += 1
            c.reserved = c.builder.c.cap
            self._incomplete.add(c)
        self._incomplete.discard(batch)
        batch.reserved = 0
        nb = batch.builder
        set_builder(batch, None)
    finally:
        self._release()
    nb = None       # freed outside the lock: its buffer goes back to the pool
    return pieces
