from typing import Any, Callable, Sequence

from .accumulator import FutureRecordMetadata, RecordAccumulator
from .router import Router

REQUEST_OVERHEAD: int

def validate_timestamp(timestamp_ms: int | None) -> int: ...
def validate_headers(headers: Sequence[tuple[str | bytes, bytes | bytearray | memoryview | None]]
                     | None) -> int: ...

_Bytes = bytes | bytearray | memoryview
_Headers = Sequence[tuple[str, _Bytes | None]]
_Callback = Callable[[Exception | None, Any], Any]

class ProducerCore(Router):
    _closed: bool
    @property
    def _max_record_size(self) -> int: ...
    def _init_core(self, acc: RecordAccumulator, metadata_version: Any, poller: Any,
                   partitioner: Any, max_record_size: int, max_block_ms: int) -> None: ...
    def _closed_error(self) -> Exception: ...
    def _too_large(self, size: int) -> Exception: ...
    def send(self, topic: str, value: _Bytes | None = ..., key: _Bytes | None = ...,
             partition: int | None = ..., timestamp_ms: int | None = ...,
             headers: _Headers | None = ..., on_delivery: _Callback | None = ...,
             ) -> FutureRecordMetadata: ...
    def produce(self, topic: str, value: _Bytes | None = ..., key: _Bytes | None = ...,
                partition: int | None = ..., on_delivery: _Callback | None = ...,
                timestamp: int | None = ..., headers: _Headers | None = ...) -> None: ...
    def send_waiter(self, sink: Any, waiter: Any, topic: str, value: _Bytes | None = ...,
                    key: _Bytes | None = ..., partition: int | None = ...,
                    timestamp_ms: int | None = ..., headers: _Headers | None = ...) -> None: ...
