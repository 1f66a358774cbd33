# cython: language_level=3
# path:
#   request: ProducePart[] -> encode_produce_c -> Segment[] (glue; batches by reference) -> writev
#   answer:  frame -> parse_produce_response_c -> ProducePartAnswer[] -> decode_frame

# Contract of fastkafka.protocol.produce_codec: the compiled Produce request encoder and response
# decoder the sender hands to NetworkClient.send(..., codec=). How and why:
# docs/internals.md#the-produce-codec.
cimport cython
from libc.stdint cimport int16_t, int32_t, int64_t, uint64_t

from fastkafka._wire.segment cimport Segment


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
# when truncated or garbled. One pass of the parser below (validating strings as UTF-8), then the
# objects built from its answers.
cdef ProduceResult decode_frame(int version, const unsigned char *data, Py_ssize_t size)


# ============================================================ the Produce response without the GIL
# One partition's answer as parse_produce_response_c reads it, pointing into the frame (valid while
# the frame's bytes are). Offsets are from the start of the frame (the correlation id).
cdef struct ProducePartAnswer:
    const unsigned char *topic          # the topic name's bytes in the frame: meant to be UTF-8 but
                                        # NOT validated by parse_produce_response_c (decode_frame does)
    Py_ssize_t topic_len
    int32_t partition
    int16_t error_code
    int64_t base_offset
    int64_t log_append_time_ms
    int64_t log_start_offset            # -1 before v5
    Py_ssize_t error_message_at         # offset of error_message's bytes (v8+); -1 when null
    Py_ssize_t error_message_len        # its length in bytes; -1 when null
    Py_ssize_t record_errors_at         # offset of record_errors' first element (after its count;
                                        # v8+), -1 before v8
    Py_ssize_t record_errors_count      # its elements (batch_index int32, message, v9+ tags); 0: none
    int32_t leader_id                   # tagged current_leader (v10+; the last tag 0), -1 when absent
    int32_t leader_epoch                # -1 when absent


# What went wrong in a malformed frame (ProduceAnswerInfo.error), and the message decode_frame
# raises for it: CorruptFrameError("cannot decode PRODUCE (0) v{version} response ({size} bytes): "
# + the text below, {field} = err_field, {at} = err_at, {size} = err_size, {left} = err_left ...).
cdef enum ProduceAnswerError:
    PRODUCE_ANSWER_OK = 0
    PRODUCE_ANSWER_VERSION = 1          # version outside 3-11 (UnsupportedVersionError)
    PRODUCE_ANSWER_NEED = 2             # "needs {size} bytes at offset {at}, only {left} left"
    PRODUCE_ANSWER_VARINT_END = 3       # "unsigned varint runs past the end at offset {at}"
    PRODUCE_ANSWER_VARINT_LONG = 4      # "unsigned varint longer than 10 bytes at offset {at}"
    PRODUCE_ANSWER_NULL_STRING = 5      # "null {field}"
    PRODUCE_ANSWER_STRING_SIZE = 6      # "{field} of {size} bytes at offset {at}, only {left} left"
    PRODUCE_ANSWER_BAD_LENGTH = 7       # "invalid {field} length {length}"
    PRODUCE_ANSWER_NULL_ARRAY = 8       # "{field} is null"
    PRODUCE_ANSWER_COUNT = 9            # "{field} claims {size} elements but only {left} bytes remain"
    PRODUCE_ANSWER_TAG_SIZE = 10        # "tagged field of {size} bytes at offset {at} runs past the end"
    PRODUCE_ANSWER_TAG_USED = 11        # "tagged field {field} has size {size} but used {used}"
    PRODUCE_ANSWER_UTF8 = 12            # "{field} at offset {at} is not UTF-8 ({reason})", the reason
                                        # Python's decoder gives for the {length} bytes at {at}
                                        # (only from decode_frame's pass, which validates strings)


# The frame as a whole, and where a malformed frame went wrong.
cdef struct ProduceAnswerInfo:
    int32_t correlation_id
    int32_t throttle_time_ms
    Py_ssize_t nparts                   # partitions in the frame (read so far, when malformed)
    Py_ssize_t ntopics                  # topic entries (read so far, when malformed)
    bint all_plain                      # every partition a plain success: error_code 0 or 46
                                        # (DUPLICATE_SEQUENCE_NUMBER), a null error_message and no
                                        # record_errors (true when there is no partition)
    Py_ssize_t node_endpoints_at        # offset of the tagged node_endpoints' (v10+, the last tag 0)
                                        # first element (after its count); -1 when the tag is absent
    Py_ssize_t node_endpoints_count     # its elements (node_id, compact host, port, compact nullable
                                        # rack, tags); -1 when the tag is absent, 0 when empty
    Py_ssize_t end                      # offset where the body ends (bytes after it are ignored)
    # When malformed (parse_produce_response_c returned -1):
    int error                           # a ProduceAnswerError (PRODUCE_ANSWER_OK when well-formed)
    const char *err_field               # the field's name as the message quotes it (static), or NULL
    Py_ssize_t err_at                   # the offset the message quotes
    uint64_t err_size                   # the bytes / elements claimed
    Py_ssize_t err_left                 # the bytes left
    int64_t err_length                  # BAD_LENGTH's length; UTF8's string length
    Py_ssize_t err_used                 # TAG_USED's bytes used


# Parse a Produce response frame (without its size prefix; version 3-11) in ONE pass without the
# GIL, touching only C memory and reading nothing outside data[0:size]: the correlation id, the
# flexible header's tags, the topics and their partitions, the throttle time and the body's tags
# (tag 0 current_leader and node_endpoints decoded in v10+, unknown tags skipped by size), with
# every check decode_frame makes, except that strings are not validated as UTF-8.
# Returns the number of partitions (ProduceAnswerInfo.nparts) and fills `info`; the partitions are
# in out[0:n] in the order of the frame (a partition listed twice appears twice: its last entry
# counts). When n > out_cap only out[0:out_cap] were written (info is complete all the same): call
# again with room for n. Returns -1 when the frame is malformed or the version unsupported, with
# info.error and the err_ fields set (produce_answer_error makes the exception decode_frame raises);
# out and info's other fields then hold what was read before the fault.
# thread: any · lock: none · gil: any
cdef Py_ssize_t parse_produce_response_c(int version, const unsigned char *data, Py_ssize_t size,
                                         ProducePartAnswer *out, Py_ssize_t out_cap,
                                         ProduceAnswerInfo *info) noexcept nogil


# The exception decode_frame raises for a frame parse_produce_response_c refused (returned -1 for):
# UnsupportedVersionError, or CorruptFrameError with the message of ProduceAnswerError. Needs the GIL
# (and, for PRODUCE_ANSWER_UTF8, the frame's bytes).
cdef object produce_answer_error(int version, const unsigned char *data, Py_ssize_t size,
                                 const ProduceAnswerInfo *info)


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
# thread: any · lock: none · gil: any
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
# thread: any · lock: none · gil: any
cdef inline Py_ssize_t produce_glue_bound(Py_ssize_t nparts, Py_ssize_t topic_bytes,
                                          Py_ssize_t client_id_len,
                                          Py_ssize_t tid_len) noexcept nogil:
    return (35 + (client_id_len if client_id_len > 0 else 0) + (tid_len if tid_len > 0 else 0)
            + 24 * nparts + topic_bytes)


# Segments encode_produce_c needs at most for `nparts` parts: two batch pieces per part, a glue
# segment before each, and the glue after the last.
# thread: any · lock: none · gil: any
cdef inline Py_ssize_t produce_segs_bound(Py_ssize_t nparts) noexcept nogil:
    return 4 * nparts + 1

# parse_produce_response_c, and with ``utf8`` decode_frame's pass (strings validated as UTF-8 too).
# thread: any · lock: none · gil: any
cdef Py_ssize_t _parse(int version, const unsigned char *data, Py_ssize_t size,
                       ProducePartAnswer *out, Py_ssize_t out_cap, ProduceAnswerInfo *info,
                       bint utf8) noexcept nogil
