"""OpenTelemetry for the producer: a tracing interceptor and a metrics bridge. OpenTelemetry is
not a dependency of fastkafka: ``pip install "fastkafka-producer[otel]"`` (opentelemetry-api),
plus an SDK and exporter of your choice.

Tracing::

    from fastkafka import Producer
    from fastkafka.otel import TracingInterceptor

    p = Producer(bootstrap_servers="host:9092", interceptors=[TracingInterceptor()])

Each record sent gets a PRODUCER span ``send <topic>`` (a child of the span current where
``send``/``produce``/``send_batch`` is called) carrying the messaging semantic conventions'
attributes, and its context in the record's headers (W3C ``traceparent``, through the
configured propagator), so a consumer can continue the trace. The span ends when the record is
acknowledged (with its partition and offset) or fails (status ERROR, the exception recorded,
``error.type``).

Metrics::

    from fastkafka.otel import MetricsBridge
    MetricsBridge(p)     # observable instruments over p.metrics(), on the global MeterProvider

Names as in :mod:`fastkafka.prometheus` (``fastkafka.producer.<name>``), counters as observable
counters, the rest as observable gauges, with a ``client_id`` attribute (and ``node``/``topic``
for nested groups). With them the Java producer's metrics (``java_metrics()``) under the names
of opentelemetry-java-instrumentation's Kafka metrics bridge (``kafka.producer.record_send_rate``
with attributes ``client-id`` and ``topic``, ...): see :mod:`fastkafka.observability._java_export`.
"""
from __future__ import annotations

import logging
import threading
import time
import weakref

from fastkafka.observability._java_export import java_source, otel_names, otel_samples
from fastkafka.observability._metric_walk import walk
from fastkafka._version import __version__

log = logging.getLogger("fastkafka")

_INSTALL = ('fastkafka.otel needs the OpenTelemetry API: pip install "fastkafka-producer[otel]" '
            '(or pip install opentelemetry-api), plus opentelemetry-sdk to export')


def _otel():
    try:
        from opentelemetry import propagate, trace
    except ImportError:
        raise ImportError(_INSTALL) from None
    return trace, propagate


def _text(x):
    """A key as text for ``messaging.kafka.message.key``: str, or bytes that are UTF-8."""
    if isinstance(x, str):
        return x
    if isinstance(x, (bytes, bytearray, memoryview)):
        try:
            return bytes(x).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def _size(x):
    if isinstance(x, str):
        return len(x.encode("utf-8", "surrogatepass"))
    if isinstance(x, (bytes, bytearray)):
        return len(x)
    if isinstance(x, memoryview):
        return x.nbytes
    return None


class TracingInterceptor:
    """A producer interceptor (fastkafka.interceptors) that traces every record with
    OpenTelemetry.

    ``tracer_provider``: where spans go (the global one when None); ``propagator``: a
    ``TextMapPropagator`` (the global ``opentelemetry.propagate`` one when None: W3C trace context
    and baggage by default); ``client_id``: the ``messaging.client.id`` attribute;
    ``legacy_attributes``: also set the names of semantic conventions 1.24 and before
    (``messaging.kafka.destination.partition``, ``messaging.kafka.message.offset``), besides the
    current ``messaging.destination.partition.id`` and ``messaging.kafka.offset``.

    Headers the propagator writes replace a header of the same name the record had. Put this
    interceptor after those that change a record's value or key if the span should describe
    what is sent."""

    def __init__(self, tracer_provider=None, propagator=None, *, client_id: str | None = None,
                 legacy_attributes: bool = False):
        trace, propagate = _otel()
        self._trace = trace
        self._tracer = trace.get_tracer("fastkafka", __version__, tracer_provider=tracer_provider)
        self._inject = propagator.inject if propagator is not None else propagate.inject
        self._kind = trace.SpanKind.PRODUCER
        self._client_id = client_id
        self._legacy = legacy_attributes

    def on_send(self, record):
        if not isinstance(record.headers, list):
            return record        # headers of a wrong type: the send refuses the record
        attrs = {"messaging.system": "kafka", "messaging.destination.name": record.topic,
                 "messaging.operation.type": "send", "messaging.operation.name": "send"}
        if self._client_id:
            attrs["messaging.client.id"] = self._client_id
        size = _size(record.value)
        if size is not None:
            attrs["messaging.message.body.size"] = size
        if record.value is None:
            attrs["messaging.kafka.message.tombstone"] = True
        key = _text(record.key)
        if key is not None:
            attrs["messaging.kafka.message.key"] = key
        if type(record.partition) is int:
            self._partition(attrs, record.partition)
        span = self._tracer.start_span(f"send {record.topic}", kind=self._kind, attributes=attrs)
        carrier: dict[str, str] = {}
        self._inject(carrier, context=self._trace.set_span_in_context(span))
        if carrier:
            names = {k.lower() for k in carrier}
            headers = [h for h in record.headers
                       if not (isinstance(h, tuple) and len(h) == 2 and isinstance(h[0], str)
                               and h[0].lower() in names)]
            headers.extend((k, v.encode("utf-8")) for k, v in carrier.items())
            record.headers = headers
        if record.context is None:
            record.context = {}
        record.context[id(self)] = span
        return record

    def _partition(self, attrs, partition: int) -> None:
        attrs["messaging.destination.partition.id"] = str(partition)
        if self._legacy:
            attrs["messaging.kafka.destination.partition"] = partition

    def on_acknowledgement(self, metadata, error, record=None):
        ctx = getattr(record, "context", None)
        span = ctx.pop(id(self), None) if isinstance(ctx, dict) else None
        if span is None:
            return
        attrs = {}
        if metadata is not None and metadata.partition >= 0:
            self._partition(attrs, metadata.partition)
        if error is None:
            if metadata is not None and metadata.offset >= 0:
                attrs["messaging.kafka.offset"] = metadata.offset
                if self._legacy:
                    attrs["messaging.kafka.message.offset"] = metadata.offset
        else:
            from opentelemetry.trace import Status, StatusCode

            attrs["error.type"] = getattr(error, "name", None) or type(error).__qualname__
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        if attrs:
            span.set_attributes(attrs)
        span.end()

    def close(self) -> None:
        pass


class MetricsBridge:
    """OpenTelemetry observable instruments over ``producer.metrics()`` (read at each
    collection, once for all the instruments).

    ``meter_provider``: the global one when None. One instrument per name, made from the names
    ``metrics()`` has now; a name that appears later (a new node's group) gets its instrument
    right after the collection that first sees it (OpenTelemetry does not allow making one
    during a collection), and is reported from the next. ``close()`` stops reporting (the
    instruments stay, observing nothing).

    ``java`` (default True): also the Java producer's metrics of ``java_metrics()``, named as
    opentelemetry-java-instrumentation's ``OpenTelemetryKafkaMetrics`` names them
    (``kafka.producer.record_send_rate``, attributes ``client-id`` and ``node-id``/``topic``);
    a value with no event in the windows is not observed."""

    def __init__(self, producer, meter_provider=None, *, prefix: str = "fastkafka.producer",
                 client_id: str | None = None, java: bool = True):
        try:
            from opentelemetry import metrics
        except ImportError:
            raise ImportError(_INSTALL) from None
        from fastkafka.observability.prometheus import _client_id

        if not callable(getattr(producer, "metrics", None)):
            raise TypeError(f"MetricsBridge takes a producer (an object with metrics()), got "
                            f"{type(producer).__name__}")
        self._metrics = metrics
        self._meter = metrics.get_meter("fastkafka", __version__, meter_provider=meter_provider)
        self._ref = weakref.ref(producer)
        self._java = java_source(producer) is not None if java else False
        self._client_id = client_id if client_id is not None else _client_id(producer)
        self.prefix = prefix
        self._lock = threading.Lock()
        self._instruments: dict[str, object] = {}
        self._snap = None
        self._snap_at = 0.0
        self._closed = False
        self._adding = False
        self._add_instruments(self._read())

    def _read(self) -> dict:
        """{instrument name: (is_counter, [(labels, value), ...])} of metrics() and
        java_metrics() now ({} when the producer is gone or closed)."""
        p = self._ref()
        if p is None or self._closed:
            return {}
        out = {}
        try:
            out = _by_name(p.metrics(), self.prefix, self._client_id)
        except Exception:
            log.warning("MetricsBridge: metrics() of %r raised", p, exc_info=True)
        if self._java:
            try:
                java = java_source(p)()
            except Exception:
                log.warning("MetricsBridge: java_metrics() of %r raised", p, exc_info=True)
            else:
                for name, (counter, points) in otel_samples(java, self._client_id).items():
                    out[name] = (counter, [(tuple(a.items()), v) for a, v in points])
                for name, counter in otel_names(java).items():    # made before any value
                    out.setdefault(name, (counter, []))
        return out

    def _samples(self):
        """The samples of one collection: metrics() read once per 50 ms at most (every
        instrument's callback of a collection shares it)."""
        with self._lock:
            now = time.monotonic()
            if self._snap is None or now - self._snap_at > 0.05:
                self._snap = self._read()
                self._snap_at = now
            return self._snap

    def _add_instruments(self, by_name: dict) -> None:
        for name, (counter, _) in by_name.items():
            if name in self._instruments:
                continue
            make = (self._meter.create_observable_counter if counter
                    else self._meter.create_observable_gauge)
            doc = (f"Java producer metric {name}, from java_metrics()"
                   if name.startswith("kafka.") else f"fastkafka producer metrics(): {name}")
            self._instruments[name] = make(name, callbacks=[self._callback(name)],
                                           description=doc)

    def _callback(self, name: str):
        Observation = self._metrics.Observation

        def observe(options):
            samples = self._samples()
            if not self._adding and any(n not in self._instruments for n in samples):
                self._adding = True      # instruments for new names, once this collection ends
                threading.Thread(target=self._add_later, daemon=True,
                                 name="fastkafka-otel-metrics").start()
            entry = samples.get(name)
            if entry is None:
                return []
            return [Observation(value, dict(labels)) for labels, value in entry[1]]
        return observe

    def _add_later(self) -> None:
        try:
            with self._lock:
                snap = dict(self._snap or {})
            self._add_instruments(snap)
        except Exception:
            log.warning("MetricsBridge: adding instruments failed", exc_info=True)
        finally:
            self._adding = False

    def close(self) -> None:
        """Stop reporting (the instruments observe nothing from now on)."""
        self._closed = True
        with self._lock:
            self._snap = {}
            self._snap_at = float("inf")


def _by_name(metrics, prefix: str, client_id: str) -> dict:
    """{prefix.name: (is_counter, [(labels, value), ...])} of a metrics() dict, the labels
    starting with client_id."""
    out: dict[str, tuple] = {}
    for name, labels, value, counter in walk(metrics, (("client_id", client_id),)):
        name = f"{prefix}.{name}"
        entry = out.get(name)
        if entry is None:
            entry = out[name] = (counter, [])
        entry[1].append((labels, value))
    return out


__all__ = ["TracingInterceptor", "MetricsBridge"]
