"""CRC-32C in C on every compiler the wheels are built with: crc32c_vectors.c (the RFC 3720 vectors, a
bitwise reference, random lengths and alignments, continuation) built from fastkafka/_wire/crc32c_impl.c
by the host gcc, by zig cc for x86_64 and aarch64 (and by aarch64-linux-gnu-gcc when installed), and
run: aarch64 code under qemu on any other machine, where it must take the ARMv8 CRC32 path
("armv8-crc": every CPU qemu models has it).

A compiler or qemu that is absent fails its tests, naming what installs it (scripts/system-packages.sh
--tests; ziglang comes with the ``test`` extra), as does a compiler that fails to build. The one skip:
the x86_64-to-aarch64 cross gcc on an aarch64 machine, where it does not apply.

Besides: the object each toolchain would put into a wheel (``-shared -fPIC``) must not leave a compiler
runtime symbol undefined (``__cpu_model``, ``__cpu_indicator_init``: a shared object that needs them
fails at dlopen on a user's machine).
"""
from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

import cpucaps
import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = next(p for p in HERE.parents if (p / "pyproject.toml").exists())
WIRE = ROOT / "fastkafka" / "_wire"
HARNESS = HERE / "crc32c_vectors.c"
CFLAGS = ["-O2", "-Wall", "-Wextra", "-Werror", f"-I{WIRE}"]

ZIG = [sys.executable, "-m", "ziglang", "cc"]
# name -> (compiler command or None when absent, architecture of the code it makes)
TOOLCHAINS = {
    "gcc": (["gcc"] if shutil.which("gcc") else None, cpucaps.machine()),
    # gcc spells the target attribute differently ("+crc"); a cross gcc checks it on x86_64 hosts
    "gcc-aarch64": (["aarch64-linux-gnu-gcc"] if cpucaps.machine() != "aarch64"
                    and shutil.which("aarch64-linux-gnu-gcc") else None, "aarch64"),
    # the wheel targets (manylinux2014: glibc 2.17)
    "zig-x86_64": (ZIG + ["-target", "x86_64-linux-gnu.2.17"]
                   if importlib.util.find_spec("ziglang") else None, "x86_64"),
    "zig-aarch64": (ZIG + ["-target", "aarch64-linux-gnu.2.17"]
                    if importlib.util.find_spec("ziglang") else None, "aarch64"),
}
# An executable runs without the target's loader and libc as a static musl binary (the glibc one is
# what the shared-object test below builds).
RUN_TARGET = {"zig-aarch64": ["-target", "aarch64-linux-musl", "-static"], "gcc-aarch64": ["-static"]}
# The undefined dynamic symbols crc32c_impl.c may have: libc's, all in glibc 2.17.
LIBC_SYMBOLS = {"getenv", "strcmp", "getauxval"}


def _compiler(name):
    cc, arch = TOOLCHAINS[name]
    if cc is None:
        if name == "gcc-aarch64" and cpucaps.machine() == "aarch64":
            pytest.skip("gcc-aarch64 is the cross compiler of x86_64 hosts; here plain gcc is aarch64")
        pytest.fail(f"{name}: compiler not installed (scripts/system-packages.sh --tests installs "
                    f"gcc and gcc-aarch64-linux-gnu; ziglang comes with the test extra)", pytrace=False)
    return cc, arch


def _runner(arch):
    """The command prefix that runs an ``arch`` executable here; fails when nothing can."""
    if arch == cpucaps.machine():
        return []
    if arch == "aarch64":
        for qemu in ("qemu-aarch64-static", "qemu-aarch64"):
            if shutil.which(qemu):
                return [shutil.which(qemu)]
    pytest.fail(f"cannot run {arch} code on {cpucaps.machine()}: no qemu-{arch} on PATH "
                f"(scripts/system-packages.sh --tests installs qemu-user-static)", pytrace=False)


def _build(cmd, out, *args):
    proc = subprocess.run(cmd + list(args) + ["-o", str(out)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd + list(args))}\n{proc.stderr}"


def _expected_impl(arch, runner):
    if runner:            # under qemu: every modelled aarch64 CPU has CRC32
        return "armv8-crc"
    name, present = cpucaps.crc32c_hw()
    if present is None:
        pytest.fail("the CPU's features cannot be read here (/proc/cpuinfo, getauxval)", pytrace=False)
    return name if present else "table"


# zig builds musl for a new target once (about a minute), then takes it from its cache
@pytest.mark.timeout(900)
@pytest.mark.parametrize("toolchain", sorted(TOOLCHAINS))
def test_c_vectors(toolchain, tmp_path):
    cc, arch = _compiler(toolchain)
    exe = tmp_path / "crc32c_vectors"
    _build(cc + RUN_TARGET.get(toolchain, []), exe, *CFLAGS, str(HARNESS))
    runner = _runner(arch)
    expected = _expected_impl(arch, runner)
    for env, impl in ((None, expected), ("table", "table")):
        environ = dict(os.environ)
        environ.pop("FASTKAFKA_CRC32C", None)
        if env:
            environ["FASTKAFKA_CRC32C"] = env
        proc = subprocess.run(runner + [str(exe)], capture_output=True, text=True, env=environ,
                              timeout=300)
        assert proc.returncode == 0, f"FASTKAFKA_CRC32C={env}: {proc.stdout}{proc.stderr}"
        lines = proc.stdout.split("\n")
        assert lines[0] == f"impl={impl} hw={int(expected != 'table')}", proc.stdout
        assert lines[1].startswith("ok "), proc.stdout


@pytest.mark.timeout(600)
@pytest.mark.parametrize("toolchain", sorted(TOOLCHAINS))
def test_shared_object_needs_only_libc(toolchain, tmp_path):
    cc, _ = _compiler(toolchain)
    nm = shutil.which("nm")
    if nm is None:
        pytest.fail("nm (binutils) not installed (it comes with gcc)", pytrace=False)
    so = tmp_path / "crc32c_impl.so"
    _build(cc, so, *CFLAGS, "-O3", "-fPIC", "-shared", str(WIRE / "crc32c_impl.c"))
    out = subprocess.run([nm, "-D", "--undefined-only", str(so)], capture_output=True, text=True,
                         check=True).stdout
    # "U name@version"; "w name" are the weak references gcc's crtstuff adds, resolved or not
    undefined = {line.split()[-1].split("@")[0]: line.split()[-2] for line in out.splitlines() if line.strip()}
    assert not [s for s in undefined if s.startswith("__cpu_")], undefined
    assert {s for s, kind in undefined.items() if kind == "U"} <= LIBC_SYMBOLS, undefined
