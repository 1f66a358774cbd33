from typing import Any, Callable, Mapping, Sequence

from fastkafka._wire.records import EncodedHeaders

from .accumulator import RecordAccumulator
from .batch import DeliveryCallback, FutureRecordMetadata, LoopFuture
from .router import Router

REQUEST_OVERHEAD: int

_Bytes = bytes | bytearray | memoryview
_Value = _Bytes | str
_Headers = (Sequence[tuple[str | bytes, _Bytes | str | None]]
            | Mapping[str | bytes, _Bytes | str | None] | EncodedHeaders)
_Callback = DeliveryCallback

def validate_timestamp(timestamp_ms: int | None) -> int: ...
def validate_headers(headers: _Headers | None) -> int: ...
def validate_field(obj: _Value | None, name: str) -> None: ...

class ProducerCore(Router):
    _closed: bool
    @property
    def _interceptors(self) -> Any: ...
    @property
    def _max_record_size(self) -> int: ...
    def _init_core(self, acc: RecordAccumulator, metadata_version: Any, poller: Any,
                   partitioner: Any, max_record_size: int, max_block_ms: int,
                   key_serializer: Any = ..., value_serializer: Any = ...,
                   interceptors: Any = ..., key_takes_topic: bool = ...,
                   value_takes_topic: bool = ...) -> None: ...
    def _append_acked(self, batch: Any, future: Any, start: int, acks: list) -> None: ...
    def _serialize(self, topic: str, value: Any = ..., key: Any = ...) -> tuple[Any, Any]: ...
    def _serialize_column(self, topic: str, column: list, field: str) -> list: ...
    def _closed_error(self) -> Exception: ...
    def _too_large(self, size: int) -> Exception: ...
    def send(self, topic: str, value: _Value | Any = ..., key: _Value | Any = ...,
             partition: int | None = ..., timestamp_ms: int | None = ...,
             headers: _Headers | None = ..., on_delivery: _Callback | None = ...,
             callback: _Callback | None = ...) -> FutureRecordMetadata: ...
    def produce(self, topic: str, value: _Value | Any = ..., key: _Value | Any = ...,
                partition: int | None = ..., on_delivery: _Callback | None = ...,
                timestamp: int | None = ..., headers: _Headers | None = ...,
                callback: _Callback | None = ...) -> None: ...
    def _send_waiter(self, sink: Any, waiter: Any, topic: str, value: _Value | None = ...,
                    key: _Value | None = ..., partition: int | None = ...,
                    timestamp_ms: int | None = ..., headers: _Headers | None = ...,
                    waiter_ack: Any = ...) -> None: ...


class MustWait(Exception):
    version: int
    def __init__(self, version: int) -> None: ...

class LoopSender:
    _loop: Any
    _sink: Any
    _p: Any
    _backlog: Any
    _closing: bool
    _chain: Any
    _serializing: bool
    def send(self, topic: str, value: _Value | None = ..., key: _Value | None = ...,
             partition: int | None = ..., timestamp_ms: int | None = ...,
             headers: _Headers | None = ...) -> LoopFuture: ...
    def produce(self, topic: str, value: _Value | None = ..., key: _Value | None = ...,
                partition: int | None = ..., on_delivery: _Callback | None = ...,
                timestamp: int | None = ..., headers: _Headers | None = ...,
                callback: _Callback | None = ...) -> None: ...
