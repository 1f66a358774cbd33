"""Helpers of the packaging tests: the sdist and the repaired wheels ``scripts/wheel.sh`` builds.

* The CPython versions the project claims as tested are those of pyproject.toml's
  ``Programming Language :: Python :: 3.X`` classifiers (:func:`claimed_versions`); every one of
  them is built and tested here. An interpreter that cannot be found fails the tests that need it
  (never a skip: CI runs on the same machine image, which has them).
* Interpreters are looked up at run time (:func:`find_cpython`): pyenv's versions directory
  (``$PYENV_ROOT``, ``pyenv root``, ``~/.pyenv``), then ``python3.X`` on PATH.
* :class:`Dist` (the ``dist`` fixture of conftest.py): one session-wide build. The first wheel asked for (the one of the interpreter running
  the tests, if claimed) is built together with the sdist (``bash scripts/wheel.sh``); every other
  version's wheel is built from that same sdist (``--sdist``), once, when a test first needs it.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WHEEL_SH = REPO / "scripts" / "wheel.sh"
BUILD_TIMEOUT_S = 1800          # one wheel.sh run (a cold tooling venv, Cython, ~20 modules at -O3)
DIST_NAME = "fastkafka-producer"
DIST_FILE_PREFIX = "fastkafka_producer-"

# ``python -c IMPORT_AS PLATFORM MODULE``: import MODULE with sys.platform set to PLATFORM first; it
# must raise ImportError, whose message is printed, then the fastkafka/spark_sink modules left
# loaded (``[]``: the check ran before any compiled module).
IMPORT_AS = r'''
import sys
platform, module = sys.argv[1], sys.argv[2]
sys.platform = platform
try:
    __import__(module)
except ImportError as e:
    print(repr(str(e)))
    print(sorted(m for m in sys.modules if m.startswith(("fastkafka", "spark_sink"))))
else:
    raise SystemExit(f"import {module} succeeded with sys.platform = {platform!r}")
'''


# ------------------------------------------------------------------------------ what is claimed
def pyproject_text() -> str:
    return (REPO / "pyproject.toml").read_text(encoding="utf-8")


def pyproject() -> dict:
    try:
        import tomllib
    except ImportError:                               # Python 3.10 (pytest brings tomli there)
        import tomli as tomllib
    return tomllib.loads(pyproject_text())


def claimed_versions() -> list[str]:
    """["3.10", ...]: the versions of the ``Programming Language :: Python :: 3.X`` classifiers."""
    try:
        classifiers = pyproject()["project"]["classifiers"]
    except ImportError:                 # no TOML reader (a bare 3.10): the quoted strings will do
        classifiers = re.findall(r'"([^"]+)"', pyproject_text())
    found = []
    for c in classifiers:
        m = re.fullmatch(r"Programming Language :: Python :: (3\.\d+)", c)
        if m:
            found.append(m.group(1))
    return sorted(found, key=lambda v: tuple(int(x) for x in v.split(".")))


def project_version() -> str:
    return pyproject()["project"]["version"]


def primary_version(versions: list[str]) -> str:
    """The version built with the sdist: the running interpreter's when claimed, else the first."""
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return here if here in versions else versions[0]


# ------------------------------------------------------------------------------ interpreters
def pyenv_roots() -> list[Path]:
    roots = []
    if os.environ.get("PYENV_ROOT"):
        roots.append(Path(os.environ["PYENV_ROOT"]))
    pyenv = shutil.which("pyenv")
    if pyenv:
        try:
            out = subprocess.run([pyenv, "root"], capture_output=True, text=True, timeout=30).stdout.strip()
            if out:
                roots.append(Path(out))
        except (OSError, subprocess.SubprocessError):
            pass
    roots.append(Path.home() / ".pyenv")
    unique = []
    for r in roots:
        if r not in unique:
            unique.append(r)
    return unique


def _interpreter_version(exe: str) -> tuple[str, str] | None:
    """(implementation, "3.X") of ``exe``, or None when it does not run."""
    try:
        r = subprocess.run([exe, "-c", "import sys; print(sys.implementation.name, "
                                       "'%d.%d' % sys.version_info[:2])"],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0:
        return None
    impl, _, ver = r.stdout.strip().partition(" ")
    return impl, ver


def find_cpython(version: str) -> tuple[str | None, list[str]]:
    """(path of a CPython ``version`` interpreter or None, the places looked at)."""
    looked = []
    pattern = re.compile(re.escape(version) + r"\.(\d+)")      # 3.12.1, not 3.12.1t nor 3.12-dev
    for root in pyenv_roots():
        versions = root / "versions"
        looked.append(str(versions))
        if not versions.is_dir():
            continue
        candidates = sorted(((int(m.group(1)), d) for d in versions.iterdir()
                             if (m := pattern.fullmatch(d.name))), reverse=True)
        for _patch, d in candidates:
            exe = d / "bin" / f"python{version}"
            if exe.exists() and _interpreter_version(str(exe)) == ("cpython", version):
                return str(exe), looked
    looked.append(f"python{version} on PATH")
    exe = shutil.which(f"python{version}")
    if exe and _interpreter_version(exe) == ("cpython", version):
        return exe, looked
    return None, looked


def missing_message(version: str, looked: list[str]) -> str:
    return (f"CPython {version} not found (looked in: {', '.join(looked)}). pyproject.toml's "
            f"classifiers claim it is tested: install it (e.g. `pyenv install {version}`), or drop "
            f"its classifier and narrow requires-python")


def require_cpython(version: str) -> str:
    import pytest

    exe, looked = find_cpython(version)
    if exe is None:
        pytest.fail(missing_message(version, looked), pytrace=False)
    return exe


# ------------------------------------------------------------------------------ the builds
@dataclass
class Built:
    version: str
    wheel: Path
    log: str
    seconds: float


@dataclass
class Dist:
    """The session's artefacts; ``wheel(version)`` builds a version's wheel on first use."""
    root: Path
    versions: list[str]
    primary: str
    sdist: Path | None = None
    sdist_log: str = ""
    built: dict = field(default_factory=dict)        # version -> Built
    failed: dict = field(default_factory=dict)       # version -> message

    def _run(self, version: str, outdir: Path, *args: str) -> tuple[str, float]:
        exe = require_cpython(version)
        env = dict(os.environ, PYTHON=exe)
        for var in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV"):
            env.pop(var, None)
        t0 = time.monotonic()
        try:
            r = subprocess.run(["bash", str(WHEEL_SH), "--outdir", str(outdir), *args], cwd=str(REPO),
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            raise AssertionError(f"scripts/wheel.sh for CPython {version} ({exe}) did not finish in "
                                 f"{BUILD_TIMEOUT_S}s; its output ends:\n{out[-6000:]}") from None
        elapsed = time.monotonic() - t0
        (self.root / f"wheel-{version}.log").write_text(r.stdout)
        if r.returncode != 0:
            raise AssertionError(f"scripts/wheel.sh for CPython {version} ({exe}) failed (exit "
                                 f"{r.returncode}); its output ends:\n{r.stdout[-6000:]}")
        return r.stdout, elapsed

    def _only(self, outdir: Path, pattern: str) -> Path:
        found = sorted(outdir.glob(pattern))
        assert len(found) == 1, f"expected one {pattern} in {outdir}, found {[p.name for p in outdir.iterdir()]}"
        return found[0]

    def wheel(self, version: str) -> Built:
        if version in self.built:
            return self.built[version]
        if version in self.failed:
            import pytest
            pytest.fail(f"(the session's earlier build) {self.failed[version]}", pytrace=False)
        if version != self.primary and self.sdist is None:
            self.wheel(self.primary)              # the sdist comes with the primary build
        outdir = self.root / f"cp{version.replace('.', '')}"
        outdir.mkdir(parents=True, exist_ok=True)
        try:
            if version == self.primary:
                log, secs = self._run(version, outdir)
                self.sdist = self._only(outdir, f"{DIST_FILE_PREFIX}*.tar.gz")
                self.sdist_log = log
            else:
                log, secs = self._run(version, outdir, "--sdist", str(self.sdist))
            whl = self._only(outdir, f"{DIST_FILE_PREFIX}*.whl")
        except AssertionError as e:
            self.failed[version] = (str(e).splitlines()[0] + f" (full output: the first test that asked "
                                    f"for it, and {self.root / f'wheel-{version}.log'})")
            raise
        self.built[version] = Built(version, whl, log, secs)
        return self.built[version]

    def get_sdist(self) -> Path:
        if self.sdist is None:
            self.wheel(self.primary)
        return self.sdist


# ------------------------------------------------------------------------------ reading artefacts
def wheel_names(path: Path) -> list[str]:
    with zipfile.ZipFile(path) as z:
        return z.namelist()


def wheel_metadata(path: Path, member: str = "METADATA"):
    with zipfile.ZipFile(path) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/" + member))
        return HeaderParser().parsestr(z.read(name).decode("utf-8"))


def sdist_names(path: Path) -> list[str]:
    """Member paths of the sdist without its top directory ("fastkafka_producer-0.2.0/")."""
    with tarfile.open(path) as t:
        names = [m.name for m in t.getmembers() if m.isfile()]
    tops = {n.split("/", 1)[0] for n in names}
    assert len(tops) == 1, tops
    return sorted(n.split("/", 1)[1] for n in names)


def sdist_metadata(path: Path):
    with tarfile.open(path) as t:
        top = t.getnames()[0].split("/", 1)[0]
        return HeaderParser().parsestr(t.extractfile(f"{top}/PKG-INFO").read().decode("utf-8"))


def main() -> int:
    """``python tests/packaging/distbuild.py``: the interpreters the packaging tests will use, or
    which claimed one is missing (exit status 1), in a second instead of at the end of a test run."""
    missing = 0
    for version in claimed_versions():
        exe, looked = find_cpython(version)
        print(f"CPython {version}: {exe}" if exe else missing_message(version, looked),
              file=sys.stdout if exe else sys.stderr)
        missing += exe is None
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
