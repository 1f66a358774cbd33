# cython: language_level=3
"""Failpoints of the network client's I/O loop, for fault-injection tests only (built with
FASTKAFKA_TEST_MODULES=1, never in a wheel).

A failpoint is a callable ``fn(stage, client, conn)`` the loop calls at each of its stages
(``"connected"``, ``"read"``, ``"api_versions"``); it may raise, to prove that a failure there is
contained. The shipping module tests one pointer per stage and has no way to set it.
"""

from fastkafka._net.network cimport set_failpoint_c


def set_network_failpoint(fn):
    """Install ``fn(stage, client, conn)`` as the network client's failpoint, or None to remove it."""
    if fn is not None and not callable(fn):
        raise TypeError(f"a failpoint is a callable (stage, client, conn) or None, not {type(fn).__name__}")
    set_failpoint_c(fn)
