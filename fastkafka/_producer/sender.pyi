from typing import Any, Callable

PRODUCE_CODEC: Any

class Sender:
    config: Any
    acc: Any
    metadata: Any
    client: Any
    clock: Callable[[], int]
    idem: Any
    transactional_id: str | None
    txn: Any
    acks: int
    min_produce_version: int
    running: bool
    force_close: bool
    sampled: Any
    stats_source: Callable[[], dict | None] | None
    in_flight_batches: int
    fatal_error: Exception | None
    on_error: Callable[[Exception], None] | None
    reporter: Any
    on_fatal: Callable[[], None] | None
    in_flight: dict[int, Any]
    stats: dict[str, int]
    def __init__(self, config: Any, accumulator: Any, metadata: Any, client: Any,
                 clock: Callable[[], int] = ...) -> None: ...
    def start(self, name: str) -> None: ...
    def wakeup(self) -> None: ...
    def join(self, timeout: float | None = None) -> bool: ...
    def run(self) -> None: ...
    def run_once(self) -> None: ...
    def call_soon(self, fn: Callable[[], Any]) -> None: ...
    def fail_everything(self, error: Exception) -> None: ...
    def unmute_and_fail(self, batch: Any, error: Exception) -> None: ...
    def report_error(self, error: Exception, now: int | None = None) -> bool: ...
