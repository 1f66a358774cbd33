# accumulator_append.pxi: the one append path, for send(), produce() and send_batch() (lists and
# Arrow).
# Included by accumulator.pyx; the contract is in accumulator.pxd, the explanation in
# docs/internals.md.

from fastkafka._producer.router cimport CANNOT_EXIST, NONE_AVAILABLE, refuse_partition

# ---------------------------------------------------------------------------------------------
# The append path: one for send(), produce() and send_batch() (lists and Arrow)
# ---------------------------------------------------------------------------------------------

cdef inline ProducerBatch _append_to_tail(RecordAccumulator acc, _PartitionQueue pq,
                                          int64_t timestamp, const char *kp, Py_ssize_t kl,
                                          const char *vp, Py_ssize_t vl, object headers):
    """Append the record to the partition's open (last) batch: that batch, or None when there is
    none or it has no room (it is then closed for appends and the sender is to be woken)."""
    cdef ProducerBatch batch
    cdef Py_ssize_t nb = q_len(&pq.q)
    if nb:
        batch = <ProducerBatch>q_get(&pq.q, nb - 1)
        if not batch.s.full:
            if batch.builder.append_raw(timestamp, kp, kl, vp, vl, headers):
                return batch
            batch.s.full = True
            if acc.wakeup_pending != WAKE_GIL:
                acc.wakeup_pending = WAKE_NOW
    return None


cdef ProducerBatch _append_to_tail_hp(RecordAccumulator acc, _PartitionQueue pq,
                                      int64_t timestamp, const char *kp, Py_ssize_t kl,
                                      const char *vp, Py_ssize_t vl, const char *hp,
                                      Py_ssize_t hl):
    """_append_to_tail for a record whose headers section is encoded already (``hl`` bytes at
    ``hp``): send_batch's per-record headers."""
    cdef ProducerBatch batch
    cdef Py_ssize_t nb = q_len(&pq.q)
    if nb:
        batch = <ProducerBatch>q_get(&pq.q, nb - 1)
        if not batch.s.full:
            if batch.builder.append_encoded(timestamp, kp, kl, vp, vl, hp, hl):
                return batch
            batch.s.full = True
            if acc.wakeup_pending != WAKE_GIL:
                acc.wakeup_pending = WAKE_NOW
    return None


cdef ProducerBatch append_record_locked(RecordAccumulator acc, _TopicState ts, int32_t partition,
                                        bint sticky, bint move_sticky, int64_t timestamp,
                                        const char *kp, Py_ssize_t kl, const char *vp,
                                        Py_ssize_t vl, object headers, Py_ssize_t hsize,
                                        int64_t now_ms, int64_t max_block_ms,
                                        const char *hp):
    """Append one record of ``ts.topic`` to ``partition``; return the batch it went into. Called
    with the accumulator's lock held, which is held again when this returns or raises (it is
    released while waiting for buffer memory).

    1. The partition's open batch, if it has room.
    2. ``sticky`` (``partition`` is the topic's sticky partition): the first time a new batch would
       be needed, the sticky partition moves to another of ``ts.available`` (the Java "abort on new
       batch") and its open batch is tried. Otherwise, with ``move_sticky``, a full batch in the
       current sticky partition moves it anyway (keyed records filled it).
    3. A new batch: its memory (the batch size, or the record's size when larger: ``hsize`` is the
       headers' encoded size, -1 to compute it here) from the buffer pool, waiting up to
       ``max_block_ms`` without the lock when it is not free; then the open batch is tried once
       more, since another thread may have started one meanwhile (the memory goes back then).
    ``now_ms`` < 0: the monotonic clock, read only when a batch is started. ``hp`` (not NULL): the
    record's headers section, encoded (``hsize`` bytes), instead of ``headers``."""
    cdef _PartitionQueue pq
    cdef ProducerBatch batch
    cdef bint switched = False
    cdef int32_t np
    cdef int64_t size, hint
    cdef BatchState *bs
    cdef object cur
    cdef char *buf = NULL
    while True:
        pq = acc._pq_locked(ts, partition)
        if hp != NULL:
            batch = _append_to_tail_hp(acc, pq, timestamp, kp, kl, vp, vl, hp, hsize)
        else:
            batch = _append_to_tail(acc, pq, timestamp, kp, kl, vp, vl, headers)
        if batch is not None:
            return batch
        if sticky:
            if not switched:
                switched = True
                np = acc._sticky.next_partition(ts.topic, ts.available, partition)
                if np != partition:
                    partition = np
                    continue
        elif move_sticky and ts.available and q_len(&pq.q):
            cur = acc._sticky.current_c(ts.topic)
            if cur is not None and <int32_t>cur == partition:
                acc._sticky.next_partition(ts.topic, ts.available, partition)
        break
    # headers are validated here (TypeError naming the index) before memory is taken
    if hsize < 0:
        hsize = headers_encoded_size(headers) if headers is not None else 1
    size = BATCH_HEADER_SIZE + record_size_c(0, 0, kl, vl, hsize)
    # The buffer: the pool's size class for what the partition's last batch held (the one just
    # filled, else the last one drained), at least this record; it grows while records come
    # (BufferPool.grow_buffer). Memory then follows what the batches hold, not partitions x
    # batch_size.
    hint = pq.q.last_batch_len
    if q_len(&pq.q):
        bs = &(<ProducerBatch>q_get(&pq.q, q_len(&pq.q) - 1)).s
        if bs.bc != NULL and bs.bc.len > hint:
            hint = bs.bc.len
    size = acc.buffer_pool.class_for_c(hint if hint > size else size)
    # the bytes and (when one is free) the buffer, in one round of the pool's lock
    if not acc.buffer_pool.try_take_c(size, &buf):
        acc._release()
        try:
            acc.buffer_pool.allocate_buffer_c(size, max_block_ms, &buf)
        finally:
            acc._acquire()
        if acc.st.closed:
            acc.buffer_pool.give_back(buf, size)
            raise ProducerClosedError("the producer was closed while waiting for memory")
        if hp != NULL:
            batch = _append_to_tail_hp(acc, pq, timestamp, kp, kl, vp, vl, hp, hsize)
        else:
            batch = _append_to_tail(acc, pq, timestamp, kp, kl, vp, vl, headers)
        if batch is not None:
            acc.buffer_pool.give_back(buf, size)
            return batch
    if now_ms < 0:
        now_ms = clock_ms(CLOCK_MONOTONIC)
    # from here the builder owns the bytes and the buffer (and gives them back when freed)
    batch = acc._new_batch(pq, now_ms, size, buf)
    try:
        if not (batch.builder.append_encoded(timestamp, kp, kl, vp, vl, hp, hsize) if hp != NULL
                else batch.builder.append_raw(timestamp, kp, kl, vp, vl, headers)):
            raise RuntimeError("BatchBuilder refused the first record of a new batch")
    except BaseException:
        set_builder(batch, None)
        raise
    q_push_back(&pq.q, batch)
    act_join(&acc.st, &pq.q)
    acc._incomplete.add(batch)
    if acc.st.transactional and not pq.q.txn_added:
        acc.wakeup_pending = WAKE_GIL       # AddPartitionsToTxn first: only the GIL turn sends it
    elif acc.wakeup_pending == WAKE_NONE or (acc.wakeup_pending == WAKE_BY
                                             and batch.s.created_ms + acc.st.linger_ms < acc.wake_deadline_ms):
        acc.wakeup_pending = WAKE_BY
        acc.wake_deadline_ms = batch.s.created_ms + acc.st.linger_ms
    return batch


cdef int _count_record(ProducerBatch batch, BatchFuture future) except -1:
    count_batch_record(batch, future)
    return 0


cdef int _append_columns_locked(RecordAccumulator self, _TopicState tstate, Py_ssize_t n,
                                Column *kc, Column *vc, const int32_t *pp, int32_t single,
                                bint sticky, const TsColumn *tc, const HeaderColumn *hc,
                                bint has_ts, bint has_hc, int64_t timestamp_ms, object headers,
                                Py_ssize_t hsize, int64_t now_ms, int64_t max_block_ms,
                                BatchFuture future, int64_t *appended, bint *locked) except -1:
    """append_batch_c's loop for a timestamp and/or a headers section per record (the headers
    encoded into a scratch buffer, then copied into the batch). Apart from the plain loop so that
    one stays as small (and as inlined) as it was. Called and returns with the lock held
    (``locked[0]`` says so while it runs); ``appended[0]`` counts the records appended."""
    cdef Py_ssize_t i, kl, vl, hl = hsize, scap = 0
    cdef const char *kp
    cdef const char *vp
    cdef Py_buffer kview, vview
    cdef bint krel = False, vrel = False
    cdef int32_t p, cur_p = -1
    cdef int64_t ts = timestamp_ms
    cdef char *scratch = NULL
    cdef char *grown
    cdef ProducerBatch batch
    try:
        for i in range(n):
            column_get(kc, i, &kp, &kl, &kview, &krel)
            column_get(vc, i, &vp, &vl, &vview, &vrel)
            p = pp[i] if pp != NULL else single
            if has_ts:
                ts = ts_get(tc, i, timestamp_ms)
            if has_hc:
                hl = headers_size(hc, i)
                if hl > scap:
                    grown = <char *>PyMem_RawRealloc(scratch, hl if hl > 256 else 256)
                    if grown == NULL:
                        raise MemoryError()
                    scratch = grown
                    scap = hl if hl > 256 else 256
                headers_write(hc, i, scratch)
            # the whole append path (its first step is the open batch): the plain loop's inline
            # steps stay inlined there
            batch = append_record_locked(self, tstate, p, sticky, False, ts, kp, kl, vp, vl,
                                         headers, hl, now_ms, max_block_ms, scratch)
            if batch.partition != cur_p:  # the sticky partition moved
                cur_p = batch.partition
                single = cur_p
            _count_record(batch, future)
            appended[0] += 1
            if krel:
                PyBuffer_Release(&kview)
                krel = False
            if vrel:
                PyBuffer_Release(&vview)
                vrel = False
            if (i & 4095) == 4095:
                # let other producer threads and the sender in
                self._release()
                locked[0] = False
                self._acquire()
                locked[0] = True
                if self.st.closed:
                    raise ProducerClosedError("the producer was closed during send_batch")
    finally:
        if krel:
            PyBuffer_Release(&kview)
        if vrel:
            PyBuffer_Release(&vview)
        PyMem_RawFree(scratch)
    return 0


cdef int64_t append_batch_c(RecordAccumulator self, str topic, partitions, values, keys, headers,
                             int64_t timestamp_ms, BatchFuture future, int64_t now_ms,
                             int64_t max_block_ms, list available_partitions,
                             int64_t max_record_size, timestamps=None,
                             record_headers=None) except -1:
    """RecordAccumulator.append_batch (its docstring has the rules)."""

    cdef Column vc, kc
    cdef TsColumn tc
    cdef HeaderColumn hc
    cdef bint has_ts = False, has_hc = False
    cdef list keep = []
    cdef Py_ssize_t n, nk, i
    cdef int32_t single = 0
    cdef const int32_t *pp = NULL
    cdef Py_ssize_t hsize = 1
    cdef int32_t p, cur_p
    cdef const char *kp
    cdef const char *vp
    cdef Py_ssize_t kl, vl
    cdef Py_buffer kview, vview
    cdef bint krel = False, vrel = False, locked = False
    cdef int64_t size, appended = 0
    cdef _TopicState tstate
    cdef _PartitionQueue pq = None
    cdef ProducerBatch batch
    cdef object err = None
    cdef bint sticky = False

    if future is None:
        raise ValueError("append_batch needs a BatchFuture")
    try:
        # ---- validation: nothing is appended if any of this fails ----
        n = prepare_column(values, &vc, "values", keep)
        if keys is None:
            kc.kind = COL_NULL
        else:
            nk = prepare_column(keys, &kc, "keys", keep)
            if nk != n:
                raise MalformedRecordError(f"keys has {nk} elements but values has {n}")
        if timestamps is not None:
            prepare_timestamps(timestamps, &tc, n, timestamp_ms, keep)
            has_ts = True
        if record_headers is not None:
            # the call's headers go after each record's own (the column's tail)
            prepare_headers_column(record_headers, &hc, n, headers, keep)
            has_hc = True
            headers = None
        elif headers is not None:
            try:
                # encoded once for every record of the call (each record copies the bytes)
                headers = EncodedHeaders(headers)
                hsize = headers_encoded_size(headers)
            except TypeError as e:
                raise InvalidRecordError(f"headers: {e}") from None
            except (ValueError, BufferError) as e:  # a lone surrogate, a released memoryview
                raise MalformedRecordError(f"headers: {e}") from None
        if isinstance(partitions, int):
            single = partitions
            # the router (fastkafka/_producer/router.pyx) placed them; what it refuses, refused
            # here the same way
            if single == PARTITION_STICKY:
                sticky = True
                if not available_partitions:
                    refuse_partition(NONE_AVAILABLE, topic, None, 0, -1)
            elif single < 0:
                refuse_partition(CANNOT_EXIST, topic, single, -1, -1)
        else:
            pp = prepare_int32_column(partitions, n, keep)
            for i in range(n):
                if pp[i] < 0:
                    refuse_partition(CANNOT_EXIST, topic, pp[i], -1, i)

        if max_record_size > 0:
            for i in range(n):
                column_get(&kc, i, &kp, &kl, &kview, &krel)
                column_get(&vc, i, &vp, &vl, &vview, &vrel)
                if krel:
                    PyBuffer_Release(&kview)
                    krel = False
                if vrel:
                    PyBuffer_Release(&vview)
                    vrel = False
                if has_hc:
                    hsize = headers_size(&hc, i)
                size = BATCH_HEADER_SIZE + record_size_c(0, 0, kl, vl, hsize)
                if size > max_record_size:
                    raise RecordTooLargeError(
                        f"record {i} is {size} bytes when serialized, larger than the "
                        f"{max_record_size} bytes max_request_size allows")

        # ---- the loop ----
        self._acquire()
        locked = True
        if self.st.closed:
            raise ProducerClosedError("the producer is closed")
        tstate = self._topic_locked(topic)
        if sticky:
            tstate.available = available_partitions
            single = self._sticky.partition(topic, available_partitions)
        cur_p = -1
        if has_ts or has_hc:
            _append_columns_locked(self, tstate, n, &kc, &vc, pp, single, sticky, &tc, &hc,
                                   has_ts, has_hc, timestamp_ms, headers, hsize, now_ms,
                                   max_block_ms, future, &appended, &locked)
        else:
            # the call's timestamp and headers for every record (the loop the others follow)
            for i in range(n):
                column_get(&kc, i, &kp, &kl, &kview, &krel)
                column_get(&vc, i, &vp, &vl, &vview, &vrel)
                p = pp[i] if pp != NULL else single
                if p != cur_p:
                    pq = self._pq_locked(tstate, p)
                    cur_p = p
                # the open batch inline (most records), else the whole append path
                batch = _append_to_tail(self, pq, timestamp_ms, kp, kl, vp, vl, headers)
                if batch is None:
                    batch = append_record_locked(self, tstate, p, sticky, False, timestamp_ms, kp,
                                                 kl, vp, vl, headers, hsize, now_ms, max_block_ms,
                                                 NULL)
                    if batch.partition != cur_p:  # the sticky partition moved
                        cur_p = batch.partition
                        pq = self._pq_locked(tstate, cur_p)
                        single = cur_p
                count_batch_record(batch, future)
                appended += 1
                if krel:
                    PyBuffer_Release(&kview)
                    krel = False
                if vrel:
                    PyBuffer_Release(&vview)
                    vrel = False
                if (i & 4095) == 4095:
                    # let other producer threads and the sender in
                    self._release()
                    locked = False
                    self._acquire()
                    locked = True
                    if self.st.closed:
                        raise ProducerClosedError("the producer was closed during send_batch")
    except BaseException as e:
        err = e
    finally:
        if krel:
            PyBuffer_Release(&kview)
        if vrel:
            PyBuffer_Release(&vview)
        if locked:
            self._release()
    future.seal(appended)
    if err is not None:
        try:
            err.records_appended = appended
        except Exception:
            pass
        raise err
    return appended
