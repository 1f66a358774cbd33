from collections import deque
from enum import Enum, IntEnum
from typing import Any, Callable

UNSUPPORTED_VERSION: int

class State(IntEnum):
    DISCONNECTED = 0
    CONNECTING = 1
    HANDSHAKE = 2
    READY = 3

class Due(Enum):
    CONNECT = "connect"
    TLS_HANDSHAKE = "tls"
    REQUEST = "request"
    REAUTHENTICATE = "reauth"
    IDLE = "idle"

class InFlightRequest:
    correlation_id: int
    api_key: int
    version: int
    expect_response: bool
    created_ms: int
    callback: Callable[[Any, BaseException | None], None]
    node_id: int
    internal: bool
    codec: Any
    def __init__(self, correlation_id: int, api_key: int, version: int, expect_response: bool,
                 created_ms: int, callback: Callable[[Any, BaseException | None], None],
                 node_id: int, internal: bool = False, codec: Any = None) -> None: ...

class ProduceRequest:
    correlation_id: int
    created_ms: int
    version: int
    node_id: int
    batches: list[Any]
    handler: Callable[[int, list[Any], Any, BaseException | None], None] | None
    def __call__(self, body: Any, error: BaseException | None) -> None: ...

class Connection:
    node_id: int
    host: str
    port: int
    status: int
    state: State
    sock: Any
    fd: int
    max_frame_size: int
    send_queue: Any
    reader: Any
    unacked_writes: int
    unconfirmed: bool
    api_versions: dict[int, tuple[int, int]]
    versions: dict[int, int]
    handshake: deque[Any]
    connect_started_ms: int
    last_activity_ms: int
    failures: int
    address_index: int
    next_attempt_ms: int
    registered_events: int
    reauth_at_ms: int
    throttle_until_ms: int
    tls: Any
    @property
    def produce_version(self) -> int: ...
    @property
    def produce_count(self) -> int: ...
    def produce_batches(self) -> list: ...
    def requests_in_flight(self) -> list[InFlightRequest]: ...
    def in_flight_ids(self) -> list[int]: ...
    def __init__(self, node_id: int, host: str, port: int, max_frame_size: int) -> None: ...
    def in_flight_count(self) -> int: ...
    def can_send(self, now: int, max_in_flight: int) -> bool: ...
    def version_for(self, api_key: int, min_version: int = 0, max_version: int | None = None) -> int: ...
    def negotiate(self, api_keys: list[dict[str, int]], required_apis: Any) -> list[str]: ...
    def enqueue(self, req: InFlightRequest, frame: Any, now: int) -> None: ...
    def written(self, done: Any, now: int) -> list[InFlightRequest]: ...
    def receive(self, frame: bytes, now: int) -> tuple[InFlightRequest | ProduceRequest, Any, int]: ...
    def deadline(self, now: int, setup_timeout_ms: int, request_timeout_ms: int,
                 max_idle_ms: int) -> int | None: ...
    def due(self, now: int, setup_timeout_ms: int, request_timeout_ms: int,
            max_idle_ms: int) -> Due | None: ...
    def oldest_request(self) -> str: ...
    def reset(self) -> list[InFlightRequest | ProduceRequest]: ...
