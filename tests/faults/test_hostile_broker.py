"""No input from a broker kills the I/O thread, every record gets an outcome, close is bounded.

Each scenario of hostile_cases.py runs in its own Python process: a crash (segfault, abort) or a hang
there is this test's failure, with the child's output in the message.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.faultbroker

HERE = os.path.dirname(os.path.abspath(__file__))


def run_case(name: str, timeout: float = 90.0) -> dict:
    try:
        proc = subprocess.run([sys.executable, os.path.join(HERE, "hostile_cases.py"), name],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"scenario {name} hung for {timeout} s; output:\n{(e.stdout or '')[-3000:]}"
                    f"\n{(e.stderr or '')[-3000:]}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (
        f"scenario {name} exited {proc.returncode}; stdout:\n{proc.stdout[-3000:]}\n"
        f"stderr:\n{proc.stderr[-5000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def test_node_without_metadata_api_is_unusable_others_work():
    r = run_case("api_versions_without_metadata")
    assert r["outcomes"] == {"ok": 200} and r["alive"]
    assert r["close_s"] < 5
    assert r["alone_alive"]
    assert r["alone"].startswith("KafkaTimeoutError")
    assert "cannot be used: it supports no version of METADATA" in r["alone"]


def test_broker_host_that_cannot_be_encoded():
    r = run_case("unencodable_broker_host")
    assert r["alive"] and r["direct_alive"]
    assert r["p0"] == {"ok": 50} and r["stored_p0"] == 50
    # the partition led by the unusable broker: every record fails with the producer's timeout
    assert r["p1"] == {"DeliveryTimeoutError": 50}
    assert r["late"] == {"ProducerClosedError": 1}
    assert r["close_s"] < 2 + 1
    assert "name resolution failed" in r["direct"] and "cannot be encoded" in r["direct"]


def test_sparse_partition_index_sizes_nothing():
    r = run_case("sparse_partition_index")
    assert r["alive"]
    assert r["rss_growth_mb"] < 50
    assert r["took_s"] < 5
    assert "INVALID_BROKER_RESPONSE" in r["error"] and "2147483647" in r["error"]
    assert r["close_s"] < 2


def test_many_partitions_small_per_partition_and_bounded_close():
    r = run_case("many_partitions", timeout=150)
    assert r["count"] == 200_000 and r["outcomes"] == {"ok": 1}
    # The response carries ~26 bytes per partition; the client keeps well under 1 KB per partition
    # (it was ~1 KB before the compact rows), transient decoding included.
    assert r["bytes_per_partition"] < 700, r["bytes_per_partition"]
    assert r["close_s"] < 2


def test_raising_step_at_each_stage_is_contained():
    r = run_case("raising_handlers")
    assert r["left_armed"] == {"api_versions": 0, "metadata": 0, "produce": 0, "read": 0}
    assert r["alive"]
    assert r["outcomes"] == {"ok": 200} and r["stored"] == 200
    assert r["contained"] >= 2          # the read and the ApiVersions step closed their connection
    assert r["close_s"] < 5


def test_unusable_init_producer_id_answer_backs_off():
    r = run_case("init_producer_id_minus_one")
    # 4 s of delivery timeout with a 100 ms base backoff doubling to 1 s: about 7 requests, not
    # thousands.
    assert 2 <= r["requests"] <= 15, r["requests"]
    assert r["failures"] == r["requests"]
    assert r["outcomes"] == {"DeliveryTimeoutError": 1}
    assert r["alive"] and r["close_s"] < 5


def test_io_thread_death_gives_every_record_an_outcome():
    r = run_case("sender_thread_dies")
    assert r["outcomes"] == {"ProducerClosedError": 100}
    assert r["later"].startswith("ProducerClosedError") and "I/O thread failed" in r["later"]
    assert r["close_s"] < 1


def test_close_is_bounded_when_a_callback_never_returns():
    r = run_case("callback_never_returns")
    assert r["first_done"]
    assert r["outcomes"] == {"ProducerClosedError": 50}
    assert 1 <= r["close_s"] < 1 + r["grace"] + 1


def test_forked_child_fails_at_once_and_can_make_its_own():
    r = run_case("forked_child")
    child = r["child"]
    assert child["send"].startswith("ProducerForkedError") and "forked child" in child["send"]
    assert child["flush"].startswith("ProducerForkedError")
    assert child["send_s"] < 1
    assert child["new_offset"] == 1
    assert r["parent_offset"] == 2


def test_broker_data_loss_is_reported_not_silent():
    r = run_case("broker_loses_acknowledged_tail")
    assert r["reported"] == 1 and r["type"] == "BrokerDataLossError"
    assert r["fields"] == [r["node"], "t", 0, 10, r["last_acked_offset"]]
    assert f"node {r['node']}" in r["message"] and "t-0" in r["message"]
    assert r["metric"] == 1 and r["epoch_bumps"] == 1 and r["error_logged"]
    assert r["lost_records"] == 10
    assert r["later"] == {"ok": 10} and r["stored"] == [10]
