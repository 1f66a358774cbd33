"""Each claimed CPython's repaired wheel, installed with pip into a fresh venv, works without the
repository, a C compiler or Cython: a round trip against the session's Apache Kafka broker, read
back with confluent-kafka (an independent client) in this process, record by record.

Where each runs (distbuild.ROOT_OF): 3.10-3.13 on the host (pyenv's), 3.14 and 3.15 in a Debian
unstable root, and the aarch64 cp311 wheel in an arm64 Debian root under qemu (buildtools/roots.py;
a root shares the host's network, so the broker on the loopback is reached from inside). Under
emulation the wheel is installed without the [spark] extra (pyspark's install alone would take
minutes there); everything else is checked the same way.

The wheel is installed as the README says, ``pip install --find-links DIR "fastkafka-producer[spark]"``
from the directory scripts/wheel.sh wrote (the sdist beside the wheel). The venv is not
``--system-site-packages``; pip and the installed code run with a PATH that is the
venv's ``bin`` alone (no cc, no gcc) and from a directory outside the repository, so
``import fastkafka`` can only find the installed wheel. Every version gets the ``[spark]`` extra
(pyspark, pyarrow: ``import spark_sink.datasource`` is checked; pip's cache makes it quick).
"""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from brokers import read_back, unique_name
from distbuild import (DIST_NAME, IMPORT_AS, REPO, ROOT_OF, add_test_modules, claimed_versions,
                       project_version, require_cpython, targets_under_test)

from buildtools import roots
from seam_modules import TEST_MODULES

pytestmark = pytest.mark.timeout(2400)     # the first test of a version waits for its wheel's build

VERSIONS = claimed_versions()
TARGETS = targets_under_test(VERSIONS)
# the codecs' C libraries, installed in the roots as the host has them (scripts/setup.sh)
CODEC_LIBRARIES = ("zlib1g", "libsnappy1v5", "liblz4-1", "libzstd1")
PARTITIONS = 3
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PIP_TIMEOUT_S = 900


# Recent timestamps: the broker deletes records older than its retention (7 days) at its next
# retention check, even from the active segment, so a fixed date years back would race that check.
T0 = int(time.time() * 1000) - 60_000


def records() -> list[dict]:
    """The records sent: keys (and a null key), values (empty, null, binary, 200 kB), headers (none,
    several, a repeated name, a null value, a non-ASCII name), explicit partitions and timestamps."""
    out = []
    for i in range(60):
        key = None if i % 11 == 3 else b"key-%d-\x00\xff" % i
        if i % 13 == 5:
            value = None
        elif i % 17 == 7:
            value = b""
        elif i == 42:
            value = bytes(range(256)) * 800
        else:
            value = b"value-%d-" % i + bytes([i % 256]) * (i % 50)
        headers = [] if i % 4 == 0 else [("trace", b"t-%d" % i), ("n\u00e9", b"\xe2\x82\xac"),
                                         ("trace", b"again"), ("empty", None)][: 1 + i % 4]
        out.append({"key": key, "value": value, "headers": headers, "partition": i % PARTITIONS,
                    "timestamp_ms": T0 + i, "codec": CODECS[i % len(CODECS)]})
    return out


def _b64(b: bytes | None):
    return None if b is None else base64.b64encode(b).decode()


# Runs inside the venv: no compiler, no Cython, outside the repository; prints one JSON line.
ROUND_TRIP = r'''
import base64, importlib, importlib.metadata as md, json, os, shutil, sys

job = json.loads(sys.stdin.read())
venv = os.path.realpath(sys.prefix)
assert venv == os.path.realpath(job["venv"]), (venv, job["venv"])
assert shutil.which("cc") is None and shutil.which("gcc") is None, "a C compiler is on PATH"
try:
    import Cython  # noqa: F401
except ImportError:
    pass
else:
    raise SystemExit("Cython is importable in the venv: " + Cython.__file__)

import fastkafka
from fastkafka import Producer

def inside(path):
    return os.path.realpath(path).startswith(venv + os.sep)

assert inside(fastkafka.__file__), fastkafka.__file__
compiled = {}
for name in job["compiled"]:
    mod = importlib.import_module(name)
    assert inside(mod.__file__) and mod.__file__.endswith(".so"), mod.__file__
    compiled[name] = os.path.basename(mod.__file__)
names = sorted(d.metadata["Name"] for d in md.distributions())
spark = None
if job["spark"]:
    import spark_sink, spark_sink.datasource, pyspark       # the [spark] extra is enough for the sink
    assert inside(spark_sink.__file__) and inside(pyspark.__file__), (spark_sink.__file__, pyspark.__file__)
    spark = {"spark_sink": spark_sink.__file__, "pyspark": pyspark.__version__}
import platform

dec = lambda s: None if s is None else base64.b64decode(s)
sent = []
for codec in job["codecs"]:
    mine = [r for r in job["records"] if r["codec"] == codec]
    with Producer(bootstrap_servers=job["bootstrap"], compression_type=codec, linger_ms=5) as p:
        futures = [p.send(job["topic"], value=dec(r["value"]), key=dec(r["key"]),
                          partition=r["partition"], timestamp_ms=r["timestamp_ms"],
                          headers=[(k, dec(v)) for k, v in r["headers"]]) for r in mine]
        for r, f in zip(mine, futures):
            m = f.get(timeout=60)
            sent.append({"i": r["i"], "partition": m.partition, "offset": m.offset, "topic": m.topic})

# Which path compressed the batches: the codecs' C libraries (opened at run time by the installed
# fastkafka._wire.ccodecs) or the Python codecs.
from fastkafka._wire import ccodecs as _ccodecs, compression as _compression
codec_paths = _compression.counters()
codec_paths["versions"] = _ccodecs.versions()

# Which TLS data path this CPython gets: the compiled one reads the SSL* out of the interpreter's
# private _ssl object (fastkafka._net.transport), checked field by field; else the ssl module's own
# calls (a fallback that works everywhere, slower).
import ssl
from fastkafka._net.transport import TlsPipe, tls_attach_failure
probe = ssl.create_default_context().wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="localhost")
tls_path = "openssl_direct" if TlsPipe.attach(probe) is not None else "ssl_module: " + tls_attach_failure()

print(json.dumps({"tls_path": tls_path, "fastkafka": fastkafka.__file__, "version": fastkafka.__version__,
                  "dist_version": md.version(job["dist"]), "dists": names, "compiled": compiled,
                  "spark": spark, "sent": sent, "python": sys.version, "codec_paths": codec_paths,
                  "machine": platform.machine()}))
'''

def bare_env(venv: Path) -> dict:
    """The environment of pip and the code in the venv: PATH is the venv's bin alone."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "PYTHONUSERBASE",
                        "CC", "CXX", "LDSHARED")}
    env.update(PATH=str(venv / "bin"), VIRTUAL_ENV=str(venv), PYTHONNOUSERSITE="1",
               PYTHONDONTWRITEBYTECODE="1")
    return env


def run(cmd: list[str], *, env: dict, cwd: Path, timeout: float, input: str | None = None,
        what: str) -> subprocess.CompletedProcess:
    try:
        r = subprocess.run(cmd, env=env, cwd=str(cwd), input=input, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{what}: no answer in {timeout}s; output: {e.stdout!r} {e.stderr!r}") from None
    assert r.returncode == 0, f"{what} failed (exit {r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-6000:]}"
    return r


def compiled_modules() -> list[str]:
    """The dotted names of the Cython modules a wheel carries (setup.py compiles every .pyx of these
    packages; the test-only ones are in no wheel)."""
    names = (p.relative_to(REPO).with_suffix("").as_posix().replace("/", ".")
             for pkg in ("fastkafka", "spark_sink") for p in (REPO / pkg).rglob("*.pyx"))
    return sorted(n for n in names if n not in TEST_MODULES)


class Venv:
    """A fresh venv of one target's CPython with its wheel installed: on the host, or in a root."""

    def __init__(self, version: str, arch: str, base: Path):
        self.version, self.arch = version, arch
        self.root_name, self.python = ROOT_OF.get((version, arch), (None, None))
        if self.root_name is None:
            self.python = require_cpython(version)
            self.venv, self.cwd = base / "venv", base / "run"
            self.cwd.mkdir()
            assert REPO not in self.cwd.resolve().parents, self.cwd
        else:
            rootdir = Path(roots.ensure(self.root_name))
            roots.ensure_packages(self.root_name, CODEC_LIBRARIES)
            self.inside = rootdir / "tmp" / f"fk-{base.name}"       # the venv, seen from the host
            shutil.rmtree(self.inside, ignore_errors=True)
            self.inside.mkdir(parents=True)
            self.venv = Path("/tmp") / self.inside.name / "venv"   # ... and from inside the root
            self.cwd = Path("/")

    @property
    def spark(self) -> bool:
        return self.arch == "x86_64"        # not under emulation (the module docstring says why)

    def host_path(self, p: Path) -> Path:
        return p if self.root_name is None else Path(roots.root_path(self.root_name) + str(p))

    def run(self, argv: list[str], *, timeout: float, what: str, input: str | None = None,
            env: dict | None = None, binds: tuple = ()) -> subprocess.CompletedProcess:
        if self.root_name is None:
            return run(argv, env=env or bare_env(self.venv), cwd=self.cwd, timeout=timeout,
                       input=input, what=what)
        try:
            r = roots.run(self.root_name, argv, env=env or root_env(self.venv), binds=binds,
                          input=input, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"{what}: no answer in {timeout}s; output: {e.stdout!r} {e.stderr!r}") from None
        assert r.returncode == 0, f"{what} failed (exit {r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-6000:]}"
        return r


def root_env(venv: Path) -> dict:
    """Inside a root: PATH is the venv's bin alone, as bare_env does on the host."""
    return {"PATH": str(venv / "bin"), "VIRTUAL_ENV": str(venv), "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/root", "LANG": "C.UTF-8"}


def target_id(t) -> str:
    return f"{t[0]}-{t[1]}"


@pytest.fixture(scope="session")
def installed(dist, tmp_path_factory):
    """(version, arch) -> Venv: a fresh venv of that CPython with its wheel (and, natively, the
    [spark] extra) installed (once per target)."""
    done = {}

    def install(version: str, arch: str = "x86_64") -> Venv:
        if (version, arch) in done:
            return done[(version, arch)]
        wheel = dist.wheel(version, arch).wheel
        env = Venv(version, arch, tmp_path_factory.mktemp(f"venv-{version}-{arch}"))
        python = env.python
        env.run([python, "-m", "venv", str(env.venv)], timeout=600,
                what=f"{python} -m venv", env=None if env.root_name is None else {"PATH": "/usr/bin:/bin"})
        cfg = env.host_path(env.venv / "pyvenv.cfg").read_text()
        assert "include-system-site-packages = false" in cfg, cfg
        # The README's command: pip install --find-links dist "fastkafka-producer[spark]". The
        # directory holds the sdist and the other targets' wheels too; with no compiler on PATH
        # only this target's wheel can install. The version is pinned so that a newer release on
        # PyPI could not be the one installed.
        links = sorted(p.name for p in wheel.parent.iterdir())
        assert any(n.endswith(".tar.gz") for n in links) and wheel.name in links, links
        req = f"{DIST_NAME}[spark]" if env.spark else DIST_NAME
        r = env.run([str(env.venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
                     "--no-input", "--find-links", str(wheel.parent), f"{req}=={project_version()}"],
                    timeout=PIP_TIMEOUT_S, binds=(str(wheel.parent),),
                    what=f"pip install --find-links of {req} into a fresh CPython {version} ({arch}) venv")
        assert wheel.name in r.stdout, f"pip did not install {wheel.name}:\n{r.stdout[-3000:]}"
        done[(version, arch)] = env
        return env

    return install


@pytest.mark.parametrize("target", TARGETS, ids=target_id)
def test_installed_wheel_round_trip(target, installed, kafka_broker):
    version, arch = target
    env = installed(version, arch)
    venv = env.venv
    topic = unique_name(f"pkg-{version.replace('.', '')}-{arch}")
    kafka_broker.create_topic(topic, PARTITIONS)
    recs = records()
    job = {
        "venv": str(venv), "bootstrap": kafka_broker.bootstrap, "topic": topic, "codecs": list(CODECS),
        "dist": DIST_NAME, "compiled": compiled_modules(), "spark": env.spark,
        "records": [{"i": i, "key": _b64(r["key"]), "value": _b64(r["value"]),
                     "headers": [(k, _b64(v)) for k, v in r["headers"]], "partition": r["partition"],
                     "timestamp_ms": r["timestamp_ms"], "codec": r["codec"]} for i, r in enumerate(recs)],
    }
    r = env.run([str(venv / "bin" / "python"), "-c", ROUND_TRIP], timeout=900 if arch != "x86_64" else 300,
                input=json.dumps(job), what=f"the round trip in the CPython {version} ({arch}) venv")
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["python"].startswith(version + "."), got["python"]
    assert got["version"] == project_version() == got["dist_version"]
    assert "fastkafka" not in got["dists"], "the old distribution name is installed too"
    assert DIST_NAME in got["dists"]
    assert set(got["compiled"]) == set(compiled_modules())
    assert got["machine"] == arch, got["machine"]
    assert all(f.endswith(f"cpython-{version.replace('.', '')}-{arch}-linux-gnu.so")
               for f in got["compiled"].values()), got["compiled"]
    assert (got["spark"] is not None and got["spark"]["pyspark"]) if env.spark else got["spark"] is None, got["spark"]
    # the compiled TLS path attaches on every claimed CPython (docs/security.md says so)
    assert got["tls_path"] == "openssl_direct", got["tls_path"]
    assert len(got["sent"]) == len(recs)
    # the wheel links none of the codecs' libraries, and finds them on this machine at run time:
    # every gzip, snappy and lz4 batch went through C; zstd's too where the machine's libzstd is
    # 1.5.7 or newer (Debian unstable), else (Debian 12's 1.5.4) the Python codec (ccodecs)
    paths = got["codec_paths"]
    major, minor, release = (int(x) for x in paths["versions"]["zstd"].split("."))
    zstd_in_c = (major, minor, release) >= (1, 5, 7)
    for codec in CODECS:
        if codec == "zstd" and not zstd_in_c:
            assert paths["c"][codec]["calls"] == 0 and paths["python"][codec] > 0, (codec, paths)
        elif codec != "none":
            assert paths["c"][codec]["calls"] > 0 and paths["python"][codec] == 0, (codec, paths)

    # read back with confluent-kafka, here; compare every record where the producer said it landed
    back = read_back(kafka_broker.bootstrap, topic, PARTITIONS, len(recs), timeout=60)
    by_position = {(m.partition, m.offset): m for msgs in back.values() for m in msgs}
    assert len(by_position) == len(recs)
    for s in got["sent"]:
        want = recs[s["i"]]
        assert s["topic"] == topic and s["partition"] == want["partition"], s
        m = by_position[(s["partition"], s["offset"])]
        assert m.key == want["key"], s
        assert m.value == want["value"], s
        assert m.headers == [(k, v) for k, v in want["headers"]], s
        assert m.timestamp == want["timestamp_ms"], s


@pytest.mark.parametrize("platform", ["darwin", "win32"])
@pytest.mark.parametrize("target", TARGETS, ids=target_id)
def test_installed_wheel_refuses_other_platforms(target, platform, installed):
    version, arch = target
    env = installed(version, arch)
    for module in ("fastkafka", "spark_sink"):
        r = env.run([str(env.venv / "bin" / "python"), "-c", IMPORT_AS, platform, module], timeout=300,
                    what=f"import {module} as {platform} in the CPython {version} ({arch}) venv")
        message, loaded = r.stdout.strip().splitlines()[-2:]
        assert repr(platform) in message and "Linux" in message, message
        assert loaded == "[]", f"modules loaded before the platform check: {loaded}"


# The wire layer's unit tests (CRC-32C, records, varints, codecs) run on the aarch64 wheel under qemu.
# Left out: test_crc32c_c.py compiles its C harness with zig on the host and runs the aarch64 build
# under qemu itself (tests/unit/fastkafka/_wire/test_crc32c_c.py), so it has nothing to do here.
WIRE_TESTS = REPO / "tests" / "unit" / "fastkafka" / "_wire"
WIRE_HELPERS = ("reference_records.py", "cpucaps.py")          # modules of tests/ the wire tests import
WIRE_LEFT_OUT = ("test_crc32c_c.py",)


def test_aarch64_wire_unit_tests_under_emulation(installed):
    env = installed("3.11", "aarch64")
    py = str(env.venv / "bin" / "python")
    env.run([py, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
             "pytest>=8", "hypothesis>=6.100", "crc32c>=2.4", "kafka-python>=2.0.3", "aiokafka>=0.11"],
            timeout=PIP_TIMEOUT_S,
            what="pip install of the wire tests' requirements under emulation")
    # the test-only compiled modules some wire tests use, built for the target beside its wheel
    site = env.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], timeout=300,
                   what="the venv's site-packages").stdout.strip().splitlines()[-1]
    add_test_modules(env.host_path(Path(site)), env.inside / "test-modules", "cp311-aarch64")
    work = env.inside / "wire-tests"            # seen from the host; inside the root: under its tmp
    inside = Path("/tmp") / env.inside.name / "wire-tests"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(WIRE_TESTS, work / "wire", ignore=shutil.ignore_patterns("__pycache__", *WIRE_LEFT_OUT))
    for helper in WIRE_HELPERS:
        shutil.copyfile(REPO / "tests" / helper, work / helper)
    shutil.copyfile(REPO / "pyproject.toml", work / "pyproject.toml")    # marks the tests' root
    # as tests/conftest.py does: zstd's C path on, so that it is tested like the other codecs
    (work / "conftest.py").write_text("from fastkafka._wire import ccodecs\nccodecs.use_c('zstd', True)\n")
    run_env = dict(root_env(env.venv), PYTHONPATH=str(inside))
    r = roots.run(env.root_name, [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(inside),
                                  str(inside / "wire")], env=run_env, capture_output=True, text=True,
                  timeout=2400)
    summary = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    assert r.returncode == 0, f"the wire tests under emulation failed:\n{r.stdout[-6000:]}\n{r.stderr[-3000:]}"
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    local = sum(1 for p in WIRE_TESTS.glob("test_*.py") if p.name not in WIRE_LEFT_OUT)
    assert passed >= 10 * local, f"too few wire tests ran under emulation: {summary}"
    # the compiled modules that ran are the wheel's aarch64 ones, and the CRC took the ARMv8 path
    probe = env.run([py, "-c", "import platform, fastkafka._wire.crc32c as c, fastkafka._wire.records as r; "
                               "print(platform.machine(), c.__file__, r.__file__)"],
                    timeout=300, what="which modules ran")
    machine, crc_file, rec_file = probe.stdout.split()
    assert machine == "aarch64" and crc_file.endswith("aarch64-linux-gnu.so") and str(env.venv) in crc_file
