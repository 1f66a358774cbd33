# cython: language_level=3
"""Bounded accounting of the memory held by record batches (the Java ``BufferPool``'s job).

The batch buffers themselves are owned by ``BatchBuilder``; the pool only counts bytes, so the total
held by queued and in-flight batches never exceeds ``buffer_memory``. A thread that asks for more than
is free waits (GIL released) in FIFO order: memory given back goes to the oldest waiter first, and a
later, smaller request does not overtake it.

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

from fastkafka._core.clock cimport monotonic_ms

from collections import deque
import logging

from fastkafka.errors import BufferExhaustedError, ProducerClosedError, RecordTooLargeError

cdef extern from "pythread.h":
    ctypedef enum PyLockStatus:
        PY_LOCK_FAILURE
        PY_LOCK_ACQUIRED
        PY_LOCK_INTR
    PyLockStatus PyThread_acquire_lock_timed(PyThread_type_lock, long long microseconds,
                                             int intr_flag) nogil

_log = logging.getLogger("fastkafka")

# Live-resource counters (read by ``pool_counters()``; touched only with the GIL held): pools alive
# and the bytes they have handed out and not had back. A pool freed while holding bytes takes its
# count with it, so the counters describe live pools only.
cdef int64_t _live_pools = 0
cdef int64_t _held_bytes = 0


def pool_counters():
    """pool_counters() -> dict: ``buffer_pools`` (BufferPool objects alive) and
    ``buffer_pool_bytes`` (bytes those pools have handed out and not had back), over the process.

    >>> pool_counters()["buffer_pools"] >= 0
    True
    """
    return {"buffer_pools": _live_pools, "buffer_pool_bytes": _held_bytes}


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
cdef class BufferPool:
    """``BufferPool(total_bytes, batch_size)``: accounting of batch memory with FIFO blocking.

    * ``allocate(size, max_block_ms)`` takes ``size`` bytes, waiting up to ``max_block_ms`` for them;
      raises ``BufferExhaustedError`` when the time runs out, ``RecordTooLargeError`` at once when
      ``size`` exceeds the whole pool, ``ProducerClosedError`` if the pool is (or gets) closed.
    * ``deallocate(size)`` gives bytes back and serves waiters, oldest first.
    * ``wakeup``: an optional callable run when a thread starts waiting (the sender uses it to send
      at once, which is what frees memory). Exceptions from it are logged.
    * ``io_thread_ident``: the thread ident (``threading.get_ident()``) of the thread that frees
      memory, the producer's I/O thread; 0 for none. An ``allocate`` on that thread never waits:
      when the memory is not free at once it raises ``BufferExhaustedError`` saying so, since
      waiting there would deadlock the thread that would give the memory back. The thread is
      compared only when the memory is not free.
    """

    def __cinit__(self, int64_t total_bytes, int64_t batch_size):
        global _live_pools
        if total_bytes <= 0:
            raise ValueError(f"buffer_memory must be positive, got {total_bytes}")
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.total = total_bytes
        self.batch_size = batch_size
        self._available = total_bytes
        self._waiters = deque()
        self._lock = PyThread_allocate_lock()
        if self._lock == NULL:
            raise MemoryError()
        self.wakeup = None
        self._counted = True
        _live_pools += 1

    def __dealloc__(self):
        global _live_pools, _held_bytes
        if self._counted:
            self._counted = False
            _live_pools -= 1
            _held_bytes -= self.total - self._available
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
            self._available -= w.size
            _held_bytes += w.size
            w.granted = True
            PyThread_release_lock(w.sem)
        return 0

    cpdef bint try_allocate(self, int64_t size) except -1:
        """Take ``size`` bytes if free and nobody is waiting; never blocks."""
        global _held_bytes
        cdef bint ok = False
        self._lock_acquire()
        if not self._closed and not self._waiters and self._available >= size:
            self._available -= size
            _held_bytes += size
            ok = True
        PyThread_release_lock(self._lock)
        return ok

    cpdef allocate(self, int64_t size, int64_t max_block_ms):
        global _held_bytes
        cdef _Waiter w
        cdef double deadline, remaining
        cdef long long timeout_us
        cdef PyLockStatus r
        cdef int64_t avail_at_start
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
            self._available -= size
            _held_bytes += size
            PyThread_release_lock(self._lock)
            return None
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
                return None
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
        if self._available + size > self.total:
            PyThread_release_lock(self._lock)
            raise ValueError(f"deallocate({size}) would exceed buffer_memory={self.total} "
                             f"(available {self._available}): memory given back twice?")
        self._available += size
        _held_bytes -= size
        try:
            self._grant_locked()
        finally:
            PyThread_release_lock(self._lock)

    def close(self):
        """Fail every waiting and every future ``allocate`` with ``ProducerClosedError``."""
        cdef _Waiter w
        self._lock_acquire()
        self._closed = True
        while self._waiters:
            w = <_Waiter>self._waiters.popleft()
            w.closed = True
            PyThread_release_lock(w.sem)
        PyThread_release_lock(self._lock)

    @property
    def available_memory(self):
        """Bytes not held by any batch."""
        return self._available

    @property
    def queued(self):
        """Number of threads waiting for memory."""
        return len(self._waiters)

    @property
    def closed(self):
        return self._closed

    def __repr__(self):
        return (f"BufferPool(total={self.total}, available={self._available}, "
                f"waiters={len(self._waiters)}, batch_size={self.batch_size})")
