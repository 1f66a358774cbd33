# cython: language_level=3
"""Windowed statistics kept in C, measured as the Java client measures them (contract in
sampled.pxd; the metrics built on them: docs/observability.md, "Metrics").

A statistic keeps ``samples + 1`` samples of ``window_ms`` each (Java's ``SampledStat``): an event
goes into the current sample, or starts the next one (recycling the oldest) once the current
sample began a window ago. Reading combines the samples whose last event is less than
``samples * window_ms`` old:

- a rate (Java's ``Rate``) is the values' sum over the elapsed time since the oldest sample began,
  counted as at least ``samples - 1`` full windows;
- an average is the values' sum over the events' count, a maximum the largest value; both None
  (Java: NaN) without an event.

Reading does not change the samples (Java's read resets the obsolete ones to the read time).
"""
cimport cython
from libc.math cimport NAN, isnan
from libc.stdint cimport int32_t, int64_t

from fastkafka.errors import ConfigError


cdef tuple _measure(const Sampled *w, const SampleConf *cf, int64_t now):
    """(sum rate /s, event rate /s, average, max, total, events) of ``w`` at ``now``."""
    cdef int i
    cdef const Sample *s
    cdef int64_t expire = cf.window_ms * cf.samples, oldest = now, elapsed, full
    cdef double vsum = 0.0, vmax = NAN
    cdef int64_t count = 0
    for i in range(w.used):
        s = &w.s[i]
        if now - s.last_ms >= expire:
            continue                     # obsolete: as reset now (start = now, no events)
        if s.start_ms < oldest:
            oldest = s.start_ms
        if s.count > 0:
            vsum += s.sum
            count += s.count
            if isnan(vmax) or s.max > vmax:
                vmax = s.max
    elapsed = now - oldest
    full = elapsed // cf.window_ms
    if full < cf.samples - 1:
        elapsed += (cf.samples - 1 - full) * cf.window_ms
    if elapsed > 0:
        rate = vsum * 1000.0 / elapsed
        crate = count * 1000.0 / elapsed
    else:
        rate = crate = None
    return (rate, crate, (vsum / count) if count else None, None if isnan(vmax) else vmax,
            w.total, w.events)


cdef int _check_conf(SampleConf *cf, window_ms, samples) except -1:
    if not (1 <= samples <= MAX_SAMPLES):
        raise ConfigError(f"metrics_num_samples={samples!r}: must be 1 to {MAX_SAMPLES}")
    if window_ms < 1:
        raise ConfigError(f"metrics_sample_window_ms={window_ms!r}: must be at least 1")
    cf.window_ms = window_ms
    cf.samples = samples
    return 0


cdef Sampled *_topic_field(TopicSampled *t, str name) except NULL:
    if name == "records": return &t.records
    if name == "bytes": return &t.bytes
    if name == "compression": return &t.compression
    if name == "errors": return &t.errors
    if name == "retries": return &t.retries
    raise KeyError(name)


cdef Sampled *_node_field(NodeSampled *n, str name) except NULL:
    if name == "requests": return &n.requests
    if name == "responses": return &n.responses
    if name == "latency": return &n.latency
    raise KeyError(name)


@cython.final
cdef class SampledStat:
    """One windowed statistic, with the time passed in (for tests and Python-side counting)::

        >>> s = SampledStat(window_ms=30_000, samples=2)
        >>> s.record(10, now=0); s.record(20, now=1_000)
        >>> s.measure(now=30_000)["rate"]    # 30 over 30 s
        1.0
        >>> s.measure(now=15_000)["rate"]    # 30 over 45 s (15 s and the window before)
        0.6666666666666666
    """
    cdef Sampled w
    cdef SampleConf cf

    def __init__(self, int64_t window_ms=30_000, int samples=2):
        _check_conf(&self.cf, window_ms, samples)

    def record(self, double value, int64_t now):
        sampled_record_c(&self.w, &self.cf, value, now)

    def measure(self, int64_t now) -> dict:
        """``rate`` (values per second), ``count_rate`` (events per second), ``avg``, ``max``,
        ``total`` (values since the start) and ``events`` at ``now``."""
        return dict(zip(_KEYS, _measure(&self.w, &self.cf, now)))


_KEYS = ("rate", "count_rate", "avg", "max", "total", "events")
_GLOBAL = ("records_per_request", "batch_size", "compression", "queue_time", "record_size",
           "errors", "retries", "latency", "throttle", "requests", "responses", "io_wait",
           "connections_created", "connections_closed", "splits")
_TOPIC = ("records", "bytes", "compression", "errors", "retries")
_NODE = ("requests", "responses", "latency")


@cython.final
cdef class TopicStats:
    pass


@cython.final
cdef class NodeStats:
    pass


@cython.final
cdef class SampledRegistry:
    """The producer's windowed statistics (see the module docstring): recorded in C on the I/O
    thread, read by :meth:`snapshot`. ``record(name, value, now)`` and its topic / node forms
    count the events that are Python's anyway (a batch failed or retried, a connection made)."""

    def __init__(self, int64_t window_ms=30_000, int samples=2):
        _check_conf(&self.g.conf, window_ms, samples)
        self.topics = {}
        self.nodes = {}

    @property
    def window_ms(self):
        return self.g.conf.window_ms

    @property
    def samples(self):
        return self.g.conf.samples

    cdef TopicSampled *topic_c(self, str topic) except NULL:
        t = self.topics.get(topic)
        if t is None:
            t = self.topics[topic] = TopicStats.__new__(TopicStats)
        return &(<TopicStats>t).t

    cdef NodeSampled *node_c(self, int32_t node) except NULL:
        n = self.nodes.get(node)
        if n is None:
            n = self.nodes[node] = NodeStats.__new__(NodeStats)
        return &(<NodeStats>n).n

    def record(self, str name, double value, int64_t now):
        """Record into the global statistic ``name`` (one of the producer's, see sampled.pxd)."""
        sampled_record_c(self._global(name), &self.g.conf, value, now)

    def record_topic(self, str topic, str name, double value, int64_t now):
        """Record into topic ``topic``'s statistic ``name`` (errors, retries, ...)."""
        sampled_record_c(_topic_field(self.topic_c(topic), name), &self.g.conf, value, now)

    def record_node(self, int32_t node, str name, double value, int64_t now):
        sampled_record_c(_node_field(self.node_c(node), name), &self.g.conf, value, now)

    cdef Sampled *_global(self, str name) except NULL:
        cdef ProducerSampled *g = &self.g
        if name == "records_per_request": return &g.records_per_request
        if name == "batch_size": return &g.batch_size
        if name == "compression": return &g.compression
        if name == "queue_time": return &g.queue_time
        if name == "record_size": return &g.record_size
        if name == "errors": return &g.errors
        if name == "retries": return &g.retries
        if name == "latency": return &g.latency
        if name == "throttle": return &g.throttle
        if name == "requests": return &g.requests
        if name == "responses": return &g.responses
        if name == "io_wait": return &g.io_wait
        if name == "connections_created": return &g.connections_created
        if name == "connections_closed": return &g.connections_closed
        if name == "splits": return &g.splits
        raise KeyError(name)

    def snapshot(self, int64_t now) -> dict:
        """``{"global": {name: measure}, "topics": {topic: {...}}, "nodes": {node: {...}}}``, each
        measure a dict as :meth:`SampledStat.measure`'s."""
        cdef SampleConf *cf = &self.g.conf
        cdef TopicStats ts
        cdef NodeStats ns
        glob, topics, nodes = {}, {}, {}
        for n in _GLOBAL:
            glob[n] = dict(zip(_KEYS, _measure(self._global(n), cf, now)))
        for topic, t in list(self.topics.items()):
            ts = <TopicStats>t
            topics[topic] = d = {}
            for n in _TOPIC:
                d[n] = dict(zip(_KEYS, _measure(_topic_field(&ts.t, n), cf, now)))
        for node, o in list(self.nodes.items()):
            ns = <NodeStats>o
            nodes[node] = d = {}
            for n in _NODE:
                d[n] = dict(zip(_KEYS, _measure(_node_field(&ns.n, n), cf, now)))
        return {"global": glob, "topics": topics, "nodes": nodes}
