"""Smoke test of bench/e2e.py: a tiny run end to end (broker, child processes, delivery checks,
table). Run: python -m pytest bench/test_e2e.py -q"""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import e2e  # noqa: E402
import harness  # noqa: E402

ONLY = ["raw", "fk_send_all", "fk_batch_list", "ck_all"]
RECORDS = 20000
SIZE = 100          # e2e.py's default --size


def _num(cell: str) -> float:
    return float(cell.replace(",", "").rstrip("*"))


def parse_table(text: str) -> dict[tuple[str, str], list[str]]:
    """{(client, variant): [records, median rec/s, median MB/s, vs raw, vs ref, rounds]}"""
    rows = {}
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| client | variant |"))
    for ln in lines[start + 2:]:
        if not ln.startswith("| "):
            break
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        assert len(cells) == 8, ln
        rows[(cells[0], cells[1])] = cells[2:]
    return rows


def test_e2e_small_run(tmp_path):
    out = tmp_path / "e2e.md"
    assert e2e.main(["--records", str(RECORDS), "--slow-records", "2000", "--rounds", "1",
                     "--only", ",".join(ONLY), "--out", str(out)]) == 0
    text = out.read_text()
    assert "FAILED" not in text
    rows = parse_table(text)
    # one row per measurement asked for, in that order, and nothing else
    assert list(rows) == [e2e.MEASUREMENTS[n][:2] for n in ONLY]
    by_name = {n: rows[e2e.MEASUREMENTS[n][:2]] for n in ONLY}
    raw = _num(by_name["raw"][1])
    ref = _num(by_name[e2e.REFERENCE][1])
    for name, (records, median, mbs, vs_raw, vs_ref, rounds) in by_name.items():
        assert _num(records) == RECORDS, (name, records)
        rates = [_num(r) for r in rounds.split(", ")]
        assert len(rates) == 1 and rates[0] > 0, (name, rounds)   # --rounds 1
        assert _num(median) == rates[0], (name, median, rounds)  # the median of one round
        # MB/s counts value bytes; the ratios are this row's median over the raw and reference ones
        assert _num(mbs) == pytest.approx(_num(median) * SIZE / 1e6, abs=0.051), (name, mbs)
        assert _num(vs_raw) == pytest.approx(_num(median) / raw, abs=0.006), (name, vs_raw)
        assert _num(vs_ref) == pytest.approx(_num(median) / ref, abs=0.006), (name, vs_ref)
    # the paired table: one row per pair whose two measurements ran, each round's ratio of the two
    paired = {}
    first_section = text.split("\n## ")[1]       # the first broker's, as parse_table reads
    for ln in first_section.splitlines():
        if ln.startswith("| fastkafka "):
            cells = [c.strip() for c in ln.strip().strip("|").split("|")]
            if len(cells) == 7:
                paired[(cells[0], cells[1])] = cells
    label = {n: " ".join(e2e.MEASUREMENTS[n][:2]) for n in ONLY}
    assert set(paired) == {(label["fk_send_all"], label["ck_all"]), (label["fk_batch_list"], label["raw"])}
    for (a, b), cells in paired.items():
        name_a = next(n for n in ONLY if label[n] == a)
        name_b = next(n for n in ONLY if label[n] == b)
        expect = _num(by_name[name_a][1]) / _num(by_name[name_b][1])
        assert _num(cells[5]) == pytest.approx(expect, abs=0.006), cells
    assert "Machine:" in text and "- nproc:" in text


def test_failure_line_is_one_cell():
    out = "Traceback (most recent call last):\n  File \"x\", line 3\ncimpl.KafkaException: boom|x\n%4|TERMINATE|rdkafka| left\n"
    assert harness.failure_line(out) == "cimpl.KafkaException: boom/x"
    assert harness.failure_line("exit 1: plain") == "exit 1: plain"
    assert harness.failure_line("") == "no data"
