"""The one retry backoff of every request the client repeats on its own (InitProducerId, Metadata,
admin requests; reconnects use the same shape with their own settings).

The delay after the n-th consecutive failure is ``base * 2**(n-1)``, capped at ``maximum``, with
±20 % jitter so that many clients that failed together do not retry together (as the Java client
does since KIP-580). A success resets the count.
"""
from __future__ import annotations

import random
from typing import Callable

__all__ = ["Backoff"]

JITTER = 0.2


class Backoff:
    __slots__ = ("base_ms", "max_ms", "failures", "_rand")

    def __init__(self, base_ms: int, max_ms: int, rand: Callable[[], float] = random.random):
        self.base_ms = max(0, int(base_ms))
        self.max_ms = max(self.base_ms, int(max_ms))
        self.failures = 0
        self._rand = rand

    def delay_ms(self, failures: int | None = None) -> int:
        """The delay after ``failures`` consecutive failures (default: the count so far); 0 for none."""
        n = self.failures if failures is None else failures
        if n <= 0 or self.base_ms == 0:
            return 0
        raw = min(self.max_ms, self.base_ms * (1 << min(n - 1, 30)))
        return max(0, int(raw * (1 - JITTER + 2 * JITTER * self._rand())))

    def failed(self) -> int:
        """Count one more failure; returns the delay before the next attempt."""
        self.failures += 1
        return self.delay_ms()

    def succeeded(self) -> None:
        self.failures = 0

    def __repr__(self) -> str:
        return f"Backoff({self.base_ms}..{self.max_ms} ms, failures={self.failures})"
