"""``key_serializer`` / ``value_serializer`` on fastkafka.aio.AsyncProducer: send, produce and
send_batch serialize each record once, also when it waits for the topic's metadata behind other
calls; a failing serializer raises SerializationError from the call, queuing nothing.

Against the in-process fault broker, whose stored batches are decoded by the reference decoder.
"""
from __future__ import annotations

import asyncio
import json

import pytest

import reference_records as ref
from aioloops import LOOPS, run
from faultbroker import FaultBroker
from fastkafka.aio import AsyncProducer
from fastkafka.errors import SerializationError

pytestmark = pytest.mark.parametrize("loop_kind", LOOPS)


class Counting:
    """A serializer that counts its calls."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, obj):
        self.calls += 1
        return self.fn(obj)


@pytest.fixture
def broker():
    b = FaultBroker()
    yield b
    b.close()
    assert b.crashed == [] and b.handler_errors == []


def stored(broker, topic):
    return [(r.key, r.value) for b in broker.cluster.batches(topic, 0)
            for r in ref.decode_batch(b.data).records]


def test_each_record_is_serialized_once_also_when_it_waits_for_metadata(broker, loop_kind):
    broker.create_topic("aio-ser", 1)
    values = Counting(lambda v: json.dumps(v).encode())
    keys = Counting(lambda k: None if k is None else k.encode())
    done = []

    async def main():
        async with AsyncProducer(bootstrap_servers=broker.bootstrap, value_serializer=values,
                                 key_serializer=keys, linger_ms=1) as p:
            # the topic is not known yet: the first calls wait for metadata behind each other
            futs = [p.send("aio-ser", {"i": i}, key=f"k{i}") for i in range(5)]
            p.produce("aio-ser", {"i": 5}, key="k5", on_delivery=lambda e, md: done.append(e))
            n = await p.send_batch("aio-ser", [{"i": 6}, {"i": 7}], keys=["k6", None])
            mds = await asyncio.gather(*futs)
            await p.flush()
            return n, mds

    n, mds = run(loop_kind, main)
    assert n == 2 and len(mds) == 5 and done == [None]
    assert values.calls == 8 and keys.calls == 8
    assert stored(broker, "aio-ser") == (
        [(f"k{i}".encode(), json.dumps({"i": i}).encode()) for i in range(7)]
        + [(None, b'{"i": 7}')])
    assert [md.serialized_value_size for md in mds] == [len(b'{"i": 0}')] * 5


def test_a_failing_serializer_raises_from_the_call_and_queues_nothing(broker, loop_kind):
    broker.create_topic("aio-bad", 1)

    def strict(v):
        if not isinstance(v, dict):
            raise ValueError(f"expected a dict, got {type(v).__name__}")
        return json.dumps(v).encode()

    async def main():
        async with AsyncProducer(bootstrap_servers=broker.bootstrap, value_serializer=strict) as p:
            await p.send("aio-bad", {"ok": 1})
            errors = []
            for call in (p.send, p.produce):
                with pytest.raises(SerializationError) as exc:
                    call("aio-bad", ["not", "a", "dict"])
                errors.append(exc.value)
            with pytest.raises(SerializationError, match=r"record 1 \(of send_batch's values\)"):
                await p.send_batch("aio-bad", [{"a": 1}, 2])
            await p.send("aio-bad", {"ok": 2})
            return errors

    errors = run(loop_kind, main)
    for e in errors:
        assert e.field == "value" and e.topic == "aio-bad"
        assert isinstance(e.__cause__, ValueError) and "expected a dict, got list" in str(e)
    assert stored(broker, "aio-bad") == [(None, b'{"ok": 1}'), (None, b'{"ok": 2}')]
