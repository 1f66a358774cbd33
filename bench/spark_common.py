"""What the Spark benchmark scripts (``spark_e2e.py``, ``spark_avro.py``) share: the jars of Spark's
own connectors, the one quiet ``local[2]`` SparkSession of a run, the no-op Arrow writer (Spark's
floor for any Python data source), the CPU of Spark's JVM, its Python workers and the broker, and a
failed job's one-line reason."""
from __future__ import annotations

import os
import sys

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

from harness import HERE, ROOT


# ------------------------------------------------------------------------------- no-op writer
class RowCount(WriterCommitMessage):
    def __init__(self, rows: int):
        self.rows = rows


class NoopArrowWriter(DataSourceArrowWriter):
    """Iterates the Arrow batches, counts rows; the driver appends the total to ``count_path``
    (commit() runs in a Python worker of the driver, so a file carries the count back)."""

    def __init__(self, count_path: str):
        self.count_path = count_path

    def write(self, iterator):
        rows = 0
        for batch in iterator:
            rows += batch.num_rows
        return RowCount(rows)

    def commit(self, messages):
        with open(self.count_path, "a") as f:
            f.write(f"{sum(m.rows for m in messages)}\n")


class NoopArrowSource(DataSource):
    """``format("fastkafka_bench_noop")`` with the option ``count.path``: the no-op Arrow writer."""

    @classmethod
    def name(cls) -> str:
        return "fastkafka_bench_noop"

    def writer(self, schema, overwrite):
        return NoopArrowWriter(self.options["count.path"])


def spark_jars(*parts: str) -> list[str]:
    """The jars of ``parts`` of ``fastkafka_tools.apachekafka.ensure_jars`` ("spark-kafka": Spark's
    Kafka connector and its kafka-clients; "spark-avro": ``to_avro``/``from_avro``) for the
    installed pyspark, fetched once with Maven; each jar once."""
    from fastkafka_tools.apachekafka import ensure_jars

    jars: dict[str, str] = {}
    for part in parts:
        folder = ensure_jars(part)
        for j in sorted(os.listdir(folder)):
            if j.endswith(".jar"):
                jars.setdefault(j, os.path.join(folder, j))
    return list(jars.values())


def spark_session(work_dir: str, jars: list[str], app_name: str = "fastkafka-spark-e2e"):
    """The demo's quiet ``local[2]`` session (same settings as
    ``fastkafka_tools.spark_demo.spark_session``) with ``jars`` in ``spark.jars``, which only a
    session's first start takes; its Python workers can import fastkafka, spark_sink and the bench
    modules."""
    from pyspark.sql import SparkSession

    from fastkafka_tools.spark_demo import LOG4J2

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, HERE, os.environ.get("PYTHONPATH")) if p)
    log_config = os.path.join(work_dir, "log4j2.properties")
    with open(log_config, "w") as f:
        f.write(LOG4J2)
    builder = (SparkSession.builder.master("local[2]").appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log_config}"))
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def cpu_by_part(jvm_pid: int, broker_pid: int) -> dict[str, float]:
    """CPU seconds (user + system, all threads) so far of Spark's JVM, of its descendants (the
    Python workers) and of the broker, from /proc. A worker that exited in between is not counted;
    Spark reuses its workers, so none does in these runs."""
    tick = os.sysconf("SC_CLK_TCK")
    table: dict[int, tuple[int, float]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        table[int(d)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    workers, todo = 0.0, list(children.get(jvm_pid, []))
    while todo:
        pid = todo.pop()
        workers += table[pid][1]
        todo += children.get(pid, [])
    return {"jvm": table.get(jvm_pid, (0, 0.0))[1], "workers": workers,
            "broker": table.get(broker_pid, (0, 0.0))[1]}


def broker_pid(broker) -> int:
    """The broker's process (a KafkaCluster has one node; its pid is the node's)."""
    pid = getattr(broker, "pid", None)
    return pid if pid is not None else broker.nodes[1].pid


def first_line(e: BaseException) -> str:
    """A failed Spark job's reason in one line: the last line of its message naming an error."""
    text = str(e).strip()
    lines = [ln for ln in text.splitlines() if "Error" in ln or "Exception" in ln] or text.splitlines() or [""]
    return lines[-1][:300]
