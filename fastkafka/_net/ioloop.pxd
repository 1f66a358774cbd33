# path:
#   wait:     poll -> epoll_wait (GIL held, no wait) -> epoll_wait (GIL released) -> gil_free_fn
#   wake-up:  wakeup / wake_at / wake_gil_free -> eventfd / timerfd -> the wait ends
#   GIL back: poll -> waiting counter raised -> give_way (application thread) -> the GIL handed over

# The contract of fastkafka/_net/ioloop.pyx. How and why:
# docs/internals.md#the-io-loop-and-the-gil-hand-over.

from libc.stdint cimport int64_t

cdef void give_way() noexcept

cdef extern from "<sys/epoll.h>" nogil:
    ctypedef union epoll_data_t:
        void *ptr
        int fd
        unsigned int u32
        unsigned long long u64
    cdef struct epoll_event:
        unsigned int events
        epoll_data_t data
    enum:
        EPOLLIN
        EPOLLOUT

# The GIL-free turn the I/O thread may run inside Poller.poll's wait (see Poller.set_gil_free):
# called without the GIL when the wait ended on anything but the general wake-up: ``evs[0:n]`` are
# the sockets that are ready (their ``data.fd``; the timer and GIL-free wake-ups are consumed and
# not among them), n == 0 for a deadline. It returns 0 to go on waiting without the GIL for at most
# wait_ms[0] ms (negative: no limit) — the sockets it was given are then handled, and it must not
# return 0 leaving one of them unhandled — or 1 to take the GIL and return from poll with every
# event of the wait (the GIL turn handles the sockets: what the turn read is in their buffers).
ctypedef int (*gil_free_fn)(void *ctx, int64_t now_ms, const epoll_event *evs, int n,
                           int64_t *wait_ms) noexcept nogil


cdef class Poller:
    cdef int _epfd
    cdef int _evfd
    cdef int _xfd                   # eventfd: wake_gil_free() (a batch filled: GIL-free turn)
    cdef int _xwake_pending
    cdef gil_free_fn _xfn            # set_gil_free(): the GIL-free turn, NULL: none
    cdef void *_xctx
    cdef readonly long long gil_free_turns   # GIL-free turns run inside waits
    cdef int _tfd                   # timerfd: wake_at() deadlines
    cdef int _pokefd                # eventfd: gil_poke_fd() (an event loop hands the GIL over), -1: none
    cdef int _poke_pending          # 1 while a poke is written and not yet read
    cdef readonly long long gil_pokes       # pokes written
    cdef int _turn_active           # 1 from taking the GIL after a wait to the next wait (with a poke fd)
    cdef int _turn_waiters          # 1 while an event loop waits for the turn to end
    cdef readonly long long turn_handovers  # gil_poked() calls that waited for a turn
    cdef long long _timer_at_ms     # the deadline it is armed for (LLONG_MAX: none)
    cdef int _wake_pending          # 1 while a wakeup is written and not yet consumed
    cdef dict _data                 # fd -> the object registered with it
    cdef dict _events               # fd -> the events registered (READ / WRITE bits)
    cdef void *_buf                 # epoll_event[_max_events]
    cdef int _max_events
    cdef readonly long long waits           # polls that blocked (released the GIL)
    cdef readonly long long io_wait_ns      # total time in those waits' epoll_wait calls
    cdef readonly long long gil_wait_ns     # total time taking the GIL back after those
    cdef readonly long long gil_wait_max_ns
    cdef readonly long long slow_gil_waits  # of those, the ones over 1 ms
    cdef readonly long long wakeups_written
    cdef readonly long long timers_armed

    cdef int _check_open(self) except -1
    cdef int _watch(self, int fd, int events, data, int op, int retry_errno, int retry_op) except -1
    cdef void _close_fds(self) noexcept
    cpdef list poll(self, long timeout_ms)
    cpdef wakeup(self)
    cpdef wake_at(self, long long deadline_ms)
    cpdef wake_gil_free(self)
    cdef void set_gil_free(self, gil_free_fn fn, void *ctx) noexcept
    # thread: io · lock: none · gil: any
    cdef void _timer_fired(self) noexcept nogil
    # thread: io · lock: none · gil: no
    cdef void _poke_c(self) noexcept nogil
    # thread: io · lock: none · gil: held
    cdef bint _only_ours(self, int n) noexcept nogil
    # thread: io · lock: none · gil: no
    cdef int _sockets_first(self, int n) noexcept nogil
