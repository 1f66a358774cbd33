"""bench/spark_avro.py: its report (made-up rounds, no Spark) and a tiny run end to end (Spark,
broker, registry server; the two writers' warm-up values read back and compared byte for byte).

    python -m pytest bench/test_spark_avro.py -q
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import spark_avro as sa  # noqa: E402

ARGS = type("A", (), {"warmup_rows": 1000})()
CPU = {"jvm": 1.0, "workers": 0.5, "broker": 0.25}


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _rounds(*rates):
    return [{"failed": "x"} if r is None else {"rate": float(r), "rows": 1_000_000, "cpu": CPU} for r in rates]


def test_section_gives_the_medians_the_paired_ratio_and_the_target():
    results = {sa.SINK: _rounds(300_000, 200_000, 330_000), sa.SPARK: _rounds(100_000, 100_000, 300_000)}
    same = {"equal": True, "records": (1000, 1000), "differ": 0}
    lines = sa.section(ARGS, [sa.SINK, sa.SPARK], results, same, "{}")
    text = "\n".join(lines)
    sink = next(_cells(ln) for ln in lines if ln.startswith("| fastkafka data source |"))
    assert sink[2] == "300,000" and sink[3] == "300,000, 200,000, 330,000"
    cpu = next(_cells(ln) for ln in lines if ln.startswith("| fastkafka data source (sink_avro) |"))
    assert cpu[1:] == ["1.00", "0.50", "0.25", "1.75"]                 # core-s per 1M rows
    assert "(median of the per-round ratios): 2.00, met." in text                     # per-round 3.0, 2.0, 1.1
    assert "the same bytes" in text


def test_section_says_when_the_target_is_missed_a_round_failed_or_the_values_differ():
    results = {sa.SINK: _rounds(140, 140, 140), sa.SPARK: _rounds(100, 100, 100)}
    same = {"equal": False, "records": (1000, 1000), "differ": 7}
    text = "\n".join(sa.section(ARGS, [sa.SINK, sa.SPARK], results, same, "{}"))
    assert "1.40, not met." in text and "NOT the same: 7 of 1000 differ" in text
    results[sa.SINK] = _rounds(140, None, 500)
    text = "\n".join(sa.section(ARGS, [sa.SINK, sa.SPARK], results, None, "{}"))
    assert "n/a (a round failed)." in text
    row = next(_cells(ln) for ln in text.splitlines() if ln.startswith("| fastkafka data source |"))
    assert row[2] == "FAILED" and row[3] == "140, FAILED, 500 (x)"


def test_a_tiny_run_end_to_end(tmp_path):
    out = tmp_path / "spark_avro.md"
    assert sa.main(["--rows", "4000", "--rounds", "1", "--warmup-rows", "2000", "--kafka-heap-mb", "512",
                    "--out", str(out)]) == 0
    text = out.read_text()
    assert "FAILED" not in text, text
    assert "the two writers' values are the same bytes" in text
    for name in (sa.SINK, sa.SPARK):
        row = next(_cells(ln) for ln in text.splitlines() if ln.startswith(f"| {sa.MEASUREMENTS[name][0]} |"))
        assert float(row[2].replace(",", "")) > 0, row
    assert '"name": "topLevelRecord"' in text
