"""Running fastkafka.aio's tests under each event loop: asyncio's own and uvloop's.

``run(kind, coro_fn)`` makes a fresh loop of ``kind`` ("asyncio" or "uvloop"), runs ``coro_fn()``
on it to completion, then shuts down its async generators and closes it (what ``asyncio.run``
does, for either loop and on Python 3.10). ``Ticker`` is a task that measures how long the loop
went without running it: a producer that blocked the loop shows up as a long gap.
"""
from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
import time
import traceback

LOOPS = ("asyncio", "uvloop")


def new_loop(kind: str) -> asyncio.AbstractEventLoop:
    if kind == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    assert kind == "asyncio", kind
    return asyncio.new_event_loop()


def run(kind: str, coro_fn, timeout: float = 60.0):
    """Run ``coro_fn()`` on a new loop of ``kind``, bounded by ``timeout`` seconds."""
    loop = new_loop(kind)
    try:
        return loop.run_until_complete(asyncio.wait_for(coro_fn(), timeout))
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


#: The system calls an event loop waits in for its next event or timer (x86-64 and arm64 numbers):
#: a late loop found in one of them was not running, nor blocked in this process's code.
_SELECTOR_WAITS = {"x86_64": {7, 23, 232, 270, 271, 281, 441},
                   "aarch64": {22, 72, 73, 441}}.get(os.uname().machine, set())


class Gap:
    """One gap of the loop longer than the reporting threshold, and what the machine and this
    process did during it (milliseconds):

    - ``gap``: how much later than its period the ticker ran;
    - ``loop_cpu``: CPU time the loop's thread got (it ran Python or C code: ours or the test's);
    - ``other_cpu``: CPU time the process's other threads got (the I/O thread, which may have held
      the GIL the loop waited for), the sampler's own left out;
    - ``queued``: time the loop's thread was runnable but waiting for a CPU (the OS ran others);
    - ``other_queued``: the same for the process's other threads (one of them may have held the
      GIL the loop waited for while it waited for a CPU);
    - ``stolen``: the most time the hypervisor took from one of the machine's CPUs (``/proc/stat``'s
      steal, in 10 ms ticks: an estimate; a CPU stolen from a running thread may also be charged
      to it as CPU time);
    - ``blocked``: whether a sample found the loop's thread blocked in a system call other than
      its selector's wait (a lock such as the GIL, a sleep): held by this process, not idle;
    - ``collected``: time the interpreter's cyclic garbage collector ran during the gap (on
      whichever thread allocated: in a test process holding thousands of objects, a full
      collection takes tens of milliseconds, in C, whatever allocated last);
    - ``frames``: the loop thread's innermost Python frames and system call, sampled while late.
    """

    __slots__ = ("gap", "loop_cpu", "other_cpu", "queued", "other_queued", "stolen", "blocked",
                 "collected", "frames")

    def __init__(self, gap, loop_cpu, other_cpu, queued, other_queued, stolen, blocked, collected,
                 frames):
        self.gap, self.loop_cpu, self.other_cpu = gap, loop_cpu, other_cpu
        self.queued, self.other_queued, self.stolen = queued, other_queued, stolen
        self.blocked, self.collected, self.frames = blocked, collected, frames

    @property
    def held(self) -> float:
        """How long this process held the loop: the CPU time its threads used during the gap, or,
        when the loop's thread was found blocked, the part of the gap neither the OS (queueing
        the loop's thread or the others) nor the hypervisor took, whichever is larger; the
        garbage collector's time left out. A gap in which the loop waited in its selector while
        nothing of the process ran is the machine's: a virtual CPU woken late, a timer fired
        late."""
        cpu = self.loop_cpu + self.other_cpu
        if self.blocked:
            cpu = max(cpu, self.gap - self.queued - self.other_queued - self.stolen)
        return max(0.0, cpu - self.collected)

    def __repr__(self) -> str:
        where = " <- ".join(reversed(self.frames[-1])) if self.frames else "no frame sampled"
        return (f"gap {self.gap:.1f} ms (held {self.held:.1f}: loop CPU {self.loop_cpu:.1f}, other "
                f"threads' CPU {self.other_cpu:.1f}, queued by the OS {self.queued:.1f} (others "
                f"{self.other_queued:.1f}), stolen by "
                f"the hypervisor ~{self.stolen:.0f}, garbage collection {self.collected:.1f}, "
                f"blocked {self.blocked}); the loop was in: "
                f"{where}")


def _schedstat(fd: int) -> tuple[float, float]:
    """(run, queued) milliseconds of a thread, from its /proc schedstat (0s where there is none)."""
    if fd < 0:
        return 0.0, 0.0
    try:
        run, queued = os.pread(fd, 128, 0).split()[:2]
        return int(run) / 1e6, int(queued) / 1e6
    except (OSError, ValueError):
        return 0.0, 0.0


def _steal_ms(fd: int) -> list[float]:
    """Per-CPU steal time so far (ms), from /proc/stat (empty where there is none)."""
    if fd < 0:
        return []
    try:
        lines = os.pread(fd, 65536, 0).split(b"\n")
    except OSError:
        return []
    tick_ms = 1000.0 / _CLK_TCK
    return [int(ln.split()[8]) * tick_ms for ln in lines
            if ln.startswith(b"cpu") and not ln.startswith(b"cpu ") and len(ln.split()) > 8]


def _syscall_of(fd: int) -> str:
    """What a thread is doing, from its /proc syscall file: the number of the system call it is
    blocked in, "running", or "-1" (blocked outside a system call); "" when unknown."""
    if fd < 0:
        return ""
    try:
        return os.pread(fd, 256, 0).split(b" ", 1)[0].strip().decode()
    except (OSError, IndexError):
        return ""


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _open(path: str) -> int:
    try:
        return os.open(path, os.O_RDONLY)
    except OSError:
        return -1


class Ticker:
    """A task on the running loop that sleeps ``period`` seconds in turn and records the longest
    time between two of its turns beyond that period (``max_gap_ms``): a producer that blocked
    the loop shows up as a long gap.

    A gap is not always the producer's: on a shared machine the OS runs other processes (the
    broker's JVM) and a virtual machine's hypervisor takes its CPUs away for tens of
    milliseconds at times, while nothing in this process runs. Each gap over ``report_ms`` is
    kept in ``gaps`` (:class:`Gap`) with what the loop's thread and the process's other threads
    did during it, and a sampler thread records the loop thread's Python frames while the loop
    is late. :meth:`assert_held_under` fails on a gap this process held longer than the bound,
    naming where the loop was."""

    def __init__(self, period: float = 0.001, report_ms: float = 5.0):
        self.period = period
        self.report_ms = report_ms
        self.max_gap_ms = 0.0
        self.ticks = 0
        self.gaps: list[Gap] = []
        self._task: asyncio.Task | None = None
        self._tick_at = 0.0
        self._frames: list[tuple[float, str, list[str]]] = []
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None
        self._sampler_tid = 0
        self._loop_ident = 0
        self._loop_tid = 0
        self._collections: list[tuple[float, float]] = []
        self._gc_started = 0.0

    @property
    def max_held_ms(self) -> float:
        """The longest time this process held the loop (:attr:`Gap.held`) among ``gaps``."""
        return max((g.held for g in self.gaps), default=0.0)

    def assert_held_under(self, bound_ms: float, min_ticks: int = 0) -> None:
        """Fail when this process held the loop for ``bound_ms`` or more in one gap (each such
        gap named, with the loop's frames), or when the ticker ran fewer than ``min_ticks``
        times (the loop did not run all along)."""
        held = [g for g in self.gaps if g.held >= bound_ms]
        assert not held, (f"the loop was held {bound_ms} ms or more: "
                          + "; ".join(repr(g) for g in held))
        assert self.ticks >= min_ticks, (self.ticks, min_ticks)

    def _sample(self) -> None:
        """The sampler thread: while the loop is late by half the reporting threshold, record
        its thread's innermost frames (the loop releases the GIL while it waits, and a thread
        holding it hands it over every switch interval)."""
        self._sampler_tid = threading.get_native_id()
        late_s = self.report_ms / 2000.0
        syscall = _open(f"/proc/{os.getpid()}/task/{self._loop_tid}/syscall")
        try:
            while not self._stop.wait(0.001):
                at = self._tick_at
                if time.perf_counter() - at > self.period + late_s:
                    state = _syscall_of(syscall)
                    frame = sys._current_frames().get(self._loop_ident)
                    stack = traceback.extract_stack(frame)[-5:] if frame is not None else []
                    self._frames.append((at, state, [
                        f"{os.path.basename(f.filename)}:{f.lineno} {f.name}" for f in stack]
                        + [f"(system call {state})"]))
        finally:
            if syscall >= 0:
                os.close(syscall)

    def _cpu_of_others(self, task_dir: str, fds: dict[int, int], relist: bool) -> dict:
        """{thread id: (CPU time, time queued) so far (ms)} of the process's threads other than
        the loop's and the sampler's (``fds``: their schedstat files by thread id, listed again
        when ``relist``; a thread that ended reads as (0, 0))."""
        if relist:
            skip = (threading.get_native_id(), self._sampler_tid)
            try:
                tids = {int(t) for t in os.listdir(task_dir)} - set(skip)
            except OSError:
                tids = set()
            for tid in set(fds) - tids:
                os.close(fds.pop(tid))
            for tid in tids - set(fds):
                fd = _open(f"{task_dir}/{tid}/schedstat")
                if fd >= 0:
                    fds[tid] = fd
        return {tid: _schedstat(fd) for tid, fd in fds.items()}

    async def _run(self) -> None:
        task_dir = f"/proc/{os.getpid()}/task"
        own = _open(f"{task_dir}/{threading.get_native_id()}/schedstat")
        stat = _open("/proc/stat")
        fds: dict[int, int] = {}
        try:
            last = self._tick_at = time.perf_counter()
            run0, queued0 = _schedstat(own)
            others0 = self._cpu_of_others(task_dir, fds, True)
            steal0 = _steal_ms(stat)
            while True:
                await asyncio.sleep(self.period)
                now = time.perf_counter()
                run1, queued1 = _schedstat(own)
                # after a gap, listed again: a thread started during it counts from its start
                others1 = self._cpu_of_others(task_dir, fds, False)
                steal1 = _steal_ms(stat)
                gap = (now - last - self.period) * 1000.0
                if gap > self.max_gap_ms:
                    self.max_gap_ms = gap
                if gap > self.report_ms:
                    others1 = self._cpu_of_others(task_dir, fds, True)
                    stolen = max((b - a for a, b in zip(steal0, steal1)), default=0.0)
                    samples = [(st, f) for at, st, f in self._frames if at == last]
                    blocked = any(st not in ("running", "-1") and st.isdigit() and
                                  int(st) not in _SELECTOR_WAITS for st, _f in samples)
                    collected = sum(min(end, now) - max(start, last)
                                    for start, end in self._collections
                                    if end > last and start < now) * 1000.0
                    # per thread: one that ended during the gap reads 0, and is left out
                    deltas = [(r - others0.get(t, (0.0, 0.0))[0], q - others0.get(t, (0.0, 0.0))[1])
                              for t, (r, q) in others1.items() if (r, q) != (0.0, 0.0)]
                    self.gaps.append(Gap(gap, run1 - run0, sum(r for r, _q in deltas),
                                         queued1 - queued0, sum(q for _r, q in deltas),
                                         stolen, blocked, collected,
                                         [f for _st, f in samples]))
                self._collections.clear()
                self._frames.clear()
                self.ticks += 1
                if self.ticks % 16 == 0:
                    others1 = self._cpu_of_others(task_dir, fds, True)
                others0, steal0 = others1, steal1
                last = self._tick_at = time.perf_counter()
                run0, queued0 = _schedstat(own)
        finally:
            for fd in (own, stat, *fds.values()):
                if fd >= 0:
                    os.close(fd)

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        elif self._gc_started:
            self._collections.append((self._gc_started, time.perf_counter()))
            self._gc_started = 0.0

    async def __aenter__(self) -> "Ticker":
        gc.callbacks.append(self._on_gc)
        self._loop_ident = threading.get_ident()
        self._loop_tid = threading.get_native_id()
        self._sampler = threading.Thread(target=self._sample, name="ticker-sampler", daemon=True)
        self._sampler.start()
        self._task = asyncio.get_running_loop().create_task(self._run())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc) -> None:
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._stop.set()
        self._sampler.join()
        gc.callbacks.remove(self._on_gc)
