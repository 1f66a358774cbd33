# cython: language_level=3
# path:
#   new batch: allocate_buffer_c / try_take_c -> _reserve_locked (or waits: _Waiter) -> pooled_builder
#   freed:     give_back -> _push_free_locked -> _grant_locked (the waiters, in order)
#              -> _notify_locked (fastkafka.aio's listeners, once no thread waits)

from cpython.pythread cimport PyThread_type_lock
from libc.stdint cimport int64_t

from fastkafka._wire.records cimport BufferSource


cdef class _Waiter:
    cdef int64_t size
    cdef PyThread_type_lock sem     # held until the waiter is granted memory or woken by close()
    cdef bint granted
    cdef bint closed
    cdef bint for_buffer            # the bytes are for a batch buffer (allocate_buffer_c)
    cdef char *buf                  # a free buffer handed over with the grant, or NULL


cdef enum:
    MIN_CLASS = 4096                # the smallest batch buffer the pool hands out (bytes)
    MAX_CLASSES = 48


cdef class BufferPool(BufferSource):
    cdef readonly int64_t total
    cdef readonly int64_t batch_size
    cdef int64_t _available
    cdef object _waiters            # collections.deque of _Waiter, FIFO
    cdef list _listeners            # [size, callable] of senders awaiting memory (fastkafka.aio)
    cdef PyThread_type_lock _lock
    cdef bint _closed
    cdef public object wakeup       # callable() run (outside locks) when a thread starts waiting
    cdef readonly int64_t blocked_count   # how many allocate() calls had to wait (metrics)
    cdef readonly int64_t wait_time_ns    # the time those calls waited, in total (metrics)
    cdef public unsigned long io_thread_ident   # the I/O thread, whose allocate() never waits; 0: none
    cdef readonly int64_t io_thread_refusals    # allocate() calls refused at once on that thread
    cdef bint _counted              # counted in the module's live-resource counters
    # Batch buffers. Bytes reserved for buffers of live builders (a part of total - available),
    # and free buffers of batch_size bytes kept for the next batch (a part of available, so
    # _buf_held + _free_bytes <= total; free buffers beyond available are freed at once).
    cdef readonly int64_t held_bytes
    cdef readonly int64_t free_bytes
    # Buffer size classes: MIN_CLASS << k below batch_size, then batch_size itself. A new batch
    # takes the class its partition's last batch needed (class_for); a batch that outgrows its
    # buffer moves to the next class that holds it (grow_buffer). Each class keeps its own free
    # buffers (_free[k]: _free_n[k] of them in an array of _free_cap[k]).
    cdef Py_ssize_t _nclasses
    cdef int64_t _class_size[MAX_CLASSES]
    cdef char **_free[MAX_CLASSES]
    cdef Py_ssize_t _free_n[MAX_CLASSES]
    cdef Py_ssize_t _free_cap[MAX_CLASSES]
    cdef Py_ssize_t _free_total     # sum of _free_n
    cdef readonly int64_t peak_bytes        # the most held_bytes + free_bytes ever was
    cdef readonly int64_t buffers_reused    # batch buffers handed out from the free ones
    cdef readonly int64_t buffers_made      # batch buffers the takers had to malloc
    cdef int64_t _over              # free bytes beyond available (0 unless the bound broke)

    # BufferSource: what pooled BatchBuilders give back and ask for
    cdef void give_back(self, char *buf, Py_ssize_t cap) noexcept
    cdef int try_reserve(self, Py_ssize_t size) except -1
    cdef int resize_reservation(self, Py_ssize_t old, Py_ssize_t new) except -1
    cdef int grow_buffer(self, char **buf, Py_ssize_t used, Py_ssize_t old_cap, Py_ssize_t needed,
                         Py_ssize_t *new_cap) except -1

    # The buffer size for a batch that needs `need` bytes: the smallest class that holds them, or
    # `need` itself beyond batch_size.
    cdef int64_t class_for_c(self, int64_t need) noexcept
    cdef Py_ssize_t _class_at_least(self, int64_t size) noexcept
    cdef Py_ssize_t _class_index(self, int64_t size) noexcept
    cdef char *_pop_free_locked(self, Py_ssize_t k) noexcept
    cdef bint _push_free_locked(self, char *buf, int64_t cap) noexcept
    cdef void _trim_locked(self) noexcept

    cpdef allocate(self, int64_t size, int64_t max_block_ms)
    cdef int _allocate(self, int64_t size, int64_t max_block_ms, bint for_buffer,
                       char **buf) except -1
    # allocate() of the bytes for a batch buffer: *buf gets a free buffer of `size` bytes, or NULL
    # (the caller mallocs one). The bytes and the buffer go back with give_back().
    cdef int allocate_buffer_c(self, int64_t size, int64_t max_block_ms, char **buf) except -1
    # try_allocate() of the bytes for a batch buffer, in one lock round: 1 (and *buf as above)
    # or 0 (nothing taken).
    cdef int try_take_c(self, int64_t size, char **buf) except -1
    cdef char *_reserve_locked(self, int64_t size, int64_t buffer_of) noexcept
    cdef void _check_locked(self) noexcept
    cdef void _free_all_locked(self) noexcept
    cpdef bint try_allocate(self, int64_t size) except -1
    cpdef deallocate(self, int64_t size)
    cdef int _grant_locked(self) except -1
    cdef void _notify_locked(self, bint everyone) noexcept
    cdef _remove_locked(self, _Waiter w)
    cdef void _lock_acquire(self) noexcept

    # Some thread is waiting for memory.
    cdef inline bint has_waiters_c(self) except -1:
        return len(self._waiters) > 0 or len(self._listeners) > 0
