# cython: language_level=3
# path:
#   reading: monotonic_ms -> clock_ms(CLOCK_MONOTONIC) -> clock_gettime
#   latency: ms_since_us -> monotonic_us -> clock_gettime

# The producer's one clock, as inline C: every monotonic reading of the compiled core and of the
# Python layer (through fastkafka._producer.sendpath.monotonic_ms) is CLOCK_MONOTONIC, in milliseconds;
# CLOCK_REALTIME gives record timestamps.
from libc.stdint cimport int64_t
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec


# thread: any · lock: none · gil: any
cdef inline int64_t clock_ms(int clock) noexcept nogil:
    cdef timespec t
    clock_gettime(clock, &t)
    return <int64_t>t.tv_sec * 1000 + t.tv_nsec // 1000000


# thread: any · lock: none · gil: any
cdef inline int64_t monotonic_ms() noexcept nogil:
    return clock_ms(CLOCK_MONOTONIC)


# thread: any · lock: none · gil: any
cdef inline int64_t monotonic_us() noexcept nogil:
    """CLOCK_MONOTONIC in microseconds: request latencies, which are often below a millisecond."""
    cdef timespec t
    clock_gettime(CLOCK_MONOTONIC, &t)
    return <int64_t>t.tv_sec * 1000000 + t.tv_nsec // 1000


# thread: any · lock: none · gil: any
cdef inline double ms_since_us(int64_t t0_us) noexcept nogil:
    """Milliseconds, to the microsecond, since ``t0_us`` (a monotonic_us() reading): a request's
    latency, read by either turn."""
    return (monotonic_us() - t0_us) / 1000.0
