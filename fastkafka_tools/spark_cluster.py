"""A local Spark standalone cluster, run from the installed pyspark: one master and N workers.

What a user's cluster looks like, unlike ``local[...]``: each executor is a JVM of its own
(``CoarseGrainedExecutorBackend``, started by a worker) with its own Python workers, the job's Python
environment is shipped to it, and it can be killed::

    with SparkCluster(workers=2) as sc:             # master + 2 workers, 1 core and 1g each
        sc.master_url                               # spark://127.0.0.1:PORT, for spark-submit
        sc.executors()                              # the running executors: Executor(pid, app_id, ...)
        os.kill(sc.executors(app_id)[0].pid, signal.SIGKILL)

The daemons are started with the installed pyspark's own launcher (``<spark home>/bin/spark-class
org.apache.spark.deploy.master.Master`` and ``...deploy.worker.Worker``), in sessions of their own,
with their logs, ``SPARK_WORKER_DIR`` (the executors' working directories) and ``SPARK_LOG_DIR`` under
one temporary directory, small heaps (``SPARK_DAEMON_MEMORY``) and a C1-only JIT. Worker ``i`` listens
on ``127.0.0.<i+1>`` (all loopback addresses on Linux): Spark never runs a speculative copy of a task on
a host where an attempt of it already runs, so one-host workers would never speculate.

:meth:`SparkCluster.start` returns when the master's JSON status page (``http://127.0.0.1:<ui>/json/``)
lists every worker ALIVE. :meth:`SparkCluster.stop` stops by pid: first every process whose working
directory is under the cluster's directory (executors and their Python workers), then the workers and
the master (SIGTERM, then SIGKILL after a grace period). Clusters still running are stopped at exit.

:func:`pack_python_env` makes what ``spark.archives`` ships to the executors: a tarball of a fresh
venv into which a fastkafka wheel (and pyarrow) is installed; ``spark.pyspark.python`` is then
``./<alias>/bin/python``. This module is a test and benchmark rig; the product needs none of it.
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.request
import weakref
from dataclasses import dataclass

from .localbroker import LocalBrokerError, free_port

__all__ = ["SparkCluster", "SparkClusterError", "Executor", "spark_home", "pack_python_env",
           "find_executors", "parse_executor_cmdline", "worker_host", "alive_workers"]

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
DAEMON_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

_live: "weakref.WeakSet[SparkCluster]" = weakref.WeakSet()
_live_lock = threading.Lock()


class SparkClusterError(LocalBrokerError):
    """pyspark or Java is missing, or a master or worker did not start or stop as asked."""


def spark_home() -> str:
    """The installed pyspark's Spark home (``$SPARK_HOME`` if set, else the package directory)."""
    home = os.environ.get("SPARK_HOME")
    if not home:
        try:
            from pyspark.find_spark_home import _find_spark_home
        except ImportError as e:
            raise SparkClusterError("pyspark is not installed: pip install 'fastkafka-producer[spark]'") from e
        home = _find_spark_home()
    if not os.path.exists(os.path.join(home, "bin", "spark-class")):
        raise SparkClusterError(f"no bin/spark-class under the Spark home {home!r}")
    return home


def worker_host(index: int) -> str:
    """The loopback address worker ``index`` (0-based) listens on: 127.0.0.<index + 1>."""
    if not 0 <= index < 254:
        raise ValueError(f"worker index {index} out of range 0..253")
    return f"127.0.0.{index + 1}"


@dataclass(frozen=True)
class Executor:
    """A running executor JVM: its pid, application, executor id and host."""
    pid: int
    app_id: str
    executor_id: str
    host: str
    cwd: str


def parse_executor_cmdline(args: list[str]) -> dict | None:
    """The ``--app-id``, ``--executor-id`` and ``--hostname`` of an executor's command line (the
    arguments of ``CoarseGrainedExecutorBackend``), or None when it is not an executor's."""
    if EXECUTOR_CLASS not in args:
        return None
    found = {}
    for flag, key in (("--app-id", "app_id"), ("--executor-id", "executor_id"), ("--hostname", "host")):
        if flag in args and args.index(flag) + 1 < len(args):
            found[key] = args[args.index(flag) + 1]
    return found if "app_id" in found and "executor_id" in found else None


def _proc_cmdline(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]


def _proc_cwd(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/cwd")


def _pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def _under(path: str, root: str) -> bool:
    root = os.path.realpath(root)
    return path == root or path.startswith(root + os.sep)


def find_executors(root: str, app_id: str | None = None) -> list[Executor]:
    """The executor JVMs whose working directory is under ``root`` (a cluster's directory), of the
    application ``app_id`` if given, by executor id."""
    out = []
    for pid in _pids():
        try:
            cwd = _proc_cwd(pid)
            if not _under(cwd, root):
                continue
            info = parse_executor_cmdline(_proc_cmdline(pid))
        except OSError:               # gone meanwhile, or not ours to read
            continue
        if info is None or (app_id is not None and info["app_id"] != app_id):
            continue
        out.append(Executor(pid, info["app_id"], info["executor_id"], info.get("host", ""), cwd))
    return sorted(out, key=lambda e: (e.app_id, int(e.executor_id) if e.executor_id.isdigit() else 0))


def _processes_under(root: str) -> list[int]:
    found = []
    for pid in _pids():
        try:
            if pid != os.getpid() and _under(_proc_cwd(pid), root):
                found.append(pid)
        except OSError:
            continue
    return found


def alive_workers(status: dict) -> list[dict]:
    """The workers the master's JSON status (``/json/``) lists as ALIVE."""
    return [w for w in status.get("workers", []) if w.get("state") == "ALIVE"]


def _stop_pid(proc: subprocess.Popen, grace: float) -> None:
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    except ProcessLookupError:
        pass


class SparkCluster:
    """A standalone master and ``workers`` workers of ``cores`` cores and ``memory`` each."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g", daemon_heap: str = "256m",
                 root: str | None = None):
        if workers < 1:
            raise ValueError("a cluster needs at least one worker")
        self.n_workers = workers
        self.cores = cores
        self.memory = memory
        self.daemon_heap = daemon_heap
        self._own_root = root is None
        self.root = os.path.realpath(root or tempfile.mkdtemp(prefix="fk-spark-cluster-"))
        self.work_dir = os.path.join(self.root, "work")
        self.log_dir = os.path.join(self.root, "logs")
        self.port = 0
        self.ui_port = 0
        self.master: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self._lock = threading.Lock()

    # -- addresses ---------------------------------------------------------------------------
    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}"

    def __repr__(self) -> str:
        state = "running" if self.master is not None and self.master.poll() is None else "stopped"
        return f"SparkCluster({self.master_url if self.port else '-'}, workers={self.n_workers}, {state})"

    def __enter__(self) -> "SparkCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- processes ---------------------------------------------------------------------------
    def env(self, host: str = "127.0.0.1") -> dict:
        """The daemons' environment: no PYTHONPATH (executors must import what the job ships)."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYSPARK_PYTHON",
                            "PYSPARK_DRIVER_PYTHON", "SPARK_CONF_DIR")}
        env.update(SPARK_HOME=spark_home(), SPARK_LOCAL_IP=host, SPARK_LOCAL_HOSTNAME=host,
                   SPARK_WORKER_DIR=self.work_dir, SPARK_LOG_DIR=self.log_dir,
                   SPARK_DAEMON_MEMORY=self.daemon_heap, SPARK_DAEMON_JAVA_OPTS=DAEMON_JAVA_OPTS,
                   SPARK_NO_DAEMONIZE="1")
        return env

    def _spawn(self, name: str, cls: str, args: list[str], host: str) -> subprocess.Popen:
        if shutil.which("java") is None:
            raise SparkClusterError("no java on PATH: Spark needs Java 17+ (e.g. apt-get install openjdk-17-jre-headless)")
        log = open(os.path.join(self.log_dir, f"{name}.out"), "ab")
        try:
            return subprocess.Popen([os.path.join(spark_home(), "bin", "spark-class"), cls, *args],
                                    cwd=self.root, env=self.env(host), stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        finally:
            log.close()

    def start(self, timeout: float = 120.0) -> "SparkCluster":
        with self._lock:
            os.makedirs(self.work_dir, exist_ok=True)
            os.makedirs(self.log_dir, exist_ok=True)
            deadline = time.monotonic() + timeout
            self.port, self.ui_port = free_port(), free_port()
            self.master = self._spawn("master", MASTER_CLASS,
                                      ["--host", "127.0.0.1", "--port", str(self.port),
                                       "--webui-port", str(self.ui_port)], "127.0.0.1")
            with _live_lock:
                _live.add(self)
            try:
                self._wait(lambda s: True, deadline, "the master's status page")
                for i in range(self.n_workers):
                    host = worker_host(i)
                    self.workers.append(self._spawn(
                        f"worker-{i}", WORKER_CLASS,
                        ["--host", host, "--cores", str(self.cores), "--memory", self.memory,
                         "--work-dir", self.work_dir, "--webui-port", "0", self.master_url], host))
                self._wait(lambda s: len(alive_workers(s)) >= self.n_workers, deadline,
                           f"{self.n_workers} workers ALIVE")
            except BaseException:
                self._stop_locked(grace=5.0)
                raise
        return self

    def status(self, timeout: float = 5.0) -> dict:
        """The master's JSON status page: workers, active and completed applications."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=timeout) as r:
            return json.loads(r.read().decode())

    def _wait(self, ready, deadline: float, what: str) -> dict:
        last = None
        while time.monotonic() < deadline:
            for name, p in [("master", self.master)] + [(f"worker-{i}", w) for i, w in enumerate(self.workers)]:
                if p is not None and p.poll() is not None:
                    raise SparkClusterError(f"the Spark {name} exited ({p.returncode}) before {what}; "
                                            f"its log ends:\n{self.last_output(name)}")
            try:
                s = self.status(timeout=2.0)
                if ready(s):
                    return s
            except OSError as e:
                last = e
            time.sleep(0.3)
        raise SparkClusterError(f"no {what} within the timeout (last error: {last}); the master's log "
                                f"ends:\n{self.last_output('master')}")

    def last_output(self, name: str = "master", n: int = 30) -> str:
        try:
            with open(os.path.join(self.log_dir, f"{name}.out"), errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return "(no log)"

    # -- executors ---------------------------------------------------------------------------
    def executors(self, app_id: str | None = None) -> list[Executor]:
        """This cluster's running executor JVMs (of ``app_id`` if given)."""
        return find_executors(self.work_dir, app_id)

    def kill_executor(self, executor: Executor, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (default SIGKILL) to an executor's JVM, after checking it is still ours."""
        if executor not in self.executors(executor.app_id):
            raise SparkClusterError(f"{executor} is not running in this cluster")
        os.kill(executor.pid, sig)

    # -- stop --------------------------------------------------------------------------------
    def stop(self, grace: float = 10.0) -> None:
        with self._lock:
            self._stop_locked(grace)

    def _stop_locked(self, grace: float) -> None:
        # Executors and their Python workers first: a stopped worker would leave them orphaned.
        for pid in _processes_under(self.work_dir):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in self.workers:
            _stop_pid(p, grace)
        if self.master is not None:
            _stop_pid(self.master, grace)
        self.workers = []
        self.master = None
        with _live_lock:
            _live.discard(self)
        if self._own_root and not os.environ.get("FASTKAFKA_KEEP_SPARK_CLUSTER"):
            shutil.rmtree(self.root, ignore_errors=True)


def pack_python_env(wheels: list[str], dest: str, requirements: tuple[str, ...] | None = None,
                    python: str | None = None, timeout: float = 600.0) -> str:
    """``dest`` (a ``.tar.gz``): a fresh venv of ``python`` (default: this interpreter's base)
    with ``wheels`` and ``requirements`` (default: the running pyarrow's version) installed from
    PyPI, for ``spark.archives``. The venv's ``bin/python`` stays a link to the base interpreter,
    which must exist at the same path on the executors' machines (as with venv-pack)."""
    if requirements is None:
        import pyarrow
        requirements = (f"pyarrow=={pyarrow.__version__}",)
    base = python or os.path.join(sys.base_prefix, "bin", f"python{sys.version_info[0]}.{sys.version_info[1]}")
    build = tempfile.mkdtemp(prefix="fk-pyenv-")
    try:
        venv = os.path.join(build, "env")
        subprocess.run([base, "-m", "venv", "--without-pip", venv], check=True, timeout=timeout,
                       capture_output=True)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_REQUIRE_VIRTUALENV")}
        r = subprocess.run([sys.executable, "-m", "pip", "--python", os.path.join(venv, "bin", "python"),
                            "install", "--quiet", "--disable-pip-version-check", *wheels, *requirements],
                           env=env, timeout=timeout, capture_output=True, text=True)
        if r.returncode != 0:
            raise SparkClusterError(f"pip install into the packed env failed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
        tmp = dest + ".tmp"
        with tarfile.open(tmp, "w:gz", compresslevel=1) as tar:
            for name in sorted(os.listdir(venv)):
                tar.add(os.path.join(venv, name), arcname=name)
        os.replace(tmp, dest)
        return dest
    finally:
        shutil.rmtree(build, ignore_errors=True)


def _stop_all() -> None:
    with _live_lock:
        clusters = list(_live)
    for c in clusters:
        try:
            c.stop(grace=5.0)
        except Exception:  # pragma: no cover - best effort at exit
            pass


atexit.register(_stop_all)
