from typing import Any, Callable, Sequence

from .accumulator import FutureRecordMetadata, RecordAccumulator

REQUEST_OVERHEAD: int
MAX_PARTITION: int

def validate_timestamp(timestamp_ms: int | None) -> int: ...
def validate_headers(headers: Sequence[tuple[str | bytes, bytes | bytearray | memoryview | None]]
                     | None) -> int: ...
def check_column(column: list, name: str) -> None: ...

_Bytes = bytes | bytearray | memoryview
_Headers = Sequence[tuple[str, _Bytes | None]]
_Callback = Callable[[Exception | None, Any], Any]

class ProducerCore:
    _closed: bool
    _max_block_ms: int
    _topics: dict[str, tuple]
    @property
    def _max_record_size(self) -> int: ...
    def _init_core(self, acc: RecordAccumulator, metadata: Any, wakeup_sender: Callable[[], Any],
                   partitioner: Any, max_record_size: int, max_block_ms: int) -> None: ...
    def send(self, topic: str, value: _Bytes | None = ..., key: _Bytes | None = ...,
             partition: int | None = ..., timestamp_ms: int | None = ...,
             headers: _Headers | None = ..., on_delivery: _Callback | None = ...,
             ) -> FutureRecordMetadata: ...
    def produce(self, topic: str, value: _Bytes | None = ..., key: _Bytes | None = ...,
                partition: int | None = ..., on_delivery: _Callback | None = ...,
                timestamp: int | None = ..., headers: _Headers | None = ...) -> None: ...
