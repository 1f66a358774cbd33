"""NetworkClient: the sockets and the poller, connections to brokers, metadata refresh.

The client is compiled (:mod:`fastkafka._core.network`); this module is its public name, with the
connection state machine's names (:mod:`fastkafka.connection`) beside it.
"""

from ._core.network import NetworkClient, connect_error_text, errno_text, now_ms, set_failpoint
from .connection import Connection, Due, ExpressRequest, InFlightRequest, State

__all__ = ["Connection", "Due", "ExpressRequest", "InFlightRequest", "NetworkClient", "State", "connect_error_text",
           "errno_text", "now_ms", "set_failpoint"]
