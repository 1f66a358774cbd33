"""fastkafka_tools.spark_cluster without JVMs: executor command lines, worker hosts, the master's
status, and finding processes by working directory."""
from __future__ import annotations

import subprocess
import sys

import pytest

from fastkafka_tools.spark_cluster import (EXECUTOR_CLASS, alive_workers, find_executors,
                                           parse_executor_cmdline, worker_host)


def test_parse_executor_cmdline():
    args = ["java", "-cp", "x", EXECUTOR_CLASS, "--driver-url", "spark://d", "--executor-id", "3",
            "--hostname", "127.0.0.2", "--cores", "1", "--app-id", "app-1-0001", "--worker-url", "w"]
    assert parse_executor_cmdline(args) == {"app_id": "app-1-0001", "executor_id": "3", "host": "127.0.0.2"}
    assert parse_executor_cmdline(["java", "org.apache.spark.deploy.worker.Worker"]) is None
    assert parse_executor_cmdline(["java", EXECUTOR_CLASS, "--app-id"]) is None


def test_worker_hosts_are_distinct_loopback_addresses():
    assert [worker_host(i) for i in range(3)] == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    with pytest.raises(ValueError):
        worker_host(254)


def test_alive_workers():
    status = {"workers": [{"id": "a", "state": "ALIVE"}, {"id": "b", "state": "DEAD"}]}
    assert [w["id"] for w in alive_workers(status)] == ["a"]
    assert alive_workers({}) == []


def test_find_executors_by_working_directory(tmp_path):
    inside = tmp_path / "work" / "app-1-0001" / "0"
    inside.mkdir(parents=True)
    code = "import time; time.sleep(30)"
    # a process whose command line looks like an executor's, in the cluster's work dir
    p = subprocess.Popen([sys.executable, "-c", code, EXECUTOR_CLASS, "--app-id", "app-1-0001",
                          "--executor-id", "0", "--hostname", "127.0.0.1"], cwd=str(inside))
    other = subprocess.Popen([sys.executable, "-c", code, EXECUTOR_CLASS, "--app-id", "app-1-0001",
                              "--executor-id", "1"], cwd=str(tmp_path.parent))
    try:
        found = find_executors(str(tmp_path / "work"))
        assert [(e.pid, e.executor_id, e.host) for e in found] == [(p.pid, "0", "127.0.0.1")]
        assert find_executors(str(tmp_path / "work"), "app-2-0002") == []
    finally:
        for q in (p, other):
            q.kill()
            q.wait()
