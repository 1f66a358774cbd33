"""Micro benchmarks for fastkafka.protocol's hot path: one Produce request per batch set, and its
response. Run: ``pytest bench/test_micro_protocol.py --benchmark-only``.

* encode: Produce v9 (flexible) and v7, 6 partitions x 1 MiB batches; the batches must come back
  by reference (no copy) - asserted in every round.
* decode: the matching 6-partition Produce response (v9 and v10 with tagged fields present).
"""

from __future__ import annotations


import os
import sys

import pytest

from fastkafka import protocol as P
from fastkafka.protocol import ApiKey

# the responses decoded here are encoded by the broker's half of the protocol, kept with the tests
_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
from faultbroker.protocol import encode_response  # noqa: E402

MIB = 1 << 20
BATCHES = [memoryview(bytearray(b"%c" % (65 + i)) * MIB) for i in range(6)]


def _produce_body(batches):
    return {
        "transactional_id": None, "acks": -1, "timeout_ms": 30000,
        "topic_data": [
            {"name": "bench-topic-a", "partition_data": [{"index": i, "records": batches[i]} for i in range(3)]},
            {"name": "bench-topic-b", "partition_data": [{"index": i, "records": batches[3 + i]} for i in range(3)]},
        ],
    }


def _response_payload(version):
    body = {"responses": [
        {"name": name, "partition_responses": [
            {"index": i, "error_code": 0, "base_offset": 1_000_000 + i, "log_append_time_ms": -1,
             "log_start_offset": 0,
             **({"current_leader": {"leader_id": 1, "leader_epoch": 5}} if version >= 10 and i == 0 else {})}
            for i in range(3)]}
        for name in ("bench-topic-a", "bench-topic-b")], "throttle_time_ms": 0}
    return encode_response(ApiKey.PRODUCE, version, 12345, body)[4:]


def _check_no_copy(frame):
    refs = [p for p in frame if any(p is b for b in BATCHES)]
    assert len(refs) == 6
    assert sum(memoryview(p).nbytes for p in frame) - 4 == int.from_bytes(frame[0][:4], "big")
    assert sum(len(p) for p in frame if not any(p is b for b in BATCHES)) < 400  # only glue copied


@pytest.mark.parametrize("version", [7, 9, 11])
def test_encode_produce_6x1mib(benchmark, version):
    body = _produce_body(BATCHES)
    frame = benchmark(P.encode_request, ApiKey.PRODUCE, version, 7, "bench-client", body)
    _check_no_copy(frame)


@pytest.mark.parametrize("version", [7, 9, 10])
def test_decode_produce_response_6_partitions(benchmark, version):
    payload = _response_payload(version)
    corr, body = benchmark(P.decode_response, ApiKey.PRODUCE, version, payload)
    assert corr == 12345
    parts = [p for t in body["responses"] for p in t["partition_responses"]]
    assert len(parts) == 6 and parts[2]["base_offset"] == 1_000_002
