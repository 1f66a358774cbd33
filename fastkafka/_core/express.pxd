# cython: language_level=3
# The C shapes shared by the GIL-free steady-state turn of the I/O thread (see docs/internals.md,
# "The I/O thread and the GIL"): what the Produce encoder, the connections' send queues and the
# accumulator's drain hand each other without Python objects.
from libc.stdint cimport int16_t, int32_t, int64_t


# A run of bytes to write, by reference (the memory is kept alive by whoever queued it).
cdef struct Segment:
    const char *p
    Py_ssize_t n


# One partition's batch in a Produce request: the topic's name as UTF-8, the partition and the
# batch's bytes in one or two pieces (records2: a compressed payload kept apart, else NULL / 0).
cdef struct ProducePart:
    const char *topic
    Py_ssize_t topic_len
    int32_t partition
    const char *records
    Py_ssize_t records_len
    const char *records2
    Py_ssize_t records2_len


# A broker the GIL-free turn may send a Produce request to now, and how many more it may take.
cdef struct ExpressNode:
    int32_t node_id
    int room
