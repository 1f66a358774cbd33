"""What the platform table (docs/platforms.md) promises beyond the wheels' round trips: an sdist that
fails at once and says why where no wheel fits, the aarch64 headers of 3.10 and 3.12 derived by a
rule Debian's own packages confirm, and a [spark] extra that keeps the platform's own pyspark.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from distbuild import DIST_NAME, REPO, project_version, require_cpython

from buildtools import pythons

pytestmark = pytest.mark.timeout(2400)     # the first test to ask for the sdist waits for its build


def _setup_module():
    spec = importlib.util.spec_from_file_location("fastkafka_setup_for_tests", REPO / "setup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _venv(tmp_path: Path, version: str = "3.11") -> tuple[Path, dict]:
    venv = tmp_path / "venv"
    subprocess.run([require_cpython(version), "-m", "venv", str(venv)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CC", "CXX", "LDSHARED")}
    env.update(PATH=str(venv / "bin"), VIRTUAL_ENV=str(venv), PYTHONNOUSERSITE="1")
    return venv, env


# ------------------------------------------------------------------------------ the sdist
@pytest.mark.parametrize("compiler,has_headers,missing", [
    (None, True, ["a C compiler ('cc' is not on PATH"]),
    ("/usr/bin/cc", False, ["the Python headers (no Python.h in /inc)"]),
    (None, False, ["a C compiler", "the Python headers"]),
])
def test_build_prerequisites_message_names_what_is_missing(compiler, has_headers, missing):
    msg = _setup_module().build_prerequisites_message("cc", compiler, "/inc", has_headers, "riscv64",
                                                      "CPython 3.12.1", "glibc 2.28")
    for part in missing:
        assert part in msg, msg
    assert "riscv64" in msg and "CPython 3.12.1" in msg and "glibc 2.28" in msg, msg
    assert "3.10-3.15" in msg and "x86_64 and aarch64" in msg and "manylinux2014" in msg, msg
    assert "--only-binary fastkafka-producer" in msg, msg


def test_build_prerequisites_message_is_none_when_all_is_there():
    assert _setup_module().build_prerequisites_message("cc", "/usr/bin/cc", "/inc", True, "x86_64",
                                                       "CPython 3.12.1", "glibc 2.36") is None


def test_sdist_without_a_compiler_fails_at_once_naming_the_wheels(dist, tmp_path):
    """pip takes the sdist (here forced with --no-binary, as when no wheel fits): with no compiler on
    PATH the build stops before Cython with the message, not a compiler's error."""
    venv, env = _venv(tmp_path)
    t0 = time.monotonic()
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
                        "--no-input", "--no-binary", DIST_NAME, "--find-links", str(dist.get_sdist().parent),
                        f"{DIST_NAME}=={project_version()}"], env=env, cwd=str(tmp_path),
                       capture_output=True, text=True, timeout=900)
    elapsed = time.monotonic() - t0
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-3000:]
    assert "cannot be built from source here: missing a C compiler" in out, out[-4000:]
    assert "3.10-3.15 on Linux x86_64 and aarch64" in out, out[-4000:]
    assert "Compiling" not in out and "Cythonizing" not in out, "the build began:\n" + out[-4000:]
    assert "gcc -" not in out and "cc -" not in out, out[-4000:]
    assert elapsed < 300, f"the refusal took {elapsed:.0f} s"


# ------------------------------------------------------------------------------ aarch64 headers
@pytest.mark.parametrize("version", ["3.11", "3.13"])
def test_aarch64_pyconfig_rule_reproduces_debians_arm64_pyconfig(version, tmp_path):
    """The rule that makes the aarch64 pyconfig.h of 3.10 and 3.12 (which no Debian release has)
    from their x86_64 one turns Debian's amd64 pyconfig.h of 3.11 and 3.13 into Debian's arm64 one,
    byte for byte."""
    pythons._debian_headers(version, "x86_64", tmp_path / "amd64")
    pythons._debian_headers(version, "aarch64", tmp_path / "arm64")
    amd64 = (tmp_path / "amd64" / "pyconfig.h").read_text()
    arm64 = (tmp_path / "arm64" / "pyconfig.h").read_text()
    assert amd64 != arm64
    assert pythons.aarch64_pyconfig(amd64) == arm64


# ------------------------------------------------------------------------------ [spark]
@pytest.mark.parametrize("pyspark", ["3.5.3", "4.0.1", "4.1.0"])
def test_spark_extra_keeps_the_installed_pyspark(pyspark, dist, tmp_path):
    """An environment whose platform installed pyspark (Databricks, EMR, Dataproc): installing
    fastkafka-producer[spark] keeps it. The platform's pyspark is stood for by its metadata alone
    (a dist-info folder), which is all pip's resolver reads; pip's report says what it would do."""
    venv, env = _venv(tmp_path)
    site = next((venv / "lib").glob("python3.*/site-packages"))
    info = site / f"pyspark-{pyspark}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: pyspark\nVersion: {pyspark}\n"
                                   f"Requires-Dist: py4j>=0.10.9\n")
    (info / "INSTALLER").write_text("platform\n")
    (info / "RECORD").write_text("")
    report = tmp_path / "report.json"
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
                        "--no-input", "--dry-run", "--report", str(report), "--only-binary", DIST_NAME,
                        "--find-links", str(dist.get_sdist().parent), f"{DIST_NAME}[spark]=={project_version()}"],
                       env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    would = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
    assert DIST_NAME in would, would
    assert "pyspark" not in would, f"pip would replace the installed pyspark {pyspark} with {would.get('pyspark')}"
    assert "pyarrow" in would, would


def test_free_threaded_cpython_is_refused_by_name():
    mod = _setup_module()
    assert mod.free_threaded_message(0) is None and mod.free_threaded_message(None) is None
    msg = mod.free_threaded_message(1)
    assert "free-threaded" in msg and "3.14t" in msg and "standard build" in msg, msg


def test_platform_table_lists_every_claimed_version_and_architecture():
    """docs/platforms.md has a row per claimed CPython, saying for each architecture how it is tested;
    requires-python and the README point there."""
    from distbuild import claimed_versions, pyproject

    text = (REPO / "docs" / "platforms.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in text.splitlines()
            if line.startswith("| 3.")}
    assert sorted(rows) == claimed_versions(), sorted(rows)
    for v, line in rows.items():
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert len(cells) == 3 and all(cells), line
    assert "docs/platforms.md" in (REPO / "README.md").read_text()
    assert "3.10 to 3.15" in text
    assert pyproject()["project"]["requires-python"] == ">=3.10,<3.16"
