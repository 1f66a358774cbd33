# cython: language_level=3
from cpython.pythread cimport PyThread_type_lock
from libc.stdint cimport int64_t


cdef class _Waiter:
    cdef int64_t size
    cdef PyThread_type_lock sem     # held until the waiter is granted memory or woken by close()
    cdef bint granted
    cdef bint closed


cdef class BufferPool:
    cdef readonly int64_t total
    cdef readonly int64_t batch_size
    cdef int64_t _available
    cdef object _waiters            # collections.deque of _Waiter, FIFO
    cdef PyThread_type_lock _lock
    cdef bint _closed
    cdef public object wakeup       # callable() run (outside locks) when a thread starts waiting
    cdef readonly int64_t blocked_count   # how many allocate() calls had to wait (metrics)
    cdef public unsigned long io_thread_ident   # the I/O thread, whose allocate() never waits; 0: none
    cdef readonly int64_t io_thread_refusals    # allocate() calls refused at once on that thread
    cdef bint _counted              # counted in the module's live-resource counters

    cpdef allocate(self, int64_t size, int64_t max_block_ms)
    cpdef bint try_allocate(self, int64_t size) except -1
    cpdef deallocate(self, int64_t size)
    cdef int _grant_locked(self) except -1
    cdef _remove_locked(self, _Waiter w)
    cdef void _lock_acquire(self) noexcept

    # Some thread is waiting for memory.
    cdef inline bint has_waiters_c(self) except -1:
        return len(self._waiters) > 0
