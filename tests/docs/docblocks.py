"""The code blocks of the project's Markdown documentation, and how the tests run them.

Documents: README.md, CHANGELOG.md and every ``docs/**/*.md``. The convention (docs/testing.md,
"Examples in the documentation"):

* Every fenced block whose info string is ``python`` runs, against a real broker, in a fresh
  namespace: it must be complete (its own imports) and close what it opens. Blocks not meant to run
  use another info string (``bash``, ``text``, ``properties``, ...). ``py``, ``python3``, ``pycon`` and
  the like are refused, so that no Python block is left out by a spelling.
* An HTML comment on the line right above a ``python`` block, ``<!-- example: WORD ... -->``, says
  what the block needs: ``spark`` (the variable ``spark``, the tests' SparkSession), ``registry``
  (``http://localhost:8081`` is then the tests' Schema Registry server), ``tls`` or
  ``sasl`` (the secured broker, below), and ``id=NAME`` (a check of its own in
  tests/docs/test_doc_examples.py, ``CHECKS[NAME]``).
* Addresses and files in the examples are placeholders the test replaces: ``localhost:9092`` is the
  plaintext broker, ``localhost:9093`` its TLS listener, ``localhost:9094`` its SASL_SSL listener;
  the files ``"ca.pem"``, ``"client.pem"`` and ``"client.key"`` are the test CA, client certificate
  and (encrypted) client key. ``tls`` examples read the key's password from the environment variable
  ``KEY_PASSWORD``; ``sasl`` examples read ``KAFKA_PASSWORD`` (the users ``alice``, ``bob`` and
  ``carol`` have it) and may call ``fetch_token()`` (an OAUTHBEARER token and its expiry).
* What an example prints can be shown in a ``text`` block right after it, with ``<!-- output -->``
  on the line above that block; the printed text must match it, ``...`` standing for any text
  within a line.
"""
from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

KINDS = {"spark", "tls", "sasl", "registry"}
PYTHON = "python"
#: Info strings that look like Python but would not run: refused, so nothing is skipped by spelling.
PYTHON_LOOKALIKES = {"py", "py3", "python3", "python2", "pycon", "pytb", "ipython", "ipython3",
                     "pyi", "cython", "pyx"}

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*example:(?P<body>.*?)-->\s*$")
_OUTPUT = re.compile(r"^\s*<!--\s*output\s*-->\s*$")
_ANY_MARK = re.compile(r"<!--\s*(example|output)\b")


def doc_files(root: str = ROOT) -> list[str]:
    """README.md, CHANGELOG.md (when present) and docs/**/*.md, relative to ``root``, sorted."""
    out = [name for name in ("README.md", "CHANGELOG.md") if os.path.isfile(os.path.join(root, name))]
    docs = os.path.join(root, "docs")
    for dirpath, dirnames, filenames in os.walk(docs):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(("_", ".")))
        for name in sorted(filenames):
            if name.endswith(".md"):
                out.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
    return out


@dataclass
class Block:
    path: str                       # document, relative to the repository root
    line: int                       # line of the opening fence (1-based)
    lang: str                       # first word of the info string ("" for none)
    code: str
    kinds: frozenset = frozenset()  # from <!-- example: ... -->
    name: str | None = None         # id=NAME
    output: str | None = None       # the <!-- output --> text block that follows it
    directive: str | None = None    # the comment as written

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def last_line(self) -> int:
        """The line of the closing fence."""
        return self.line + len(self.code.splitlines()) + 1


class DocFormatError(ValueError):
    """A document breaks the examples' convention (named with its file and line)."""


@dataclass
class Document:
    path: str
    blocks: list = field(default_factory=list)
    problems: list = field(default_factory=list)

    @property
    def python(self) -> list:
        return [b for b in self.blocks if b.lang == PYTHON]


def parse(path: str, root: str = ROOT) -> Document:
    """The fenced blocks of one Markdown file, with the convention's comments attached; the
    problems found (a look-alike info string, a misplaced comment, an unknown word) are listed in
    ``problems`` rather than raised, so one test can name them all."""
    with open(os.path.join(root, path), encoding="utf-8") as f:
        lines = f.read().splitlines()
    doc = Document(path)
    i = 0
    last_python: Block | None = None
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            prose = re.sub(r"`[^`]*`", "", lines[i])      # a comment shown as inline code is text
            if _ANY_MARK.search(prose) and not (_DIRECTIVE.match(lines[i]) or _OUTPUT.match(lines[i])):
                doc.problems.append(f"{path}:{i + 1}: an example comment must stand alone on its line")
            i += 1
            continue
        start = i
        fence, indent = m.group("fence"), len(m.group("indent"))
        info = m.group("info").strip()
        lang = info.split()[0].lower() if info else ""
        body = []
        i += 1
        while i < len(lines):
            close = lines[i].strip()
            if close.startswith(fence[0] * len(fence)) and set(close) == {fence[0]}:
                break
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i].lstrip())
            i += 1
        else:
            doc.problems.append(f"{path}:{start + 1}: code block never closed")
        i += 1
        above = lines[start - 1] if start > 0 else ""
        block = Block(path, start + 1, lang, "\n".join(body) + "\n")
        d = _DIRECTIVE.match(above)
        if lang in PYTHON_LOOKALIKES or (lang != PYTHON and lang.startswith("python")):
            doc.problems.append(f"{path}:{start + 1}: ```{info} would not run: use ```python (runs) "
                                f"or ```text (does not)")
        if d:
            block.directive = above.strip()
            if lang != PYTHON:
                doc.problems.append(f"{path}:{start + 1}: <!-- example: --> above a ```{lang} block "
                                    f"(only ```python blocks run)")
            kinds = set()
            for word in d.group("body").split():
                if word.startswith("id="):
                    block.name = word[3:]
                elif word in KINDS:
                    kinds.add(word)
                else:
                    doc.problems.append(f"{path}:{start}: unknown word {word!r} in {above.strip()} "
                                        f"(known: {', '.join(sorted(KINDS))}, id=NAME)")
            block.kinds = frozenset(kinds)
            if "tls" in kinds and "sasl" in kinds:
                doc.problems.append(f"{path}:{start}: an example is either tls or sasl")
        if _OUTPUT.match(above):
            if lang != "text":
                doc.problems.append(f"{path}:{start + 1}: <!-- output --> must be above a ```text block")
            elif last_python is None or last_python.output is not None:
                doc.problems.append(f"{path}:{start + 1}: <!-- output --> block with no ```python "
                                    f"block right before it")
            else:
                last_python.output = block.code
        doc.blocks.append(block)
        last_python = block if lang == PYTHON else None
    return doc


def all_documents(root: str = ROOT) -> list[Document]:
    return [parse(p, root) for p in doc_files(root)]


def python_blocks(root: str = ROOT) -> list[Block]:
    return [b for d in all_documents(root) for b in d.python]


# ------------------------------------------------------------------------------ running one
def substitute(code: str, mapping: dict[str, str]) -> str:
    for placeholder, real in mapping.items():
        code = code.replace(placeholder, real)
    return code


_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def topic_candidates(code: str) -> set[str]:
    """String constants of the example that could be topic names (the tests snapshot their end
    offsets before and after the example; names that are no topic are dropped then)."""
    out = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _TOPIC.match(node.value):
            if not node.value.startswith(("_", ".")) and node.value not in (".", ".."):
                out.add(node.value)
    return out


def output_matches(expected: str, got: str) -> bool:
    """Line by line, ``...`` standing for any text within a line; trailing blanks ignored."""
    exp = [line.rstrip() for line in expected.rstrip("\n").splitlines()]
    out = [line.rstrip() for line in got.rstrip("\n").splitlines()]
    if len(exp) != len(out):
        return False
    for e, o in zip(exp, out):
        pattern = "^" + ".*".join(re.escape(part) for part in e.split("...")) + "$"
        if not re.match(pattern, o):
            return False
    return True
