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


# ---------------------------------------------------------------------------------------------
# Names a reader is sent to must exist: every code name of a .pxd path block, and every file,
# module and code name that docs/internals.md gives in backticks or in its diagrams.

SOURCE_SUFFIXES = (".py", ".pyx", ".pxd", ".pxi", ".pyi")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def _is_code_name(word: str) -> bool:
    """A word of prose is all lower case letters; a code name has an underscore, a dot, or a
    capital after its first letter (``scan_c``, ``Metadata.update``, ``GilFreeTurn``)."""
    if word.isupper() and "_" not in word:
        return False  # an acronym: TLS, GIL
    return "_" in word or "." in word or any(c.isupper() for c in word[1:])


def _code_words(text: str) -> set[str]:
    """The identifiers of ``text`` outside its comments and string literals (docstrings too), so
    that a name surviving only in a comment or a docstring does not count as existing. Cython
    source tokenizes as Python for this purpose; a file the tokenizer refuses falls back to
    dropping '#' comments line by line."""
    import io
    import tokenize
    words: set[str] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.NAME:
                words.add(tok.string)
            elif tok.type == tokenize.STRING and _KEY_LITERAL.fullmatch(tok.string):
                # a name kept as a string: a metric, a setting, a partitioner's name
                words.add(tok.string[tok.string.index(tok.string[-1]) + 1:-1])
    except (tokenize.TokenError, IndentationError, SyntaxError):
        for line in text.splitlines():
            words.update(re.findall(r"[A-Za-z_]\w*", _code(line)))
    return words


_KEY_LITERAL = re.compile(r"""[bruf]{0,2}(['"])[A-Za-z_][A-Za-z0-9_]*\1""")
_WORDS: set[str] | None = None


def code_words() -> set[str]:
    """Every identifier used in code by the library (fastkafka, spark_sink) and its C sources."""
    global _WORDS
    if _WORDS is None:
        words: set[str] = set()
        for root in (PACKAGE, ROOT / "spark_sink"):
            for p in sorted(root.rglob("*")):
                if p.suffix in SOURCE_SUFFIXES and p.is_file():
                    words |= _code_words(p.read_text(encoding="utf-8"))
                elif p.suffix in (".h", ".c") and p.is_file() and p.stem.endswith("_impl"):
                    words.update(re.findall(r"[A-Za-z_]\w*", p.read_text(encoding="utf-8")))
        _WORDS = words
    return _WORDS


# Prefixes the code puts before names it has as keys (metrics() puts the network client's
# counters under "net_": fastkafka/producer.py).
NAME_PREFIXES = ("net_",)


def _exists(part: str, words) -> bool:
    return part in words or any(part.startswith(p) and part[len(p):] in words
                                for p in NAME_PREFIXES)


def unresolved(names, words) -> list[str]:
    """The dotted or plain code names of ``names`` with a part that no code uses."""
    return [n for n in names if _is_code_name(n) and not all(
        _exists(part, words) for part in n.split("."))]


def path_block_names(text: str) -> list[str]:
    """The code names a .pxd's path block gives (its '#   <way>: ...' lines, the way's label and
    parenthesised remarks left out)."""
    lines = text.splitlines()
    i = 1 if lines and lines[0].startswith("# cython:") else 0
    names: list[str] = []
    for line in lines[i + 1:]:
        if not line.startswith("#   "):
            break
        body = line[4:]
        m = re.match(r"^\s*[\w ()'/-]+:\s+", body)
        if m and "->" in body[m.end():] + " ->":
            body = body[m.end():]
        while re.search(r"\([^()]*\)", body):
            body = re.sub(r"\([^()]*\)", " ", body)
        body = re.sub(_FILE_TOKEN, " ", body)
        names += _IDENT.findall(body.replace("()", ""))
    return names


_FILE_TOKEN = r"(?:[\w.-]+/)*\b\w+\.(?:pyx|pxd|pxi|pyi|py)\b"


def path_block_files(text: str) -> list[str]:
    """The files a .pxd's path block names (``confluent.py``)."""
    lines = text.splitlines()
    i = 1 if lines and lines[0].startswith("# cython:") else 0
    files: list[str] = []
    for line in lines[i + 1:]:
        if not line.startswith("#   "):
            break
        files += re.findall(_FILE_TOKEN, line)
    return files


def test_every_name_a_path_block_gives_exists():
    words = code_words()
    problems = []
    for p in _files(".pxd"):
        text = p.read_text(encoding="utf-8")
        missing = unresolved(path_block_names(text), words)
        missing += [f for f in path_block_files(text) if not _path_exists(f)]
        if missing:
            problems.append(f"{_rel(p)}: {', '.join(sorted(set(missing)))}")
    assert not problems, ("path blocks name what no code has (renamed or removed?):\n"
                          + "\n".join(problems))


def _internals_spans(text: str) -> tuple[list[str], list[str]]:
    """(the backticked spans of docs/internals.md's prose, the lines of its fenced blocks)."""
    spans, blocks, fenced = [], [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            blocks.append(line)
        else:
            spans += re.findall(r"`([^`]+)`", line)
    return spans, blocks


_PATH = re.compile(r"^(?:[\w.-]+/)*[\w.-]+\.(?:pyx|pxd|pxi|pyi|py|c|h|md|sh|toml)$")


# Files of other projects that docs/internals.md cites, with whose they are.
OUTSIDE_FILES = {
    "src/rdkafka_msg.c": "librdkafka's",
    "src/rdkafka_topic.c": "librdkafka's",
}


def _path_exists(path: str) -> bool:
    if path in OUTSIDE_FILES:
        return True
    if (ROOT / path).exists() or (PACKAGE / path).exists():
        return True
    # a file named without its folder (``clock.pxd``) or below a package (``_net/cells.pxd``)
    return any(p.as_posix().endswith("/" + path) for p in ROOT.glob("**/" + path.split("/")[-1])
               if ".venv" not in p.parts and "build" not in p.parts)


def internals_problems(text: str, words: set[str]) -> list[str]:
    spans, blocks = _internals_spans(text)
    problems = []
    for span in spans:
        span = span.strip()
        if _PATH.match(span):
            if not _path_exists(span):
                problems.append(f"no file {span}")
            continue
        if " " in span or not _IDENT.fullmatch(span.removesuffix("()")):
            continue  # a call with arguments, a value or a phrase: not a bare name
        name = span.removesuffix("()")
        if name.startswith(("fastkafka.", "spark_sink.")):
            parts = name.split(".")
            k = len(parts)
            while k > 1 and not any((ROOT / "/".join(parts[:k])).with_suffix(s).exists()
                                    or (ROOT / "/".join(parts[:k])).is_dir()
                                    for s in SOURCE_SUFFIXES):
                k -= 1
            rest = parts[k:]
            if k == 1 or any(r not in words for r in rest):
                problems.append(f"no module or name {name}")
        elif unresolved([name], words):
            problems.append(f"no code name {name}")
    for line in blocks:
        for token in re.findall(r"(?:[\w.-]+/)+[\w.-]+\.\w+|\b[\w.]+\.(?:pyx|pxd|py)\b", line):
            if not _path_exists(token):
                problems.append(f"no file {token} (in a diagram)")
        if not line.lstrip().startswith("#"):
            code = re.sub(_FILE_TOKEN, " ", re.sub(r"\S+/\S+", " ", line))
            for word in unresolved(_IDENT.findall(code), words):
                problems.append(f"no code name {word} (in a diagram)")
    return problems


# Names docs/internals.md gives that are not the library's own code, with where they come from.
OUTSIDE_NAMES = {
    "fastkafka_tools": "the project's tools folder, not part of the library",
    "spark_sink": "the Spark package (a folder of its own)",
    "call_soon_threadsafe": "asyncio's loop method",
    "os.register_at_fork": "the standard library",
    "ssl.SSLObject": "the standard library",
    "rd_kafka_msg_partitioner_": "librdkafka's function prefix",
}


def test_every_name_internals_md_gives_exists():
    words = code_words() | {w for n in OUTSIDE_NAMES for w in n.split(".")}
    problems = internals_problems(INTERNALS.read_text(encoding="utf-8"), words)
    assert not problems, ("docs/internals.md names what the code does not have (renamed or "
                          "removed?):\n" + "\n".join(sorted(set(problems))))


def test_the_name_checks_catch_a_missing_name():
    words = {"scan_c", "drain_c", "Metadata", "update"}
    assert unresolved(path_block_names("# path:\n#   send:   ready -> scan_c -> _TopicInfo\n"),
                      words) == ["_TopicInfo"]
    assert unresolved(path_block_names("# path:\n#   a: x -> Metadata.update (a note_c)\n"),
                      words) == []
    assert internals_problems("`route_batch` and `scan_c`, `fastkafka/_producer/nothing.pyx`\n",
                              words) == ["no code name route_batch",
                                         "no file fastkafka/_producer/nothing.pyx"]
