# cython: language_level=3
# A run of bytes to write, by reference (the memory is kept alive by whoever queued it): what the
# Produce encoder writes (fastkafka.protocol.produce_codec) and a connection's send queue writes
# with writev (fastkafka._net.transport / connection).


cdef struct Segment:
    const char *p
    Py_ssize_t n
