"""Fixtures of the documentation tests (tests/docs/test_doc_examples.py)."""
from __future__ import annotations

import pytest

from securedkafka import secured_kafka_cluster


@pytest.fixture(scope="module")
def docs_secured_kafka(pki):
    """The secured Kafka node of the ``tls`` and ``sasl`` examples (securedkafka.py), started
    only when such an example runs."""
    kc = secured_kafka_cluster(pki).start()
    yield kc
    kc.stop()
