"""What ``scripts/wheel.sh`` makes: the sdist's contents, the repaired wheels and their metadata.

The builds are the session's (``dist`` in conftest.py): one ``scripts/wheel.sh --targets`` run, the
sdist and the wheel of every tested (CPython, architecture) from it.
"""
from __future__ import annotations

import importlib.util
import re
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from distbuild import (DIST_NAME, REPO, claimed_versions, project_version, pyproject, sdist_metadata,
                       sdist_names, targets_under_test, wheel_metadata, wheel_names)
from packaging.specifiers import SpecifierSet
from packaging.version import Version

pytestmark = pytest.mark.timeout(2400)     # the first test to ask for a wheel waits for its build

from buildtools import pythons
from buildtools.crosswheels import ALL_TARGETS

VERSIONS = claimed_versions()
TARGETS = targets_under_test(VERSIONS)
# manylinux2014 (glibc 2.17) is what the wheels are built for; 2_28 is the most the issue allows
MANYLINUX = {"x86_64": re.compile(r"manylinux_2_17_x86_64|manylinux2014_x86_64"),
             "aarch64": re.compile(r"manylinux_2_17_aarch64|manylinux2014_aarch64")}


def target_id(t) -> str:
    return f"{t[0]}-{t[1]}"


def _sources(*patterns: str) -> set[str]:
    """Source files of the work tree (repository-relative) that a build needs."""
    out = set()
    for pkg in ("fastkafka", "spark_sink"):     # fastkafka_tools stays in the source tree
        for pattern in patterns:
            out |= {p.relative_to(REPO).as_posix() for p in (REPO / pkg).rglob(pattern)
                    if "__pycache__" not in p.parts}
    return out


def _pyx_modules() -> set[str]:
    return {p[:-len(".pyx")].replace("/", ".") for p in _sources("*.pyx")}


def _setup():
    """setup.py as a module (importing it builds nothing)."""
    spec = importlib.util.spec_from_file_location("fastkafka_setup", REPO / "setup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# The compiled modules only the tests use: built with FASTKAFKA_TEST_MODULES=1, never in a wheel.
TEST_MODULES = frozenset(_setup().TEST_MODULES)


def test_the_test_only_modules_are_known_to_setup_and_to_the_tests():
    import seam_modules

    assert TEST_MODULES, "setup.py names no test-only module"
    assert TEST_MODULES == set(seam_modules.TEST_MODULES), "setup.py's TEST_MODULES vs tests/seam_modules.py's"
    assert TEST_MODULES <= _pyx_modules(), "a test-only module that is no .pyx of the tree"
    setup = _setup()
    assert not TEST_MODULES & {e.name for e in setup.extensions(test_modules=False)}
    assert TEST_MODULES <= {e.name for e in setup.extensions(test_modules=True)}


# ------------------------------------------------------------------------------------ sdist
# The project's own C sources (everything else ending in .c is Cython's output).
C_SOURCES = {"fastkafka/_wire/crc32c_impl.c", "fastkafka/_wire/ccodecs_impl.c"}


def test_sdist_has_the_build_sources_and_no_generated_files(dist):
    names = set(sdist_names(dist.get_sdist()))
    needed = {"setup.py", "pyproject.toml", "README.md", "LICENSE", "PKG-INFO", "MANIFEST.in",
              "fastkafka/_wire/crc32c_impl.h", "fastkafka/_wire/ccodecs_impl.h",
              "fastkafka/py.typed", "pyspark_fastkafka.py"} | C_SOURCES
    needed |= _sources("*.py", "*.pyx", "*.pxd", "*.pxi", "*.pyi", "*.h", "*.xml")
    assert needed - names == set(), "missing from the sdist"
    assert {"fastkafka/_producer/sendpath.pyx", "fastkafka/_net/mutex.pxd"} <= names
    generated = sorted(n for n in names if n.endswith((".so", ".o", ".pyc", ".pyd", ".html"))
                       or (n.endswith(".c") and n not in C_SOURCES))
    assert generated == [], "generated files in the sdist"
    assert not any(n.startswith(("tests/", "bench/", "build/", "dist/", ".venv/", "docs/",
                                 "fastkafka_tools/")) for n in names)


def test_sdist_metadata(dist):
    md = sdist_metadata(dist.get_sdist())
    assert md["Name"] == DIST_NAME
    assert md["Version"] == project_version()
    assert md["License-Expression"] == "Apache-2.0"


def test_license_is_apache_2(dist):
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    with tarfile.open(dist.get_sdist()) as t:
        member = next(m for m in t.getmembers() if m.name.endswith("/LICENSE"))
        assert t.extractfile(member).read().decode("utf-8") == text


def test_build_prints_no_deprecation_warnings(dist):
    log = dist.sdist_log
    hits = [line for line in log.splitlines() if re.search(r"deprecat", line, re.I)]
    assert hits == [], "the build warns of deprecations:\n" + "\n".join(hits)


# ------------------------------------------------------------------------------------ wheels
@pytest.mark.parametrize("target", TARGETS, ids=target_id)
def test_wheel_is_manylinux_and_complete(dist, target):
    version, arch = target
    built = dist.wheel(version, arch)
    name = built.wheel.name
    cp = "cp" + version.replace(".", "")
    m = re.fullmatch(r"fastkafka_producer-(?P<v>[^-]+)-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl", name)
    assert m, name
    assert m["v"] == project_version() and m["py"] == cp and m["abi"] == cp, name
    assert all(MANYLINUX[arch].fullmatch(tag) for tag in m["plat"].split(".")), f"not manylinux_2_17: {name}"
    # auditwheel's verdict, printed by the build
    assert re.search(rf'{re.escape(name)} is consistent with the following platform tag: '
                     rf'"manylinux_2_17_{arch}"', built.log), f"auditwheel show's verdict on {name} not in the log"
    # wheel.sh leaves only repaired wheels (and the sdist) in its output directory
    assert not [p.name for p in built.wheel.parent.iterdir() if "-linux_" in p.name], \
        "an unrepaired wheel was left beside the repaired ones"

    names = set(wheel_names(built.wheel))
    so = {n for n in names if n.endswith(".so")}
    modules = {n.split(".cpython-")[0].replace("/", ".") for n in so}
    assert modules == _pyx_modules() - TEST_MODULES, "compiled modules of the wheel vs the .pyx files"
    # no test-only module, nor its contract or stubs
    for test_module in sorted(TEST_MODULES):
        path = test_module.replace(".", "/")
        assert not [n for n in names if n.startswith(path + ".")], f"the wheel carries {test_module}"
    assert all(f".cpython-{cp[2:]}-{arch}-linux-gnu.so" in n for n in so), so
    for needed in ("fastkafka/__init__.py", "fastkafka/py.typed", "fastkafka/producer.py",
                   "fastkafka/_producer/sendpath.pyi", "fastkafka/_producer/sendpath.pxd",
                   "spark_sink/__init__.py", "spark_sink/datasource.py", "spark_sink/py.typed",
                   "pyspark_fastkafka.py"):
        assert needed in names, needed
    dist_info = f"fastkafka_producer-{project_version()}.dist-info/"
    assert dist_info + "licenses/LICENSE" in names
    assert dist_info + "entry_points.txt" not in names, "the wheel installs no command"
    # the wheel carries compiled modules, not what made them; nothing of the tests or benchmarks
    assert not [n for n in names if n.endswith((".pyx", ".c", ".o"))]
    assert not [n for n in names if n.startswith(("tests/", "bench/", "docs/"))]
    # auditwheel vendored no library (the extensions need libc only); there would be a .libs dir
    assert not [n for n in names if ".libs/" in n]


@pytest.mark.parametrize("target", TARGETS, ids=target_id)
def test_wheel_names_no_directory_of_the_build_machine(dist, target):
    """No run-time search path or other path of the build machine in the compiled modules (pyenv
    interpreters put an rpath to their lib directory into every extension they link)."""
    version, arch = target
    built = dist.wheel(version, arch)
    headers = pythons.headers(version, arch)
    prefixes = {sys.base_prefix, sys.prefix, str(REPO), str(dist.root), str(headers)}
    needles = {p.encode() for p in prefixes if len(p) > 4}
    with zipfile.ZipFile(built.wheel) as z:
        for n in z.namelist():
            if n.endswith(".so"):
                data = z.read(n)
                assert b"/.pyenv/" not in data, n
                for needle in needles:
                    assert needle not in data, (n, needle)


@pytest.mark.parametrize("target", TARGETS, ids=target_id)
def test_wheel_metadata(dist, target):
    md = wheel_metadata(dist.wheel(*target).wheel)
    project = pyproject()["project"]
    assert md["Metadata-Version"] and Version(md["Metadata-Version"]) >= Version("2.4")
    assert md["Name"] == DIST_NAME
    assert md["Version"] == project_version()
    assert md["License-Expression"] == "Apache-2.0"
    assert md.get_all("License-File") == ["LICENSE"]
    assert not md.get_all("License"), "the deprecated License field next to License-Expression"
    assert SpecifierSet(md["Requires-Python"]) == SpecifierSet(project["requires-python"])
    classifiers = set(md.get_all("Classifier"))
    for c in ("Operating System :: POSIX :: Linux", "Programming Language :: Python :: 3 :: Only",
              "Programming Language :: Cython", "Programming Language :: Python :: Implementation :: CPython"):
        assert c in classifiers, c
    assert {f"Programming Language :: Python :: {v}" for v in VERSIONS} <= classifiers
    assert any(c.startswith("Development Status :: ") for c in classifiers)
    assert any(c.startswith("Topic :: ") for c in classifiers)
    assert not any(c.startswith("License :: ") for c in classifiers), "license classifiers are deprecated"
    assert md["Keywords"]
    extras = set(md.get_all("Provides-Extra"))
    assert {"spark", "arrow", "lz4", "snappy", "zstd", "all", "test", "bench"} <= extras
    requires = md.get_all("Requires-Dist")
    assert {'lz4>=4.3; python_version < "3.15"', "cramjam>=2.8"} <= set(requires), requires
    for extra, wanted in {"spark": ("pyspark", "pyarrow"), "arrow": ("pyarrow",), "lz4": ("lz4",),
                          "snappy": ("cramjam",), "zstd": ("cramjam",),
                          "all": ("pyspark", "pyarrow", "lz4", "cramjam")}.items():
        got = {r.split(";")[0].strip() for r in requires if f'extra == "{extra}"' in r}
        names = {re.split(r"[<>=!~ \[]", r, maxsplit=1)[0] for r in got}
        assert set(wanted) <= names, (extra, got)
    assert md["Description-Content-Type"] == "text/markdown"
    # [spark] keeps the platform's own pyspark: 3.5 (partition_writer, batch_writer) up to 4.x
    spark = [r for r in requires if r.startswith("pyspark") and 'extra == "spark"' in r]
    assert spark and SpecifierSet(spark[0].split(";")[0][len("pyspark"):]).contains("3.5.3"), spark
    assert all(SpecifierSet(spark[0].split(";")[0][len("pyspark"):]).contains(v)
               for v in ("3.5.0", "4.0.1", "4.1.0", "4.2.0")), spark


def test_wheel_sh_all_is_every_claimed_version_on_both_architectures():
    """``scripts/wheel.sh --all`` builds cp310-cp315 for x86_64 and aarch64: the claimed versions."""
    assert sorted(ALL_TARGETS) == sorted(f"cp{v.replace('.', '')}-{a}" for v in VERSIONS
                                         for a in ("x86_64", "aarch64"))


def test_classifiers_and_requires_python_agree():
    """requires-python admits exactly the CPython versions the classifiers claim (and tests here)."""
    project = pyproject()["project"]
    spec = SpecifierSet(project["requires-python"])
    admitted = [f"3.{m}" for m in range(0, 40) if Version(f"3.{m}.0") in spec]
    assert admitted == VERSIONS, (project["requires-python"], VERSIONS)
    assert "Programming Language :: Python :: 3 :: Only" in project["classifiers"]
    assert "urls" not in project or all(u.startswith("https://") for u in project["urls"].values())
