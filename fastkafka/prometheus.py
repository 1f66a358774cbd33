"""``producer.metrics()`` for Prometheus: the import path of
:mod:`fastkafka.observability.prometheus`, which holds the code and the full description.

Example::

    from prometheus_client import start_http_server
    from fastkafka.prometheus import ProducerCollector

    collector = ProducerCollector(producer)      # registered with prometheus_client's REGISTRY
    start_http_server(8000)

``prometheus_client`` is not a dependency of fastkafka: ``pip install prometheus_client``.
"""
from __future__ import annotations

from fastkafka.observability.prometheus import ProducerCollector, register

__all__ = ["ProducerCollector", "register"]
