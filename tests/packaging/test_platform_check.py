"""Linux only, said at once: ``import fastkafka`` (and ``spark_sink``, which imports it) raises an
ImportError naming the platform before any compiled module loads, and ``setup.py`` stops before
anything is compiled, naming the platform too (in the checkout and in the sdist).

The other platforms are simulated: ``sys.platform`` is set before the import / the build script.
"""
from __future__ import annotations

import subprocess
import sys
import tarfile
import time

import pytest
from distbuild import IMPORT_AS, REPO

PLATFORMS = ["darwin", "win32", "freebsd14", "cygwin"]


# setup.py as a build frontend runs it (``__main__``), with a patched platform.
SETUP_AS = r'''
import runpy, sys
platform, setup_py = sys.argv[1], sys.argv[2]
sys.platform = platform
sys.argv = [setup_py, "--version"]
runpy.run_path(setup_py, run_name="__main__")
'''

# The PEP 517 hook a frontend calls first (pip, build), on the sdist's tree.
BACKEND_AS = r'''
import sys
import setuptools.build_meta as backend
sys.platform = sys.argv[1]
backend.get_requires_for_build_wheel()
'''


@pytest.mark.parametrize("module", ["fastkafka", "spark_sink"])
@pytest.mark.parametrize("platform", PLATFORMS)
def test_import_refuses_other_platforms(platform, module):
    r = subprocess.run([sys.executable, "-c", IMPORT_AS, platform, module], cwd=str(REPO),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    message, loaded = r.stdout.strip().splitlines()[-2:]
    assert f"sys.platform == {platform!r}" in message, message
    assert "Linux" in message and "epoll" in message, message
    assert loaded == "[]", f"modules left loaded by the refused import: {loaded}"


def test_import_on_linux_is_unchanged():
    r = subprocess.run([sys.executable, "-c", "import fastkafka, spark_sink; print(fastkafka.__version__);"
                        "print(hasattr(fastkafka, '_sys'))"], cwd=str(REPO), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [fastkafka_version(), "False"]


def fastkafka_version() -> str:
    import re
    text = (REPO / "fastkafka" / "_version.py").read_text(encoding="utf-8")
    return re.search(r'^__version__ = "([^"]+)"', text, re.M).group(1)


def _assert_build_refused(r: subprocess.CompletedProcess, platform: str, elapsed: float) -> None:
    assert r.returncode != 0, f"the build went on with sys.platform = {platform!r}:\n{r.stdout}\n{r.stderr}"
    err = r.stderr
    assert f"sys.platform == {platform!r}" in err and "Linux only" in err, err
    assert "Traceback" not in err, "a traceback instead of the message:\n" + err
    assert "Cython" not in err + r.stdout and "gcc" not in err + r.stdout, "it began to build"
    assert elapsed < 60, f"the refusal took {elapsed:.0f}s"


@pytest.mark.parametrize("platform", PLATFORMS)
def test_setup_py_refuses_other_platforms(platform):
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", SETUP_AS, platform, "setup.py"], cwd=str(REPO),
                       capture_output=True, text=True, timeout=120)
    _assert_build_refused(r, platform, time.monotonic() - t0)


@pytest.mark.timeout(2400)                   # the first test to ask for the sdist waits for its build
@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_sdist_build_backend_refuses_other_platforms(platform, dist, tmp_path):
    """The sdist's own setup.py, reached the way pip reaches it (setuptools' PEP 517 backend)."""
    with tarfile.open(dist.get_sdist()) as t:
        t.extractall(tmp_path, filter="data") if hasattr(tarfile, "data_filter") else t.extractall(tmp_path)
    (src,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    for script, args in ((SETUP_AS, [platform, "setup.py"]), (BACKEND_AS, [platform])):
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-c", script, *args], cwd=str(src), capture_output=True,
                           text=True, timeout=120)
        _assert_build_refused(r, platform, time.monotonic() - t0)
