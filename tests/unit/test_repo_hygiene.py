"""Guard: no tracked file names an absolute path of one machine's home, work or temp directory.

Such a path works on the machine that wrote it and nowhere else (a fresh clone's test run failed on a
hard-coded broker binary this way). Code finds files relative to the repository, through
``fastkafka_tools.localbroker``, ``shutil.which`` or ``tempfile``; documentation uses relative paths or
placeholders.

Files: ``git ls-files`` from the repository root; without git (an unpacked archive), a walk of the tree
that skips VCS, virtualenv, build and cache directories, the simple name patterns of .gitignore and
binary files.

What counts: an absolute path starting at a path boundary (not inside a URL, not after ``~`` or a
variable) whose first directory is a work directory, a home directory (``home`` with a user name,
``root``, macOS ``Users``) or a temp directory (``tmp``, ``var`` + ``tmp``, macOS ``var`` +
``folders``). A line that has to show one (documentation explaining this rule) carries the marker
``repo-hygiene: allow-path``. The patterns below are assembled from pieces so that this file does
not match itself.
"""
from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
THIS = os.path.relpath(os.path.abspath(__file__), ROOT).replace(os.sep, "/")

ALLOW_MARKER = "repo-hygiene: " + "allow-path"
SKIP_DIRS = {".git", ".venv", "venv", "build", "dist", "__pycache__", ".pytest_cache", ".benchmarks",
             ".hypothesis", ".mypy_cache", ".ruff_cache", ".tox", ".eggs"}

_S = "/"
_DIRS = [
    _S + "work" + _S,
    _S + "home" + _S + r"[^/\s\"'`]+" + _S,
    _S + "root" + _S,
    _S + "tmp" + _S,
    _S + "var" + _S + "tmp" + _S,
    _S + "var" + _S + "folders" + _S,
    _S + "Users" + _S,
]
# A path boundary: not preceded by a word character, '.', '~', '/', '-', '$', '}' or ')' (URLs,
# relative and home-relative paths, $VAR/..., ${VAR}/... and $(cmd)/... are not machine paths).
MACHINE_PATH = re.compile(r"(?<![\w.~/$})-])(?:" + "|".join(_DIRS) + r")[^\s`'\"]*")


def find_machine_paths(text: str) -> list[tuple[int, str]]:
    """[(line number, matched text)] of the machine paths in ``text``."""
    hits = []
    for no, line in enumerate(text.splitlines(), 1):
        if ALLOW_MARKER in line:
            continue
        hits.extend((no, m.group(0)) for m in MACHINE_PATH.finditer(line))
    return hits


def git_files(root: str) -> list[str] | None:
    """Tracked files (relative, '/'-separated), or None when git or the repository is unavailable."""
    git = shutil.which("git")
    if git is None:
        return None
    try:
        r = subprocess.run([git, "ls-files", "-z"], cwd=root, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0:
        return None
    return [p for p in r.stdout.decode("utf-8", "surrogateescape").split("\0") if p]


def _gitignore_names(root: str) -> tuple[list[str], list[str]]:
    """The name patterns (no '/') of .gitignore, and its negated ('!') patterns."""
    ignore, keep = [], []
    try:
        with open(os.path.join(root, ".gitignore"), encoding="utf-8") as f:
            for raw in f:
                line = raw.strip()
                if not line or line.startswith("#"):
                    continue
                if line.startswith("!"):
                    keep.append(line[1:].lstrip("/"))
                elif "/" not in line.rstrip("/"):
                    ignore.append(line.rstrip("/"))
    except OSError:
        pass
    return ignore, keep


def walked_files(root: str) -> list[str]:
    """The fallback without git: every file of the tree outside SKIP_DIRS and .gitignore's names."""
    ignore, keep = _gitignore_names(root)
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info")
                             and not any(fnmatch.fnmatch(d, p) for p in ignore))
        for name in sorted(filenames):
            rel = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
            if any(fnmatch.fnmatch(name, p) for p in ignore) and rel not in keep:
                continue
            out.append(rel)
    return out


def repo_files(root: str = ROOT) -> list[str]:
    files = git_files(root)
    return files if files is not None else walked_files(root)


def scan(root: str, files: list[str]) -> list[str]:
    """'path:line: text' for every machine path in the text files among ``files``."""
    problems = []
    for rel in files:
        path = os.path.join(root, rel)
        if not os.path.isfile(path):          # deleted in the work tree, not yet committed
            continue
        with open(path, "rb") as f:
            data = f.read()
        if b"\0" in data:                      # binary
            continue
        for no, text in find_machine_paths(data.decode("utf-8", "replace")):
            problems.append(f"{rel}:{no}: {text}")
    return problems


# ------------------------------------------------------------------------------------------ tests
def test_no_tracked_file_names_a_machine_path():
    files = repo_files()
    # the listing really covers the repository (an empty one would pass vacuously)
    assert {"pyproject.toml", "tests/conftest.py", "fastkafka/producer.py"} <= set(files), files[:20]
    problems = scan(ROOT, files)
    assert problems == [], (
        "absolute paths of one machine's home/work/temp directory in tracked files (use paths "
        "relative to the repository, shutil.which, tempfile or fastkafka_tools.localbroker):\n  "
        + "\n  ".join(problems))


@pytest.mark.parametrize("line", [
    "NOIDA = " + repr(_S + "work" + _S + "venv/bin/noida-db"),
    "cd " + _S + "home" + _S + "alice" + _S + "src/fastkafka && make",
    "open(" + repr(_S + "root" + _S + ".cache/x") + ")",
    "--out " + _S + "tmp" + _S + "spark.md",
    "data_dir=" + _S + "var" + _S + "folders" + _S + "xy/T/abc",
    "`" + _S + "Users" + _S + "bob" + _S + "venv/bin/python -m pytest`",
    "path: " + _S + "var" + _S + "tmp" + _S + "fk",
])
def test_detector_flags_machine_paths(line):
    assert find_machine_paths(line), line


@pytest.mark.parametrize("line", [
    "data_dir = tempfile.mkdtemp(prefix='fastkafka-noida-')",
    "see https://example.org" + _S + "home" + _S + "user" + _S + "docs and https://h" + _S + "tmp" + _S,
    "cp x ~" + _S + "work" + _S + "y",
    "$HOME" + _S + "work" + _S + "x and ${TMPDIR}" + _S + "tmp" + _S + "y",
    "tests" + _S + "tmp" + _S + "x and .venv" + _S + "bin" + _S + "python",
    "a " + _S + "tmp" + _S + "x example  # " + ALLOW_MARKER,
    "os.path.exists(f'" + _S + "proc" + _S + "{pid}')",
])
def test_detector_ignores_non_machine_paths(line):
    assert find_machine_paths(line) == [], line


def test_walk_fallback_lists_the_tree_without_git():
    walked = walked_files(ROOT)
    assert THIS in walked and "pyproject.toml" in walked
    assert not any(p.startswith((".git/", ".venv/", "build/")) or "/__pycache__/" in p for p in walked)
    assert not any(p.endswith((".so", ".pyc")) for p in walked)
    tracked = git_files(ROOT)
    if tracked is not None:       # every tracked file that exists is found by the walk too
        missing = [p for p in tracked if os.path.isfile(os.path.join(ROOT, p)) and p not in walked]
        assert missing == []


# ------------------------------------------------------------------ test folders mirror the sources
# The rule (tests/conftest.py): every folder under tests/unit/ is named after a source package, by
# its path: tests/unit/<package>/<subpackage>/... for the package folder <package>/<subpackage>/
# (its __init__.py present), underscores and all.
def _package_dir(name: str) -> str | None:
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def mirror_strays(unit_dir: str, package_dir=_package_dir) -> list[str]:
    """The folders under ``unit_dir`` that name no source package folder (repository-relative to
    ``unit_dir``), each with what it should mirror."""
    strays = []
    for dirpath, dirnames, _files in os.walk(unit_dir):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        rel = os.path.relpath(dirpath, unit_dir)
        if rel == ".":
            continue
        parts = rel.split(os.sep)
        top = package_dir(parts[0])
        if top is None:
            strays.append(f"{rel}: no source package {parts[0]!r}")
            continue
        src = os.path.join(top, *parts[1:])
        if not os.path.isfile(os.path.join(src, "__init__.py")):
            strays.append(f"{rel}: no package folder {'/'.join(parts)}/ in the sources")
    return strays


def test_unit_test_folders_mirror_the_source_packages():
    unit = os.path.join(ROOT, "tests", "unit")
    assert os.path.isdir(os.path.join(unit, "fastkafka"))
    assert mirror_strays(unit) == []


def test_mirror_check_flags_a_folder_of_no_package(tmp_path):
    src = tmp_path / "src"
    (src / "pkg" / "_sub").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("")
    (src / "pkg" / "_sub" / "__init__.py").write_text("")
    (src / "pkg" / "data").mkdir()                      # a folder, but no package
    unit = tmp_path / "unit"
    for d in ("pkg/_sub", "pkg/sub", "pkg/data", "pkg/core", "other"):
        (unit / d).mkdir(parents=True)

    def locate(name):
        return str(src / name) if (src / name / "__init__.py").exists() else None

    strays = mirror_strays(str(unit), locate)
    assert sorted(s.split(":")[0] for s in strays) == ["other", "pkg/core", "pkg/data", "pkg/sub"]
