# cython: language_level=3
# Contract of fastkafka._core.produce_codec: the compiled Produce request encoder and response
# decoder the sender hands to NetworkClient.send(..., codec=).
cimport cython
from libc.stdint cimport int16_t, int32_t, int64_t


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
