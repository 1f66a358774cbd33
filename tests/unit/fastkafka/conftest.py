"""Fixtures shared by the unit tests of fastkafka that talk to the in-process fault broker."""
from __future__ import annotations

import pytest

from faultbroker import FaultBroker


@pytest.fixture
def fb():
    """A fresh FaultBroker; the test fails if one of its threads crashed or a handler raised."""
    b = FaultBroker()
    try:
        yield b
    finally:
        b.close()
    assert b.crashed == [] and b.handler_errors == []
