"""Fixtures of the Spark standalone cluster tests.

* ``spark_cluster``: one master and two one-core workers (``fastkafka_tools.spark_cluster``), for the
  session.
* ``shipped_env``: the tarball ``spark.archives`` ships to the executors: a fresh venv with the
  session's fastkafka wheel (the ``dist`` fixture of tests/conftest.py, shared with the packaging
  tests) and pyarrow. ``$FASTKAFKA_TEST_WHEEL`` names a wheel to use instead (a quicker local run).
* ``submit``: runs ``cluster_job.py`` with ``spark-submit`` against the cluster, the driver in a
  process of its own (one SparkContext per process: the session's ``local`` SparkSession of
  tests/spark can live beside it). The executors run ``./env/bin/python`` of the shipped env, with
  no PYTHONPATH and the repository nowhere in sight.
* ``submit_job``: the same for any driver program of this directory (``stream_job.py``) and its
  spec; the driver runs in a process group of its own, which :meth:`Submitted.kill` SIGKILLs.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from fastkafka_tools.spark_cluster import SparkCluster, pack_python_env, spark_home

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "cluster_job.py")
SUBMIT_TIMEOUT_S = 300

#: Every job's configuration: small heaps, the shipped env, the REST API the job reads its tasks from.
BASE_CONF = {
    "spark.archives": None,                                 # set to the shipped env
    "spark.pyspark.python": "./env/bin/python",
    "spark.driver.memory": "512m",
    "spark.executor.memory": "512m",
    "spark.executor.cores": "1",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.ui.port": "0",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "500",
}


@pytest.fixture(scope="session")
def spark_cluster():
    sc = SparkCluster(workers=2, cores=1, memory="1g").start()
    yield sc
    sc.stop()


@pytest.fixture(scope="session")
def cluster_wheel(request) -> str:
    given = os.environ.get("FASTKAFKA_TEST_WHEEL")
    if given:
        return given
    dist = request.getfixturevalue("dist")
    return str(dist.wheel(f"{sys.version_info[0]}.{sys.version_info[1]}").wheel)


@pytest.fixture(scope="session")
def shipped_env(tmp_path_factory, cluster_wheel) -> str:
    dest = str(tmp_path_factory.mktemp("shipped") / "fk-env.tar.gz")
    return pack_python_env([cluster_wheel], dest)


@pytest.fixture(scope="session")
def driver_dir(tmp_path_factory, shipped_env) -> str:
    """The drivers' working directory, holding the shipped env unpacked as ./env: in client mode
    the driver runs ``spark.pyspark.python`` (./env/bin/python) from its working directory, for the
    program itself and for the data source's driver side (writer(), commit())."""
    import tarfile

    d = tmp_path_factory.mktemp("driver")
    with tarfile.open(shipped_env) as tar:
        tar.extractall(d / "env", filter="tar")
    return str(d)


class Submitted:
    """A running spark-submit of cluster_job.py."""

    def __init__(self, proc, spec, log, spec_path):
        self.proc, self.spec, self.log_path, self.spec_path = proc, spec, log, spec_path

    def log(self, n: int = 60) -> str:
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-n:])

    def kill(self) -> None:
        """SIGKILL the driver: spark-submit's JVM, the driver program and its Python workers (the
        process group it was started in)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(30)

    def wait(self, timeout: float = SUBMIT_TIMEOUT_S) -> dict:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"spark-submit did not finish in {timeout:.0f}s:\n{self.log()}") from None
        assert rc == 0, f"spark-submit exited {rc}:\n{self.log()}"
        with open(self.spec["result"]) as f:
            return json.load(f)


def submit_command(master_url: str, conf: dict, *args: str) -> list[str]:
    cmd = [os.path.join(spark_home(), "bin", "spark-submit"), "--master", master_url]
    for k, v in conf.items():
        cmd += ["--conf", f"{k}={v}"]
    return cmd + list(args)


def driver_env() -> dict:
    """The driver's environment: nothing of this checkout's (the driver, too, imports fastkafka
    from the shipped env)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "VIRTUAL_ENV")}
    env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=spark_home())
    return env


@pytest.fixture
def submit_job(spark_cluster, shipped_env, driver_dir, tmp_path):
    """``submit_job(script, spec, conf={...}, name="job") -> Submitted``: start the driver program
    ``script SPEC.json`` on the cluster (``spec["result"]`` names the file it writes at its end).
    The driver's log is ``<tmp_path>/<name>.log``."""
    def start(script: str, spec: dict, conf: dict | None = None, name: str = "job") -> Submitted:
        spec_path = tmp_path / f"{name}.spec.json"
        spec_path.write_text(json.dumps(spec))
        full = {**BASE_CONF, "spark.archives": f"{shipped_env}#env", **(conf or {})}
        log = str(tmp_path / f"{name}.log")
        with open(log, "wb") as out:
            proc = subprocess.Popen(submit_command(spark_cluster.master_url, full, script, str(spec_path)),
                                    cwd=driver_dir, env=driver_env(), stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        return Submitted(proc, spec, log, str(spec_path))

    return start


@pytest.fixture
def submit(submit_job, request, tmp_path):
    """``submit(writes, conf={...}, probe=0, bootstrap=None) -> Submitted``: start cluster_job.py on
    the cluster (writing to ``kafka_broker``, or to ``bootstrap``)."""
    def start(writes: list[dict], conf: dict | None = None, probe: int = 0,
              bootstrap: str | None = None) -> Submitted:
        if bootstrap is None:
            bootstrap = request.getfixturevalue("kafka_broker").bootstrap
        spec = {"bootstrap": bootstrap, "result": str(tmp_path / "result.json"),
                "probe": probe, "writes": writes}
        return submit_job(JOB, spec, conf, name="driver")

    return start
