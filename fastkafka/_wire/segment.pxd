# cython: language_level=3
# path:
#   request: encode_produce_c -> Segment[] -> sq_push_raw_c -> sq_write_c (writev)

# A run of bytes to write, by reference (the memory is kept alive by whoever queued it): what the
# Produce encoder writes (fastkafka.protocol.produce_codec) and a connection's send queue writes
# with writev (fastkafka._net.transport / connection).


cdef struct Segment:
    const char *p
    Py_ssize_t n
