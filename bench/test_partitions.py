"""Smoke test of bench/partitions.py: a tiny run end to end in each topic mode (warm, the default:
each client's topics written once before the rounds, then by every round; fresh: new topics per
measurement) with topics, child processes, counters, delivery checks and the report; ``--combine``;
``--fastkafka-path``'s import check. One Apache Kafka node. No speed is asserted.

    python -m pytest bench/test_partitions.py -q
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
import partitions  # noqa: E402
import partitions_measure  # noqa: E402

RECORDS = 2000
SHAPES = ["100", "4x3"]   # one keyed topic of 100 partitions; 4 unkeyed topics of 3


@pytest.fixture(scope="module")
def kafka():
    """One Apache Kafka node for the module, as tests/conftest.py's ``kafka_broker`` (bench/ has no
    conftest of its own): the rig's default small heap, C1-only JIT."""
    from fastkafka_tools.apachekafka import KafkaCluster

    kc = KafkaCluster(nodes=1).start()
    yield kc
    kc.stop()


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _num(cell: str) -> float:
    return float(cell.replace(",", ""))


def table_after(text: str, header_start: str) -> list[list[str]]:
    """The rows of the first markdown table whose header starts with ``header_start``."""
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith(header_start))
    rows = []
    for ln in lines[i + 2:]:
        if not ln.startswith("| "):
            break
        rows.append(_cells(ln))
    return rows


def check_round(spec: str, name: str, r: dict) -> None:
    """One timed round's counts add up (either mode)."""
    assert "failed" not in r, (spec, name, r.get("failed"))
    # every record delivered and acknowledged, nothing left, no error
    assert r["records"] == RECORDS and r["delivered"] == RECORDS, (spec, name, r)
    assert r["undelivered"] == 0 and r["errors"] == 0, (spec, name, r)
    # the counters add up: batches carry every record once (no retries in a clean run)
    assert r["batch_records"] == RECORDS, (spec, name, r["batch_records"])
    assert r["batches"] >= 1 and r["requests"] >= 1, (spec, name, r)
    assert r["records_per_batch"] * r["batches"] == pytest.approx(RECORDS), (spec, name)
    assert r["batches_per_request"] * r["requests"] == pytest.approx(r["batches"]), (spec, name)
    assert r["requests_per_s"] * r["seconds"] == pytest.approx(r["requests"]), (spec, name)
    assert r["rate"] * r["seconds"] == pytest.approx(RECORDS), (spec, name)
    shape = partitions.parse_shape(spec)
    # one warm-up record per topic before the clock (the prefill's cover records are not a round's)
    assert r["warmup_records"] == shape.topics, (spec, name)
    # at least one batch per partition written to; at most one per record
    assert r["batches"] <= RECORDS
    if name.startswith("fk_"):
        assert r["metrics"]["records_sent"] == RECORDS
        assert r["metrics"]["batches_sent"] == r["batches"]
        assert r["metrics"]["produce_requests"] == r["requests"]
        assert r["metrics"]["retries"] == 0
    if shape.keyed:
        # the broker took the records and the warm-up (fresh: holds; warm: offset differences), in as
        # many partitions as the topic has
        assert len(r["partition_counts"]) == shape.partitions
        assert sum(r["partition_counts"]) == RECORDS + r["warmup_records"]
        assert r["batches"] >= sum(1 for c in r["partition_counts"] if c) - 1


def check_text(text: str, report: dict, names: list[str], rounds: int) -> None:
    summary = table_after(text, "| shape |")
    assert [row[0] for row in summary] == [partitions.parse_shape(s).label for s in SHAPES]
    for spec in SHAPES:
        label = partitions.parse_shape(spec).label
        assert f"## {label}" in text
        section = text.split(f"## {label}", 1)[1]
        per_round = table_after(section, "| round | client |")
        assert len(per_round) == len(names) * rounds
        for row in per_round:
            name = next(n for n in names if " ".join(partitions.MEASUREMENTS[n]) == row[1])
            r = report["shapes"][spec][name][int(row[0]) - 1]
            records, batches, requests = _num(row[2]), _num(row[5]), _num(row[6])
            assert records == RECORDS and batches == r["batches"] and requests == r["requests"], row
            # records/batch x batches = records (to the table's two decimals)
            assert _num(row[7]) * batches == pytest.approx(records, abs=0.005 * batches + 1e-9), row
        medians = table_after(section, "| client | median records/s |")
        assert [row[0] for row in medians] == [" ".join(partitions.MEASUREMENTS[n]) for n in names]
        ck = next(row for row in medians if row[0].startswith("confluent-kafka"))
        assert ck[2] == "1.00"
        for row in medians:
            assert _num(row[1]) > 0 and "FAILED" not in row[-1], row
    assert "same key placement): " + ", ".join(["yes"] * rounds) + "." in text
    assert "Machine:" in text and "- nproc:" in text and "load average" in text
    assert "fastkafka at git " in text and "built in place in this repository" in text


@pytest.mark.timeout(600)
@pytest.mark.parametrize("mode", ["warm", "fresh"])
def test_small_run(kafka, tmp_path, mode):
    rounds = 2 if mode == "warm" else 1   # warm: round 2 writes into topics written twice already
    args = partitions.parse_args(["--bootstrap-servers", kafka.bootstrap, "--records", str(RECORDS),
                                  "--rounds", str(rounds), "--shapes", ",".join(SHAPES),
                                  "--warmup-records", "0", "--out", str(tmp_path / "partitions.md")]
                                 + (["--fresh-topics"] if mode == "fresh" else []))
    report = partitions.run_benchmark(kafka.bootstrap, args, log=lambda s: None, broker_pid=kafka.pid)
    names = list(partitions.MEASUREMENTS)
    assert report["mode"] == mode and report["fastkafka_is_repo"]
    assert list(report["shapes"]) == SHAPES
    if mode == "warm":
        assert list(report["prefill"]) == SHAPES
        for spec, pre in report["prefill"].items():
            shape = partitions.parse_shape(spec)
            for name in names:
                r = pre[name]
                assert "failed" not in r, (spec, name, r.get("failed"))
                # one record into every partition, one per topic, then the records of a round
                assert r["warmup_records"] == shape.topics * (shape.partitions + 1), (spec, name)
                assert r["delivered"] == RECORDS and r["empty_partitions"] == 0, (spec, name)
    else:
        assert report["prefill"] == {}
    for spec, res in report["shapes"].items():
        assert list(res) == names
        for name, rs in res.items():
            assert [r["round"] for r in rs] == list(range(1, rounds + 1)), (spec, name)
            for r in rs:
                check_round(spec, name, r)
        if partitions.parse_shape(spec).keyed:
            # both clients place keys by Java's murmur2: the same count in every partition, every round
            for a, b in zip(res["fk_produce"], res["ck_produce"]):
                assert a["partition_counts"] == b["partition_counts"]

    text = partitions.render(report, args, 1.0, "broker: test")
    check_text(text, report, names, rounds)
    assert f"Mode: **{mode}**" in text
    assert ("Prefill (untimed" in text) == (mode == "warm")
    assert ("--fresh-topics" in text.split("\n", 3)[2]) == (mode == "fresh")

    if mode == "warm":
        combined = partitions.combine([("warm A", text), ("warm B", text)], note="Two of the same.")
        summary = table_after(combined, "| shape |")
        assert [row[0] for row in summary] == [partitions.parse_shape(s).label for s in SHAPES]
        head = _cells(next(ln for ln in combined.splitlines() if ln.startswith("| shape |")))
        assert head[1:3] == ["produce()/ck warm A", "produce()/ck warm B"]
        run_summary = table_after(text, "| shape |")
        for row, run_row in zip(summary, run_summary):
            assert row[1] == row[2] == run_row[4]            # fastkafka produce() / confluent-kafka
            assert row[3] == row[4] == run_row[5]            # fastkafka send() / confluent-kafka
            assert row[5] == f"{run_row[6]} / {run_row[7]}"  # records/batch, fastkafka produce() / ck
        assert "Two of the same." in combined
        assert combined.count("\n## warm A: fastkafka at git ") == 1
        assert combined.count("\n### Summary\n") == 2 and "\n# " not in combined


def test_fastkafka_path_import_check(tmp_path):
    """A child imports fastkafka from --fastkafka-path and refuses one found elsewhere."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import harness; "
            "m = harness.import_fastkafka_from(sys.argv[2]); print('FROM', m.__file__)")
    bench = os.path.dirname(os.path.abspath(__file__))
    ok = subprocess.run([sys.executable, "-c", code, bench, partitions.ROOT], capture_output=True, text=True,
                        env=partitions.child_env(partitions.ROOT))
    assert ok.returncode == 0, ok.stderr
    assert os.path.realpath(ok.stdout.split("FROM ", 1)[1].strip()).startswith(os.path.realpath(partitions.ROOT))
    other = tmp_path / "tree"
    (other / "fastkafka").mkdir(parents=True)   # no package there: fastkafka comes from elsewhere or not at all
    bad = subprocess.run([sys.executable, "-c", code, bench, str(other)], capture_output=True, text=True,
                         env=partitions.child_env(str(other)))
    assert bad.returncode != 0
    assert "outside --fastkafka-path" in bad.stderr or "No module named" in bad.stderr, bad.stderr
    # the report names the tree's commit, never its path
    args = partitions.parse_args(["--fastkafka-path", str(other), "--records", "10"])
    assert args.fastkafka_path == str(other)
    report = {"shapes": {}, "prefill": {}, "loads": [0.5], "mode": "warm", "fastkafka_commit": "abc1234",
              "fastkafka_is_repo": False}
    text = partitions.render(report, args, 1.0, "broker: test")
    assert str(tmp_path) not in text and "--fastkafka-path DIR" in text and "git abc1234" in text


def test_shapes_and_round_order():
    assert partitions.parse_shape("300") == partitions.Shape(1, 300, True)
    assert partitions.parse_shape("100x6") == partitions.Shape(100, 6, False)
    assert partitions.parse_shape("100x6").topic_names("t") == [f"t-{i}" for i in range(100)]
    assert partitions.parse_shape("6").topic_names("t") == ["t"]
    with pytest.raises(SystemExit):
        partitions.parse_shape("lots")
    names = ["a", "b", "c"]
    assert harness.round_order(names, 1) == names
    assert harness.round_order(names, 2) == ["c", "b", "a"]
    tops, keys, values = partitions_measure.workload(partitions.parse_shape("3x2"), ["t0", "t1", "t2"], 7, 10, 5)
    assert tops == ["t0", "t1", "t2", "t0", "t1", "t2", "t0"] and keys == [None] * 7
    assert all(len(v) == 10 for v in values)
    tops, keys, values = partitions_measure.workload(partitions.parse_shape("4"), ["t"], 7, 10, 5)
    assert tops == ["t"] * 7 and len(set(keys)) == 5 and keys[0] == keys[5]


def test_per_round_ratios_and_medians():
    fk = [{"rate": 100.0}, {"rate": 300.0}, {"failed": "x"}]
    ck = [{"rate": 50.0}, {"rate": 100.0}, {"rate": 10.0}]
    assert harness.paired_ratios(fk, ck) == [2.0, 3.0, None]
    s = partitions.summarize({"fk_produce": fk[:2], "ck_produce": ck[:2]})
    assert s["fk_produce"]["ratio"] == 2.5 and s["fk_produce"]["rate"] == 200.0
    assert partitions.summarize({"fk_produce": fk, "ck_produce": ck})["fk_produce"]["rate"] is None
