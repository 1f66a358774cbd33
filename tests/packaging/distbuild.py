"""Helpers of the packaging tests: the sdist and the repaired wheels ``scripts/wheel.sh`` builds.

* The CPython versions the project claims as tested are those of pyproject.toml's
  ``Programming Language :: Python :: 3.X`` classifiers (:func:`claimed_versions`); every one of
  them is built and tested here. An interpreter that cannot be found fails the tests that need it
  (never a skip: CI runs on the same machine image, which has them).
* Interpreters: 3.10-3.13 on the host, looked up at run time (:func:`find_cpython`: pyenv's versions
  directory, then ``python3.X`` on PATH); 3.14 and 3.15 in a Debian unstable root, and arm64's
  3.11 in an arm64 Debian root under qemu (:data:`ROOT_OF`, buildtools/roots.py).
* :class:`Dist` (the ``dist`` fixture of conftest.py): one session-wide build, when a test first
  needs it: ``bash scripts/wheel.sh --targets ...`` makes the sdist and the wheel of every tested
  target (:func:`targets_under_test`) into one folder. ``bash scripts/wheel.sh --all`` adds the aarch64
  wheels of the versions no root here runs (built the same way; docs/platforms.md).
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
sys.path.insert(0, str(REPO))
from buildtools.crosswheels import ALL_TARGETS  # noqa: E402
from buildtools.pythons import PYENV_VERSIONS, find_cpython  # noqa: E402

# Where each tested (version, architecture) runs: the host's interpreters (pyenv), or a Debian root
# (buildtools.roots): CPython 3.14 and 3.15 in sid, and arm64's 3.11 under qemu in bookworm.
ROOT_OF = {("3.14", "x86_64"): ("sid-amd64", "python3.14"), ("3.15", "x86_64"): ("sid-amd64", "python3.15"),
           ("3.11", "aarch64"): ("bookworm-arm64", "python3")}


def targets_under_test(versions: list[str]) -> list[tuple[str, str]]:
    """(version, arch) of every wheel the tests install: each claimed version on x86_64, and the
    aarch64 ones an emulated root can run."""
    out = [(v, "x86_64") for v in versions]
    out += [k for k in ROOT_OF if k[1] != "x86_64" and k[0] in versions]
    return out


def target_name(version: str, arch: str) -> str:
    return f"cp{version.replace('.', '')}-{arch}"


def missing_message(version: str, looked: list[str]) -> str:
    return (f"CPython {version} not found (looked in: {', '.join(looked)}). pyproject.toml's "
            f"classifiers claim it is tested: install it (e.g. `pyenv install {version}`), or drop "
            f"its classifier and narrow requires-python")


def require_cpython(version: str) -> str:
    """A host interpreter of ``version`` (pyenv's 3.10-3.13); the others run in a root."""
    import pytest

    exe, looked = find_cpython(version)
    if exe is None:
        pytest.fail(missing_message(version, looked), pytrace=False)
    return exe


# ------------------------------------------------------------------------------ the builds
@dataclass
class Built:
    version: str
    arch: str
    wheel: Path
    log: str
    seconds: float


@dataclass
class Dist:
    """The session's artefacts: on first use, one ``scripts/wheel.sh --targets`` run builds the
    sdist and the wheel of every tested target into one folder (as ``dist/`` would hold them)."""
    root: Path
    versions: list[str]
    primary: str
    sdist: Path | None = None
    sdist_log: str = ""
    built: dict = field(default_factory=dict)        # (version, arch) -> Built
    failed: str | None = None

    @property
    def outdir(self) -> Path:
        return self.root / "dist"

    def _build(self) -> None:
        import pytest

        if self.failed:
            pytest.fail(f"(the session's earlier build) {self.failed}", pytrace=False)
        targets = targets_under_test(self.versions)
        env = dict(os.environ)
        for var in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV", "PYTHON"):
            env.pop(var, None)
        t0 = time.monotonic()
        cmd = ["bash", str(WHEEL_SH), "--outdir", str(self.outdir),
               "--targets", ",".join(target_name(*t) for t in targets)]
        try:
            r = subprocess.run(cmd, cwd=str(REPO), env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=BUILD_TIMEOUT_S)
            out, code = r.stdout, r.returncode
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            code = None
        (self.root / "wheel.log").write_text(out)
        if code != 0:
            self.failed = (f"{' '.join(cmd[1:])} " + ("did not finish in %ds" % BUILD_TIMEOUT_S if code is None
                           else f"failed (exit {code})") + f"; full output: {self.root / 'wheel.log'}")
            raise AssertionError(f"{self.failed}; its output ends:\n{out[-6000:]}")
        secs = time.monotonic() - t0
        self.sdist = self._only(f"{DIST_FILE_PREFIX}*.tar.gz")
        self.sdist_log = out
        for version, arch in targets:
            whl = self._only(f"{DIST_FILE_PREFIX}*-cp{version.replace('.', '')}-*{arch}.whl")
            self.built[(version, arch)] = Built(version, arch, whl, out, secs)

    def _only(self, pattern: str) -> Path:
        found = sorted(self.outdir.glob(pattern))
        assert len(found) == 1, f"expected one {pattern} in {self.outdir}, found {[p.name for p in self.outdir.iterdir()]}"
        return found[0]

    def wheel(self, version: str, arch: str = "x86_64") -> Built:
        if not self.built:
            self._build()
        if (version, arch) not in self.built:
            raise AssertionError(f"no wheel for CPython {version} on {arch} among the tested targets "
                                 f"{sorted(self.built)}")
        return self.built[(version, arch)]

    def get_sdist(self) -> Path:
        if self.sdist is None:
            self._build()
        return self.sdist


# ------------------------------------------------------------------------------ reading artefacts
def add_test_modules(site_packages: Path, work: Path, target: str) -> list[str]:
    """The test-only compiled modules (setup.py's TEST_MODULES, in no wheel) compiled for ``target``
    (``cp314-x86_64``) by ``scripts/wheel.sh --test-modules`` into ``work``, and put into the package
    installed in ``site_packages``, for a test run against an installed wheel; their names."""
    from seam_modules import TEST_MODULES            # tests/ (on sys.path in the test session)

    r = subprocess.run(["bash", str(WHEEL_SH), "--test-modules", "--targets", target, "--outdir", str(work)],
                       cwd=REPO, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    assert r.returncode == 0, f"wheel.sh --test-modules failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    built = sorted((work / target).rglob("*.so"))
    names = sorted(p.relative_to(work / target).as_posix().split(".cpython-")[0].replace("/", ".")
                   for p in built)
    assert names == sorted(TEST_MODULES), f"wheel.sh --test-modules made {names}"
    for p in built:
        dest = site_packages / p.relative_to(work / target)
        assert dest.parent.is_dir(), f"the installed wheel has no {dest.parent}"
        shutil.copy2(p, dest)
    return names


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
        if (version, "x86_64") in ROOT_OF:
            name, exe = ROOT_OF[(version, "x86_64")]
            print(f"CPython {version}: {exe} in the {name} root (buildtools/roots.py; made by scripts/test.sh)")
            continue
        exe, looked = find_cpython(version)
        print(f"CPython {version}: {exe}" if exe else missing_message(version, looked),
              file=sys.stdout if exe else sys.stderr)
        missing += exe is None
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
