"""A check the SASL tests share: a login the broker (or the token source) refuses fails the first
send with a typed, not retriable :class:`SaslAuthenticationError` well before ``max_block_ms``,
and the producer's I/O thread survives it."""
from __future__ import annotations

import time

import pytest

from fastkafka import Producer
from fastkafka.errors import SaslAuthenticationError

from brokers import unique_name

__all__ = ["assert_refused_fast"]


def assert_refused_fast(kc, listener: str, settings: dict, match: str,
                        bound_s: float) -> SaslAuthenticationError:
    """Send one record through ``kc``'s ``listener`` with ``settings``; the error must match
    ``match`` and come within ``bound_s`` (``max_block_ms`` is 60 s). Returns the error."""
    p = Producer({"bootstrap.servers": kc.bootstrap_for(listener), **settings,
                  "max_block_ms": 60000, "reconnect_backoff_max_ms": 1000})
    try:
        t0 = time.monotonic()
        with pytest.raises(SaslAuthenticationError, match=match) as exc:
            p.send(unique_name("refused"), b"x").get(60)
        elapsed = time.monotonic() - t0
        assert elapsed < bound_s, f"took {elapsed:.1f} s: max_block_ms must not be waited out"
        assert p._sender._thread.is_alive(), "the I/O thread must survive"
        assert exc.value.retriable is False
        return exc.value
    finally:
        p.close(5)
