"""Apache Kafka itself, run locally: KRaft nodes (combined broker + controller) on 127.0.0.1.

The reference broker of fastkafka's tests, demo (``--broker kafka``) and benchmarks::

    with KafkaCluster() as kc:                 # one node, Apache Kafka 4.4.0
        kc.create_topic("events", 6)
        producer = Producer(bootstrap_servers=kc.bootstrap)

    with KafkaCluster(nodes=3) as kc:          # replication factor 3, min.insync.replicas=2
        kc.kill(kc.leader_of("events", 0))     # SIGKILL a node; kc.start_node(n) brings it back

The jars come from Maven Central through Maven (``mvn``): ``ensure_jars()`` runs
``dependency:copy-dependencies`` on the small poms in ``fastkafka_tools/rig`` once per version into a cache
outside the work tree (``$FASTKAFKA_CACHE``, else ``$XDG_CACHE_HOME/fastkafka``, else
``~/.cache/fastkafka``). The version is ``FASTKAFKA_KAFKA_VERSION`` (default :data:`DEFAULT_VERSION`;
3.9.x works too). Each node's storage is formatted with ``kafka.tools.StorageTool`` under one random
cluster id, and its log goes to ``<node dir>/server.log`` at WARN (``fastkafka_tools/rig/log4j2.xml``).
Nodes are started in their own session and stopped by pid: SIGTERM, then SIGKILL after a grace period;
``kill()`` is an immediate SIGKILL. Every node still running is stopped at interpreter exit.

This module is a test and benchmark rig; the producer itself needs no JVM.
"""
from __future__ import annotations

import atexit
import base64
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref

from .localbroker import LocalBrokerError, api_versions_probe, free_port

__all__ = ["KafkaCluster", "KafkaNode", "KafkaRigError", "ensure_jars", "kafka_version",
           "DEFAULT_VERSION", "VERIFIED_VERSIONS", "java_command"]

DEFAULT_VERSION = "4.4.0"
# Versions the project's integration suite is run against (docs/tools.md).
VERIFIED_VERSIONS = ("4.4.0", "3.9.1")
# kafka-tools (ProducerPerformance, LeaderElectionCommand, ...) is published up to this version; for
# a newer broker the tools (and the Java producer they run) are this release.
TOOLS_VERSION = "4.3.1"

RIG_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rig")
LOG4J2_CONFIG = os.path.join(RIG_DIR, "log4j2.xml")

_live: "weakref.WeakSet[KafkaNode]" = weakref.WeakSet()
_live_lock = threading.Lock()
_fetch_lock = threading.Lock()


class KafkaRigError(LocalBrokerError):
    """Maven or Java is missing, a fetch failed, or a Kafka node did not start or stop as asked."""


def kafka_version() -> str:
    """The Apache Kafka version to run: ``$FASTKAFKA_KAFKA_VERSION`` or :data:`DEFAULT_VERSION`."""
    return os.environ.get("FASTKAFKA_KAFKA_VERSION", "").strip() or DEFAULT_VERSION


def cache_root() -> str:
    explicit = os.environ.get("FASTKAFKA_CACHE")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fastkafka")


def ensure_jars(part: str = "broker", version: str | None = None, quiet: bool = True) -> str:
    """The directory holding the jars of ``part`` ("broker", "tools", "spark-kafka" or
    "spark-avro") for ``version`` (Kafka's; pyspark's for the Spark parts), fetched with Maven the
    first time. Safe to call from several processes at once."""
    if part not in _PARTS:
        raise ValueError(f"part must be one of {sorted(_PARTS)}, not {part!r}")
    version = version or (kafka_version() if not part.startswith("spark-") else _pyspark_version())
    dirname, props = _PARTS[part](version)
    target = os.path.join(cache_root(), dirname)
    marker = os.path.join(target, ".complete")
    if os.path.exists(marker):
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaRigError("Apache Kafka's jars are fetched with Maven, and `mvn` is not on PATH "
                            "(Debian/Ubuntu: apt-get install maven; scripts/setup.sh does this)")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with _fetch_lock, _file_lock(os.path.join(os.path.dirname(target), f".{part}.lock")):
        if os.path.exists(marker):
            return target
        tmp = tempfile.mkdtemp(prefix=f".{part}-", dir=os.path.dirname(target))
        pom = os.path.join(RIG_DIR, f"{part}-pom.xml")
        cmd = [mvn, "-B", "-f", pom, "dependency:copy-dependencies", f"-DoutputDirectory={tmp}",
               "-DincludeScope=runtime", *props]
        if quiet:
            cmd.insert(1, "-q")
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, cwd=RIG_DIR)
        if proc.returncode != 0 or not os.listdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
            tail = proc.stdout.decode("utf-8", "replace")[-3000:]
            raise KafkaRigError(f"fetching Apache Kafka {version} ({part}) with Maven failed "
                                f"(exit {proc.returncode}):\n{tail}")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
        with open(marker, "w") as f:
            f.write(version + "\n")
    # The Maven project directory may have gained a target/ folder; it is not needed.
    shutil.rmtree(os.path.join(RIG_DIR, "target"), ignore_errors=True)
    return target


def _pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def _tools_version(version: str) -> str:
    """kafka-tools of the broker's version where Maven Central has it, else the newest published."""
    major = tuple(int(x) for x in version.split(".")[:2] if x.isdigit())
    return version if major < (4, 4) else TOOLS_VERSION


# part -> (cache folder, Maven properties for fastkafka_tools/rig/<part>-pom.xml), given the version asked for.
_PARTS = {
    "broker": lambda v: (os.path.join(f"kafka-{v}", "broker"), [f"-Dkafka.version={v}"]),
    # The tools run on the Java client of their own release: kafka-tools 4.3.1 on a 4.4 client fails
    # in classes the client moved (org.apache.kafka.common.utils.Exit).
    "tools": lambda v: (f"kafka-tools-{_tools_version(v)}",
                        [f"-Dclients.version={_tools_version(v)}", f"-Dtools.version={_tools_version(v)}"]),
    # Spark's own Kafka sink (a benchmark peer), for the installed pyspark's version.
    "spark-kafka": lambda v: (f"spark-kafka-{v}", [f"-Dspark.version={v}"]),
    # Spark's from_avro / to_avro (reading back the sink's registry Avro), likewise.
    "spark-avro": lambda v: (f"spark-avro-{v}", [f"-Dspark.version={v}"]),
}


@contextlib.contextmanager
def _file_lock(path: str):
    import fcntl

    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def java_command(part: str = "broker", version: str | None = None, heap_mb: int = 512,
                 log_file: str | None = None, jit: str = "c1") -> list[str]:
    """``java`` with the classpath of ``part`` and the log4j2 config; append a main class and args."""
    java = shutil.which("java")
    if java is None:
        raise KafkaRigError("Apache Kafka needs a Java 17+ runtime on PATH "
                            "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless)")
    libs = ensure_jars(part, version)
    cmd = [java, f"-Xmx{heap_mb}m", f"-Xms{min(heap_mb, 128)}m", "-XX:+UseSerialGC",
           "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}",
           f"-Dfastkafka.log.file={log_file or os.devnull}", "-cp", os.path.join(libs, "*")]
    if jit == "c1":   # tests: quick start, little compiler CPU on a 2-core machine
        cmd.insert(1, "-XX:TieredStopAtLevel=1")
    elif jit != "full":
        raise ValueError(f"jit must be 'c1' or 'full', not {jit!r}")
    return cmd


def _cluster_id() -> str:
    return base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")


class KafkaNode:
    """One KRaft node (process.roles=broker,controller) of a :class:`KafkaCluster`."""

    def __init__(self, cluster: "KafkaCluster", node_id: int, port: int, controller_port: int):
        self.cluster = cluster
        self.node_id = node_id
        self.host = "127.0.0.1"
        self.port = port
        self.controller_port = controller_port
        # Extra listeners (security tests): name -> port, e.g. {"SASL_PLAINTEXT": 40123}.
        self.listener_ports: dict[str, int] = {name: free_port() for name in cluster.listeners}
        self.dir = os.path.join(cluster.base_dir, f"node-{node_id}")
        self.data_dir = os.path.join(self.dir, "data")
        self.properties_file = os.path.join(self.dir, "server.properties")
        self.log_file = os.path.join(self.dir, "server.log")
        self.stdout_file = os.path.join(self.dir, "stdout.log")
        self._proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        return f"<KafkaNode {self.node_id} {self.address} {'running' if self.running else 'stopped'}>"

    def listener_address(self, name: str) -> str:
        """host:port of listener ``name`` ("PLAINTEXT" or one of the cluster's extra listeners), as
        advertised (the cluster's ``advertised_hosts`` may name another host than 127.0.0.1)."""
        if name == "PLAINTEXT":
            return self.address
        return f"{self.cluster.advertised_hosts.get(name, self.host)}:{self.listener_ports[name]}"

    def write_properties(self, voters: str) -> None:
        os.makedirs(self.data_dir, exist_ok=True)
        extra = self.cluster.listeners
        listeners = [f"PLAINTEXT://{self.host}:{self.port}"] + [
            f"{name}://{self.host}:{self.listener_ports[name]}" for name in extra]
        advertised = [f"PLAINTEXT://{self.host}:{self.port}"] + [
            f"{name}://{self.listener_address(name)}" for name in extra]
        protocol_map = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"] + [
            f"{name}:{proto}" for name, proto in extra.items()]
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": voters,
            "listeners": ",".join(listeners + [f"CONTROLLER://{self.host}:{self.controller_port}"]),
            "advertised.listeners": ",".join(advertised),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": ",".join(protocol_map),
            "log.dirs": self.data_dir,
        }
        props.update(self.cluster.broker_properties())
        with open(self.properties_file, "w") as f:
            for k, v in props.items():
                f.write(f"{k}={v}\n")

    def format(self, cluster_id: str) -> None:
        # "--cluster-id=ID": a random id may start with "-", which as a separate argument reads
        # as an option (seen: "argument --cluster-id/-t: expected one argument").
        cmd = self.cluster.java(self.log_file) + ["kafka.tools.StorageTool", "format",
                                                  f"--cluster-id={cluster_id}",
                                                  f"--config={self.properties_file}"]
        for mechanism, name, password in self.cluster.scram_users:
            cmd.append(f"--add-scram={mechanism}=[name={name},password={password}]")
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=120)
        if proc.returncode != 0:
            raise KafkaRigError(f"formatting node {self.node_id}'s storage failed (exit "
                                f"{proc.returncode}):\n{proc.stdout.decode('utf-8', 'replace')[-3000:]}")

    def start(self) -> None:
        if self.running:
            return
        cmd = self.cluster.java(self.log_file) + ["kafka.Kafka", self.properties_file]
        with open(self.stdout_file, "ab") as out:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
        with _live_lock:
            _live.add(self)

    def wait_answering(self, deadline: float) -> None:
        last: Exception | None = None
        while True:
            if self._proc is None or self._proc.poll() is not None:
                rc = None if self._proc is None else self._proc.returncode
                raise KafkaRigError(f"Kafka node {self.node_id} exited with code {rc} during start-up; "
                                    f"last output:\n{self.last_output()}")
            try:
                api_versions_probe(self.host, self.port, timeout=0.5)
                return
            except (OSError, ConnectionError) as e:
                last = e
            if time.monotonic() >= deadline:
                raise KafkaRigError(f"Kafka node {self.node_id} on {self.address} did not answer "
                                    f"ApiVersions in time (last error: {last!r}); last output:\n"
                                    f"{self.last_output()}")
            time.sleep(0.05)

    def kill(self, sig: int = signal.SIGKILL, grace: float = 30.0) -> int | None:
        """Send ``sig`` (SIGKILL: no shutdown at all; SIGTERM: controlled shutdown) and reap. A node
        that outlives ``grace`` after SIGTERM is killed."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(grace if sig != signal.SIGKILL else 10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self._proc = None
        with _live_lock:
            _live.discard(self)
        return proc.returncode

    def last_output(self, n: int = 30) -> str:
        lines: list[str] = []
        for path in (self.stdout_file, self.log_file):
            with contextlib.suppress(OSError):
                with open(path, "rb") as f:
                    f.seek(0, os.SEEK_END)
                    f.seek(max(0, f.tell() - 16384))
                    lines += f.read().decode("utf-8", "replace").splitlines()[-n:]
        return "\n".join(lines[-n:])


def data_place(path: str) -> str:
    """The file system ``path`` lives on, in words: "in memory (tmpfs at /dev/shm)" or "on local
    disk (ext4)" (from /proc/mounts: the longest mount point containing it)."""
    path = os.path.realpath(path)
    best, fstype = "", ""
    with contextlib.suppress(OSError):
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 3:
                    continue
                mnt = parts[1].replace("\\040", " ")
                inside = path == mnt or path.startswith(mnt.rstrip("/") + "/")
                if inside and len(mnt) >= len(best):
                    best, fstype = mnt, parts[2]
    if fstype in ("tmpfs", "ramfs"):
        return f"in memory ({fstype} at {best})"
    return f"on local disk ({fstype})" if fstype else "on local disk"


class KafkaCluster:
    """``nodes`` KRaft nodes of Apache Kafka ``version`` on 127.0.0.1, each broker + controller.

    With one node the internal topics have replication factor 1; with three or more, new topics get
    replication factor 3 and ``min.insync.replicas=2`` by default. ``properties`` adds or overrides
    broker settings (for example security listeners). ``jit="full"`` lets the JVM compile fully
    (benchmarks); the default C1-only mode starts quicker and uses less CPU (tests).

    The nodes' data go to a temporary directory (removed at ``stop``) under ``data_root``, or under
    the environment's ``FASTKAFKA_KAFKA_DATA_ROOT``, or under the system's temporary directory.
    Benchmarks put it on a tmpfs (``/dev/shm``) to take the disk out of what they measure: on a
    virtual disk a broker's writes can stall for seconds, for every client alike.

    It offers the interface of :class:`fastkafka_tools.localbroker.LocalBroker` (``bootstrap``,
    ``running``, ``create_topic``, ``delete_topic``, ``stop``, ``last_output``), so the same fixtures
    and tools drive either.
    """

    kind = "kafka"

    def __init__(self, nodes: int = 1, version: str | None = None, heap_mb: int = 384,
                 properties: dict | None = None, jit: str = "c1", base_dir: str | None = None,
                 listeners: dict | None = None, scram_users=(), data_root: str | None = None,
                 advertised_hosts: dict | None = None, jvm_options=()):
        if nodes < 1:
            raise ValueError("nodes must be >= 1")
        # Extra listeners beside PLAINTEXT, name -> security protocol (e.g. {"SASL_PLAINTEXT":
        # "SASL_PLAINTEXT", "SSL": "SSL"}); their settings (JAAS, keystores, enabled mechanisms) go
        # in ``properties`` (``listener.name.<name lower>.*``). ``scram_users``: (mechanism, name,
        # password) tuples created when the storage is formatted.
        self.listeners = dict(listeners or {})
        # Listener name -> the host it is advertised as (it still binds to 127.0.0.1), e.g.
        # {"GSSAPI": "localhost"}: Kerberos names the broker's service by the host clients use.
        self.advertised_hosts = dict(advertised_hosts or {})
        # Extra JVM options of every node, before the main class: e.g.
        # "-Djava.security.krb5.conf=<path>" (Kerberos), or
        # "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=<url>", which Kafka 4 needs before a
        # listener may fetch a JWKS.
        self.jvm_options = tuple(str(o) for o in (jvm_options or ()))
        self.scram_users = tuple(scram_users)
        self.version = version or kafka_version()
        self.heap_mb = heap_mb
        self.jit = jit
        self.extra_properties = dict(properties or {})
        self._own_dir = base_dir is None
        if base_dir is None:
            root = data_root or os.environ.get("FASTKAFKA_KAFKA_DATA_ROOT") or None
            base_dir = tempfile.mkdtemp(prefix="fastkafka-kafka-", dir=root)
        self.base_dir = base_dir
        self.nodes: dict[int, KafkaNode] = {}
        for node_id in range(1, nodes + 1):
            self.nodes[node_id] = KafkaNode(self, node_id, free_port(), free_port())
        self.cluster_id = _cluster_id()
        self._formatted = False
        self._lock = threading.Lock()

    @property
    def data_place(self) -> str:
        """Where the nodes keep their data, for benchmark reports: "in memory (tmpfs at /dev/shm)"
        or "on local disk (ext4)"."""
        return data_place(self.base_dir)

    # -- LocalBroker-compatible surface ------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return ",".join(n.address for n in self.nodes.values())

    def bootstrap_for(self, listener: str) -> str:
        """The bootstrap list of one listener ("PLAINTEXT", or an extra listener's name)."""
        return ",".join(n.listener_address(listener) for n in self.nodes.values())

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def port(self) -> int:
        return self.nodes[1].port

    @property
    def running(self) -> bool:
        return all(n.running for n in self.nodes.values())

    @property
    def pid(self) -> int | None:
        """The first node's process id (the only one's, for a one-node cluster)."""
        return self.nodes[min(self.nodes)].pid

    def last_output(self, n: int = 30) -> str:
        return "\n".join(f"--- node {i} ---\n{node.last_output(n)}" for i, node in self.nodes.items())

    def __repr__(self) -> str:
        up = [i for i, n in self.nodes.items() if n.running]
        return f"<KafkaCluster {self.version} nodes={list(self.nodes)} running={up}>"

    def __enter__(self) -> "KafkaCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- configuration ---------------------------------------------------------------------------
    def java(self, log_file: str | None = None) -> list[str]:
        cmd = java_command("broker", self.version, self.heap_mb, log_file, self.jit)
        return cmd[:1] + list(self.jvm_options) + cmd[1:]

    def broker_properties(self) -> dict:
        n = len(self.nodes)
        rf = min(n, 3)
        props = {
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.partitions": "1",
            "default.replication.factor": str(rf),
            "min.insync.replicas": str(min(2, rf)),
            "offsets.topic.replication.factor": str(rf),
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": str(rf),
            "transaction.state.log.min.isr": str(min(2, rf)),
            "transaction.state.log.num.partitions": "5",
            "share.coordinator.state.topic.replication.factor": str(rf),
            "share.coordinator.state.topic.min.isr": str(min(2, rf)),
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            "unclean.leader.election.enable": "false",
            # A killed node is noticed within a few seconds, not the default 9 s.
            "broker.session.timeout.ms": "6000",
            "broker.heartbeat.interval.ms": "500",
            "controlled.shutdown.enable": "true",
            "log.retention.check.interval.ms": "3600000",
        }
        props.update({k: str(v) for k, v in self.extra_properties.items()})
        return props

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, timeout: float = 90.0) -> "KafkaCluster":
        """Format (first time), start every node and wait until all are registered brokers."""
        with self._lock:
            voters = ",".join(f"{i}@127.0.0.1:{n.controller_port}" for i, n in self.nodes.items())
            try:
                if not self._formatted:
                    for node in self.nodes.values():
                        node.write_properties(voters)
                        node.format(self.cluster_id)
                    self._formatted = True
                for node in self.nodes.values():
                    node.start()
                self._wait_ready(list(self.nodes), timeout)
            except BaseException:
                self._stop_locked()
                raise
        return self

    def start_node(self, node_id: int, timeout: float = 60.0) -> None:
        """Start a stopped node again (same ports and data) and wait until it is a registered broker."""
        node = self.nodes[node_id]
        node.start()
        self._wait_ready([node_id], timeout)

    def kill(self, node_id: int) -> int | None:
        """SIGKILL one node: no controlled shutdown, its unflushed page cache survives the process."""
        return self.nodes[node_id].kill(signal.SIGKILL)

    def stop_node(self, node_id: int, grace: float = 30.0) -> int | None:
        """Controlled shutdown of one node (SIGTERM; SIGKILL after ``grace``)."""
        return self.nodes[node_id].kill(signal.SIGTERM, grace)

    def stop(self, grace: float = 10.0) -> None:
        with self._lock:
            self._stop_locked(grace)

    def _stop_locked(self, grace: float = 10.0) -> None:
        for node in self.nodes.values():
            with contextlib.suppress(Exception):
                node.kill(signal.SIGTERM, grace)
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self._formatted = False

    def _wait_ready(self, node_ids: list[int], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for i in node_ids:
            self.nodes[i].wait_answering(deadline)
        # Answering ApiVersions is not enough: a broker is usable once the controller registered
        # and unfenced it, which metadata shows.
        from fastkafka.errors import KafkaError

        want = set(node_ids)
        last: Exception | None = None
        while True:
            try:
                with self.admin(via=node_ids[0]) as admin:
                    seen = set(admin.describe_cluster(timeout_ms=5000).brokers)
                if want <= seen:
                    return
                last = KafkaRigError(f"metadata lists brokers {sorted(seen)}, waiting for {sorted(want)}")
            except KafkaError as e:
                last = e
            if time.monotonic() >= deadline:
                raise KafkaRigError(f"Kafka nodes {sorted(want)} were not all registered in time "
                                    f"({last}); last output:\n{self.last_output()}")
            time.sleep(0.1)

    # -- admin helpers -----------------------------------------------------------------------------
    def admin(self, via: int | None = None):
        from fastkafka.admin import Admin

        if via is not None:
            servers = self.nodes[via].address
        else:
            servers = ",".join(n.address for n in self.nodes.values() if n.running) or self.bootstrap
        return Admin(bootstrap_servers=servers, client_id="fastkafka-rig")

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None,
                     config: dict | None = None, timeout: float = 30.0) -> None:
        """CreateTopics through fastkafka's Admin, then wait until every partition has a leader and
        (with replication) a full ISR."""
        from fastkafka.errors import KafkaError

        rf = replication_factor or min(len(self.nodes), 3)
        with self.admin() as admin:
            try:
                admin.create_topics({name: partitions}, replication_factor=rf,
                                    config={k: str(v) for k, v in (config or {}).items()} or None,
                                    timeout_ms=int(timeout * 1000))
            except KafkaError as e:
                raise KafkaRigError(f"CreateTopics {name!r} ({partitions} partitions, rf {rf}) failed: "
                                    f"{e}") from e
            deadline = time.monotonic() + timeout
            parts = None
            while time.monotonic() < deadline:
                with contextlib.suppress(KafkaError):
                    parts = admin.describe_topic(name, timeout_ms=5000)
                    if (len(parts) == partitions
                            and all(p.leader >= 0 and len(p.isr) == rf for p in parts)):
                        break
                time.sleep(0.05)
            else:
                raise KafkaRigError(f"topic {name!r} not fully online after {timeout}s: {parts}")
            # Metadata can name a leader a moment before that node's replica manager has taken the
            # partition on (a produce then gets NOT_LEADER_OR_FOLLOWER, and with acks=0 the broker
            # drops the request and closes the connection). ListOffsets is answered by the replica
            # manager: once it succeeds for every partition, the topic is writable.
            for p in range(partitions):
                while True:
                    try:
                        admin.list_offsets(name, p, "latest", timeout_ms=5000)
                        break
                    except KafkaError as e:
                        if time.monotonic() >= deadline:
                            raise KafkaRigError(f"partition {name}-{p} not writable after {timeout}s: "
                                                f"{e}") from e
                        time.sleep(0.05)

    def delete_topic(self, name: str, timeout: float = 30.0) -> None:
        with self.admin() as admin:
            admin.delete_topics([name], timeout_ms=int(timeout * 1000))

    def partitions(self, topic: str, timeout: float = 10.0):
        """PartitionInfo of every partition of ``topic`` as the running nodes see it now."""
        with self.admin() as admin:
            return admin.describe_topic(topic, timeout_ms=int(timeout * 1000))

    def leader_of(self, topic: str, partition: int) -> int:
        return self.partitions(topic)[partition].leader

    def run_tool(self, main_class: str, *args: str, timeout: float = 120.0) -> str:
        """Run one of Kafka's command-line tools (``org.apache.kafka.tools.*``) against this
        cluster's version; returns its output, raises :class:`KafkaRigError` on a non-zero exit."""
        log = os.path.join(self.base_dir, "tools.log")
        cmd = java_command("tools", self.version, 256, log, "c1") + [main_class, *args]
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=timeout)
        out = proc.stdout.decode("utf-8", "replace")
        if proc.returncode != 0:
            raise KafkaRigError(f"{main_class} exited {proc.returncode}:\n{out[-3000:]}")
        return out


@atexit.register
def _stop_all() -> None:
    with _live_lock:
        nodes = list(_live)
    for node in nodes:
        with contextlib.suppress(Exception):
            node.kill(signal.SIGKILL)
        if node.cluster._own_dir:
            shutil.rmtree(node.cluster.base_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m fastkafka_tools.apachekafka fetch [VERSION...]``: fetch the jars (setup does this)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m fastkafka_tools.apachekafka")
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="fetch Apache Kafka's broker (and tools) jars with Maven")
    f.add_argument("versions", nargs="*", help=f"default: $FASTKAFKA_KAFKA_VERSION or {DEFAULT_VERSION}")
    f.add_argument("--tools", action="store_true", help="also the command-line tools (Java perf tool)")
    args = ap.parse_args(argv)
    for v in args.versions or [kafka_version()]:
        print(f"Apache Kafka {v}: {ensure_jars('broker', v)}", flush=True)
        if args.tools:
            print(f"Apache Kafka {v} tools: {ensure_jars('tools', v)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
