"""The spark-submit example of docs/spark.md ("Running on a cluster"), run verbatim against the
test cluster: its placeholders (``spark://localhost:7077``, ``localhost:9092``, the topic
``events``) replaced, the session's wheel in its directory, pyspark's ``spark-submit`` on PATH."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter

import pytest

from brokers import unique_name
from fastkafka_tools.spark_cluster import spark_home
from readall import ROOT, end_offsets, read_all

pytestmark = [pytest.mark.broker, pytest.mark.timeout(600)]


def example_block() -> str:
    lines = open(os.path.join(ROOT, "docs", "spark.md"), encoding="utf-8").read().splitlines()
    start = lines.index("<!-- cluster-example -->")
    assert lines[start + 1] == "```bash", lines[start + 1]
    end = lines.index("```", start + 2)
    return "\n".join(lines[start + 2:end]) + "\n"


def test_example_block_is_found():
    script = example_block()
    assert "spark-submit --master spark://localhost:7077" in script and "spark.archives" not in script
    assert "--archives env.tar.gz#env" in script


def test_spark_submit_example(spark_cluster, cluster_wheel, kafka_broker, tmp_path):
    topic = unique_name("events")
    kafka_broker.create_topic(topic, 2)
    script = (example_block().replace("spark://localhost:7077", spark_cluster.master_url)
              .replace("localhost:9092 events", f"{kafka_broker.bootstrap} {topic}"))
    shutil.copy(cluster_wheel, tmp_path)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    base = os.path.join(sys.base_prefix, "bin", f"python{sys.version_info[0]}.{sys.version_info[1]}")
    os.symlink(base, bindir / "python3")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON",
                                                            "PYSPARK_DRIVER_PYTHON")}
    env.update(PATH=f"{bindir}{os.pathsep}{spark_home()}/bin{os.pathsep}{env.get('PATH', '')}",
               SPARK_HOME=spark_home(), SPARK_LOCAL_IP="127.0.0.1")
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=str(tmp_path), env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=500)
    assert r.returncode == 0, r.stdout[-6000:]
    got = Counter(m.value() for m in read_all(kafka_broker.bootstrap, topic, 2))
    assert got == Counter(f"event-{i}".encode() for i in range(10000))
    assert end_offsets(kafka_broker.bootstrap, topic, 2, True) == end_offsets(kafka_broker.bootstrap, topic, 2, False)
