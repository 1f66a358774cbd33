"""bench/spark_cluster.py's pure parts: worker counts, the paired plan of writes, the checks of
what was delivered, and the tables (no cluster, no broker).

    python -m pytest bench/test_spark_cluster.py -q
"""
from __future__ import annotations

import os
import sys
from collections import Counter

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import spark_cluster as sc  # noqa: E402

NAMES = list(sc.MEASUREMENTS)


def test_parse_workers():
    assert sc.parse_workers("1,2") == [1, 2]
    assert sc.parse_workers(" 2 ") == [2]
    for bad in ("", "0", "1,1", "two", "9", "1,-2"):
        with pytest.raises(ValueError):
            sc.parse_workers(bad)


def test_plan_warms_up_then_pairs_rounds():
    writes = sc.plan(NAMES, 3, "p")
    assert [w["round"] for w in writes] == [0] * 3 + [1] * 3 + [2] * 3 + [3] * 3
    by_round = {r: [w["name"] for w in writes if w["round"] == r] for r in range(4)}
    assert by_round[0] == NAMES and by_round[1] == NAMES and by_round[3] == NAMES
    assert by_round[2] == list(reversed(NAMES))           # no measurement always runs first
    topics = [w["topic"] for w in writes]
    assert len(set(topics)) == len(topics)               # a fresh topic per write
    assert topics[3] == "p-r1-fastkafka"


def test_results_by_name_drops_the_warm_up_and_keeps_round_order():
    writes = [{"round": 2, "name": "fastkafka", "rows": 1000, "seconds": 0.5},
              {"round": 0, "name": "fastkafka", "rows": 10, "seconds": 1.0},
              {"round": 1, "name": "fastkafka", "rows": 1000, "seconds": 2.0},
              {"round": 1, "name": "spark_kafka", "rows": 1000, "failed": "boom"}]
    got = sc.results_by_name(writes, ["fastkafka", "spark_kafka"])
    assert [r["rate"] for r in got["fastkafka"]] == [500.0, 2000.0]
    assert got["spark_kafka"] == [{"failed": "boom"}]


def test_check_count():
    ok = {"rows": 100, "errors": 0, "aborted": False}
    assert sc.check_count("fastkafka", 100, stored=100, summary=ok) is None
    assert sc.check_count("fastkafka", 100, stored=130, summary=ok) is None      # at least once
    assert "holds 99" in sc.check_count("fastkafka", 100, stored=99, summary=ok)
    assert sc.check_count("fastkafka", 100, stored=100, summary={**ok, "errors": 1})
    assert sc.check_count("fastkafka", 100, stored=100, summary=None)
    assert sc.check_count("spark_kafka", 100, stored=100) is None
    assert sc.check_count("spark_kafka", 100, stored=None)
    assert sc.check_count("fastkafka_eo", 100, committed=100, summary=ok) is None
    assert "101" in sc.check_count("fastkafka_eo", 100, committed=101, summary=ok)  # exactly once
    assert sc.check_count("fastkafka_eo", 100, committed=100, summary={**ok, "aborted": True})


def test_section_has_medians_rounds_and_paired_ratios():
    results = {"fastkafka": [{"rate": 300.0}, {"rate": 100.0}, {"rate": 200.0}],
               "fastkafka_eo": [{"rate": 150.0}, {"rate": 50.0}, {"failed": "x"}],
               "spark_kafka": [{"rate": 100.0}, {"rate": 100.0}, {"rate": 100.0}]}
    lines = sc.section(2, 4, NAMES, results)
    assert lines[0] == "### 2 workers (4 tasks)"
    row = next(x for x in lines if x.startswith(f"| {sc.MEASUREMENTS['fastkafka']} |"))
    assert "| 200 |" in row.replace(",", "")                         # median of 300, 100, 200
    eo = next(x for x in lines if x.startswith(f"| {sc.MEASUREMENTS['fastkafka_eo']} |"))
    assert "FAILED" in eo
    pair = next(x for x in lines if x.startswith("| `fastkafka` | `spark_kafka` |"))
    cells = [c.strip() for c in pair.strip().strip("|").split("|")]
    assert cells[4] == "2.00" and cells[6] == "3.00, 1.00, 2.00"
    assert Counter(x.split("|")[1].strip() for x in lines if x.startswith("| `"))["`fastkafka_eo`"] == 2


def test_spark_conf_ships_env_and_jars():
    conf = sc.spark_conf("/x/env.tar.gz", ["/j/a.jar", "/j/b.jar"])
    assert conf["spark.archives"] == "/x/env.tar.gz#env"
    assert conf["spark.pyspark.python"] == "./env/bin/python"
    assert conf["spark.jars"] == "/j/a.jar,/j/b.jar"
    assert conf["spark.task.maxFailures"] == "1"       # a failed task fails the write, not a retry


def test_main_refuses_bad_arguments():
    with pytest.raises(SystemExit, match="--workers"):
        sc.main(["--workers", "0"])
    with pytest.raises(SystemExit, match="unknown measurement"):
        sc.main(["--only", "nope"])
    with pytest.raises(SystemExit, match="must be > 0"):
        sc.main(["--rows", "0"])
