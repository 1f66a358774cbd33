"""``producer.metrics()`` for Prometheus, through ``prometheus_client`` (not a dependency of
fastkafka: ``pip install prometheus_client``).

Example::

    from prometheus_client import start_http_server
    from fastkafka.prometheus import ProducerCollector

    collector = ProducerCollector(producer)      # registered with prometheus_client's REGISTRY
    start_http_server(8000)

Every number of ``metrics()`` becomes ``fastkafka_producer_<name>`` (``prefix``), labelled with
the producer's ``client_id``: counters (``records_sent``, ``errors``, ``net_bytes_sent``, ...,
and any name ending in ``total``) as Prometheus counters (``..._total``), the rest
(``records_queued``, ``buffer_available_bytes``, ...) as gauges. Nested dicts of groups (per node,
per topic) become labels (``node``, ``topic``): see
:mod:`fastkafka.observability._metric_walk`. Strings (``tls_data_path``, ``txn_state``) are left
out. ``metrics()`` is read at each scrape.

The Java producer's metrics (``java_metrics()``) are exported too, under the names the
Prometheus JMX exporter gives a Java producer with its default format
(``kafka_producer_producer_metrics_record_send_rate{client_id="..."}``,
``kafka_producer_producer_node_metrics_request_latency_avg{client_id="...",node_id="node-1"}``,
``kafka_producer_producer_topic_metrics_byte_rate{client_id="...",topic="..."}``), as gauges;
values with no event in the windows (None) are left out: see
:mod:`fastkafka.observability._java_export`. ``java=False`` leaves them out.
"""
from __future__ import annotations

import logging
import weakref

from fastkafka.observability._java_export import java_source, jmx_samples
from fastkafka.observability._metric_walk import sanitize, walk

log = logging.getLogger("fastkafka")


def _prometheus():
    try:
        from prometheus_client import core
    except ImportError:
        raise ImportError("fastkafka.prometheus needs the prometheus_client package: "
                          "pip install prometheus_client") from None
    return core


def _client_id(producer) -> str:
    config = getattr(producer, "config", None)
    if config is None:      # the compatibility layers: the fastkafka.Producer underneath
        inner = getattr(producer, "fastkafka", None) or getattr(producer, "_p", None)
        config = getattr(inner, "config", None)
    return str(getattr(config, "client_id", "") or "")


class ProducerCollector:
    """A prometheus_client collector over one or more producers' ``metrics()`` (a
    :class:`fastkafka.Producer`, :class:`fastkafka.aio.AsyncProducer`, or anything with
    ``metrics()`` returning a dict). The producers are held weakly: one that is gone is no longer
    reported. ``registry``: where to register (prometheus_client's default ``REGISTRY`` when
    None; ``False`` for none, to register it yourself). Give each producer its own ``client_id``:
    it is the label that tells them apart. ``java``: also export ``java_metrics()`` under the
    JMX exporter's names (default True; producers without java_metrics() export metrics() only).
    """

    def __init__(self, *producers, prefix: str = "fastkafka_producer", registry=None,
                 java: bool = True):
        core = _prometheus()
        if not producers:
            raise TypeError("ProducerCollector needs at least one producer")
        for p in producers:
            if not callable(getattr(p, "metrics", None)):
                raise TypeError(f"ProducerCollector takes producers (objects with metrics()), "
                                f"got {type(p).__name__}")
        self._refs = [weakref.ref(p) for p in producers]
        self._ids = [_client_id(p) for p in producers]
        self.prefix = sanitize(prefix)
        self.java = bool(java)
        self._core = core
        if registry is None:
            from prometheus_client import REGISTRY as registry
        if registry is not False:
            registry.register(self)

    def describe(self):
        """Nothing up front: the names follow ``metrics()`` (and registering does not read it)."""
        return []

    def collect(self):
        core = self._core
        families: dict[str, object] = {}
        for ref, client_id in zip(self._refs, self._ids):
            p = ref()
            if p is None:
                continue
            try:
                snapshot = p.metrics()
            except Exception:
                log.warning("ProducerCollector: metrics() of %r raised", p, exc_info=True)
                continue
            for name, labels, value, counter in walk(snapshot):
                full = f"{self.prefix}_{name}"
                if counter and full.endswith("_total"):
                    full = full[:-len("_total")]
                key = full + (" c" if counter else " g")
                fam = families.get(key)
                if fam is None:
                    doc = f"fastkafka producer metrics()[{name!r}]"
                    fam = families[key] = (core.CounterMetricFamily(full, doc) if counter
                                           else core.GaugeMetricFamily(full, doc))
                fam.add_sample(full + "_total" if counter else full,
                               {"client_id": client_id, **dict(labels)}, float(value))
            if self.java:
                self._add_java(p, client_id, families)
        yield from families.values()

    def _add_java(self, p, client_id: str, families: dict) -> None:
        source = java_source(p)
        if source is None:
            return
        try:
            java = source()
        except Exception:
            log.warning("ProducerCollector: java_metrics() of %r raised", p, exc_info=True)
            return
        for name, labels, value in jmx_samples(java, client_id):
            key = name + " j"
            fam = families.get(key)
            if fam is None:
                fam = families[key] = self._core.GaugeMetricFamily(
                    name, f"Java producer metric {name} (JMX exporter name), from java_metrics()")
            fam.add_sample(name, labels, value)


def register(producer, registry=None, prefix: str = "fastkafka_producer",
             java: bool = True) -> ProducerCollector:
    """A :class:`ProducerCollector` of ``producer`` registered with ``registry`` (default
    prometheus_client's ``REGISTRY``); ``registry.unregister(collector)`` removes it."""
    return ProducerCollector(producer, prefix=prefix, registry=registry, java=java)


__all__ = ["ProducerCollector", "register"]
