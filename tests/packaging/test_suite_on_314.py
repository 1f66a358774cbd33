"""tests/unit and the core of tests/integration, run on CPython 3.14 against the session's cp314 wheel.

The round trip of test_wheel_install.py proves the wheel imports and sends; this runs the unit suite
and the integration modules of ``INTEGRATION`` (sending, TLS, asyncio: the I/O thread, the GIL
hand-over, the GIL-free turn over plaintext and TLS, and the event loop on the new interpreter)
on the interpreter users of 3.14 have, with the wheel installed as they install it (no in-place
build). The other integration modules (SASL, transactions, fault rigs, the compatibility layers,
registries, the broker rig's own tests) exercise the same compiled code through the same paths and
run on the host's suite only: the whole of tests/integration here took about 6 minutes of CI's
time, and CI must stay within its bound. There is no CPython 3.14 on the host: the run happens in the Debian
unstable root of buildtools/roots.py (``sid-amd64``, Debian's python3.14).

* The venv (once per machine, cached in ``cache_root()/suite-venvs``, keyed by the requirements
  and the root's interpreter): python3.14's venv holding the project's dependencies and its
  ``test`` extra, nothing of the project itself.
* Per run: a fresh copy of that venv (hard links: instant, and the cached venv is never written),
  into which ``pip install --no-deps`` puts the session's cp314 wheel, then ``pip check``. Beside
  the installed package go the test-only compiled modules (setup.py's ``TEST_MODULES``, which no
  wheel carries), compiled for cp314 as the wheel's modules are (``scripts/wheel.sh
  --test-modules``); the run must load every one of them.
* The tests (and docs/, which some compare with, and fastkafka_tools, the brokers and certificates
  the tests use, which the wheel does not ship) come from the checkout, copied outside the
  repository with pyproject.toml's pytest settings, so that ``import fastkafka`` can only find
  the installed wheel; a plugin of this module's (``GUARD``) fails the run if any module of the
  distribution is loaded from elsewhere (or fastkafka_tools from the wheel), or the interpreter
  is not 3.14.
* The host's JDK (for Apache Kafka) and the broker's jars are bound into the root at their own
  paths; stunnel (the TLS tests) and the four codecs' C libraries are installed in the root.

``EXCLUDED`` lists the tests left out, each with its reason: they check the checkout's sources,
not the installed package, and run on the host's suite. Each must still exist (a stale entry fails).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from distbuild import BUILD_TIMEOUT_S, REPO, add_test_modules, pyproject, pyproject_text

from buildtools import roots
from fastkafka_tools.apachekafka import _file_lock, cache_root, ensure_jars

VERSION = "3.14"
PYTHON = f"python{VERSION}"
ROOT = "sid-amd64"
# stunnel: the TLS tests put tansu and noida-db behind it; the codecs' libraries: the suite expects
# all four C codecs (fastkafka._wire.ccodecs opens them at run time).
# gcc and libkrb5-dev: the test extra's gssapi (Kerberos) has no wheel, pip builds it in the root.
ROOT_PACKAGES = ("stunnel4", "zlib1g", "libsnappy1v5", "liblz4-1", "libzstd1", "gcc", "libkrb5-dev")
RUN_TIMEOUT_S = 3600
VENV_TIMEOUT_S = 1800     # the venv's first creation (pyspark's sdist makes a 450 MB wheel)
MIN_TESTS = 3600        # tests that ran (not skipped, not deselected): guards against collecting nothing

# The integration modules run here (each beside tests/unit): see the module docstring.
INTEGRATION = ("test_produce.py", "test_tls.py", "test_aio.py")

# Node-id prefixes (``--deselect``) -> why the test cannot run against an installed wheel. Each is
# about the checkout's files, not the package's behaviour, and runs in the host's suite.
_NO_SOURCES = "reads the package's .pyx sources, which the wheel does not ship"
EXCLUDED = {
    "tests/unit/fastkafka/test_version.py::test_version_is_the_distributions":
        "reads pyproject.toml beside the package (the checkout's layout); test_wheel_install "
        "checks the installed wheel's version",
    "tests/unit/fastkafka/test_module_contracts.py::test_every_compiled_module_has_a_pxd_contract":
        _NO_SOURCES,
    "tests/unit/fastkafka/_producer/test_router.py::test_the_router_is_the_only_maker_of_unknown_partition_error":
        _NO_SOURCES,
    "tests/unit/fastkafka/test_contracts.py::test_every_long_file_listed_is_still_long_and_has_a_reason":
        _NO_SOURCES,
    "tests/unit/fastkafka/test_contracts.py::test_links_to_internals_name_a_heading":
        "reads docs/internals.md of the checkout",
    "tests/unit/fastkafka/test_contracts.py::test_every_name_a_path_block_gives_exists":
        _NO_SOURCES + " (the names are looked up in them)",
    "tests/unit/fastkafka/test_contracts.py::test_every_name_internals_md_gives_exists":
        "reads docs/internals.md of the checkout and looks its names up in the .pyx sources",
    "tests/unit/fastkafka/_wire/test_crc32c_c.py":
        "compiles the checkout's C source (fastkafka/_wire/crc32c_impl.c) into test programs with "
        "the host's compilers and qemu: not the wheel's code, nor Python's",
    "tests/unit/test_typing.py::test_documented_usage_passes_mypy_strict":
        "a static check (mypy) of the documented usage: its result does not depend on the "
        "interpreter the tests run on",
    "tests/unit/test_typing.py::test_a_callback_with_a_wrong_error_type_fails":
        "a static check (mypy), as above",
    "tests/unit/test_repo_hygiene.py::test_no_tracked_file_names_a_machine_path":
        "scans the checkout's tracked files (git ls-files)",
}

# The plugin loaded with -p in the run: the interpreter is 3.14, every module of the distribution
# comes from the venv's site-packages (checked at start and again at the end, after every test's
# imports), and the deselected tests are written down for the outer test to compare with EXCLUDED.
GUARD = r'''
import json, os, sys, sysconfig

import pytest

OURS = ("fastkafka", "spark_sink")
TOOLS = "fastkafka_tools"       # the copy beside the tests: never the wheel's
SITE = os.path.realpath(sysconfig.get_paths()["purelib"]) + os.sep
DESELECTED = []


def _strays():
    bad = []
    for name, mod in list(sys.modules.items()):
        if name.split(".")[0] in OURS:
            f = getattr(mod, "__file__", None)
            if f is None or not os.path.realpath(f).startswith(SITE):
                bad.append(f"{name}: {f}")
        elif name.split(".")[0] == TOOLS:
            f = getattr(mod, "__file__", None)
            if f is None or os.path.realpath(f).startswith(SITE):
                bad.append(f"{name}: {f} (the wheel ships no {TOOLS})")
    return bad


def pytest_configure(config):
    if sys.version_info[:2] != (3, 14):
        raise pytest.UsageError(f"suite314 guard: running on {sys.version}, not 3.14")
    import fastkafka, spark_sink, fastkafka_tools  # noqa: F401
    bad = _strays()
    if bad:
        raise pytest.UsageError("suite314 guard: not the installed wheel's modules:\n" + "\n".join(bad))
    print(f"suite314 guard: fastkafka {fastkafka.__version__} from {fastkafka.__file__} on {sys.version}")


def pytest_deselected(items):
    DESELECTED.extend(item.nodeid for item in items)


def pytest_sessionfinish(session, exitstatus):
    bad = _strays()
    with open(os.environ["SUITE314_REPORT"], "w") as f:
        json.dump({"deselected": DESELECTED, "strays": bad,
                   "loaded": sorted(n for n in sys.modules if n.split(".")[0] in OURS + (TOOLS,))}, f)
    if bad:
        session.exitstatus = 3
'''


# ------------------------------------------------------------------------------ the root and its venv
def requirements() -> list[str]:
    """The project's dependencies and its test extra (the wheel is installed with --no-deps)."""
    project = pyproject()["project"]
    return sorted(set(project["dependencies"]) | set(project["optional-dependencies"]["test"]))


def in_root(argv: list, *, binds=(), env=None, timeout=900, what: str) -> str:
    r = roots.run(ROOT, [str(a) for a in argv], binds=tuple(str(b) for b in binds), env=env,
                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                  text=True, timeout=timeout)
    assert r.returncode == 0, f"{what} failed in the {ROOT} root (exit {r.returncode}):\n{r.stdout[-6000:]}"
    return r.stdout


def cached_venv() -> Path:
    """The venv of the requirements in the root, made the first time (under a lock)."""
    roots.ensure_packages(ROOT, ROOT_PACKAGES)
    interpreter = in_root([PYTHON, "-c", "import sys; print(sys.version)"], what=f"{PYTHON} -c")
    key = hashlib.sha256(json.dumps([interpreter, requirements()]).encode()).hexdigest()[:12]
    base = Path(cache_root()) / "suite-venvs"
    base.mkdir(parents=True, exist_ok=True)
    venv = base / f"{ROOT}-py{VERSION.replace('.', '')}-{key}"
    with _file_lock(str(base / ".lock")):
        if (venv / ".complete").exists():
            return venv
        shutil.rmtree(venv, ignore_errors=True)      # a creation that did not finish
        t0 = time.monotonic()
        in_root([PYTHON, "-m", "venv", venv], binds=[base], what=f"{PYTHON} -m venv")
        in_root([venv / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check",
                 "--no-input", *requirements()], binds=[base], timeout=VENV_TIMEOUT_S,
                what="pip install of the requirements")
        (venv / ".complete").write_text(json.dumps({"interpreter": interpreter, "requirements": requirements(),
                                                    "seconds": round(time.monotonic() - t0)}) + "\n")
    return venv


def copy_venv(src: Path, dst: Path) -> None:
    """A copy of the venv at ``dst``, hard-linked where possible; its scripts' shebangs name the copy."""
    r = subprocess.run(["cp", "-a", "-l", str(src), str(dst)], capture_output=True, text=True)
    if r.returncode != 0:           # another file system: a real copy
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst, symlinks=True)
    (dst / ".complete").unlink(missing_ok=True)
    old, new = f"#!{src}/bin/".encode(), f"#!{dst}/bin/".encode()
    for script in (dst / "bin").iterdir():
        if script.is_symlink() or not script.is_file():
            continue
        data = script.read_bytes()
        if data.startswith(old):
            tmp = script.with_name(script.name + ".tmp")      # a new file: the link to the cache is broken
            tmp.write_bytes(new + data[len(old):])
            tmp.chmod(script.stat().st_mode)
            os.replace(tmp, script)


# ------------------------------------------------------------------------------ what the root borrows
def java_binds() -> tuple[Path, list[Path]]:
    """(the host JDK's home, the folders to bind for it: the home and the /etc folders its links name)."""
    java = shutil.which("java")
    assert java, "Apache Kafka needs java on PATH (scripts/setup.sh installs openjdk-17-jre-headless)"
    home = Path(os.path.realpath(java)).parents[1]
    outside = set()
    for dirpath, _dirs, files in os.walk(home):
        for name in files:
            p = os.path.join(dirpath, name)
            target = os.path.realpath(p)
            if os.path.islink(p) and target.startswith("/etc/") and os.path.exists(target):
                outside.add(Path(target).parent)
    tops = sorted(p for p in outside if not any(q != p and q in p.parents for q in outside))
    return home, [home, *tops]


def pytest_section() -> str:
    """pyproject.toml's [tool.pytest.ini_options] table, as written there."""
    m = re.search(r"^\[tool\.pytest\.ini_options\]\n.*?(?=^\[|\Z)", pyproject_text(), re.S | re.M)
    assert m, "pyproject.toml has no [tool.pytest.ini_options]"
    return m.group(0)


def failed_ids(text: str) -> list[str]:
    """The ids of pytest's short summary (-rfEs): ``FAILED id - ...`` and ``ERROR id - ...``."""
    return re.findall(r"^(?:FAILED|ERROR) (\S+)", text, re.M)


def counts(junit: Path) -> dict:
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    return {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}


# ------------------------------------------------------------------------------ the test
@pytest.mark.timeout(BUILD_TIMEOUT_S + VENV_TIMEOUT_S + RUN_TIMEOUT_S + 300)  # the session's build, the venv, the run
def test_unit_and_integration_suites_on_314(dist, tmp_path):
    wheel = dist.wheel(VERSION).wheel
    assert f"-cp{VERSION.replace('.', '')}-" in wheel.name, wheel.name
    t0 = time.monotonic()
    cached = cached_venv()
    t_venv = time.monotonic() - t0

    run = tmp_path / "run"                      # bound into the root at the same path
    run.mkdir()
    assert REPO not in run.resolve().parents
    venv = run / "venv"
    mount_point = Path(roots.root_path(ROOT) + str(run.resolve()))
    existed = next(p for p in mount_point.parents if p.exists())
    copy_venv(cached, venv)
    try:
        py = venv / "bin" / "python"
        shutil.copy2(wheel, run / wheel.name)
        in_root([py, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-index",
                 "--no-deps", run / wheel.name], binds=[run], what="pip install --no-deps of the wheel")
        in_root([py, "-m", "pip", "check"], binds=[run], what="pip check (the wheel's requirements)")
        site = in_root([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], binds=[run],
                       what="the venv's site-packages").strip().splitlines()[-1]
        test_modules = add_test_modules(Path(site), run / "test-modules", f"cp{VERSION.replace('.', '')}-x86_64")

        suite = run / "suite"
        # docs: tests compare the layers with their documentation; fastkafka_tools: the tests' brokers
        for part in ("tests", "docs", "fastkafka_tools"):
            shutil.copytree(REPO / part, suite / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        (suite / "pyproject.toml").write_text(pytest_section())
        (suite / "suite314_guard.py").write_text(GUARD)
        assert not (suite / "fastkafka").exists()

        jdk, jdk_binds = java_binds()
        # the brokers' jars, and Apicurio Registry's (tests/apicurio_rig.py), built outside the root
        from fastkafka_tools.apicurio import APICURIO_VERSION, ensure_apicurio

        ensure_apicurio()
        jars = [Path(ensure_jars("broker")), Path(ensure_jars("tools")),
                Path(cache_root()) / f"apicurio-{APICURIO_VERSION}"]
        env = {"PATH": f"{venv}/bin:{jdk}/bin:/usr/sbin:/usr/bin:/sbin:/bin", "JAVA_HOME": str(jdk),
               "PYTHONPATH": str(suite), "SUITE314_REPORT": str(run / "guard.json"),
               **{k: os.environ[k] for k in ("FASTKAFKA_CACHE", "XDG_CACHE_HOME", "FASTKAFKA_KAFKA_VERSION")
                  if k in os.environ}}
        junit, log = run / "junit.xml", run / "pytest.log"
        # --basetemp: the run's own; pytest's default folder in the root (under its /tmp) also holds
        # the mount points of the binds, and its clean-up of old numbered folders would go through them
        argv = [py, "-m", "pytest", "tests/unit", *(f"tests/integration/{m}" for m in INTEGRATION),
                "-p", "no:cacheprovider",
                "-p", "suite314_guard", "-q", "-rfEs", "--durations=15", f"--junitxml={junit}",
                f"--basetemp={run / 'basetemp'}",
                *[a for prefix in EXCLUDED for a in ("--deselect", prefix)]]
        t1 = time.monotonic()
        with open(log, "w") as out:
            try:
                r = roots.run(ROOT, ["sh", "-c", 'cd "$0" && exec "$@"', str(suite), *map(str, argv)],
                              binds=(run, *jdk_binds, *jars), env=env, stdin=subprocess.DEVNULL,
                              stdout=out, stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pytest.fail(f"pytest on {VERSION} did not finish in {RUN_TIMEOUT_S} s; its output "
                            f"ends:\n{log.read_text(errors='replace')[-8000:]}", pytrace=False)
        t_run = time.monotonic() - t1
        text = log.read_text(errors="replace")
        print(f"suite on {VERSION}: venv ready in {t_venv:.0f} s, run {t_run:.0f} s; log {log}")
        print(text[-3000:])

        assert r.returncode == 0, (f"pytest on {VERSION} exited {r.returncode} after {t_run:.0f} s; failed: "
                                   f"{failed_ids(text) or '(see the output)'}\n...{text[-8000:]}")
        assert "suite314 guard: fastkafka" in text, text[-3000:]
        report = json.loads((run / "guard.json").read_text())
        assert report["strays"] == [], report["strays"]
        assert set(test_modules) <= set(report["loaded"]), \
            f"test-only modules the run never loaded: {sorted(set(test_modules) - set(report['loaded']))}"
        unused = [p for p in EXCLUDED if not any(n.startswith(p) for n in report["deselected"])]
        assert unused == [], f"EXCLUDED entries that match no test: {unused}"
        c = counts(junit)
        ran = c["tests"] - c["skipped"]
        assert ran >= MIN_TESTS, f"only {ran} tests ran on {VERSION} ({c}); expected at least {MIN_TESTS}"
    finally:
        shutil.rmtree(venv, ignore_errors=True)
        # the folders roots.run made in the root for the bind's mount point, if empty
        made = mount_point.relative_to(existed).parts
        for i in range(len(made), 0, -1):
            try:
                existed.joinpath(*made[:i]).rmdir()
            except OSError:
                break
