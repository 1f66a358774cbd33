"""fastkafka_tools.spark_demo's arithmetic and options (the demo itself runs in scripts/demo.sh)."""
from __future__ import annotations

import doctest

import pytest

from fastkafka_tools import spark_demo as demo


def test_rate_doctests():
    result = doctest.testmod(demo, verbose=False)
    assert result.attempted >= 2 and result.failed == 0


def test_write_rate_excludes_job_start_up():
    r = demo.throughput(rows=1_000_000, nbytes=116_000_000, wall_seconds=10.0, task_seconds=4.0,
                        tasks=2, slots=2)
    assert r["end_to_end_rows_s"] == pytest.approx(100_000)
    assert r["write_rows_s"] == pytest.approx(500_000)
    assert demo.throughput(10, 100, 0.0, 0.0, tasks=1, slots=2)["write_rows_s"] is None


def test_broker_choice():
    assert demo.build_parser().parse_args([]).broker == "tansu"
    assert demo.build_parser().parse_args(["--broker", "kafka"]).broker == "kafka"
    with pytest.raises(SystemExit):
        demo.build_parser().parse_args(["--broker", "zookeeper"])
