"""Unit tests of the ratio tables of bench/txn_e2e.py and bench/spark_e2e.py (harness.ratio_table,
harness.paired_ratios, txn_e2e.section): made-up rounds, no broker. Run:
python -m pytest bench/test_txn_e2e.py -q"""
from __future__ import annotations

import argparse
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
import txn_e2e  # noqa: E402


def _rounds(*rates):
    return [{"failed": "x"} if r is None else {"rate": float(r)} for r in rates]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _num(cell: str) -> float:
    return float(cell.replace(",", ""))


def test_paired_ratios_round_by_round():
    a, b = _rounds(100, 300, None), _rounds(200, 100, 50)
    assert harness.paired_ratios(a, b) == [0.5, 3.0, None]


def test_ratio_table_medians_and_per_round_ratios():
    # Medians 120 and 200: ratio of medians 0.60. Per round 0.50, 1.20, 0.75: median 0.75, which
    # the ratio of medians does not give (the rounds' noise pairs up).
    results = {"txn": _rounds(100, 120, 150), "plain": _rounds(200, 100, 200)}
    lines = harness.ratio_table([("txn", "plain")], results, lambda n: n.upper(), "records/s")
    assert len(lines) == 3 and lines[1].startswith("|---")
    assert _cells(lines[0])[2] == "median records/s"
    measured, against, m_a, m_b, of_medians, per_median, per_rounds = _cells(lines[2])
    assert (measured, against) == ("TXN", "PLAIN")
    assert (_num(m_a), _num(m_b)) == (120, 200)
    assert _num(of_medians) == pytest.approx(0.60)
    assert _num(per_median) == pytest.approx(0.75)
    assert per_rounds == "0.50, 1.20, 0.75"


def test_ratio_table_failed_round_gives_no_ratio():
    results = {"txn": _rounds(100, None), "plain": _rounds(200, 100)}
    cells = _cells(harness.ratio_table([("txn", "plain")], results, str, "rows/s")[2])
    assert cells[2] == "FAILED" and cells[4] == "n/a" and cells[5] == "n/a"
    assert cells[6] == "0.50, FAILED"


def test_txn_section_rows_and_pairs():
    rates = {"fk_batch_list": (1000, 900, 1100), "fk_batch_txn": (800, 900, 700),
             "fk_send_all": (500, 600, 400), "fk_send_txn": (450, 300, 400),
             "ck_all": (400, 400, 400), "ck_txn": (200, 300, 300)}
    results = {n: _rounds(*r) for n, r in rates.items()}
    args = argparse.Namespace(rounds=3, size=100)
    text = "\n".join(txn_e2e.section(results, args, 12.0, "Apache Kafka"))
    lines = text.splitlines()
    start = lines.index("| measurement | median records/s | median MB/s | rounds (records/s) |")
    rows = {_cells(ln)[0].split("`")[1]: _cells(ln) for ln in lines[start + 2:start + 2 + len(rates)]}
    assert list(rows) == txn_e2e.NAMES
    assert _num(rows["fk_batch_list"][1]) == 1000 and _num(rows["fk_batch_list"][2]) == pytest.approx(0.1)
    pair_start = next(i for i, ln in enumerate(lines) if ln.startswith("| measured | against |"))
    pairs = [_cells(ln) for ln in lines[pair_start + 2:] if ln.startswith("| ")]
    assert len(pairs) == len(txn_e2e.PAIRS)
    batch, send, ck, fk_vs_ck = pairs[:4]
    assert batch[0].startswith("`fk_batch_txn`") and batch[1].startswith("`fk_batch_list`")
    assert _num(batch[4]) == pytest.approx(0.80)                # 800 / 1000
    assert _num(batch[5]) == pytest.approx(0.80)                # median of 0.80, 1.00, 0.64
    assert send[0].startswith("`fk_send_txn`") and _num(send[4]) == pytest.approx(0.80)  # 400 / 500
    assert _num(send[5]) == pytest.approx(0.90)                 # median of 0.90, 0.50, 1.00
    assert ck[0].startswith("`ck_txn`") and _num(ck[4]) == pytest.approx(0.75)  # 300 / 400
    assert fk_vs_ck[1].startswith("`ck_txn`") and _num(fk_vs_ck[4]) == pytest.approx(1.33)  # 400 / 300
    assert _num(fk_vs_ck[5]) == pytest.approx(1.33)             # median of 2.25, 1.00, 1.33

