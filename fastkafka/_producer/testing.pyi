from typing import Any, Callable, Sequence

from fastkafka._producer.accumulator import RecordAccumulator
from fastkafka._producer.batch import ProducerBatch
from fastkafka._net.ioloop import Poller
from fastkafka._net.network import NetworkClient

def drain_nogil(acc: RecordAccumulator, nodes: Sequence[Sequence[int]], max_request_size: int,
                now_ms: int, out_cap: int = ...) -> tuple[int, list[tuple[int, ProducerBatch]]]: ...
def hold_gil(client: NetworkClient, ms: int) -> int: ...

class GilFreeProbe:
    calls: int
    calls_holding_gil: int
    sockets_seen: int
    span_ms: int
    def __init__(self, poller: Poller, gil_after: int, wait_ms: int) -> None: ...
    def remove(self) -> None: ...

def send_produce(client: NetworkClient, node_id: int, batches: list[Any], frame: Any, version: int,
                 now: int) -> int: ...
def encode_segments(version: int, correlation_id: int, client_id: bytes | None,
                    transactional_id: bytes | None, acks: int, timeout_ms: int,
                    parts: list[tuple[bytes, int, bytes | None, bytes | None]], glue_cap: int,
                    segs_cap: int) -> dict[str, object]: ...
def parse_answer(version: int, frame: Any, out_cap: int | None = ...,
                 validate_utf8: bool = ...) -> dict[str, object]: ...
def set_sender_failpoint(fn: Callable[[str, Any], None] | None) -> None: ...
