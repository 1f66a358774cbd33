# cython: language_level=3
# path:
#   metadata: Metadata.update -> VersionCell.value -> send()'s topic cache check
#   refresh:  Metadata asks for one -> DueCell.at_ms -> the network client's turn reads it

# Contract of fastkafka._net.cells: the values the metadata (fastkafka._net.cluster.Metadata, in
# Python) shares with readers in C: the network client's every turn and send()'s topic cache.
cimport cython
from libc.stdint cimport int64_t


# The metadata's version, set by Metadata on every update; send() compares it with the version its
# topic cache entry was built from.
@cython.final
cdef class VersionCell:
    cdef public int64_t value


# When the metadata next wants a refresh (monotonic ms), set by Metadata under its lock; the
# network client reads it every turn of the I/O thread.
@cython.final
cdef class DueCell:
    cdef public int64_t at_ms
