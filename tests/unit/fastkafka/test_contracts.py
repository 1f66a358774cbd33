"""Contracts where a reader looks (docs/internals.md, "Contracts in the code"), checked in every
file of the package:

- the line directly above every ``nogil`` function of the Cython code (``.pxd``, ``.pyx``, ``.pxi``)
  is its thread tag, ``# thread: <threads> · lock: <lock> · gil: <gil>``, and no tag stands
  anywhere else;
- every ``.pxd`` opens with its path block (``# path:`` then ``#   <way>: a -> b -> c`` lines);
- no ``.py``, ``.pyx``, ``.pxi`` or ``.pxd`` file is over ``MAX_LINES`` lines unless ``LONG_FILES``
  below names it with its reason;
- every ``docs/internals.md#anchor`` the package's files name is a heading of docs/internals.md.
"""
from __future__ import annotations

import pathlib
import re
import unicodedata

import pytest

import fastkafka

PACKAGE = pathlib.Path(fastkafka.__file__).resolve().parent
ROOT = PACKAGE.parent
INTERNALS = ROOT / "docs" / "internals.md"

MAX_LINES = 800

# Files allowed over MAX_LINES, with the reason. A reason must say why the file cannot be split.
LONG_FILES = {
    "_producer/accumulator.pyx": (
        "its jobs already live in accumulator_*.pxi; what is left is the one cdef class "
        "RecordAccumulator, and Cython takes an include only at module level, not inside a class"),
}

THREADS = ("io", "app")
LOCKS = ("none", "acc held", "takes acc")
GILS = ("no", "held", "any")
TAG = re.compile(
    r"^# thread: (?P<threads>any|(?:io|app)(?:\+(?:io|app))*)"
    r" \u00b7 lock: (?P<lock>[a-z ]+)"
    r" \u00b7 gil: (?P<gil>[a-z]+)$")
TAG_START = re.compile(r"^\s*#\s*thread\s*:")
_DECL = re.compile(r"^\s*c(?:p)?def\s+(?!class\b|struct\b|enum\b|extern\b|union\b|packed\b|"
                   r"public\s+class\b|readonly\b)")
_NAME = re.compile(r"(\w+)\s*\(")


def _code(line: str) -> str:
    """The line without its comment (no '#' appears inside a string in a signature)."""
    return line.split("#", 1)[0]


def nogil_functions(text: str):
    """(index of the function's first line, decorators included; index of its cdef line; name) of
    every cdef/cpdef function declared or defined ``nogil``, outside ``cdef extern`` blocks."""
    lines = text.splitlines()
    out = []
    extern_indent = None
    i = 0
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        if extern_indent is not None:
            if line.strip() and not line.lstrip().startswith("#") and indent <= extern_indent:
                extern_indent = None
            else:
                i += 1
                continue
        if re.match(r"^\s*cdef\s+extern\b", line):
            extern_indent = indent
            i += 1
            continue
        code = _code(line)
        if _DECL.match(line) and "(" in code and "=" not in code.split("(", 1)[0]:
            sig, j = code, i
            depth = code.count("(") - code.count(")")
            while depth > 0 and j + 1 < len(lines):
                j += 1
                part = _code(lines[j])
                sig += " " + part.strip()
                depth += part.count("(") - part.count(")")
            if re.search(r"\bnogil\b", sig[sig.rfind(")") + 1:]):
                first = i
                while first > 0 and lines[first - 1].lstrip().startswith("@"):
                    first -= 1
                out.append((first, i, _NAME.search(sig).group(1)))
            i = j + 1
            continue
        i += 1
    return out


def tag_problem(line: str) -> str | None:
    """Why ``line`` is not a well-formed thread tag, or None."""
    m = TAG.match(line.strip())
    if m is None:
        return f"no well-formed tag above it (got {line.strip()[:80]!r})"
    threads = m.group("threads").split("+")
    if len(set(threads)) != len(threads):
        return f"a thread named twice: {m.group('threads')!r}"
    if m.group("lock") not in LOCKS:
        return f"lock {m.group('lock')!r} is none of {LOCKS}"
    if m.group("gil") not in GILS:
        return f"gil {m.group('gil')!r} is none of {GILS}"
    return None


def tag_problems(rel: str, text: str) -> list[str]:
    lines = text.splitlines()
    problems = []
    tagged = set()
    for first, decl, name in nogil_functions(text):
        above = lines[first - 1] if first > 0 else ""
        why = tag_problem(above)
        if why is not None:
            problems.append(f"{rel}:{decl + 1}: {name}: {why}")
        tagged.add(first - 1)
    for no, line in enumerate(lines):
        if TAG_START.match(line) and no not in tagged:
            problems.append(f"{rel}:{no + 1}: a thread tag that is not directly above a nogil "
                            "function")
    return problems


def path_block_problem(text: str) -> str | None:
    """Why a .pxd's text does not open with a path block, or None."""
    lines = text.splitlines()
    i = 1 if lines and lines[0].startswith("# cython:") else 0
    if i >= len(lines) or lines[i].rstrip() != "# path:":
        return "does not open with '# path:'" + (" (after its '# cython:' line)" if i else "")
    ways = []
    j = i + 1
    while j < len(lines) and lines[j].startswith("#   "):
        ways.append(lines[j])
        j += 1
    if not any(re.match(r"^#   [\w ()'/-]+:\s+\S.* -> \S", w) for w in ways):
        return "its path block has no '#   <way>: a -> b' line"
    if j < len(lines) and lines[j].strip():
        return "its path block is not followed by a blank line"
    return None


def _files(*suffixes: str) -> list[pathlib.Path]:
    return sorted(p for p in PACKAGE.rglob("*") if p.suffix in suffixes and p.is_file())


def _rel(p: pathlib.Path) -> str:
    return p.relative_to(PACKAGE).as_posix()


def test_the_package_is_found():
    assert len(_files(".pxd")) >= 15
    assert sum(len(nogil_functions(p.read_text())) for p in _files(".pyx", ".pxd", ".pxi")) >= 100


def test_every_nogil_function_has_its_thread_tag():
    problems = []
    for p in _files(".pyx", ".pxd", ".pxi"):
        problems += tag_problems(_rel(p), p.read_text())
    assert problems == [], "thread tags (docs/internals.md, Contracts in the code):\n  " + \
        "\n  ".join(problems)


def test_every_pxd_opens_with_its_path_block():
    problems = [f"{_rel(p)}: {why}" for p in _files(".pxd")
                if (why := path_block_problem(p.read_text())) is not None]
    assert problems == [], "path blocks:\n  " + "\n  ".join(problems)


def test_no_file_is_over_the_line_limit_without_a_reason():
    problems = []
    for p in _files(".py", ".pyx", ".pxi", ".pxd"):
        n = len(p.read_text().splitlines())
        if n > MAX_LINES and _rel(p) not in LONG_FILES:
            problems.append(f"{_rel(p)}: {n} lines (at most {MAX_LINES}, or a reason in "
                            "LONG_FILES)")
    assert problems == [], "one job per file:\n  " + "\n  ".join(problems)


def test_every_long_file_listed_is_still_long_and_has_a_reason():
    for rel, reason in LONG_FILES.items():
        p = PACKAGE / rel
        assert p.exists(), rel
        assert len(p.read_text().splitlines()) > MAX_LINES, \
            f"{rel} is short now: drop it from LONG_FILES"
        assert len(reason.split()) >= 8, rel


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading (as tests/docs/test_doc_links.py makes it, code marks kept)."""
    text = heading.strip().lower()
    return "".join("-" if ch == " " else ch for ch in text
                   if ch in " -_" or unicodedata.category(ch)[0] in "LN")


def test_links_to_internals_name_a_heading():
    text = INTERNALS.read_text()
    headings = {_anchor(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.*?)\s*$", text, re.M)}
    problems = []
    for p in _files(".py", ".pyx", ".pxi", ".pxd"):
        for m in re.finditer(r"docs/internals\.md#([\w-]+)", p.read_text()):
            if m.group(1) not in headings:
                problems.append(f"{_rel(p)}: #{m.group(1)}")
    assert problems == [], \
        "links to docs/internals.md without a heading:\n  " + "\n  ".join(problems)


# -- the checks themselves catch what they are meant to ------------------------------------------

_SAMPLE = '''\
cdef extern from "x.h" nogil:
    int c_function(int a)

# thread: io \u00b7 lock: acc held \u00b7 gil: no
cdef int tagged(int a,
                int b) noexcept nogil:
    return a

cdef int untagged(int a) noexcept nogil
# thread: io, app \u00b7 lock: acc held \u00b7 gil: no
cdef inline int malformed(int a) noexcept nogil:
    return a

# thread: any \u00b7 lock: mine \u00b7 gil: no
@cython.cdivision(True)
cdef int decorated(int a) noexcept nogil:
    return a

cdef int with_gil(int a) except -1:
    return a

# thread: io \u00b7 lock: none \u00b7 gil: any
cdef int stray(int a) except -1
'''


def test_the_tag_check_catches_missing_malformed_and_stray_tags():
    assert [name for _, _, name in nogil_functions(_SAMPLE)] == ["tagged", "untagged", "malformed",
                                                                 "decorated"]
    problems = tag_problems("sample.pyx", _SAMPLE)
    assert [p.split(":")[2].strip() for p in problems[:3]] == ["untagged", "malformed", "decorated"]
    assert "lock 'mine'" in problems[2]
    assert problems[3].startswith("sample.pyx:22: a thread tag that is not directly above")
    assert len(problems) == 4


@pytest.mark.parametrize("text, ok", [
    ("# cython: language_level=3\n# path:\n#   send: a -> b\n\ncimport cython\n", True),
    ("# path:\n#   send: a -> b\n#   answer: c -> d -> e\n\n", True),
    ("# Contract of x.\n# path:\n#   send: a -> b\n\n", False),
    ("# path:\n#   just words\n\n", False),
    ("# path:\n#   send: a -> b\ncimport cython\n", False),
])
def test_the_path_block_check(text, ok):
    assert (path_block_problem(text) is None) == ok
