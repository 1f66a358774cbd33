"""Unit tests of bench/harness.py: the round order, the medians of per-round ratios and run_child
with real child processes (no broker). Run: python -m pytest bench/test_harness.py -q"""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402


def _child(code: str) -> list[str]:
    return [sys.executable, "-c", "import json, sys\n" + code]


# ------------------------------------------------------------------------------------ round order
def test_round_order_reverses_even_rounds():
    names = ["a", "b", "c"]
    back = ["c", "b", "a"]
    assert [harness.round_order(names, r) for r in (1, 2, 3, 4)] == [names, back, names, back]
    assert names == ["a", "b", "c"]                     # not reversed in place
    assert harness.round_order(("x", "y"), 2) == ["y", "x"]


def test_round_order_gives_every_measurement_each_position_equally_over_even_rounds():
    names = ["a", "b", "c", "d"]
    first = [harness.round_order(names, r)[0] for r in range(1, 5)]
    last = [harness.round_order(names, r)[-1] for r in range(1, 5)]
    assert first == ["a", "d", "a", "d"] and last == ["d", "a", "d", "a"]
    # a measurement follows a different one in odd and even rounds
    before_b = [o[o.index("b") - 1] for o in (harness.round_order(names, r) for r in (1, 2))]
    assert before_b == ["a", "c"]


# ------------------------------------------------------------------------------------ report
def _rounds(*rates):
    return [{"failed": "x"} if r is None else {"rate": float(r)} for r in rates]


def test_median_of_per_round_ratios_is_not_the_ratio_of_medians():
    a, b = _rounds(100, 120, 150), _rounds(200, 100, 200)
    per = harness.paired_ratios(a, b)
    assert per == pytest.approx([0.5, 1.2, 0.75])
    assert harness.median_or_none(per) == pytest.approx(0.75)
    assert harness.median_field(a, "rate") / harness.median_field(b, "rate") == pytest.approx(0.6)


def test_a_failed_round_gives_no_ratio_and_no_median():
    a, b = _rounds(100, None, 300), _rounds(50, 100, 100)
    assert harness.paired_ratios(a, b) == [2.0, None, 3.0]
    assert harness.median_or_none(harness.paired_ratios(a, b)) is None
    assert harness.median_field(a, "rate") is None and harness.median_field(b, "rate") == 100.0
    assert harness.median_or_none([]) is None
    # a missing field or a zero to divide by is no ratio either
    assert harness.paired_ratios([{"p99": 1.0}, {}], [{"p99": 0}, {"p99": 2.0}], "p99") == [None, None]
    assert harness.medians(["a", "b"], {"a": a, "b": b}) == {"a": None, "b": 100.0}


def test_cpu_per_record():
    assert harness.cpu_us_per_record(2.0, 1_000_000) == pytest.approx(2.0)
    assert harness.cpu_us_per_record(None, 10) is None and harness.cpu_us_per_record(1.0, 0) is None
    assert harness.per_record(6, 3) == 2


# ------------------------------------------------------------------------------------ run_child
def test_run_child_returns_the_childs_result_and_its_cpu_time():
    code = ("import time\n"
            "t = time.process_time()\n"
            "while time.process_time() - t < 0.2: pass\n"
            "print('noise')\n"
            "print('RESULT ' + json.dumps({'rate': 1234.5, 'records': 10}))\n")
    r = harness.run_child(_child(code), 60)
    assert r["rate"] == 1234.5 and r["records"] == 10
    assert r["child_cpu_s"] >= 0.15                     # the child's own CPU, not the parent's


def test_run_child_passes_cwd_and_env(tmp_path):
    code = "import os\nprint('RESULT ' + json.dumps({'cwd': os.getcwd(), 'x': os.environ.get('HARNESS_X')}))\n"
    r = harness.run_child(_child(code), 60, cwd=str(tmp_path), env=dict(os.environ, HARNESS_X="7"))
    assert os.path.realpath(r["cwd"]) == os.path.realpath(tmp_path) and r["x"] == "7"
    env = harness.tree_env(str(tmp_path), keep_pythonpath=False)
    assert env["PYTHONPATH"] == os.path.abspath(tmp_path)


@pytest.mark.parametrize("code, why", [
    ("raise ValueError('the child broke')", "exit 1 (no result): ValueError: the child broke"),
    ("print('no result here')", "exit 0 (no result): no result here"),
    ("print('RESULT ' + json.dumps({'rate': 1.0})); sys.exit(3)", "exit 3 (a result, then)"),
    ("print('RESULT [1, 2]')", "unreadable result (a list, not an object)"),
    ("print('RESULT {oops')", "unreadable result"),
])
def test_a_failing_child_is_failed_never_a_result(code, why):
    r = harness.run_child(_child(code), 60)
    assert set(r) == {"failed", "output"}, r
    assert r["failed"].startswith(why), r["failed"]
    with pytest.raises(harness.ChildFailed) as e:
        harness.run_child(_child(code), 60, check=True)
    assert e.value.why == r["failed"]


def test_a_child_past_its_timeout_is_failed():
    r = harness.run_child(_child("import time\nprint('started', flush=True)\ntime.sleep(30)"), 0.5)
    assert r["failed"].startswith("timed out after"), r["failed"]
    with pytest.raises(harness.ChildFailed, match="timed out"):
        harness.run_child(_child("import time\ntime.sleep(30)"), 0.5, check=True)


def test_result_line_round_trips_through_run_child():
    line = harness.result_line({"a": [1, 2], "b": None})
    r = harness.run_child(_child(f"print({line!r})"), 60)
    assert r["a"] == [1, 2] and r["b"] is None


def test_failure_line_is_one_table_cell():
    out = "Traceback (most recent call last):\n  File \"x\", line 3\nKafkaException: boom|x\nlast line\n"
    assert harness.failure_line(out) == "KafkaException: boom/x"
    assert harness.failure_line("") == "no data"
