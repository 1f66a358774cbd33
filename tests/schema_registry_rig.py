"""Schema Registry fixtures: the project's in-memory registry server (fastkafka_tools), one per session.

``schema_registry`` is the URL of a session-wide server; ``schema_registry_server`` the server itself
(its request log and failure injection). Tests that count requests or inject failures start their
own with ``fastkafka_tools.schema_registry_server.start_registry()``: they are cheap (a thread).
"""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def schema_registry_server():
    from fastkafka_tools.schema_registry_server import start_registry

    server = start_registry()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def schema_registry(schema_registry_server) -> str:
    """The URL (http://127.0.0.1:<port>) of the session's Schema Registry server."""
    return schema_registry_server.url
