"""The I/O thread's GIL-free turn (fastkafka/_producer/gil_free_turn.pyx) against the in-process fault
broker: the steady state's Produce requests go out without the GIL, and every fault on them
(disconnects, partition errors, sequence errors, missing answers) ends as on the GIL path: each
record stored exactly once, in order, at the offset its future reported (checked with kafka-python's
decoder and CRC check).
"""
from __future__ import annotations

import time

import pytest

from faultbroker import disconnect_before_response, no_response, partition_error
from fastkafka._producer.testing import hold_gil
from fastkafka.protocol import ApiKey

from test_producer_faultbroker import (NOT_LEADER_OR_FOLLOWER, OUT_OF_ORDER_SEQUENCE_NUMBER,
                                       send_values, stored, stored_values)

pytestmark = pytest.mark.faultbroker

FAST = dict(request_timeout_ms=2000, delivery_timeout_ms=15000, retry_backoff_ms=20,
            reconnect_backoff_ms=20, reconnect_backoff_max_ms=200, linger_ms=2, max_block_ms=5000)


def warm_up(p, topic, partitions):
    """Connection, metadata, producer id and a first acknowledgement on every partition: what the
    GIL-free turn needs before it takes a partition's batches."""
    for part in range(partitions):
        p.send(topic, b"warm-%d" % part, partition=part).get(10)
    time.sleep(0.1)   # the I/O thread is back in its wait


def gil_free(p):
    return p.metrics()["gil_free_requests"]


def send_in_waves(p, topic, waves, per_wave, keyed=True):
    """Records in waves a few linger periods apart: each wave's batches meet their linger deadline
    in the I/O thread's wait."""
    futs = []
    for w in range(waves):
        futs += send_values(p, topic, per_wave, prefix=b"w%d" % w, keyed=keyed)
        time.sleep(0.01)
    return futs


def test_linger_deadline_met_while_the_application_holds_the_gil(fb, make_producer):
    fb.create_topic("t", 1)
    p = make_producer(fb, linger_ms=5)
    warm_up(p, "t", 1)
    fut = p.send("t", b"held")
    # 300 ms with the GIL held by this thread: the request can only have gone out without it
    assert hold_gil(p._client, 300) == 1
    assert fut.get(10).offset == 1
    assert gil_free(p) >= 1


def test_steady_state_requests_go_out_without_the_gil_exactly_once(fb, make_producer):
    fb.create_topic("t", 3)
    p = make_producer(fb)
    warm_up(p, "t", 3)
    before = gil_free(p)
    futs = send_in_waves(p, "t", 20, 50)
    for _, f in futs:
        f.get(10)
    m = p.metrics()
    assert m["gil_free_requests"] - before >= 10
    assert m["gil_free_answers"] >= 10      # read, decoded and matched without the GIL too
    assert m["io_gil_free_turns"] >= m["gil_free_requests"] - before
    assert m["batches_sent"] >= m["gil_free_requests"]
    warm = [(b"warm-%d" % i, None) for i in range(3)]
    assert fb.cluster.record_count("t") == len(futs) + len(warm)
    # every value once, in order per partition, at the offset its future reported
    where = {v: (part, off) for part in range(3) for off, _, v in stored(fb.cluster, "t", part)}
    for v, f in futs:
        md = f.get(0)
        assert (md.partition, md.offset) == where[v]
    for part in range(3):   # each partition's records in send order
        offsets = [f.get(0).offset for _, f in futs if f.get(0).partition == part]
        assert offsets == sorted(offsets)


@pytest.fixture
def python_gzip():
    """gzip by the Python codec (its C library turned off meanwhile, as where it is missing)."""
    from fastkafka._wire import ccodecs
    was = ccodecs.in_c("gzip")
    ccodecs.use_c("gzip", False)
    yield
    ccodecs.use_c("gzip", was)


@pytest.mark.parametrize("settings", [
    dict(gil_free_io=False),
    dict(compression_type="gzip"),
    dict(acks=1, enable_idempotence=False, max_in_flight_requests_per_connection=1),
], ids=["off", "compressed-in-python", "not-idempotent"])
def test_where_the_gil_free_turn_applies_and_where_not(fb, make_producer, settings, request):
    if "compression_type" in settings:
        request.getfixturevalue("python_gzip")
    fb.create_topic("t", 2)
    p = make_producer(fb, **settings)
    warm_up(p, "t", 2)
    futs = send_in_waves(p, "t", 10, 20)
    for _, f in futs:
        f.get(10)
    assert fb.cluster.record_count("t") == len(futs) + 2
    if settings.get("gil_free_io") is False or "compression_type" in settings:
        assert gil_free(p) == 0
    else:
        assert gil_free(p) > 0      # acks=1 without idempotence: still the GIL-free turn's


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_a_codec_compressed_in_c_takes_the_gil_free_turn(fb, make_producer, codec):
    from fastkafka._wire import compression
    assert compression.in_c(codec)
    fb.create_topic("t", 2)
    p = make_producer(fb, compression_type=codec)
    warm_up(p, "t", 2)
    before = compression.counters()
    futs = send_in_waves(p, "t", 10, 20)
    for _, f in futs:
        f.get(10)
    assert fb.cluster.record_count("t") == len(futs) + 2
    after = compression.counters()
    assert after["c"][codec]["calls"] > before["c"][codec]["calls"]
    assert after["python"][codec] == before["python"][codec]
    assert gil_free(p) > 0


def test_acks_zero_never_takes_the_gil_free_turn(fb, make_producer):
    fb.create_topic("t", 1)
    p = make_producer(fb, acks=0, enable_idempotence=False)
    warm_up(p, "t", 1)
    futs = send_in_waves(p, "t", 5, 20)
    p.flush(10)
    for _, f in futs:
        f.get(10)
    assert gil_free(p) == 0
    deadline = time.monotonic() + 5
    while fb.cluster.record_count("t") < len(futs) + 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fb.cluster.record_count("t") == len(futs) + 1


def test_disconnect_before_the_answer_to_a_gil_free_request(fb, make_producer):
    fb.create_topic("t", 2)
    p = make_producer(fb)
    warm_up(p, "t", 2)
    before = gil_free(p)
    rule = fb.script.on(ApiKey.PRODUCE, disconnect_before_response(), times=1)
    futs = send_in_waves(p, "t", 5, 20)
    for _, f in futs:
        f.get(15)
    assert rule.fired == 1
    assert gil_free(p) > before
    # written but unanswered: resent, and the broker's sequence check keeps it once
    values = [v for v, _ in futs]
    stored = [v for vs in stored_values(fb.cluster, "t", 2).values() for v in vs if not v.startswith(b"warm")]
    assert sorted(stored) == sorted(values)


def test_missing_answer_to_a_gil_free_request_times_out_and_is_resent(fb, make_producer):
    fb.create_topic("t", 1)
    p = make_producer(fb, request_timeout_ms=500)
    warm_up(p, "t", 1)
    before = gil_free(p)
    rule = fb.script.on(ApiKey.PRODUCE, no_response(), times=1)
    futs = send_values(p, "t", 10)
    for _, f in futs:
        f.get(15)
    assert rule.fired == 1 and gil_free(p) > before
    assert p.metrics()["net_timeouts"] >= 1
    assert [v for v in stored_values(fb.cluster, "t", 1)[0] if not v.startswith(b"warm")] == \
        [v for v, _ in futs]


def test_partition_error_on_a_gil_free_request_is_retried_after_metadata(fb, make_producer):
    fb.create_topic("t", 2)
    p = make_producer(fb)
    warm_up(p, "t", 2)
    before = gil_free(p)
    rule = fb.script.on(ApiKey.PRODUCE, partition_error(NOT_LEADER_OR_FOLLOWER), times=1)
    futs = send_values(p, "t", 20, keyed=True)
    for _, f in futs:
        f.get(15)
    assert rule.fired == 1 and gil_free(p) > before
    assert p.metrics()["retries"] >= 1
    assert fb.cluster.record_count("t") == len(futs) + 2


def test_out_of_order_sequence_on_a_gil_free_request_bumps_the_epoch(fb, make_producer):
    """Partition 0's batch that should be next is refused OUT_OF_ORDER_SEQUENCE_NUMBER (the broker
    lost this producer's state for it): the epoch is bumped and the partition's unacknowledged
    records are re-sequenced; nothing is lost or stored twice."""
    fb.create_topic("t", 2)
    p = make_producer(fb)
    warm_up(p, "t", 2)
    before = gil_free(p)
    fb.script.on(ApiKey.PRODUCE, partition_error(OUT_OF_ORDER_SEQUENCE_NUMBER, [0]), times=1)
    futs = send_values(p, "t", 30, keyed=True)
    for _, f in futs:
        f.get(15)
    assert gil_free(p) > before
    m = p.metrics()
    assert m["epoch_bumps"] >= 1 and m["producer_epoch"] >= 1
    stored = [v for vs in stored_values(fb.cluster, "t", 2).values() for v in vs if not v.startswith(b"warm")]
    assert sorted(stored) == sorted(v for v, _ in futs)
