# cython: language_level=3
# path:
#   record: a counting point of the I/O thread (a request built, an answer read) -> sampled_record_c
#   read:   Producer.java_metrics -> SampledRegistry.snapshot -> rate / avg / max of each Sampled

# Contract of fastkafka._net.sampled: windowed statistics kept in C (the Java client's SampledStat
# and Rate, docs/observability.md "Metrics"): a ring of samples per statistic, recorded on the I/O
# thread without the GIL or a lock, read by any thread with the GIL (no change to the samples).
cimport cython
from libc.stdint cimport int32_t, int64_t

cdef enum:
    MAX_SAMPLES = 32                  # metrics_num_samples at most
    SAMPLE_SLOTS = 33                 # MAX_SAMPLES + 1: Java keeps one sample more than asked


cdef struct Sample:
    int64_t start_ms                  # when the sample began (its first event)
    int64_t last_ms                   # its last event
    int64_t count                     # events
    double sum                        # their values' sum
    double max                        # their largest value (count > 0)


cdef struct SampleConf:
    int64_t window_ms                 # metrics_sample_window_ms
    int samples                       # metrics_num_samples


# One statistic: the samples (a ring of samples + 1) and the totals since the start.
cdef struct Sampled:
    Sample s[SAMPLE_SLOTS]
    int cur                           # the sample being recorded
    int used                          # samples begun so far (at most samples + 1)
    int64_t events                    # events since the start
    double total                      # values' sum since the start (the *-total metrics)


# Per topic (producer-topic-metrics); the partitions' QueueState point at their topic's.
cdef struct TopicSampled:
    Sampled records                   # per batch sent: its records (record-send-rate/-total)
    Sampled bytes                     # per batch sent: its bytes (byte-rate/-total)
    Sampled compression               # per batch sent: compressed / uncompressed (compression-rate)
    Sampled errors                    # per batch failed: its records (record-error-rate/-total)
    Sampled retries                   # per batch retried: its records (record-retry-rate/-total)


# Per node (producer-node-metrics); a connection points at its node's.
cdef struct NodeSampled:
    Sampled requests                  # per request: its bytes (request-rate, outgoing-byte-rate, request-size)
    Sampled responses                 # per answer: its bytes (response-rate, incoming-byte-rate)
    Sampled latency                   # per Produce answer: ms since the request was queued


# The producer's (producer-metrics).
cdef struct ProducerSampled:
    SampleConf conf
    Sampled records_per_request       # per Produce request: its records (record-send-*, records-per-request-avg)
    Sampled batch_size                # per batch sent: its bytes on the wire
    Sampled compression               # per batch sent: compressed / uncompressed
    Sampled queue_time                # per batch sent: drained - created (ms)
    Sampled record_size               # per batch sent: its largest record's encoded bytes
    Sampled errors                    # per batch failed: its records
    Sampled retries                   # per batch retried: its records
    Sampled latency                   # per Produce answer: ms since the request was queued
    Sampled throttle                  # per Produce answer: its throttle_time_ms
    Sampled requests                  # per request (any kind): its bytes
    Sampled responses                 # per answer: its bytes
    Sampled io_wait                   # per poll of the I/O thread: ns waited in epoll_wait
    Sampled connections_created
    Sampled connections_closed
    Sampled splits                    # batches split after MESSAGE_TOO_LARGE


# Record ``v`` at ``now`` (ms): into the current sample, or a new one once the current sample is
# a window old (Java's SampledStat.record). One writer at a time: the I/O thread (with or without
# the GIL), or a thread holding the GIL for the statistics only Python code records.
# thread: any · lock: none · gil: any
cdef inline void sampled_record_c(Sampled *w, const SampleConf *cf, double v,
                                  int64_t now) noexcept nogil:
    cdef Sample *s
    if w.used == 0:
        w.used = 1
        w.cur = 0
        s = &w.s[0]
        s.start_ms = now
        s.count = 0
        s.sum = 0.0
    else:
        s = &w.s[w.cur]
        if now - s.start_ms >= cf.window_ms:
            w.cur = (w.cur + 1) % (cf.samples + 1)
            if w.cur >= w.used:
                w.used = w.cur + 1
            s = &w.s[w.cur]
            s.start_ms = now
            s.count = 0
            s.sum = 0.0
    if s.count == 0 or v > s.max:
        s.max = v
    s.sum += v
    s.count += 1
    s.last_ms = now
    w.events += 1
    w.total += v


@cython.final
cdef class TopicStats:
    cdef TopicSampled t


@cython.final
cdef class NodeStats:
    cdef NodeSampled n


# The producer's statistics: the global ones and one TopicStats / NodeStats per topic / node,
# kept as long as the producer (their C structs are pointed at from QueueState and ConnCore).
@cython.final
cdef class SampledRegistry:
    cdef ProducerSampled g
    cdef readonly dict topics         # topic -> TopicStats
    cdef readonly dict nodes          # node id -> NodeStats

    cdef TopicSampled *topic_c(self, str topic) except NULL
    cdef NodeSampled *node_c(self, int32_t node) except NULL
    cdef Sampled *_global(self, str name) except NULL
