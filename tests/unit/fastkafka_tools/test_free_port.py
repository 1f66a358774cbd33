"""The rig's ports stay out of the kernel's ephemeral range, so a restarted node can bind again."""
from __future__ import annotations

import socket

from fastkafka_tools import localbroker
from fastkafka_tools.localbroker import free_port


def test_free_port_is_outside_the_ephemeral_range_and_bindable():
    low, high = localbroker._ephemeral_range()
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports), "a port was handed out twice"
    for port in ports:
        assert not (low <= port <= high), f"{port} is inside the ephemeral range {low}-{high}"
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_free_port_skips_a_port_in_use(monkeypatch):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        held.listen()
        low, high = localbroker._ephemeral_range()
        # The taken port is drawn three times, then the span's first port: never the taken one.
        choices = iter([taken, taken, taken])
        monkeypatch.setattr(localbroker.random.SystemRandom, "randint", lambda self, a, b: next(choices, a))
        monkeypatch.setattr(localbroker, "_ephemeral_range", lambda: (taken + 2000, 65535) if taken < 40000 else (1, taken - 2000))
        port = free_port()
        assert port != taken
