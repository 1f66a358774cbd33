# cython: language_level=3
# Contract of fastkafka._core.produce_codec: the compiled Produce request encoder and response
# decoder the sender hands to NetworkClient.send(..., codec=).
cimport cython
from libc.stdint cimport int16_t, int32_t, int64_t

from fastkafka._core.express cimport ProducePart, Segment


@cython.final
cdef class PartitionResult:
    """One partition's answer in a Produce response."""
    cdef readonly str topic
    cdef readonly int32_t partition
    cdef readonly int16_t error_code
    cdef readonly int64_t base_offset
    cdef readonly int64_t log_append_time_ms
    cdef readonly int64_t log_start_offset      # -1 before v5
    cdef readonly object error_message          # str or None (v8+)
    cdef readonly object record_errors          # list of (batch_index, message or None); () if none
    cdef readonly int32_t leader_id             # tagged current_leader (v10+), -1 when absent
    cdef readonly int32_t leader_epoch


@cython.final
cdef class ProduceResult:
    """A decoded Produce response."""
    cdef readonly int32_t correlation_id
    cdef readonly int32_t throttle_time_ms
    cdef readonly list partitions                # PartitionResult, in the order of the frame
    cdef readonly object node_endpoints         # tagged (v10+): list of (node_id, host, port, rack); () if none
    cdef dict _index                            # (topic, partition) -> PartitionResult, built on demand


@cython.final
cdef class ProduceCodec:
    """encode()/decode() of Produce v3-11, stateless (one instance may serve every connection)."""
    cdef readonly int min_version
    cdef readonly int max_version


# Decode a Produce response frame (without its size prefix) read in place; CorruptFrameError
# when truncated or garbled.
cdef ProduceResult decode_frame(int version, const unsigned char *data, Py_ssize_t size)


# Encode a Produce request (version 3-11) without the GIL, as segments to write one after the
# other: the 4-byte size prefix, the request header (v1, or v2 for the flexible versions 9+) with
# the client id, then the body: the transactional id, acks, timeout and one topic entry per run of
# consecutive parts of the same topic (its bytes), in the order of `parts`. The bytes that are not
# a batch's ("glue") are written into `glue` and their segments point into it (adjacent glue in one
# segment); each part's batch is referenced where it is: `records`, then `records2` when not NULL
# (empty pieces make no segment). Lengths of -1 mean null: client_id_len, tid_len, and a part's
# records_len (null records; records2 is then not looked at).
# Returns the glue bytes used and sets *nsegs to the segments written. When glue_cap or segs_cap
# is too small: -(the glue bytes needed), *nsegs the segments needed, and nothing to send (grow
# the buffers and call again; produce_glue_bound / produce_segs_bound are always enough). 0 when
# the request cannot be encoded (version out of range, a string over 32767 bytes, a part of over
# 2**31-1 bytes, a frame of over 2**31-1 bytes). Reads no batch byte.
cdef Py_ssize_t encode_produce_c(int version, int32_t correlation_id,
                                 const char *client_id, Py_ssize_t client_id_len,
                                 const char *transactional_id, Py_ssize_t tid_len,
                                 int16_t acks, int32_t timeout_ms,
                                 const ProducePart *parts, Py_ssize_t nparts,
                                 char *glue, Py_ssize_t glue_cap,
                                 Segment *segs, Py_ssize_t segs_cap,
                                 Py_ssize_t *nsegs) noexcept nogil


# Glue bytes encode_produce_c needs at most for `nparts` parts whose topic entries' names take
# `topic_bytes` bytes together (the sum of every part's topic length is also a bound), with a
# client id and a transactional id of these lengths (-1: null): the header and body fields (35),
# per topic entry its name's length and count (14 + name), per part its partition, records length
# and tags (10).
cdef inline Py_ssize_t produce_glue_bound(Py_ssize_t nparts, Py_ssize_t topic_bytes,
                                          Py_ssize_t client_id_len,
                                          Py_ssize_t tid_len) noexcept nogil:
    return (35 + (client_id_len if client_id_len > 0 else 0) + (tid_len if tid_len > 0 else 0)
            + 24 * nparts + topic_bytes)


# Segments encode_produce_c needs at most for `nparts` parts: two batch pieces per part, a glue
# segment before each, and the glue after the last.
cdef inline Py_ssize_t produce_segs_bound(Py_ssize_t nparts) noexcept nogil:
    return 4 * nparts + 1
