# accumulator_ring.pxi: each partition's queue, a C ring of owned batch references, and its
# garbage-collector slots.
# Included by accumulator.pyx; the contract is in accumulator.pxd, the explanation in
# docs/internals.md.

# ---------------------------------------------------------------------------------------------
# Per-partition state
# ---------------------------------------------------------------------------------------------

cdef int _q_grow(QueueState *q) except -1:
    """Double the ring (at least 4 slots), keeping the order; the head moves to slot 0."""
    cdef Py_ssize_t ncap = q.cap * 2 if q.cap else 4, i
    cdef QEntry *nr = <QEntry *>PyMem_RawMalloc(ncap * sizeof(QEntry))
    if nr == NULL:
        raise MemoryError()
    for i in range(q.count):
        nr[i] = q.ring[(q.head + i) % q.cap]
    PyMem_RawFree(q.ring)
    q.ring = nr
    q.cap = ncap
    q.head = 0
    return 0


cdef int q_push_back(QueueState *q, ProducerBatch batch) except -1:
    cdef QEntry *e
    if q.count == q.cap:
        _q_grow(q)
    Py_INCREF(batch)
    e = &q.ring[(q.head + q.count) % q.cap]
    e.batch = <PyObject *>batch
    e.bs = &batch.s
    q.count += 1
    return 0


cdef int q_insert(QueueState *q, Py_ssize_t pos, ProducerBatch batch) except -1:
    cdef Py_ssize_t i
    cdef QEntry *e
    if pos < 0 or pos > q.count:
        raise IndexError(pos)
    if q.count == q.cap:
        _q_grow(q)
    Py_INCREF(batch)
    if pos == 0:                                # push front: nothing moves
        q.head = (q.head + q.cap - 1) % q.cap
        e = &q.ring[q.head]
    else:
        i = q.count
        while i > pos:
            q.ring[(q.head + i) % q.cap] = q.ring[(q.head + i - 1) % q.cap]
            i -= 1
        e = &q.ring[(q.head + pos) % q.cap]
    e.batch = <PyObject *>batch
    e.bs = &batch.s
    q.count += 1
    return 0


# thread: io · lock: acc held · gil: held
cdef PyObject *q_remove(QueueState *q, Py_ssize_t i) noexcept nogil:
    cdef PyObject *o
    if i < 0 or i >= q.count:
        return NULL
    if i == 0:
        return q_pop_front(q).batch
    o = q.ring[(q.head + i) % q.cap].batch
    while i < q.count - 1:
        q.ring[(q.head + i) % q.cap] = q.ring[(q.head + i + 1) % q.cap]
        i += 1
    q.ring[(q.head + q.count - 1) % q.cap].batch = NULL
    q.ring[(q.head + q.count - 1) % q.cap].bs = NULL
    q.count -= 1
    return o


cdef extern from "Python.h":
    # PyList_SET_ITEM taking the reference to steal as a pointer (no temporary object reference)
    void _list_set_owned "PyList_SET_ITEM" (object lst, Py_ssize_t i, PyObject *o)


cdef list q_list(QueueState *q, bint take):
    cdef list out = PyList_New(q.count)
    cdef Py_ssize_t i
    cdef QEntry *e
    for i in range(q.count):
        e = &q.ring[(q.head + i) % q.cap]
        if not take:
            Py_INCREF(<object>e.batch)
        _list_set_owned(out, i, e.batch)           # steals: the reference moves into the list
        if take:
            e.batch = NULL
            e.bs = NULL
    if take:
        q.count = 0
        q.head = 0
    return out


@cython.final
cdef class _PartitionQueue:
    """One partition's queue: its C state ``q`` (the ring of batches and the rest) and the Python
    objects that state points into (the topic's UTF-8 bytes)."""

    def __dealloc__(self):
        while self.q.count:
            Py_XDECREF(q_pop_front(&self.q).batch)
        PyMem_RawFree(self.q.ring)
        self.q.ring = NULL
        self.q.cap = 0


@cython.final
cdef class _TopicState:
    pass


# The ring holds its references in C memory, which the cyclic garbage collector does not see: a
# cycle through a queued batch (an error's traceback holding a frame that holds the producer...)
# would never be collected. So the queue's type visits (tp_traverse) and clears (tp_clear) the
# ring's references too, around what Cython generated for its object fields.
cdef extern from "Python.h":
    ctypedef int (*visitproc)(PyObject *, void *)
    ctypedef int (*traverseproc)(PyObject *, visitproc, void *)
    ctypedef int (*inquiry)(PyObject *)
    ctypedef struct _TypeGCSlots "PyTypeObject":
        traverseproc tp_traverse
        inquiry tp_clear

cdef traverseproc _pq_base_traverse = NULL
cdef inquiry _pq_base_clear = NULL


cdef int _pq_traverse(PyObject *o, visitproc visit, void *arg) noexcept:
    cdef QueueState *q = &(<_PartitionQueue>o).q
    cdef Py_ssize_t i
    cdef PyObject *b
    cdef int r
    for i in range(q.count):
        b = q.ring[(q.head + i) % q.cap].batch
        if b != NULL:
            r = visit(b, arg)
            if r:
                return r
    if _pq_base_traverse != NULL:
        return _pq_base_traverse(o, visit, arg)
    return 0


cdef int _pq_clear(PyObject *o) noexcept:
    cdef QueueState *q = &(<_PartitionQueue>o).q
    while q.count:
        Py_XDECREF(q_pop_front(q).batch)
    if _pq_base_clear != NULL:
        return _pq_base_clear(o)
    return 0


cdef _TypeGCSlots *_pq_type = <_TypeGCSlots *><PyObject *>_PartitionQueue
_pq_base_traverse = _pq_type.tp_traverse
_pq_base_clear = _pq_type.tp_clear
_pq_type.tp_traverse = _pq_traverse
_pq_type.tp_clear = _pq_clear


cdef Py_ssize_t _retry_position(QueueState *q, int32_t base_sequence) noexcept:
    """Where a batch to retry goes in its partition's queue: at the head, after the retried batches
    with a lower sequence (so sequences stay in order); at the very head without a sequence."""
    cdef Py_ssize_t i = 0, n = q_len(q)
    cdef BatchState *s
    if base_sequence < 0:
        return 0
    while i < n:
        s = &(<ProducerBatch>q_get(q, i)).s
        if s.base_sequence >= 0 and s.base_sequence < base_sequence:
            i += 1
        else:
            break
    return i
