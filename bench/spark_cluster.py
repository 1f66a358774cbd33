"""Spark standalone cluster -> Apache Kafka throughput: the fastkafka data source against Spark's own
Kafka sink, on the same cluster and broker, with 1 and 2 workers.

    python bench/spark_cluster.py [--wheel WHEEL] [--rows 2000000] [--rounds 3] [--workers 1,2]
                                  [--partitions 4] [--tasks-per-worker 2] [--out bench/results/spark_cluster.md]

Measurements:

``fastkafka``
    ``df.write.format("fastkafka").mode("append")`` (at-least-once, the default).
``fastkafka_eo``
    the same with ``delivery.guarantee=exactly_once`` and a fresh ``transactional.id.prefix`` per
    write: a transaction per task, committed by the driver; the rate includes the driver's commits.
``spark_kafka``
    Spark's own Kafka sink, ``df.write.format("kafka")`` (the ``spark-sql-kafka-0-10`` connector of
    pyspark's version and its kafka-clients, from Maven Central via
    ``fastkafka_tools.apachekafka.ensure_jars("spark-kafka")``, in ``spark.jars``, which Spark ships
    to the executors), its producer set like fastkafka's defaults (``acks=all``, idempotent,
    ``linger.ms=5``, 256 KiB batches). Spark's sink has no exactly-once mode: ``fastkafka_eo`` is
    compared with it as with an at-least-once writer, and with ``fastkafka`` for the cost of the
    transactions.

Set-up, per worker count (``--workers``): a standalone cluster of that many one-core workers
(``fastkafka_tools.spark_cluster.SparkCluster``: one executor JVM per worker, 1 core, 768 MiB) and
one ``spark-submit`` (client mode) whose driver runs every measurement: a warm-up pass (each
measurement once with ``--warmup-rows``) and then ``--rounds`` rounds, each measurement once per
round, in reverse order in even rounds (paired rounds: the ratios are taken within a round). The
executors import fastkafka from a packed venv of the wheel (``spark.archives``), as users ship it.
One Apache Kafka node (``KafkaCluster(nodes=1, jit="full")``) for the whole run, a fresh topic of
``--partitions`` partitions per write. The DataFrame: ``spark.range(rows)`` in
``workers * --tasks-per-worker`` partitions, ``key`` = the row number as 16 bytes, ``value`` = key +
84 fixed random bytes (as ``bench/spark_e2e.py``). Rate = rows / wall time of ``save()`` in the
driver.

Checked after timing, outside the clock: ``fastkafka`` by its summary (rows, no error) and the
topic's offsets (at least the rows); ``fastkafka_eo`` by a read_committed consumer (exactly the
rows; ``brokers.committed_records``); ``spark_kafka`` by the job succeeding and the offsets. A
measurement that fails a check shows FAILED.

The driver program is this file too (``spark_cluster.py --driver SPEC.json``, run by spark-submit
with the shipped venv's python): it imports pyspark and spark_sink only.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

MEASUREMENTS = {
    "fastkafka": 'fastkafka data source, df.write.format("fastkafka"), at-least-once',
    "fastkafka_eo": 'fastkafka data source, exactly_once (a transaction per task, committed by the driver)',
    "spark_kafka": "Spark's Kafka sink, df.write.format(\"kafka\"), acks=all, idempotent, linger 5 ms, 256 KiB batches",
}
#: (measured, against): Spark's sink has no exactly-once, so fastkafka_eo is set against it as is
PAIRS = [("fastkafka", "spark_kafka"), ("fastkafka_eo", "spark_kafka"), ("fastkafka_eo", "fastkafka")]
SPARK_KAFKA_OPTIONS = {"kafka.acks": "all", "kafka.enable.idempotence": "true", "kafka.linger.ms": "5",
                       "kafka.batch.size": "262144"}
KEY_BYTES, VALUE_BYTES = 16, 100
EXECUTOR_MEMORY = "768m"


# ------------------------------------------------------------------------------- pure parts
def parse_workers(text: str) -> list[int]:
    """``"1,2"`` -> [1, 2]: the worker counts to measure, each 1..8, no repeats."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or not 1 <= int(part) <= 8:
            raise ValueError(f"--workers takes worker counts 1..8 separated by commas, not {part!r}")
        if int(part) in out:
            raise ValueError(f"--workers names {part} twice")
        out.append(int(part))
    if not out:
        raise ValueError("--workers names no worker count")
    return out


def plan(names: list[str], rounds: int, prefix: str) -> list[dict]:
    """The writes of one driver, in order: a warm-up pass (round 0, each name once), then
    ``rounds`` rounds of every name, in reverse order in even rounds. Each write has its own topic
    ``<prefix>-r<round>-<name>``."""
    from harness import round_order   # here: the driver side of this file imports pyspark and spark_sink only

    out = []
    for rnd in range(rounds + 1):
        order = round_order(names, rnd) if rnd > 0 else list(names)
        out += [{"round": rnd, "name": n, "topic": f"{prefix}-r{rnd}-{n}"} for n in order]
    return out


def results_by_name(writes: list[dict], names: list[str]) -> dict[str, list[dict]]:
    """The timed rounds' results (round >= 1) of each name, in round order, for ``harness.ratio_table``:
    ``{"rate": rows/s}`` or ``{"failed": why}``."""
    out: dict[str, list[dict]] = {n: [] for n in names}
    for w in sorted((w for w in writes if w["round"] >= 1), key=lambda w: w["round"]):
        if "failed" in w:
            out[w["name"]].append({"failed": w["failed"]})
        else:
            out[w["name"]].append({"rate": w["rows"] / w["seconds"], "seconds": w["seconds"]})
    return out


def check_count(name: str, rows: int, stored: int | None = None, committed: int | None = None,
                summary: dict | None = None) -> str | None:
    """Why the write of ``name`` did not deliver its ``rows`` (None when it did): ``stored`` is
    the topic's latest - earliest offsets, ``committed`` what a read_committed consumer read,
    ``summary`` the fastkafka sink's summary line."""
    if name == "fastkafka_eo":
        if committed != rows:
            return f"read_committed read {committed} of {rows} rows"
        if summary is not None and (summary.get("aborted") or summary.get("rows") != rows):
            return f"summary: aborted={summary.get('aborted')}, rows={summary.get('rows')}"
        return None
    if stored is None or stored < rows:
        return f"the topic holds {stored} of {rows} rows"
    if name == "fastkafka" and (summary is None or summary.get("rows") != rows or summary.get("errors")):
        return f"summary: {None if summary is None else (summary.get('rows'), summary.get('errors'))}"
    return None


def section(workers: int, tasks: int, names: list[str], results: dict[str, list[dict]]) -> list[str]:
    """The markdown of one worker count: each measurement's median rows/s and every round, then
    the paired ratios (``harness.ratio_table``)."""
    from harness import fmt_rate, medians, ratio_table

    med = medians(names, results)
    lines = [f"### {workers} worker{'s' if workers > 1 else ''} ({tasks} tasks)", "",
             "| measurement | median rows/s | per round |", "|---|---:|---|"]
    for n in names:
        rounds = ", ".join(fmt_rate(r["rate"]) if "failed" not in r else f"FAILED ({r['failed']})"
                           for r in results[n])
        lines.append(f"| {MEASUREMENTS[n]} | {fmt_rate(med[n]) if med[n] else 'FAILED'} | {rounds} |")
    pairs = [p for p in PAIRS if p[0] in names and p[1] in names]
    if pairs:
        lines += [""] + ratio_table(pairs, results, lambda n: f"`{n}`", "rows/s")
    return lines + [""]


def spark_conf(shipped: str, jars: list[str]) -> dict:
    """spark-submit's ``--conf`` settings of the driver."""
    return {
        "spark.archives": f"{shipped}#env",
        "spark.pyspark.python": "./env/bin/python",
        "spark.jars": ",".join(jars),
        "spark.driver.memory": "1g",
        "spark.executor.memory": EXECUTOR_MEMORY,
        "spark.executor.cores": "1",
        "spark.task.maxFailures": "1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    }


# ------------------------------------------------------------------------------- driver side
def driver(spec_path: str) -> None:
    """The spark-submit program: every write of ``spec["plan"]``, timed; results to ``spec["result"]``."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import spark_sink

    with open(spec_path) as f:
        spec = json.load(f)
    spark = SparkSession.builder.appName("fastkafka-bench-spark-cluster").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark_sink.register(spark)
    pad = bytes.fromhex(spec["pad"])

    def frame(rows):
        key = F.unhex(F.lpad(F.hex(F.col("id")), 2 * KEY_BYTES, "0")).alias("key")
        return (spark.range(0, rows, 1, spec["tasks"]).select(key)
                .select("key", F.concat(F.col("key"), F.lit(pad)).alias("value")))

    out = []
    for w in spec["plan"]:
        rows = spec["warmup_rows"] if w["round"] == 0 else spec["rows"]
        df = frame(rows)
        if w["name"] == "spark_kafka":
            writer = df.write.format("kafka").options(**SPARK_KAFKA_OPTIONS)
        else:
            writer = (df.write.format("fastkafka").mode("append")
                      .option("summary.path", os.path.join(spec["work_dir"], w["topic"] + ".summary")))
            if w["name"] == "fastkafka_eo":
                writer = (writer.option("delivery.guarantee", "exactly_once")
                          .option("transactional.id.prefix", f"bench-{w['topic']}"))
        writer = writer.option("kafka.bootstrap.servers", spec["bootstrap"]).option("topic", w["topic"])
        t0 = time.perf_counter()
        try:
            writer.save()
            out.append({**w, "rows": rows, "seconds": time.perf_counter() - t0})
        except Exception as e:  # noqa: BLE001 - a failed write is a result of the run
            first = (str(e).strip().splitlines() or [""])[0][:200]
            out.append({**w, "rows": rows, "failed": f"{type(e).__name__}: {first}"})
        print(f"bench: {out[-1]}", file=sys.stderr, flush=True)
    with open(spec["result"], "w") as f:
        json.dump(out, f)
    spark.stop()


# ------------------------------------------------------------------------------- parent side
def build_wheel(dest: str) -> str:
    subprocess.run([sys.executable, "-m", "pip", "wheel", ROOT, "--no-deps", "--no-build-isolation",
                    "-q", "-w", dest], check=True)
    wheels = [f for f in os.listdir(dest) if f.endswith(".whl")]
    if len(wheels) != 1:
        raise SystemExit(f"expected one wheel in {dest}, found {wheels}")
    return os.path.join(dest, wheels[0])


def run_workers(workers: int, args, names, broker, shipped: str, jars: list[str], work_dir: str) -> list[dict]:
    """One cluster of ``workers`` workers, one driver running the plan; the writes checked."""
    from brokers import committed_records, stored_records

    import spark_sink
    from fastkafka_tools.spark_cluster import SparkCluster, spark_home

    tasks = workers * args.tasks_per_worker
    writes = plan(names, args.rounds, f"bench-sc{workers}-{os.getpid()}")
    for w in writes:
        broker.create_topic(w["topic"], args.partitions)
    driver_dir = os.path.join(work_dir, f"driver-{workers}")
    os.makedirs(driver_dir)
    with tarfile.open(shipped) as tar:
        tar.extractall(os.path.join(driver_dir, "env"), filter="tar")
    spec = {"bootstrap": broker.bootstrap, "rows": args.rows, "warmup_rows": args.warmup_rows,
            "tasks": tasks, "plan": writes, "pad": os.urandom(VALUE_BYTES - KEY_BYTES).hex(),
            "work_dir": driver_dir, "result": os.path.join(driver_dir, "result.json")}
    spec_path = os.path.join(driver_dir, "spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "VIRTUAL_ENV")}
    env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=spark_home())
    with SparkCluster(workers=workers, cores=1, memory="1g") as sc:
        cmd = [os.path.join(spark_home(), "bin", "spark-submit"), "--master", sc.master_url]
        for k, v in spark_conf(shipped, jars).items():
            cmd += ["--conf", f"{k}={v}"]
        log = os.path.join(driver_dir, "driver.log")
        with open(log, "wb") as out:
            rc = subprocess.run(cmd + [os.path.abspath(__file__), "--driver", spec_path], cwd=driver_dir,
                                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                timeout=args.timeout).returncode
    if rc != 0:
        with open(log, errors="replace") as f:
            raise SystemExit(f"spark-submit exited {rc}; its log ends:\n{''.join(f.readlines()[-40:])}")
    with open(spec["result"]) as f:
        done = json.load(f)
    for w in done:
        if "failed" in w or w["round"] == 0:
            continue
        summary_path = os.path.join(driver_dir, w["topic"] + ".summary")
        summary = spark_sink.read_summaries(summary_path)[-1] if os.path.exists(summary_path) else None
        if w["name"] == "fastkafka_eo":
            why = check_count(w["name"], w["rows"], summary=summary,
                              committed=committed_records(broker.bootstrap, w["topic"], args.partitions))
        else:
            why = check_count(w["name"], w["rows"], summary=summary,
                              stored=stored_records(broker.bootstrap, w["topic"], args.partitions))
        if why:
            w["failed"] = why
    return done


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--driver"]:
        driver(argv[1])
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheel", help="the fastkafka wheel to ship (default: built from this checkout)")
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--warmup-rows", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", default="1,2", help="worker counts, e.g. 1,2")
    ap.add_argument("--partitions", type=int, default=4, help="partitions of each topic")
    ap.add_argument("--tasks-per-worker", type=int, default=2, help="DataFrame partitions per worker")
    ap.add_argument("--kafka-heap-mb", type=int, default=1024)
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds for one driver")
    ap.add_argument("--only", default="", help="comma-separated measurement names: " + ",".join(MEASUREMENTS))
    ap.add_argument("--out", default=os.path.join(HERE, "results", "spark_cluster.md"))
    args = ap.parse_args(argv)
    try:
        workers = parse_workers(args.workers)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(MEASUREMENTS)
    for n in names:
        if n not in MEASUREMENTS:
            raise SystemExit(f"unknown measurement {n!r}; choose from {', '.join(MEASUREMENTS)}")
    if min(args.rows, args.rounds, args.partitions, args.tasks_per_worker, args.warmup_rows) <= 0:
        raise SystemExit("--rows, --rounds, --partitions, --tasks-per-worker and --warmup-rows must be > 0")
    for p in (ROOT, HERE):
        if p not in sys.path:
            sys.path.insert(0, p)
    from brokers import start_broker
    from harness import emit, kafka_line, load_line

    from fastkafka_tools.apachekafka import ensure_jars
    from fastkafka_tools.spark_cluster import pack_python_env

    load0, wall0 = os.getloadavg()[0], time.monotonic()
    folder = ensure_jars("spark-kafka")
    jars = [os.path.join(folder, j) for j in sorted(os.listdir(folder)) if j.endswith(".jar")]
    sections = []
    with tempfile.TemporaryDirectory(prefix="bench-spark-cluster-") as work_dir:
        wheel = args.wheel or build_wheel(os.path.join(work_dir, "wheel"))
        shipped = pack_python_env([wheel], os.path.join(work_dir, "env.tar.gz"))
        broker = start_broker("kafka", args)
        try:
            for n in workers:
                done = run_workers(n, args, names, broker, shipped, jars, work_dir)
                sections += section(n, n * args.tasks_per_worker, names, results_by_name(done, names))
        finally:
            broker.stop()
    import pyspark
    text = "\n".join([
        "## Spark standalone cluster to Kafka", "",
        f"{args.rows:,} rows ({KEY_BYTES}-byte key, {VALUE_BYTES}-byte value) per write, topics of "
        f"{args.partitions} partitions, {args.rounds} paired rounds after a warm-up pass "
        f"({args.warmup_rows:,} rows); one-core workers (one executor each, {EXECUTOR_MEMORY}), "
        f"client-mode driver; `python bench/spark_cluster.py`. Spark's Kafka sink has no exactly-once "
        "mode: `fastkafka_eo` is set against its at-least-once writes.", "",
        *sections,
        f"- pyspark {pyspark.__version__}; Spark's Kafka sink: "
        f"{', '.join(os.path.basename(j)[:-4] for j in jars if 'kafka' in os.path.basename(j))}",
        kafka_line(broker.version, args.kafka_heap_mb, broker.data_place), load_line(load0),
        f"- {os.cpu_count()} CPUs; wall time {time.monotonic() - wall0:.0f} s", ""])
    emit(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
