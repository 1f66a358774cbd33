"""Per-request fault scripting for the fault broker.

``broker.script.on(api_key, action, times=1, match=None)`` arms a rule: the next ``times`` requests
with that API key (and, if given, for which ``match(header, body)`` is true) get ``action``. Several
rules can fire on one request (e.g. a partition error *and* a split frame); each fires at most once per
request. ``times=None`` means every matching request. All methods are thread-safe.

Actions (module-level constructors)::

    split_frames(chunk=1, pause=0.001)    write the response ``chunk`` bytes at a time, pausing between
    slow_read(delay, chunk=1024)          read the rest of the request ``chunk`` bytes per ``delay`` s
                                          (decided when the request's api key is first visible, so
                                          ``match`` gets ``body=None``)
    disconnect_before_response()          close the connection instead of answering
    disconnect_mid_response(after_bytes)  write the first ``after_bytes`` bytes of the frame, then close
    wrong_correlation_id(delta=1000)      answer with correlation id + delta
    oversized_size_prefix(size=2**31-1)   replace the 4-byte size prefix by ``size`` (e.g. -1, 2 GiB-1)
    partition_error(code, partitions=None, append=False)
                                          Produce: answer ``code`` for these partitions (ints, or
                                          (topic, partition) tuples; None = all) without storing the
                                          data (unless ``append``; ``append="as_leader"`` stores it
                                          even after the leader moved away: a deposed leader that has
                                          not learnt it yet, whose followers replicated the write);
                                          other APIs: a top-level/topic error
    delay(seconds)                        hold the response back (the connection stays muted)
    no_response()                         drop the response; the connection goes on reading
    rewrite_response(fn)                  answer ``fn(body, header, request_body)`` (a response body
                                          dict, encoded by the codec) instead of the broker's own
                                          answer ``body`` (``fn`` may change ``body`` and return None):
                                          hostile or extreme answers a real broker would not give
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class Action:
    kind: str
    params: dict = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:  # action.chunk, action.code, ...
        try:
            return self.__dict__["params"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{self.kind}({args})"


def split_frames(chunk: int = 1, pause: float = 0.001) -> Action:
    if chunk < 1:
        raise ValueError("chunk must be >= 1")
    return Action("split_frames", {"chunk": chunk, "pause": pause})


def slow_read(delay: float, chunk: int = 1024) -> Action:
    if chunk < 1:
        raise ValueError("chunk must be >= 1")
    return Action("slow_read", {"delay": delay, "chunk": chunk})


def disconnect_before_response() -> Action:
    return Action("disconnect_before_response")


def disconnect_mid_response(after_bytes: int) -> Action:
    if after_bytes < 0:
        raise ValueError("after_bytes must be >= 0")
    return Action("disconnect_mid_response", {"after_bytes": after_bytes})


def wrong_correlation_id(delta: int = 1000) -> Action:
    if delta == 0:
        raise ValueError("delta must not be 0")
    return Action("wrong_correlation_id", {"delta": delta})


def oversized_size_prefix(size: int = 2**31 - 1) -> Action:
    if not -(2**31) <= size < 2**31:
        raise ValueError("size must fit in an int32")
    return Action("oversized_size_prefix", {"size": size})


def partition_error(code: int, partitions=None, append: bool | str = False) -> Action:
    if append not in (True, False, "as_leader"):
        raise ValueError(f"append is True, False or 'as_leader', not {append!r}")
    parts = None if partitions is None else frozenset(partitions)
    return Action("partition_error", {"code": code, "partitions": parts, "append": append})


def delay(seconds: float) -> Action:
    return Action("delay", {"seconds": seconds})


def no_response() -> Action:
    return Action("no_response")


def rewrite_response(fn: Callable) -> Action:
    return Action("rewrite_response", {"fn": fn})


ACTION_KINDS = {"split_frames", "slow_read", "disconnect_before_response", "disconnect_mid_response",
                "wrong_correlation_id", "oversized_size_prefix", "partition_error", "delay",
                "no_response", "rewrite_response"}


class Rule:
    """One armed rule; ``fired`` counts how often it applied, ``remaining`` what is left (None = ∞)."""

    def __init__(self, api_key: int, action: Action, times: int | None, match: Callable | None):
        self.api_key = int(api_key)
        self.action = action
        self.remaining = times
        self.match = match
        self.fired = 0

    @property
    def exhausted(self) -> bool:
        return self.remaining is not None and self.remaining <= 0

    def __repr__(self) -> str:
        return f"<Rule api_key={self.api_key} {self.action!r} fired={self.fired} remaining={self.remaining}>"


class Script:
    def __init__(self):
        self._lock = threading.Lock()
        self._rules: list[Rule] = []

    def on(self, api_key: int, action: Action, times: int | None = 1,
           match: Callable[[dict, dict | None], bool] | None = None) -> Rule:
        if not isinstance(action, Action) or action.kind not in ACTION_KINDS:
            raise TypeError(f"not a fault action: {action!r}")
        if times is not None and times < 1:
            raise ValueError("times must be >= 1 or None")
        rule = Rule(api_key, action, times, match)
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def has(self, kind: str) -> bool:
        with self._lock:
            return any(r.action.kind == kind and not r.exhausted for r in self._rules)

    def pending(self) -> list[Rule]:
        with self._lock:
            return [r for r in self._rules if not r.exhausted]

    def take(self, header: dict, body: dict | None, kinds: set[str] | None = None) -> list[Action]:
        """Fire every live rule matching this request (at most one per rule); return their actions."""
        fired: list[Action] = []
        with self._lock:
            for rule in self._rules:
                if rule.exhausted or rule.api_key != header["api_key"]:
                    continue
                if kinds is not None and rule.action.kind not in kinds:
                    continue
                if kinds is None and rule.action.kind == "slow_read":
                    continue  # decided earlier, by the processor
                if rule.match is not None:
                    try:
                        if not rule.match(header, body):
                            continue
                    except Exception:
                        continue
                rule.fired += 1
                if rule.remaining is not None:
                    rule.remaining -= 1
                fired.append(rule.action)
            self._rules = [r for r in self._rules if not r.exhausted]
        return fired
