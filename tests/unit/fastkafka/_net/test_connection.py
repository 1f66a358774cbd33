"""The connection state machine (fastkafka._net.handshake.Connection), fed frames and time, no sockets."""

import pytest

from fastkafka._net.connection import Connection, Due, InFlightRequest, State
from fastkafka.errors import CorrelationIdMismatchError, CorruptFrameError, UnsupportedVersionError
from fastkafka.protocol import ApiKey

SETUP, REQUEST, IDLE = 10_000, 30_000, 540_000


def metadata_frame(corr: int, throttle: int = 0) -> bytes:
    # Metadata v1 response: correlation id, brokers [], controller_id, topics [] (v1 has no
    # throttle time; v3+ does): use v3 here.
    return (corr.to_bytes(4, "big") + throttle.to_bytes(4, "big", signed=True) + (0).to_bytes(4, "big")
            + b"\xff\xff" + (1).to_bytes(4, "big", signed=True) + (0).to_bytes(4, "big"))


def req(corr, created=0, expect=True, api=ApiKey.METADATA, version=3, callback=None):
    return InFlightRequest(corr, int(api), version, expect, created, callback, 1)


def ready_conn():
    c = Connection(1, "h", 9092, 1 << 20)
    c.state = State.READY
    c.negotiate([{"api_key": int(ApiKey.METADATA), "min_version": 0, "max_version": 12},
                 {"api_key": int(ApiKey.PRODUCE), "min_version": 3, "max_version": 11}], ())
    return c


def test_response_matches_the_oldest_request_and_notes_the_throttle():
    c = ready_conn()
    a, b = req(7), req(8)
    c.enqueue(a, [b"x"], 0)
    c.enqueue(b, [b"y"], 0)
    got, body, throttle = c.receive(metadata_frame(7, throttle=250), 100)
    assert got is a and body["throttle_time_ms"] == 250 and throttle == 250
    assert c.requests_in_flight() == [b] and c.in_flight_ids() == [8]
    assert c.throttle_until_ms == 350
    assert not c.can_send(200, 5) and c.can_send(350, 5)


@pytest.mark.parametrize("frame, error", [
    (b"\x00\x00", CorruptFrameError),
    (metadata_frame(99), CorrelationIdMismatchError),
    (metadata_frame(7)[:9], CorruptFrameError),      # truncated body
])
def test_bad_frames_raise_and_leave_the_request_in_flight(frame, error):
    c = ready_conn()
    a = req(7)
    c.enqueue(a, [b"x"], 0)
    with pytest.raises(error):
        c.receive(frame, 1)
    assert c.requests_in_flight() == [a]    # fails with the error when the connection closes


def test_a_response_with_nothing_in_flight_is_corrupt():
    with pytest.raises(CorruptFrameError, match="no request in flight"):
        ready_conn().receive(metadata_frame(1), 0)


def test_requests_without_response_complete_when_written():
    c = ready_conn()
    r = req(3, expect=False)
    c.enqueue(r, [b"abc"], 0)
    assert c.in_flight_count() == 1 and not c.requests_in_flight()
    assert c.written([r], 5) == [r]
    assert c.in_flight_count() == 0 and c.unconfirmed


def test_versions_negotiated_and_refused_with_both_ranges():
    c = ready_conn()
    assert c.version_for(ApiKey.PRODUCE, 3) == 11
    assert c.version_for(ApiKey.PRODUCE, 3, max_version=9) == 9
    with pytest.raises(UnsupportedVersionError, match=r"PRODUCE versions \(3, 11\)"):
        c.version_for(ApiKey.PRODUCE, 3, max_version=2)
    with pytest.raises(UnsupportedVersionError):
        c.version_for(ApiKey.INIT_PRODUCER_ID)
    assert c.negotiate([], (ApiKey.METADATA,)) == ["METADATA"]


def test_deadlines_in_order():
    c = Connection(1, "h", 9092, 1 << 20)
    c.state = State.CONNECTING
    c.connect_started_ms = 100
    assert c.deadline(100, SETUP, REQUEST, IDLE) == SETUP + 1
    assert c.due(100 + SETUP, SETUP, REQUEST, IDLE) is None
    assert c.due(101 + SETUP, SETUP, REQUEST, IDLE) is Due.CONNECT
    c = ready_conn()
    c.enqueue(req(1, created=1000), [b"x"], 1000)
    assert c.deadline(1000, SETUP, REQUEST, IDLE) == REQUEST + 1
    assert c.due(1001 + REQUEST, SETUP, REQUEST, IDLE) is Due.REQUEST
    c = ready_conn()
    c.last_activity_ms = 0
    assert c.due(IDLE, SETUP, REQUEST, IDLE) is None
    assert c.due(IDLE + 1, SETUP, REQUEST, IDLE) is Due.IDLE
    c.reauth_at_ms = 500
    assert c.deadline(0, SETUP, REQUEST, IDLE) == 501
    assert c.due(500, SETUP, REQUEST, IDLE) is Due.REAUTHENTICATE


def test_reset_returns_every_request_that_now_fails():
    c = ready_conn()
    a, b = req(1), req(2, expect=False)
    c.enqueue(a, [b"x"], 0)
    c.enqueue(b, [b"y"], 0)
    assert c.reset() == [a, b]
    assert c.state is State.DISCONNECTED and c.in_flight_count() == 0
    assert not c.send_queue.has_pending()
