# cython: language_level=3
"""The values the metadata shares with readers in C, and the producer's one clock (contract in
cells.pxd)."""
cimport cython
from posix.time cimport CLOCK_MONOTONIC

from fastkafka._net.clock cimport clock_ms


def monotonic_ms():
    """The producer's one monotonic clock in milliseconds (same origin as time.monotonic): what
    ``send()`` measures ``max_block_ms`` with and the I/O thread its deadlines."""
    return clock_ms(CLOCK_MONOTONIC)


@cython.final
cdef class VersionCell:
    """A metadata version readable from C: :class:`fastkafka._net.cluster.Metadata` sets ``value`` on
    every update, ``send()`` compares it with the version its topic cache entry was built from."""


@cython.final
cdef class DueCell:
    """When :class:`fastkafka._net.cluster.Metadata` next wants a refresh (``at_ms``, the producer's
    monotonic milliseconds): Metadata sets it under its lock whenever a refresh is asked for,
    answered or fails; the network client reads it every turn of the I/O thread instead of calling
    into Python."""
