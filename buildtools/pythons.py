"""Where the CPython interpreters and headers of each wheel target come from.

* Interpreters on this machine (:func:`find_cpython`): pyenv's versions directory (``$PYENV_ROOT``,
  ``pyenv root``, ``~/.pyenv``), then ``python3.X`` on PATH. CPython 3.14 and 3.15 run in the
  Debian unstable root (buildtools.roots, ``sid-amd64``).
* Headers of a (version, architecture) (:func:`headers`), kept in the cache outside the work tree
  (``$FASTKAFKA_CACHE/pyheaders/cpXY-ARCH``):
  - x86_64 3.10-3.13: the pyenv interpreter's own include directory;
  - Debian's ``libpython3.X-dev`` package of that architecture where Debian has that version
    (3.11 in bookworm, 3.13 in trixie, 3.14 and 3.15 in sid), fetched with ``apt-get download``
    through a private apt configuration (the machine's own ``/etc/apt`` is never touched);
  - aarch64 3.10 and 3.12 (no Debian release has them): the version's generic headers from pyenv
    and its x86_64 ``pyconfig.h`` turned into aarch64's by :func:`aarch64_pyconfig`. The two
    differ in four lines only, none of them part of the extension ABI (Debian's amd64 and arm64
    pyconfig.h of 3.11 and of 3.13 differ in exactly these; a packaging test checks it).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from fastkafka_tools.apachekafka import _file_lock, cache_root

TRIPLET = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu"}
DEBIAN_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}
# The Debian suite that carries libpython3.X-dev for a version.
DEBIAN_SUITE = {"3.11": "bookworm", "3.13": "trixie", "3.14": "sid", "3.15": "sid"}
# Versions whose x86_64 interpreter (and headers) come from pyenv; the rest from Debian.
PYENV_VERSIONS = ("3.10", "3.11", "3.12", "3.13")


class HeadersError(RuntimeError):
    """The headers of a target could not be found or fetched."""


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


def interpreter_version(exe: str) -> tuple[str, str] | None:
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
    """(path of a CPython ``version`` interpreter on this machine or None, the places looked at)."""
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
            if exe.exists() and interpreter_version(str(exe)) == ("cpython", version):
                return str(exe), looked
    looked.append(f"python{version} on PATH")
    exe = shutil.which(f"python{version}")
    if exe and interpreter_version(exe) == ("cpython", version):
        return exe, looked
    return None, looked


def _include_of(exe: str) -> Path:
    out = subprocess.run([exe, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
                         capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    return Path(out)


# ------------------------------------------------------------------------------ headers
def aarch64_pyconfig(x86_64_text: str) -> str:
    """aarch64's pyconfig.h from x86_64's of the same version and configuration: x86 inline
    assembly off, wchar_t usable (unsigned on aarch64), support tier 2."""
    subs = [(r"#define HAVE_GCC_ASM_FOR_X64 1", "/* #undef HAVE_GCC_ASM_FOR_X64 */"),
            (r"#define HAVE_GCC_ASM_FOR_X87 1", "/* #undef HAVE_GCC_ASM_FOR_X87 */"),
            (r"/* #undef HAVE_USABLE_WCHAR_T */", "#define HAVE_USABLE_WCHAR_T 1"),
            (r"#define PY_SUPPORT_TIER 1", "#define PY_SUPPORT_TIER 2")]
    text = x86_64_text
    for old, new in subs:
        text = text.replace(old, new)
    return text


def _apt_dir() -> Path:
    return Path(cache_root()) / "apt"


def _apt_options() -> list[str]:
    d = _apt_dir()
    return ["-o", f"Dir::Etc::SourceList={d / 'sources.list'}", "-o", "Dir::Etc::SourceParts=/dev/null",
            "-o", f"Dir::State::Lists={d / 'lists'}", "-o", f"Dir::Cache={d / 'cache'}",
            "-o", "Dir::State::status=/dev/null",
            "-o", "APT::Architectures::=amd64", "-o", "APT::Architectures::=arm64",
            "-o", "APT::Sandbox::User=root", "-o", "Acquire::Check-Valid-Until=false"]


def _debian_mirror() -> str:
    """The Debian mirror the machine's own apt sources name (the one reachable here)."""
    for path in ["/etc/apt/sources.list", *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        m = re.search(r"(https?://[^\s]+/debian)/?(\s|$)", text)
        if m:
            return m.group(1)
    return "http://deb.debian.org/debian"


def _apt_update(force: bool = False) -> None:
    d = _apt_dir()
    stamp = d / ".updated"
    if stamp.exists() and not force:
        return
    (d / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (d / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    mirror = _debian_mirror()
    suites = sorted(set(DEBIAN_SUITE.values()))
    (d / "sources.list").write_text("".join(f"deb [arch=amd64,arm64] {mirror} {s} main\n" for s in suites))
    r = subprocess.run(["apt-get", *_apt_options(), "update", "-q"], capture_output=True, text=True)
    if r.returncode != 0:
        raise HeadersError(f"apt-get update (private configuration in {d}) failed:\n{r.stderr[-2000:]}")
    stamp.write_text("")


def _debian_headers(version: str, arch: str, dest: Path) -> None:
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise HeadersError(f"the headers of CPython {version} for {arch} come from Debian's "
                           f"libpython{version}-dev, and this machine has no apt-get/dpkg-deb")
    pkg = f"libpython{version}-dev:{DEBIAN_ARCH[arch]}"
    with tempfile.TemporaryDirectory(prefix="pyheaders-") as tmp:
        for attempt in (False, True):          # a stale package list names a version gone: update
            _apt_update(force=attempt)
            r = subprocess.run(["apt-get", *_apt_options(), "download", pkg], cwd=tmp,
                               capture_output=True, text=True)
            if r.returncode == 0:
                break
        else:
            raise HeadersError(f"apt-get download {pkg} failed:\n{r.stderr[-2000:]}")
        deb = next(Path(tmp).glob("*.deb"))
        subprocess.run(["dpkg-deb", "-x", str(deb), f"{tmp}/x"], check=True)
        generic = Path(tmp, "x", "usr", "include", f"python{version}")
        pyconfig = Path(tmp, "x", "usr", "include", TRIPLET[arch], f"python{version}", "pyconfig.h")
        if not (generic / "Python.h").exists() or not pyconfig.exists():
            raise HeadersError(f"{deb.name} has no Python.h or no {TRIPLET[arch]} pyconfig.h")
        shutil.copytree(generic, dest)
        shutil.copyfile(pyconfig, dest / "pyconfig.h")      # replaces Debian's multiarch shim
        (dest / ".source").write_text(deb.name + "\n")


def headers(version: str, arch: str) -> Path:
    """An include directory with Python.h and the right pyconfig.h for CPython ``version`` on
    ``arch`` (x86_64 or aarch64): made once, then cached."""
    if arch not in TRIPLET:
        raise HeadersError(f"unknown architecture {arch!r} (x86_64, aarch64)")
    if arch == "x86_64" and version in PYENV_VERSIONS:
        exe, looked = find_cpython(version)
        if exe is None:
            raise HeadersError(f"CPython {version} not found (looked in: {', '.join(looked)}); "
                               f"its headers come from it (e.g. `pyenv install {version}`)")
        inc = _include_of(exe)
        if not (inc / "Python.h").exists():
            raise HeadersError(f"{exe} has no Python.h in {inc}")
        return inc
    base = Path(cache_root()) / "pyheaders"
    dest = base / f"cp{version.replace('.', '')}-{arch}"
    if (dest / ".source").exists():
        return dest
    base.mkdir(parents=True, exist_ok=True)
    with _file_lock(str(base / f".{dest.name}.lock")):
        if (dest / ".source").exists():
            return dest
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=base))
        try:
            inner = tmp / "inc"
            if version in DEBIAN_SUITE:
                _debian_headers(version, arch, inner)
            elif arch == "aarch64":
                x86 = headers(version, "x86_64")
                shutil.copytree(x86, inner)
                (inner / "pyconfig.h").write_text(aarch64_pyconfig((x86 / "pyconfig.h").read_text()))
                (inner / ".source").write_text(f"{x86} with aarch64_pyconfig\n")
            else:
                raise HeadersError(f"no source of headers for CPython {version} on {arch}")
            if dest.exists():
                shutil.rmtree(dest)
            os.rename(inner, dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return dest
