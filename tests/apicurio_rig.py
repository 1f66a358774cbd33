"""Apicurio Registry fixture: a real Schema Registry server the project did not write, one per session.

``apicurio_registry`` is the base URL of its Confluent-compatible API
(``http://127.0.0.1:<port>/apis/ccompat/v7``), for ``SchemaRegistryClient({"url": ...})``. The server
(``fastkafka_tools.apicurio``, a JVM, about 5 s to start) is started only when a test first asks for
it; its runnable jar is built by the setup (``python -m fastkafka_tools.apicurio build``), or by the
first test that needs it if the cache lacks it.
"""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def apicurio_registry():
    from fastkafka_tools.apicurio import ApicurioRegistry

    with ApicurioRegistry() as server:
        yield server.url
