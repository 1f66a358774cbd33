# cython: language_level=3
"""The memory of record batches, bounded by ``buffer_memory`` (the Java ``BufferPool``'s job).

The pool hands out the batch buffers themselves: a batch's bytes are reserved here and its
builder's buffer is exactly that many bytes, given back with the reservation when the builder is
freed. Buffers come in size classes (4 KiB doubling up to ``batch_size``, then ``batch_size``; a
record larger than that gets a buffer of its own size): a new batch takes the class its partition's
last batch needed, and a batch that outgrows its buffer moves to a larger class while the pool has
the bytes free at once (else it is full). So memory follows what the batches hold: a topic of a
thousand partitions with a few records each in flight holds a few KiB per partition, not
``batch_size``. Free buffers of each class are kept for the next batch (a fresh 64 KiB+ buffer would
cost the producer's thread a page fault per 4 KiB it writes); they count against ``total`` too: the
bytes held by live builders plus the free buffers never exceed it, and free buffers that would make
them exceed it are freed.

A thread that asks for more than is free waits (GIL released) in FIFO order: memory given back
goes to the oldest waiter first, and a later, smaller request does not overtake it.

>>> pool = BufferPool(1024, 256)
>>> pool.allocate(256, 0)
>>> pool.available_memory
768
>>> pool.deallocate(256)
>>> pool.available_memory
1024
"""
cimport cython
from cpython.pythread cimport (
    PyThread_type_lock, PyThread_allocate_lock, PyThread_free_lock, PyThread_acquire_lock,
    PyThread_release_lock, PyThread_get_thread_ident, NOWAIT_LOCK, WAIT_LOCK,
)
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy

from fastkafka._net.clock cimport monotonic_ms
from fastkafka._wire.records cimport BufferSource

from collections import deque
import logging
from time import monotonic_ns as _monotonic_ns

from fastkafka.errors import BufferExhaustedError, ProducerClosedError, RecordTooLargeError

cdef extern from "pythread.h":
    ctypedef enum PyLockStatus:
        PY_LOCK_FAILURE
        PY_LOCK_ACQUIRED
        PY_LOCK_INTR
    PyLockStatus PyThread_acquire_lock_timed(PyThread_type_lock, long long microseconds,
                                             int intr_flag) nogil

_log = logging.getLogger("fastkafka")

# Live-resource counters (read by ``pool_counters()``; touched only with the GIL held): pools alive,
# the bytes they have handed out and not had back, their free batch buffers, and the free bytes
# beyond what a pool may keep (0 unless the bound is broken). A pool freed while holding bytes
# takes its counts with it, so the counters describe live pools only.
cdef int64_t _live_pools = 0
cdef int64_t _held_bytes = 0
cdef int64_t _free_bufs = 0
cdef int64_t _free_bytes = 0
cdef int64_t _over_bytes = 0


def pool_counters():
    """pool_counters() -> dict, over the process: ``buffer_pools`` (BufferPool objects alive),
    ``buffer_pool_bytes`` (bytes those pools have handed out and not had back),
    ``buffer_pool_free_buffers`` / ``buffer_pool_free_bytes`` (free batch buffers they keep for
    reuse, a part of their ``buffer_memory``) and ``buffer_pool_overflow`` (free bytes a pool keeps
    beyond its ``buffer_memory``: 0 unless the bound is broken).

    >>> pool_counters()["buffer_pool_overflow"]
    0
    """
    return {"buffer_pools": _live_pools, "buffer_pool_bytes": _held_bytes,
            "buffer_pool_free_buffers": _free_bufs, "buffer_pool_free_bytes": _free_bytes,
            "buffer_pool_overflow": _over_bytes}


@cython.final
cdef class _Waiter:
    def __cinit__(self):
        self.sem = PyThread_allocate_lock()
        if self.sem == NULL:
            raise MemoryError()
        PyThread_acquire_lock(self.sem, WAIT_LOCK)

    def __dealloc__(self):
        if self.sem != NULL:
            PyThread_acquire_lock(self.sem, NOWAIT_LOCK)   # make sure it is held ...
            PyThread_release_lock(self.sem)                # ... then unlocked before freeing
            PyThread_free_lock(self.sem)
            self.sem = NULL


@cython.final
cdef class BufferPool(BufferSource):
    """``BufferPool(total_bytes, batch_size)``: accounting of batch memory with FIFO blocking.

    * ``allocate(size, max_block_ms)`` takes ``size`` bytes, waiting up to ``max_block_ms`` for them;
      raises ``BufferExhaustedError`` when the time runs out, ``RecordTooLargeError`` at once when
      ``size`` exceeds the whole pool, ``ProducerClosedError`` if the pool is (or gets) closed.
    * ``deallocate(size)`` gives bytes back and serves waiters, oldest first.
    * ``wakeup``: an optional callable run when a thread starts waiting (the sender uses it to send
      at once, which is what frees memory). Exceptions from it are logged.
    * Batch buffers (for the accumulator's builders): ``held_bytes`` (bytes of the buffers live
      builders hold), ``free_bytes`` (free buffers kept for the next batch; ``held_bytes +
      free_bytes <= total`` always, ``peak_bytes`` is the most it ever was), ``buffers_reused`` /
      ``buffers_made`` (buffers handed out from the free ones / newly made).
    * ``io_thread_ident``: the thread ident (``threading.get_ident()``) of the thread that frees
      memory, the producer's I/O thread; 0 for none. An ``allocate`` on that thread never waits:
      when the memory is not free at once it raises ``BufferExhaustedError`` saying so, since
      waiting there would deadlock the thread that would give the memory back. The thread is
      compared only when the memory is not free.
    """

    def __cinit__(self, int64_t total_bytes, int64_t batch_size):
        global _live_pools
        cdef int64_t size = MIN_CLASS
        if total_bytes <= 0:
            raise ValueError(f"buffer_memory must be positive, got {total_bytes}")
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.total = total_bytes
        self.batch_size = batch_size
        self._nclasses = 0
        while size < batch_size and self._nclasses < MAX_CLASSES - 1:
            self._class_size[self._nclasses] = size
            self._nclasses += 1
            size *= 2
        self._class_size[self._nclasses] = batch_size
        self._nclasses += 1
        self._available = total_bytes
        self._waiters = deque()
        self._listeners = []
        self._lock = PyThread_allocate_lock()
        if self._lock == NULL:
            raise MemoryError()
        self.wakeup = None
        self._counted = True
        _live_pools += 1

    def __dealloc__(self):
        global _live_pools, _held_bytes, _over_bytes
        cdef Py_ssize_t k
        if self._counted:
            self._counted = False
            _live_pools -= 1
            _held_bytes -= self.total - self._available
            _over_bytes -= self._over
            self._over = 0
        self._free_all_locked()     # nobody else can hold a reference any more
        for k in range(self._nclasses):
            free(self._free[k])
            self._free[k] = NULL
        if self._lock != NULL:
            PyThread_free_lock(self._lock)
            self._lock = NULL

    cdef void _lock_acquire(self) noexcept:
        if not PyThread_acquire_lock(self._lock, NOWAIT_LOCK):
            with nogil:
                PyThread_acquire_lock(self._lock, WAIT_LOCK)

    cdef int _grant_locked(self) except -1:
        """Serve waiters from the head while the head's request fits. Lock held."""
        global _held_bytes
        cdef _Waiter w
        while self._waiters:
            w = <_Waiter>self._waiters[0]
            if w.size > self._available:
                break
            self._waiters.popleft()
            w.buf = self._reserve_locked(w.size, w.size if w.for_buffer else 0)
            w.granted = True
            PyThread_release_lock(w.sem)
        if self._listeners and not self._waiters:
            self._notify_locked(False)
        return 0

    cdef void _notify_locked(self, bint everyone) noexcept:
        """Call (once, and forget) the listeners whose size is available now; ``everyone``: all
        of them (the pool closed). Lock held: a listener only hands a call to an event loop."""
        cdef list keep = []
        for item in self._listeners:
            if everyone or <int64_t>item[0] <= self._available:
                try:
                    item[1]()
                except BaseException:
                    _log.exception("buffer memory listener raised")
            else:
                keep.append(item)
        self._listeners = keep

    def add_listener(self, int64_t size, fn):
        """add_listener(size, fn): call ``fn()`` once, from the thread that frees memory, when
        ``size`` bytes are available with no thread waiting before it (at once if they are), or
        when the pool closes. Meanwhile the sender sends every batch at once, as for a waiting
        thread. For senders that cannot block (fastkafka.aio), which then try again."""
        self._lock_acquire()
        try:
            if self._closed or (not self._waiters and self._available >= size):
                fn()
                return
            self._listeners.append([size, fn])
        finally:
            PyThread_release_lock(self._lock)
        if self.wakeup is not None:
            try:
                self.wakeup()
            except Exception:
                _log.exception("buffer pool wakeup hook raised")

    cdef char *_reserve_locked(self, int64_t size, int64_t buffer_of) noexcept:
        """Take ``size`` bytes of the available ones (the caller checked they are); with
        ``buffer_of`` > 0 they are for a batch buffer of that many bytes (a new one: ``size``; a
        grown one: more than ``size``), and a free buffer of that size is handed over if there is
        one. Free buffers the available bytes no longer cover are freed. Lock held."""
        global _held_bytes
        cdef char *b = NULL
        self._available -= size
        _held_bytes += size
        if buffer_of > 0:
            self.held_bytes += size
            b = self._pop_free_locked(self._class_index(buffer_of))
            if b != NULL:
                self.buffers_reused += 1
            else:
                self.buffers_made += 1
        self._trim_locked()
        self._check_locked()
        return b

    cdef Py_ssize_t _class_at_least(self, int64_t size) noexcept:
        """The index of the smallest class of at least ``size`` bytes (_nclasses: none)."""
        cdef Py_ssize_t k = 0
        while k < self._nclasses and self._class_size[k] < size:
            k += 1
        return k

    cdef Py_ssize_t _class_index(self, int64_t size) noexcept:
        """The index of the class of exactly ``size`` bytes, or -1."""
        cdef Py_ssize_t k = self._class_at_least(size)
        return k if k < self._nclasses and self._class_size[k] == size else -1

    cdef int64_t class_for_c(self, int64_t need) noexcept:
        cdef Py_ssize_t k = self._class_at_least(need)
        return self._class_size[k] if k < self._nclasses else need

    def class_for(self, int64_t need):
        """class_for(need) -> int: the buffer size a batch needing ``need`` bytes is given."""
        return self.class_for_c(need)

    cdef char *_pop_free_locked(self, Py_ssize_t k) noexcept:
        """A free buffer of class ``k`` (taken out of the free ones), or NULL. Lock held."""
        global _free_bufs, _free_bytes
        cdef char *b
        if k < 0 or self._free_n[k] == 0:
            return NULL
        self._free_n[k] -= 1
        self._free_total -= 1
        b = self._free[k][self._free_n[k]]
        self.free_bytes -= self._class_size[k]
        _free_bufs -= 1
        _free_bytes -= self._class_size[k]
        return b

    cdef bint _push_free_locked(self, char *buf, int64_t cap) noexcept:
        """Keep ``buf`` (``cap`` bytes) as a free buffer when ``cap`` is a class's size, the pool is
        open and the free buffers stay within the available bytes: True, else False (the caller
        frees it). Lock held."""
        global _free_bufs, _free_bytes
        cdef Py_ssize_t k = self._class_index(cap), n
        cdef char **arr
        if buf == NULL or k < 0 or self._closed or self.free_bytes + cap > self._available:
            return False
        if self._free_n[k] == self._free_cap[k]:
            n = self._free_cap[k] * 2 if self._free_cap[k] else 16
            arr = <char **>realloc(self._free[k], <size_t>n * sizeof(char *))
            if arr == NULL:
                return False
            self._free[k] = arr
            self._free_cap[k] = n
        self._free[k][self._free_n[k]] = buf
        self._free_n[k] += 1
        self._free_total += 1
        self.free_bytes += cap
        _free_bufs += 1
        _free_bytes += cap
        return True

    cdef void _trim_locked(self) noexcept:
        """Free the free buffers the available bytes no longer cover, largest first. Lock held."""
        cdef Py_ssize_t k = self._nclasses - 1
        while self.free_bytes > self._available and k >= 0:
            if self._free_n[k] == 0:
                k -= 1
                continue
            free(self._pop_free_locked(k))

    cdef void _check_locked(self) noexcept:
        """Keep ``peak_bytes`` and the overflow counter up to date. Lock held."""
        global _over_bytes
        cdef int64_t now = self.held_bytes + self.free_bytes, over
        if now > self.peak_bytes:
            self.peak_bytes = now
        over = self.free_bytes - self._available
        if over < 0:
            over = 0
        if over != self._over:
            _over_bytes += over - self._over
            self._over = over

    cdef void _free_all_locked(self) noexcept:
        cdef Py_ssize_t k
        for k in range(self._nclasses):
            while self._free_n[k] > 0:
                free(self._pop_free_locked(k))
        self._check_locked()

    # -- BufferSource: the builders' side ----------------------------------------------------------

    cdef void give_back(self, char *buf, Py_ssize_t cap) noexcept:
        """A builder gives its buffer (NULL: none was made) and its ``cap`` reserved bytes back;
        the buffer is kept for the next batch when it has the usual size and the pool is open."""
        global _held_bytes
        self._lock_acquire()
        self._available += cap
        _held_bytes -= cap
        self.held_bytes -= cap
        if self._push_free_locked(buf, cap):
            buf = NULL
        self._check_locked()
        try:
            self._grant_locked()
        except BaseException:   # not expected (no allocation there); never lose the lock
            pass
        PyThread_release_lock(self._lock)
        if buf != NULL:
            free(buf)

    cdef int try_reserve(self, Py_ssize_t size) except -1:
        cdef int ok = 0
        self._lock_acquire()
        if not self._closed and not self._waiters and self._available >= size:
            self._reserve_locked(size, 0)
            self.held_bytes += size
            self._check_locked()
            ok = 1
        PyThread_release_lock(self._lock)
        return ok

    cdef int resize_reservation(self, Py_ssize_t old, Py_ssize_t new) except -1:
        global _held_bytes
        cdef int ok = 1
        self._lock_acquire()
        if new > old:
            # no turn taken behind waiting threads: this is the I/O thread splitting a batch it
            # holds, whose pieces, once sent, are what frees memory for them
            if not self._closed and self._available >= new - old:
                self._reserve_locked(new - old, 0)
                self.held_bytes += new - old
                self._check_locked()
            else:
                ok = 0
        elif new < old:
            self._available += old - new
            _held_bytes -= old - new
            self.held_bytes -= old - new
            self._check_locked()
            try:
                self._grant_locked()
            except BaseException:
                PyThread_release_lock(self._lock)
                raise
        PyThread_release_lock(self._lock)
        return ok

    cdef int grow_buffer(self, char **buf, Py_ssize_t used, Py_ssize_t old_cap, Py_ssize_t needed,
                         Py_ssize_t *new_cap) except -1:
        cdef int64_t ncap = self.class_for_c(needed), more
        cdef char *nb
        cdef char *old = buf[0]
        more = ncap - old_cap
        self._lock_acquire()
        # like try_reserve: no turn taken behind waiting threads (the batch is then full instead)
        if self._closed or self._waiters or self._available < more:
            PyThread_release_lock(self._lock)
            return 0
        nb = self._reserve_locked(more, ncap)
        PyThread_release_lock(self._lock)
        if nb == NULL:
            nb = <char *>malloc(<size_t>ncap)
            if nb == NULL:
                self.resize_reservation(ncap, old_cap)
                raise MemoryError(f"cannot allocate a record batch buffer of {ncap} bytes")
        memcpy(nb, old, <size_t>used)
        # The buffer grown out of is freed, not kept: the free buffers are those batches went out
        # with, the sizes the next batches take. Kept, these leftovers would count against the
        # available bytes and, with the pool full, push out the batch_size buffers a busy producer
        # reuses (each one then made anew, a page fault per 4 KiB written).
        free(old)
        buf[0] = nb
        new_cap[0] = ncap
        return 1

    cdef int try_take_c(self, int64_t size, char **buf) except -1:
        cdef int ok = 0
        self._lock_acquire()
        if not self._closed and not self._waiters and self._available >= size:
            buf[0] = self._reserve_locked(size, size)
            ok = 1
        PyThread_release_lock(self._lock)
        return ok

    cdef int allocate_buffer_c(self, int64_t size, int64_t max_block_ms, char **buf) except -1:
        return self._allocate(size, max_block_ms, True, buf)

    cpdef bint try_allocate(self, int64_t size) except -1:
        """Take ``size`` bytes if free and nobody is waiting; never blocks."""
        cdef bint ok = False
        self._lock_acquire()
        if not self._closed and not self._waiters and self._available >= size:
            self._reserve_locked(size, 0)
            ok = True
        PyThread_release_lock(self._lock)
        return ok

    cpdef allocate(self, int64_t size, int64_t max_block_ms):
        self._allocate(size, max_block_ms, False, NULL)

    cdef int _allocate(self, int64_t size, int64_t max_block_ms, bint for_buffer,
                       char **buf) except -1:
        cdef _Waiter w
        cdef double deadline, remaining
        cdef long long timeout_us
        cdef PyLockStatus r
        cdef int64_t avail_at_start
        cdef char *b
        if size < 0:
            raise ValueError(f"cannot allocate a negative size ({size})")
        if size > self.total:
            raise RecordTooLargeError(
                f"a batch of {size} bytes is larger than the whole buffer_memory ({self.total} bytes); "
                f"raise buffer_memory or send smaller records")
        self._lock_acquire()
        if self._closed:
            PyThread_release_lock(self._lock)
            raise ProducerClosedError("the producer is closed: no memory can be allocated")
        if not self._waiters and self._available >= size:
            b = self._reserve_locked(size, size if for_buffer else 0)
            PyThread_release_lock(self._lock)
            if buf != NULL:
                buf[0] = b
            return 0
        if self.io_thread_ident != 0 and PyThread_get_thread_ident() == self.io_thread_ident:
            avail = self._available
            waiting = len(self._waiters)
            self.io_thread_refusals += 1
            PyThread_release_lock(self._lock)
            raise BufferExhaustedError(
                f"no buffer memory free for a batch of {size} bytes (buffer_memory={self.total} "
                f"bytes, {avail} available"
                + (f", {waiting} sends waiting before this one" if waiting else "")
                + ") and this send was called from the producer's I/O thread (e.g. from a "
                f"delivery callback): it does not wait there (max_block_ms is not applied), since "
                f"waiting would deadlock the thread that frees the memory. Send from an "
                f"application thread, or catch this error and send the record later")
        avail_at_start = self._available
        w = _Waiter.__new__(_Waiter)
        w.size = size
        w.for_buffer = for_buffer
        self._waiters.append(w)
        self.blocked_count += 1
        self._grant_locked()
        PyThread_release_lock(self._lock)

        if not w.granted and self.wakeup is not None:
            try:
                self.wakeup()
            except Exception:
                _log.exception("buffer pool wakeup hook raised")

        deadline = monotonic_ms() + max_block_ms
        waited_from = _monotonic_ns()
        try:
            while True:
                remaining = (deadline - monotonic_ms()) / 1000.0
                if remaining < 0:
                    remaining = 0
                timeout_us = <long long>(remaining * 1e6)
                with nogil:
                    r = PyThread_acquire_lock_timed(w.sem, timeout_us, 0)
                self._lock_acquire()
                if w.granted:
                    PyThread_release_lock(self._lock)
                    if buf != NULL:
                        buf[0] = w.buf
                    return 0
                if w.closed or self._closed:
                    self._remove_locked(w)
                    PyThread_release_lock(self._lock)
                    raise ProducerClosedError("the producer was closed while waiting for buffer memory")
                if monotonic_ms() >= deadline:
                    self._remove_locked(w)
                    avail = self._available
                    PyThread_release_lock(self._lock)
                    raise BufferExhaustedError(
                        f"failed to allocate {size} bytes within max_block_ms={max_block_ms}: "
                        f"buffer_memory={self.total} bytes, {avail} available "
                        f"({avail_at_start} when the request started waiting); the producer is sending "
                        f"slower than records are produced")
                PyThread_release_lock(self._lock)
        finally:
            self.wait_time_ns += _monotonic_ns() - waited_from

    cdef _remove_locked(self, _Waiter w):
        try:
            self._waiters.remove(w)
        except ValueError:
            pass
        # the removed waiter may have been blocking smaller requests behind it
        self._grant_locked()

    cpdef deallocate(self, int64_t size):
        """Give ``size`` bytes back and serve the oldest waiters that now fit."""
        global _held_bytes
        if size < 0:
            raise ValueError(f"cannot deallocate a negative size ({size})")
        self._lock_acquire()
        if self._available + size > self.total - self.held_bytes:
            PyThread_release_lock(self._lock)
            raise ValueError(f"deallocate({size}) would exceed buffer_memory={self.total} "
                             f"(available {self._available}, {self.held_bytes} held by batch "
                             f"buffers): memory given back twice?")
        self._available += size
        _held_bytes -= size
        self._check_locked()
        try:
            self._grant_locked()
        finally:
            PyThread_release_lock(self._lock)

    def close(self):
        """Fail every waiting and every future ``allocate`` with ``ProducerClosedError``."""
        cdef _Waiter w
        self._lock_acquire()
        self._closed = True
        self._free_all_locked()     # no batch will take them any more
        while self._waiters:
            w = <_Waiter>self._waiters.popleft()
            w.closed = True
            PyThread_release_lock(w.sem)
        self._notify_locked(True)
        PyThread_release_lock(self._lock)

    @property
    def available_memory(self):
        """Bytes not held by any batch (the free buffers kept for reuse are among them)."""
        return self._available

    @property
    def queued(self):
        """Number of threads waiting for memory."""
        return len(self._waiters)

    @property
    def closed(self):
        return self._closed

    @property
    def free_buffers(self):
        """Free batch buffers kept for the next batches (``free_bytes`` in all)."""
        return self._free_total

    def __repr__(self):
        return (f"BufferPool(total={self.total}, available={self._available}, "
                f"held={self.held_bytes}, free={self.free_bytes}, "
                f"waiters={len(self._waiters)}, batch_size={self.batch_size})")
