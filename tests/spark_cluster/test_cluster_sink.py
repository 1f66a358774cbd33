"""The Spark sink on a Spark standalone cluster: executors in JVMs of their own, the package shipped
to them as a packed venv (``spark.archives``), an executor SIGKILLed mid-write, speculative attempts,
and 200 prepared transactions committed by one driver. Read back with confluent-kafka's consumer
(read_committed for exactly_once) from Apache Kafka."""
from __future__ import annotations

import json
import os
import time
from collections import Counter

import pytest

from brokers import unique_name
from fastkafka_tools.spark_cluster import spark_home
from readall import ROOT, all_transactions, end_offsets, open_transactions, read_all, wait_for

pytestmark = [pytest.mark.broker, pytest.mark.timeout(600)]

GUARANTEES = ["at_least_once", "exactly_once"]
TOPIC_PARTITIONS = 4


def _write(tmp_path, kafka_broker, guarantee, rows, partitions, **extra) -> dict:
    topic = unique_name("cluster")
    kafka_broker.create_topic(topic, TOPIC_PARTITIONS)
    return {"topic": topic, "rows": rows, "partitions": partitions, "guarantee": guarantee,
            "prefix": unique_name("fk-tx"), "summary": str(tmp_path / f"{topic}.summary"), **extra}


def _expected(rows):
    return Counter(f"row-{i}".ljust(256, ".").encode() for i in range(rows))


def _check_delivery(kafka_broker, w) -> Counter:
    """at_least_once: every row at least once; exactly_once: every row exactly once for a
    read_committed reader, and nothing left open (the last stable offsets are the end offsets)."""
    got = Counter(m.value() for m in read_all(kafka_broker.bootstrap, w["topic"], TOPIC_PARTITIONS))
    want = _expected(w["rows"])
    if w["guarantee"] == "exactly_once":
        assert got == want, (f"{sum(got.values())} rows read, {len(want - got)} missing, "
                             f"{sum((got - want).values())} extra")
        assert (end_offsets(kafka_broker.bootstrap, w["topic"], TOPIC_PARTITIONS, committed=True)
                == end_offsets(kafka_broker.bootstrap, w["topic"], TOPIC_PARTITIONS, committed=False))
    else:
        assert not (want - got), f"{len(want - got)} rows lost"
        assert set(got) == set(want)
    return got


def _summary(w) -> dict:
    with open(w["summary"]) as f:
        lines = [json.loads(x) for x in f if x.strip()]
    assert len(lines) == 1 and not lines[0]["aborted"], lines
    return lines[0]


def test_plain_write_from_the_shipped_package(submit, spark_cluster, kafka_broker, tmp_path):
    writes = [_write(tmp_path, kafka_broker, g, 3000, 6) for g in GUARANTEES]
    result = submit(writes, probe=2).wait()
    # The executors imported fastkafka and spark_sink from the shipped env, unpacked in their work
    # dirs, and could not have seen this checkout.
    assert len(result["probe"]) == 2
    for p in result["probe"]:
        for mod in ("fastkafka", "spark_sink"):
            assert p[mod].startswith(spark_cluster.work_dir + os.sep), p
            assert f"{os.sep}env{os.sep}lib{os.sep}" in p[mod], p
        assert p["cwd"].startswith(spark_cluster.work_dir + os.sep), p
        # Spark's own Python (pyspark.zip, py4j) comes from the installed pyspark, which may sit
        # in a venv inside this checkout: only that is allowed under it
        home = spark_home()
        assert [x for x in p["path"] if (x == ROOT or x.startswith(ROOT + os.sep))
                and not x.startswith(home + os.sep)] == [], p["path"]
    assert not result["driver_fastkafka"].startswith(ROOT + os.sep), result["driver_fastkafka"]
    for w, done in zip(writes, result["writes"]):
        _check_delivery(kafka_broker, w)
        s = _summary(w)
        assert s["tasks"] == 6 and s["rows"] == 3000
        assert {t["status"] for t in done["tasks"]} == {"SUCCESS"}
        assert len({t["executor"] for t in done["tasks"]}) >= 1


@pytest.mark.parametrize("guarantee", GUARANTEES)
def test_executor_killed_mid_write(submit, spark_cluster, kafka_broker, tmp_path, guarantee):
    rows, parts = 24000, 12          # 2000 rows a task: 4 batches of 500, 0.4 s apart
    w = _write(tmp_path, kafka_broker, guarantee, rows, parts, pause=0.4)
    job = submit([w], conf={"spark.task.maxFailures": "4"})

    def writing():
        assert job.proc.poll() is None, f"the job ended before the kill:\n{job.log()}"
        written = sum(end_offsets(kafka_broker.bootstrap, w["topic"], TOPIC_PARTITIONS, committed=False))
        execs = [e for e in spark_cluster.executors() if e.app_id.startswith("app-")]
        return execs if rows // 6 <= written < rows // 2 and len(execs) == 2 else None

    execs = wait_for(writing, 180, "the write under way on two executors", every=0.1)
    assert job.proc.poll() is None, "the job ended before the kill"
    victim = execs[0]
    spark_cluster.kill_executor(victim)
    result = job.wait()
    tasks = result["writes"][0]["tasks"]
    lost = [t for t in tasks if t["status"] == "FAILED" and t["executor"] == victim.executor_id]
    assert lost, f"no task failed on the killed executor {victim.executor_id}: {tasks}"
    assert all("ExecutorLost" in t["error"] or "exited" in t["error"] for t in lost), lost
    retried = {t["index"] for t in tasks if t["status"] == "SUCCESS" and t["attempt"] > 0}
    assert {t["index"] for t in lost} <= retried
    _check_delivery(kafka_broker, w)
    s = _summary(w)
    assert s["tasks"] == parts and s["rows"] == rows
    if guarantee == "exactly_once":
        assert open_transactions(kafka_broker, w["prefix"]) == []


SPECULATION = {"spark.speculation": "true", "spark.speculation.interval": "100ms",
               "spark.speculation.multiplier": "1.5", "spark.speculation.quantile": "0.5",
               "spark.speculation.minTaskRuntime": "1s", "spark.speculation.efficiency.enabled": "false"}


@pytest.mark.parametrize("guarantee", GUARANTEES)
def test_speculative_attempts(submit, kafka_broker, tmp_path, guarantee):
    """Two writes: in the first, partition 0's first attempt stalls after its first batch and a
    speculative copy wins; in the second, the speculative copy is the one that stalls (after
    writing its first batch) and the original wins. Both attempts write at once in each."""
    rows, parts = 9000, 6            # 1500 rows a task: 3 batches of 500
    copy_wins = _write(tmp_path, kafka_broker, guarantee, rows, parts,
                       slow={"partition": 0, "seconds": {"0": 60}})
    original_wins = _write(tmp_path, kafka_broker, guarantee, rows, parts,
                           slow={"partition": 0, "seconds": {"0": 8, "1": 60}})
    job = submit([copy_wins, original_wins], conf=SPECULATION)
    result = job.wait()
    taken_over = [ln for ln in job.log(100_000).splitlines() if "left open by attempts" in ln]
    for w, done, winner in zip((copy_wins, original_wins), result["writes"], (1, 0)):
        p0 = [t for t in done["tasks"] if t["index"] == 0]
        assert any(t["speculative"] for t in p0), f"no speculative attempt of partition 0: {p0}"
        assert [t["attempt"] for t in p0 if t["status"] == "SUCCESS"] == [winner], p0
        assert len(p0) == 2, p0
        # both attempts wrote: the loser's first batch reached the broker (aborted if transactional)
        seen = Counter((m.headers() and dict(m.headers()).get("spark.attempt"))
                       for m in read_all(kafka_broker.bootstrap, w["topic"], TOPIC_PARTITIONS, committed=False)
                       if dict(m.headers() or []).get("spark.partition") == b"0")
        assert seen[b"%d" % (1 - winner)] >= 500, seen
        _check_delivery(kafka_broker, w)
        assert _summary(w)["rows"] == rows
        if guarantee == "exactly_once":
            assert open_transactions(kafka_broker, w["prefix"]) == []
            # the loser reported nothing: the driver found its open transaction and took its id
            # over (in the original-wins write its number is above the winner's)
            assert any(ln.endswith(f"{w['prefix']}-0-{1 - winner}") for ln in taken_over), taken_over


def test_200_partitions_exactly_once(submit, kafka_broker, tmp_path, record_property):
    rows, parts = 20000, 200
    w = _write(tmp_path, kafka_broker, "exactly_once", rows, parts)
    t0 = time.monotonic()
    result = submit([w]).wait()
    total = time.monotonic() - t0
    seconds = result["writes"][0]["seconds"]
    record_property("write_seconds", seconds)
    print(f"200-partition exactly_once write: {seconds:.1f} s (spark-submit {total:.1f} s)")
    s = _summary(w)
    assert s["tasks"] == parts and s["rows"] == rows
    txns = {r["transaction"][0] for r in s["reports"]}
    assert txns == {f"{w['prefix']}-{p}-0" for p in range(parts)}
    _check_delivery(kafka_broker, w)
    listed = all_transactions(kafka_broker, w["prefix"])
    assert len(listed) == parts, listed[:5]
    assert open_transactions(kafka_broker, w["prefix"]) == []
