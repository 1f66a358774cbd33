# cython: language_level=3
"""The I/O thread's wait, compiled: readiness from epoll without the GIL, wake-ups through an
eventfd and a timerfd, and the GIL handed over by the application's ``send()``.

Contract: ``ioloop.pxd``: :class:`Poller` (``poll``, ``wakeup``, ``wake_at``, ``wake_gil_free``,
``set_gil_free``) and :func:`give_way`, called by the application thread on every send. Linux only
(epoll, eventfd, timerfd, futexes). How and why: docs/internals.md#the-io-loop-and-the-gil-hand-over.
"""
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.errno cimport EEXIST, EINTR, ENOENT, errno
cimport cython
from libc.stdint cimport int64_t, uint64_t


cdef extern from "Python.h":
    int PyGILState_Check() nogil
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from posix.unistd cimport close, read, write

from fastkafka._net.clock cimport monotonic_ms

import os

cdef extern from "<sys/epoll.h>" nogil:
    int epoll_create1(int flags)
    int epoll_ctl(int epfd, int op, int fd, epoll_event *event)
    int epoll_wait(int epfd, epoll_event *events, int maxevents, int timeout)
    enum:
        EPOLL_CTL_ADD
        EPOLL_CTL_MOD
        EPOLL_CTL_DEL
        EPOLL_CLOEXEC

cdef extern from "<sys/eventfd.h>" nogil:
    int eventfd(unsigned int initval, int flags)
    enum:
        EFD_NONBLOCK
        EFD_CLOEXEC

cdef extern from "<sys/timerfd.h>" nogil:
    cdef struct itimerspec:
        timespec it_interval
        timespec it_value
    int timerfd_create(int clockid, int flags)
    int timerfd_settime(int fd, int flags, const itimerspec *new_value, itimerspec *old_value)
    enum:
        TFD_NONBLOCK
        TFD_CLOEXEC
        TFD_TIMER_ABSTIME

cdef extern from "<sched.h>" nogil:
    int sched_yield()

cdef extern from *:
    """
    /* Process-wide: I/O threads between their blocking wait and having the GIL again, and how
       many times an I/O thread took the GIL back after such a wait. */
    #include <linux/futex.h>
    #include <sys/syscall.h>
    #include <unistd.h>
    #include <time.h>
    static int fk_io_waiting = 0;
    static int fk_io_took = 0;          /* a futex word: application threads wait on it */
    static int fk_handing_over = 0;     /* application threads waiting on it */
    /* A forked child has none of the parent's threads: nobody waits there. */
    static inline void fk_after_fork(void) {
        __atomic_store_n(&fk_io_waiting, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&fk_handing_over, 0, __ATOMIC_RELEASE);
    }
    static inline int fk_waiting(void) { return __atomic_load_n(&fk_io_waiting, __ATOMIC_ACQUIRE); }
    static inline void fk_waiting_add(int d) { __atomic_add_fetch(&fk_io_waiting, d, __ATOMIC_ACQ_REL); }
    static inline int fk_took(void) { return __atomic_load_n(&fk_io_took, __ATOMIC_ACQUIRE); }
    static inline void fk_took_bump(void) {
        __atomic_add_fetch(&fk_io_took, 1, __ATOMIC_ACQ_REL);
        if (__atomic_load_n(&fk_handing_over, __ATOMIC_ACQUIRE) > 0)
            syscall(SYS_futex, &fk_io_took, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
    }
    /* Sleep (no spinning: on a small machine the I/O thread needs the core) until fk_io_took
       differs from seen, at most ns nanoseconds. */
    static inline void fk_took_wait(int seen, long long ns) {
        struct timespec ts;
        ts.tv_sec = ns / 1000000000LL;
        ts.tv_nsec = ns % 1000000000LL;
        __atomic_add_fetch(&fk_handing_over, 1, __ATOMIC_ACQ_REL);
        syscall(SYS_futex, &fk_io_took, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
        __atomic_sub_fetch(&fk_handing_over, 1, __ATOMIC_ACQ_REL);
    }
    /* Sleep until *word differs from seen, at most ns nanoseconds; wake such sleepers. */
    static inline void fk_word_wait(int *word, int seen, long long ns) {
        struct timespec ts;
        ts.tv_sec = ns / 1000000000LL;
        ts.tv_nsec = ns % 1000000000LL;
        syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
    }
    static inline void fk_word_wake(int *word) {
        syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
    }
    static inline int fk_load(int *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    static inline int fk_swap(int *p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_ACQ_REL); }
    static inline void fk_store(int *p, int v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
    static inline long long fk_load64(long long *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    static inline void fk_store64(long long *p, long long v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
    """
    int fk_waiting() nogil
    void fk_after_fork() nogil
    void fk_waiting_add(int d) nogil
    int fk_took() nogil
    void fk_took_bump() nogil
    void fk_took_wait(int seen, long long ns) nogil
    void fk_word_wait(int *word, int seen, long long ns) nogil
    void fk_word_wake(int *word) nogil
    int fk_load(int *p) nogil
    int fk_swap(int *p, int v) nogil
    void fk_store(int *p, int v) nogil
    long long fk_load64(long long *p) nogil
    void fk_store64(long long *p, long long v) nogil

#: selectors-compatible event bits.
READ = 1
WRITE = 2

cdef long long NO_TIMER = 0x7FFFFFFFFFFFFFFF

#: The longest an application thread waits, without the GIL, for an I/O thread to take it.
HANDOVER_MAX_US = 500

cdef long long _HANDOVER_MAX_NS = HANDOVER_MAX_US * 1000

#: The longest an event loop waits, without the GIL, for an I/O thread's turn to end (gil_poked).
TURN_HANDOVER_MAX_US = 2000

cdef long long _TURN_HANDOVER_MAX_NS = TURN_HANDOVER_MAX_US * 1000
cdef long long handovers = 0           # give_way() calls that released the GIL


# thread: app+io · lock: none · gil: any
cdef inline long long _now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec * 1000000000LL + ts.tv_nsec


# thread: io+app · lock: none · gil: any
cdef inline bint _signal(int fd, int *pending) noexcept nogil:
    """Wake an eventfd's reader unless a wake-up is already pending: the write happens only when
    this call turns the flag from 0 to 1 (the reader clears it in :func:`_consume`). True when
    it wrote. EAGAIN (the counter full) needs nothing: a wake-up is pending anyway."""
    cdef uint64_t one = 1
    if fk_swap(pending, 1) != 0:
        return False
    write(fd, &one, 8)
    return True


# thread: io+app · lock: none · gil: any
cdef inline void _consume(int fd, int *pending) noexcept nogil:
    """Take an eventfd's wake-ups, then clear its pending flag, in that order. The writer writes
    only when it turns the flag from 0 to 1. Cleared first, a write between the clear and the
    read would be consumed with the flag left at 1, and every later wake-up skipped (the flag is
    cleared only here, after a read that no write would make possible again): the I/O thread
    or the event loop would never be woken that way again. Cleared after, a wake-up between
    the two finds the flag set and writes nothing, but its reason was recorded before it, and
    the reader, awake, acts on it after this returns (the clear is an exchange, so the reader's
    next loads do not move before it)."""
    cdef uint64_t counter
    read(fd, &counter, 8)
    fk_swap(pending, 0)


cdef void _hand_over() noexcept:
    global handovers
    cdef int took = fk_took()
    cdef long long deadline, left
    handovers += 1
    with nogil:
        deadline = _now_ns() + _HANDOVER_MAX_NS
        while fk_took() == took and fk_waiting() > 0:
            left = deadline - _now_ns()
            if left <= 0:
                break
            fk_took_wait(took, left)


cdef void give_way() noexcept:
    """Called by the application thread (GIL held) on every send: when an I/O thread is taking
    the GIL back after a wait, let it have it now (see the module docstring)."""
    if fk_waiting() > 0:
        _hand_over()


def _after_fork_in_child():
    fk_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


def yield_to_io():
    """yield_to_io() -> None: :func:`give_way` for Python callers (``send_batch``)."""
    give_way()


def waiting_io_threads():
    """waiting_io_threads() -> int: I/O threads (process-wide) between the end of a blocking wait
    and having the GIL again."""
    return fk_waiting()


def handover_count():
    """handover_count() -> int: how many times an application thread released the GIL for an
    I/O thread (process-wide, for metrics and tests)."""
    return handovers


cdef inline unsigned int _to_epoll(int events) noexcept:
    cdef unsigned int e = 0
    if events & 1:
        e |= EPOLLIN
    if events & 2:
        e |= EPOLLOUT
    return e


cdef class Poller:
    """Readiness of the I/O thread's sockets (epoll) and its wake-up (eventfd).

    ``register(fd, events, data)`` / ``modify`` / ``unregister`` as :mod:`selectors` (events:
    ``READ``, ``WRITE``); :meth:`poll` returns ``[(data, fd, events), ...]``; the wake-up is
    consumed inside :meth:`poll` and never returned. Only the I/O thread may call anything but
    :meth:`wakeup`."""

    def __cinit__(self, int max_events=64):
        self._epfd = -1
        self._evfd = -1
        self._xfd = -1
        self._tfd = -1
        self._pokefd = -1
        self._xfn = NULL
        self._xctx = NULL
        self._timer_at_ms = NO_TIMER
        self._buf = NULL
        self._data = {}
        self._events = {}
        self._max_events = max_events if max_events > 0 else 64
        self._buf = PyMem_Malloc(self._max_events * sizeof(epoll_event))
        if self._buf == NULL:
            raise MemoryError()
        self._epfd = epoll_create1(EPOLL_CLOEXEC)
        if self._epfd < 0:
            raise OSError(errno, "epoll_create1 failed")
        self._evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)
        if self._evfd < 0:
            raise OSError(errno, "eventfd failed")
        self._xfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)
        if self._xfd < 0:
            raise OSError(errno, "eventfd failed")
        self._tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)
        if self._tfd < 0:
            raise OSError(errno, "timerfd_create failed")
        cdef epoll_event ev
        ev.events = EPOLLIN
        ev.data.fd = self._evfd
        if epoll_ctl(self._epfd, EPOLL_CTL_ADD, self._evfd, &ev) < 0:
            raise OSError(errno, "epoll_ctl failed")
        ev.data.fd = self._tfd
        if epoll_ctl(self._epfd, EPOLL_CTL_ADD, self._tfd, &ev) < 0:
            raise OSError(errno, "epoll_ctl failed")
        ev.data.fd = self._xfd
        if epoll_ctl(self._epfd, EPOLL_CTL_ADD, self._xfd, &ev) < 0:
            raise OSError(errno, "epoll_ctl failed")

    def __dealloc__(self):
        self._close_fds()
        if self._buf != NULL:
            PyMem_Free(self._buf)
            self._buf = NULL

    cdef void _close_fds(self) noexcept:
        if self._epfd >= 0:
            close(self._epfd)
            self._epfd = -1
        if self._evfd >= 0:
            close(self._evfd)
            self._evfd = -1
        if self._xfd >= 0:
            close(self._xfd)
            self._xfd = -1
        if self._tfd >= 0:
            close(self._tfd)
            self._tfd = -1
        if self._pokefd >= 0:
            close(self._pokefd)
            self._pokefd = -1

    @property
    def closed(self):
        return self._epfd < 0

    def close(self):
        """Stop watching (registered sockets are left to their owners). The eventfd stays open
        until the poller is freed: another thread may still call :meth:`wakeup`, and a write to a
        closed descriptor number could land in a socket that reused it."""
        if self._epfd >= 0:
            close(self._epfd)
            self._epfd = -1
        self._data.clear()
        self._events.clear()

    def __len__(self):
        return len(self._data)

    def register(self, int fd, int events, data):
        # EEXIST: a descriptor number reused after a close the poller was not told of.
        self._watch(fd, events, data, EPOLL_CTL_ADD, EEXIST, EPOLL_CTL_MOD)

    def modify(self, int fd, int events, data):
        # ENOENT: not watched yet.
        self._watch(fd, events, data, EPOLL_CTL_MOD, ENOENT, EPOLL_CTL_ADD)

    cdef int _watch(self, int fd, int events, data, int op, int retry_errno, int retry_op) except -1:
        cdef epoll_event ev
        self._check_open()
        ev.events = _to_epoll(events)
        ev.data.fd = fd
        if epoll_ctl(self._epfd, op, fd, &ev) < 0:
            if errno != retry_errno or epoll_ctl(self._epfd, retry_op, fd, &ev) < 0:
                raise OSError(errno, f"cannot watch descriptor {fd}")
        self._data[fd] = data
        self._events[fd] = events
        return 0

    def unregister(self, int fd):
        """Stop watching ``fd`` (before it is closed); unknown descriptors are ignored."""
        cdef epoll_event ev
        if fd not in self._events:
            return
        del self._events[fd]
        self._data.pop(fd, None)
        if self._epfd >= 0:
            epoll_ctl(self._epfd, EPOLL_CTL_DEL, fd, &ev)   # ENOENT/EBADF: already gone

    def registered_events(self, int fd):
        """The events ``fd`` is watched for (0 if it is not)."""
        return self._events.get(fd, 0)

    cdef int _check_open(self) except -1:
        if self._epfd < 0:
            raise ValueError("the poller is closed")
        return 0

    cpdef wakeup(self):
        """Wake the thread in :meth:`poll` (any thread). Cheap when a wake-up is already pending:
        no system call, and the GIL is never released."""
        if self._evfd < 0:
            return
        if _signal(self._evfd, &self._wake_pending):
            self.wakeups_written += 1

    cpdef wake_gil_free(self):
        """Wake the thread in :meth:`poll` for the GIL-free turn only (a batch filled; any
        thread): a poll with a GIL-free turn set runs it without taking the GIL; one without
        returns, as after :meth:`wakeup`."""
        if self._xfd < 0:
            return
        if _signal(self._xfd, &self._xwake_pending):
            self.wakeups_written += 1

    def gil_poke_fd(self):
        """gil_poke_fd() -> int: an eventfd the I/O thread writes to as it starts taking the GIL
        back after a wait (at most one write until :meth:`gil_poked` reads it). An event loop
        watches it and calls :meth:`gil_poked`, which hands the GIL over. Made on the first call,
        open until the poller is freed (a write to a closed number could reach another file).

        Why: an event loop that runs Python code and polls its selector with a zero timeout gives
        the GIL up for microseconds on every poll. CPython forces a switch to a thread waiting for
        the GIL only after a whole switch interval in which the GIL did not change hands, so
        those short releases can keep the I/O thread waiting for seconds."""
        if self._pokefd < 0:
            self._pokefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)
            if self._pokefd < 0:
                raise OSError(errno, "eventfd failed")
        return self._pokefd

    # thread: io · lock: none · gil: any
    cdef void _timer_fired(self) noexcept nogil:
        """The timer's descriptor was ready: read its expirations, then record it as unarmed, in
        that order. Recorded first, a ``wake_at`` between the record and the read would arm a
        deadline already passed (``linger_ms=0``), its expiry would be read here with the old
        one, and the record would keep that deadline with no expiry to come: every later
        ``wake_at`` (a later deadline) would then be refused and new batches would wait for some
        other wake-up, hundreds of milliseconds on a busy event loop. Read first, a ``wake_at``
        in between at worst leaves an expiry pending with no deadline recorded: one wake-up more."""
        cdef uint64_t counter
        read(self._tfd, &counter, 8)
        fk_store64(&self._timer_at_ms, NO_TIMER)

    # thread: io · lock: none · gil: no
    cdef void _poke_c(self) noexcept nogil:
        """About to take the GIL back: with a poke fd, mark the turn active, then poke the loop
        (one write until it is read: ``gil_poked``)."""
        if self._pokefd >= 0:
            fk_store(&self._turn_active, 1)
            if _signal(self._pokefd, &self._poke_pending):
                self.gil_pokes += 1

    def gil_poked(self):
        """gil_poked(): the event loop's reader of :meth:`gil_poke_fd`: read it, then, while the
        I/O thread's turn with the GIL goes on, wait for it without the GIL (up to
        TURN_HANDOVER_MAX_US): the turn gets the GIL now, and keeps it, instead of losing it
        to the loop's next short release in the middle."""
        cdef long long deadline, left
        # Read, then cleared (_consume): a poke that found the flag still set between the two
        # wrote nothing, but its turn was marked active before it: acted on below.
        if self._pokefd >= 0:
            _consume(self._pokefd, &self._poke_pending)
        if fk_load(&self._turn_active):
            self.turn_handovers += 1
            with nogil:
                deadline = _now_ns() + _TURN_HANDOVER_MAX_NS
                fk_store(&self._turn_waiters, 1)
                while fk_load(&self._turn_active):
                    left = deadline - _now_ns()
                    if left <= 0:
                        break
                    fk_word_wait(&self._turn_active, 1, left)
                fk_store(&self._turn_waiters, 0)
            if fk_load(&self._turn_active):
                # The turn goes on (it may lose the GIL again in its middle: CPython's own
                # switch, a lock, a socket write): the loop comes back here on its next turn.
                _signal(self._pokefd, &self._poke_pending)

    cdef void set_gil_free(self, gil_free_fn fn, void *ctx) noexcept:
        """Run ``fn(ctx, now_ms, &wait_ms)`` without the GIL inside the next waits of :meth:`poll`
        (I/O thread only; NULL: none). It runs when a wait ends with nothing but the timer, an
        GIL-free wake-up or its own timeout: it may queue and write requests (the steady state's
        linger deadlines and full batches) and either go on waiting without the GIL or end the
        wait. ``ctx`` must stay valid until set_gil_free(NULL, NULL)."""
        self._xfn = fn
        self._xctx = ctx

    # thread: io · lock: none · gil: held
    cdef bint _only_ours(self, int n) noexcept nogil:
        """The wait ended on nothing but the timer and GIL-free wake-ups (consumed here), or on
        its timeout: the GIL-free turn may handle it."""
        cdef epoll_event *evs = <epoll_event *>self._buf
        cdef int i, fd
        for i in range(n):
            fd = evs[i].data.fd
            if fd != self._tfd and fd != self._xfd:
                return False
        for i in range(n):
            if evs[i].data.fd == self._tfd:
                self._timer_fired()
            else:
                _consume(self._xfd, &self._xwake_pending)
        return True

    # thread: io · lock: none · gil: no
    cdef int _sockets_first(self, int n) noexcept nogil:
        """For the GIL-free turn: consume the timer and GIL-free wake-ups among ``n`` events and
        move the sockets to the front; how many sockets there are, or -1 when the general wake-up
        is among them (the GIL turn is asked for: nothing is consumed or moved)."""
        cdef epoll_event *evs = <epoll_event *>self._buf
        cdef epoll_event tmp
        cdef int i, fd, k = 0
        for i in range(n):
            if evs[i].data.fd == self._evfd:
                return -1
        for i in range(n):
            fd = evs[i].data.fd
            if fd == self._tfd:
                self._timer_fired()
            elif fd == self._xfd:
                _consume(self._xfd, &self._xwake_pending)
            else:
                if i != k:
                    tmp = evs[k]
                    evs[k] = evs[i]
                    evs[i] = tmp
                k += 1
        return k

    cpdef wake_at(self, long long deadline_ms):
        """Make the thread in :meth:`poll` return by ``deadline_ms`` (the monotonic clock of
        ``fastkafka._producer.sendpath.monotonic_ms``) without waking it now: a timer, armed only when
        it is earlier than the one already armed (application threads, GIL held; the timer's
        expiry is consumed inside poll). A batch that starts needs the sender at its linger
        deadline, not at once: this spares the I/O thread a turn, and the GIL a hand-over, per
        batch."""
        cdef itimerspec its
        if self._tfd < 0 or deadline_ms >= fk_load64(&self._timer_at_ms):
            return
        if deadline_ms <= 0:
            deadline_ms = 1
        its.it_interval.tv_sec = 0
        its.it_interval.tv_nsec = 0
        its.it_value.tv_sec = deadline_ms // 1000
        its.it_value.tv_nsec = (deadline_ms % 1000) * 1000000
        # Recorded before arming: a deadline already passed (linger_ms=0) fires at once, and the
        # I/O thread consuming it resets the record; recorded after, a stale record would keep
        # every later deadline from being armed.
        fk_store64(&self._timer_at_ms, deadline_ms)
        if timerfd_settime(self._tfd, TFD_TIMER_ABSTIME, &its, NULL) == 0:
            self.timers_armed += 1
        else:
            fk_store64(&self._timer_at_ms, NO_TIMER)
            self.wakeup()    # cannot arm: wake now, as without a timer

    cpdef list poll(self, long timeout_ms):
        """Ready descriptors as ``[(data, fd, events), ...]``, waiting up to ``timeout_ms`` (0: do
        not wait; negative: no limit) without the GIL when nothing is ready yet."""
        cdef epoll_event *evs = <epoll_event *>self._buf
        cdef int n, i, fd, epfd = self._epfd
        cdef int maxev = self._max_events
        cdef unsigned int e
        cdef int mask, wait, k
        cdef long long t0, waited
        cdef int64_t xwait
        cdef list out = []
        self._check_open()
        # With the GIL: anything ready now is handled without giving the GIL up.
        n = epoll_wait(epfd, evs, maxev, 0)
        wait = <int>timeout_ms if timeout_ms < 0x7FFFFFFF else 0x7FFFFFFF
        if n > 0 and self._xfn != NULL and self._only_ours(n):
            # The timer or a GIL-free wake-up, already there: the GIL-free turn runs now, then the
            # wait goes on as it asks. The GIL is given up for it all the same: the turn takes the
            # accumulator's lock, whose holder (an application thread in send()) may be waiting
            # for the GIL; holding it here would be a deadlock.
            n = 0
            xwait = 0
            self.gil_free_turns += 1
            with nogil:
                k = self._xfn(self._xctx, monotonic_ms(), evs, 0, &xwait)
                self._poke_c()
            if k != 0 or xwait == 0:
                timeout_ms = 0
            elif timeout_ms != 0:
                wait = -1 if xwait < 0 else (<int>xwait if xwait < 0x7FFFFFFF else 0x7FFFFFFF)
        if n == 0 and timeout_ms != 0:
            self.waits += 1
            with nogil:
                if self._pokefd >= 0:
                    # this turn with the GIL is over: an event loop waiting for it goes on
                    fk_store(&self._turn_active, 0)
                    if fk_load(&self._turn_waiters):
                        fk_word_wake(&self._turn_active)
                while True:
                    t0 = _now_ns()
                    n = epoll_wait(epfd, evs, maxev, wait)
                    self.io_wait_ns += _now_ns() - t0
                    # The GIL-free turn handles deadlines, GIL-free wake-ups and the sockets it
                    # knows; the general wake-up or a failed wait need the GIL.
                    if self._xfn == NULL or n < 0:
                        break
                    k = self._sockets_first(n)
                    if k < 0:
                        break
                    xwait = 0
                    self.gil_free_turns += 1
                    if self._xfn(self._xctx, monotonic_ms(), evs, k, &xwait) != 0 or xwait == 0:
                        n = k            # the sockets (the rest was consumed) go to the GIL turn
                        break
                    wait = -1 if xwait < 0 else (<int>xwait if xwait < 0x7FFFFFFF else 0x7FFFFFFF)
                fk_waiting_add(1)
                self._poke_c()
                t0 = _now_ns()
            # The GIL is ours again: let the application threads stop waiting for us.
            fk_took_bump()
            fk_waiting_add(-1)
            waited = _now_ns() - t0
            self.gil_wait_ns += waited
            if waited > self.gil_wait_max_ns:
                self.gil_wait_max_ns = waited
            if waited > 1000000:
                self.slow_gil_waits += 1
        if n < 0:
            if errno == EINTR:
                return out
            raise OSError(errno, "epoll_wait failed")
        for i in range(n):
            fd = evs[i].data.fd
            e = evs[i].events
            if fd == self._evfd:
                _consume(self._evfd, &self._wake_pending)
                continue
            if fd == self._xfd:
                _consume(self._xfd, &self._xwake_pending)
                continue
            if fd == self._tfd:
                self._timer_fired()
                continue
            mask = 0
            if e & ~(<unsigned int>EPOLLIN):
                mask |= 2
            if e & ~(<unsigned int>EPOLLOUT):
                mask |= 1
            data = self._data.get(fd)
            if data is None:
                continue   # unregistered after epoll reported it
            out.append((data, fd, mask))
        return out
