from typing import Any, Callable

from fastkafka._net.network import NetworkClient

def set_network_failpoint(fn: Callable[[str, NetworkClient, Any], None] | None) -> None: ...
