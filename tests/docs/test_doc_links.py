"""The README stays a five-minute read, and no relative link of the documentation is broken.

Documents: README.md, CHANGELOG.md and docs/**/*.md. A relative link (``[text](path)``,
``[text](path#anchor)``, ``[text](#anchor)``, or a reference definition ``[id]: path``) must name an
existing file or directory of the repository, and its anchor a heading of that Markdown file, as
GitHub makes anchors from headings. Links inside code blocks and inline code are not links.
"""
from __future__ import annotations

import os
import re
import unicodedata

import pytest

import docblocks

ROOT = docblocks.ROOT
README_MAX_LINES = 200

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text: str):
    """(line number, line) outside fenced code blocks, inline code removed."""
    fence = None
    for no, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            continue
        if fence is not None:
            if line.strip().startswith(fence) and set(line.strip()) == {fence[0]}:
                fence = None
            continue
        yield no, _INLINE_CODE.sub("", line)


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped (letters, digits, spaces,
    '-' and '_' kept), spaces to hyphens. Markdown emphasis and code marks are punctuation."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)     # a link in a heading: its text
    text = text.strip().lower()
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in " -_" or cat[0] in "LN":
            out.append("-" if ch == " " else ch)
    return "".join(out)


def anchors(path: str) -> set[str]:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    seen: dict[str, int] = {}
    out = set()
    for _no, line in prose_lines(text):
        m = _HEADING.match(line)
        if not m:
            continue
        slug = github_anchor(m.group(2))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(path: str, root: str = ROOT):
    """(line, target) of every link and reference definition of a Markdown file."""
    with open(os.path.join(root, path), encoding="utf-8") as f:
        text = f.read()
    for no, line in prose_lines(text):
        for m in _LINK.finditer(line):
            yield no, m.group(1)
        m = _REF_DEF.match(line)
        if m:
            yield no, m.group(1)


def is_external(target: str) -> bool:
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target)) or target.startswith("//")


def broken_links(root: str = ROOT) -> list[str]:
    problems = []
    for doc in docblocks.doc_files(root):
        base = os.path.dirname(os.path.join(root, doc))
        for no, target in links(doc, root):
            if is_external(target):
                continue
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(base, file_part)) if file_part else os.path.join(root, doc)
            if not os.path.abspath(dest).startswith(os.path.abspath(root) + os.sep):
                problems.append(f"{doc}:{no}: {target} points outside the repository")
                continue
            if not os.path.exists(dest):
                problems.append(f"{doc}:{no}: {target}: no such file or directory")
                continue
            if anchor:
                if not dest.endswith(".md") or not os.path.isfile(dest):
                    problems.append(f"{doc}:{no}: {target}: an anchor into a file that is not Markdown")
                elif anchor not in anchors(dest):
                    problems.append(f"{doc}:{no}: {target}: no heading with the anchor #{anchor} in "
                                    f"{os.path.relpath(dest, root)}")
    return problems


# ------------------------------------------------------------------------------------------ tests
def test_readme_is_short():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"


def test_readme_starts_with_the_two_fresh_machine_commands():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        head = f.read().splitlines()[:12]
    commands = [line.split("#")[0].strip() for line in head]
    assert "bash scripts/demo.sh" in commands and "bash scripts/test.sh" in commands, head


def test_every_relative_link_resolves():
    problems = broken_links()
    assert problems == [], "broken links in the documentation:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("heading,anchor", [
    ("The Spark sink (`spark_sink`)", "the-spark-sink-spark_sink"),
    ("`foreachPartition` and `foreachBatch`", "foreachpartition-and-foreachbatch"),
    ("The I/O thread and the GIL: the GIL-free turn", "the-io-thread-and-the-gil-the-gil-free-turn"),
    ("Delivery: at least once by default", "delivery-at-least-once-by-default"),
    ("From kafka-python", "from-kafka-python"),
])
def test_github_anchor(heading, anchor):
    assert github_anchor(heading) == anchor


def test_checker_finds_broken_links(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "# Title\n\n## A section\n\n[ok](docs/a.md) [ok](#a-section) [bad](docs/missing.md)\n"
        "[bad anchor](docs/a.md#nowhere) [web](https://example.org/x) `[code](nope.md)`\n\n"
        "```text\n[in a block](nope.md)\n```\n[ref]: docs/gone.md\n")
    (tmp_path / "docs" / "a.md").write_text("# A\n\n[up](../README.md#title) [dup](#b-1)\n\n## B\n\n## B\n")
    problems = broken_links(str(tmp_path))
    assert len(problems) == 3, problems
    assert any("docs/missing.md" in p for p in problems)
    assert any("#nowhere" in p for p in problems)
    assert any("docs/gone.md" in p for p in problems)
