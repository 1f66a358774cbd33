"""The first batch of a partition under an epoch, when it fails with a retriable error.

Apache Kafka accepts *any* first sequence from a producer it holds no state for on a partition (the
fault broker does the same). Seen on Apache Kafka 4.4 right after a topic was created: the first batch
of a partition got NOT_LEADER_OR_FOLLOWER, the batch pipelined behind it was written with its higher
sequence, and the first batch was then refused with OUT_OF_ORDER_SEQUENCE_NUMBER on every retry until
its delivery timeout. The producer now keeps one batch of a partition in flight until the partition's
first acknowledgement.
"""
from __future__ import annotations

import pytest

from faultbroker import delay, parse_batches, partition_error
from fastkafka import Producer
from fastkafka.protocol import ApiKey

pytestmark = pytest.mark.faultbroker

NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7


def _first_sequences(body) -> list[int]:
    out = []
    for td in body["topic_data"]:
        for pd in td["partition_data"]:
            out += [i.base_sequence for i in parse_batches(bytes(pd["records"]))]
    return out


@pytest.mark.parametrize("code", [NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT])
def test_first_batch_retriable_error_keeps_order(fb, no_leaks, code):
    fb.create_topic("t", 1)
    first = fb.script.on(ApiKey.PRODUCE, partition_error(code), times=1,
                         match=lambda header, body: 0 in _first_sequences(body))
    # Hold the first answer back so that, without the rule under test, later batches go out behind it.
    fb.script.on(ApiKey.PRODUCE, delay(0.2), times=1,
                 match=lambda header, body: 0 in _first_sequences(body))
    values = [b"v-%05d" % i for i in range(300)]
    with Producer(bootstrap_servers=fb.bootstrap, linger_ms=0, batch_size=256, retry_backoff_ms=20,
                  request_timeout_ms=2000, delivery_timeout_ms=8000) as p:
        futs = [p.send("t", v) for v in values]
        mds = [f.get(15) for f in futs]
        assert p.metrics()["epoch_bumps"] == 0
    assert first.fired == 1
    stored = [r for sb in fb.cluster.batches("t", 0) for r in parse_records(sb.data)]
    assert stored == values, "partition 0 holds the records out of order or not exactly once"
    assert [md.offset for md in mds] == list(range(len(values)))
    # While the first batch was unresolved, no other batch of the partition was in flight: the
    # request right after the failed one is its retry (sequence 0 again).
    produce = fb.received(ApiKey.PRODUCE)
    failed_at = next(i for i, r in enumerate(produce) if any(a.kind == "partition_error" for a in r.actions))
    assert _first_sequences(produce[failed_at + 1].body) == [0]


def parse_records(data: bytes) -> list[bytes]:
    from kafka.record.default_records import DefaultRecordBatch

    batch = DefaultRecordBatch(data)
    assert batch.validate_crc()
    return [r.value for r in batch]
