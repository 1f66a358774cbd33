"""The package is laid out by layer and imports only go down the layers (docs/internals.md, "Layers").

From the bottom: ``fastkafka.errors`` and ``fastkafka._version`` (leaves), ``fastkafka._wire`` (record
batches, codecs, CRC), ``fastkafka.protocol`` (the Kafka messages, the Produce codec),
``fastkafka._net`` (the I/O loop, connections, TLS, SASL, metadata), ``fastkafka._producer`` (the
accumulator, the send path, the I/O thread, idempotence, transactions) and the API on top
(``fastkafka.producer``, ``fastkafka.aio``, ``fastkafka.admin``, ``fastkafka.config``, ``fastkafka.compat``,
``fastkafka.interceptors``, ``fastkafka.observability``, ``fastkafka.schema_registry``,
``fastkafka.aws`` (the import path of ``fastkafka._net.aws_iam``), ``fastkafka``,
and ``fastkafka.otel``,
``fastkafka.prometheus``: the import paths users type for two modules of ``fastkafka.observability``).
A module may import (or cimport) its own layer and the ones below, never one above: every import
statement of every module, including those inside functions, is read from the source."""
from __future__ import annotations

import ast
import importlib
import pathlib
import re

import fastkafka

PACKAGE = pathlib.Path(fastkafka.__file__).resolve().parent

LAYERS = ["base", "wire", "protocol", "net", "producer", "api"]


def layer_of(dotted: str) -> str:
    parts = dotted.split(".")
    assert parts[0] == "fastkafka", dotted
    if len(parts) == 1:
        return "api"
    top = parts[1]
    if top in ("errors", "_version"):
        return "base"
    return {"_wire": "wire", "protocol": "protocol", "_net": "net", "_producer": "producer",
            "producer": "api", "aio": "api", "admin": "api", "config": "api", "compat": "api",
            "interceptors": "api", "observability": "api", "otel": "api", "prometheus": "api",
            "schema_registry": "api", "aws": "api",
            "_habits": "api"}[top]


#: import paths kept for users, each the public names of one module of the package that holds the code
ALIASES = {"fastkafka.otel": "fastkafka.observability.otel",
           "fastkafka.prometheus": "fastkafka.observability.prometheus"}


def module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


IMPORT = re.compile(r"^\s*(?:from\s+(\.*[\w.]*)\s+c?import\s+([\w, ()*]+)|c?import\s+([\w., ]+))", re.M)


def imports_in(text: str, package: list[str]) -> set[str]:
    """The fastkafka modules a module of ``package`` whose source is ``text`` imports (relative
    imports resolved; for "from X import a, b" both X and, where they are modules, X.a and X.b)."""
    out = set()
    for m in IMPORT.finditer(text):
        if m.group(1) is not None:
            src = m.group(1)
            if src.startswith("."):
                dots = len(src) - len(src.lstrip("."))
                base = package[:len(package) - (dots - 1)]
                src = ".".join(base + ([src.lstrip(".")] if src.lstrip(".") else []))
            out.add(src)
            out.update(f"{src}.{name}" for name in re.split(r"[,\s()]+", m.group(2))
                       if name and name != "as" and _is_module(f"{src}.{name}"))
        else:
            out.update(t.strip().split(" as ")[0] for t in m.group(3).split(","))
    return {t for t in out if t == "fastkafka" or t.startswith("fastkafka.")}


def _is_module(dotted: str) -> bool:
    base = PACKAGE.parent / dotted.replace(".", "/")
    return any(base.with_suffix(ext).exists() for ext in (".py", ".pyx", ".pxd")) or base.is_dir()


def package_of(path: pathlib.Path) -> list[str]:
    me = module_name(path).split(".")
    return me if path.name == "__init__.py" else me[:-1]


def sources() -> list[pathlib.Path]:
    return sorted(p for ext in ("*.py", "*.pyx", "*.pxd", "*.pxi") for p in PACKAGE.rglob(ext))


def test_imports_only_go_down_the_layers():
    upward = []
    checked = 0
    for path in sources():
        mine = layer_of(".".join(package_of(path) + ([] if path.name == "__init__.py" else [path.stem])))
        for target in imports_in(path.read_text(encoding="utf-8"), package_of(path)):
            checked += 1
            if LAYERS.index(layer_of(target)) > LAYERS.index(mine):
                upward.append(f"{path.relative_to(PACKAGE.parent)} ({mine}) imports {target} "
                              f"({layer_of(target)})")
    assert checked > 100          # the imports were found at all
    assert upward == []


def test_the_check_sees_an_upward_import():
    # the reader of imports is not blind: a module of the network layer importing the producer
    # layer, written each way the package writes imports, is found
    for line in ("from fastkafka._producer.sender import Sender",
                 "    from fastkafka._producer import sender",
                 "from .._producer.accumulator cimport RecordAccumulator",
                 "import fastkafka.producer",
                 "from fastkafka import producer"):
        found = imports_in(line + "\n", ["fastkafka", "_net"])
        assert any(LAYERS.index(layer_of(t)) > LAYERS.index("net") for t in found), (line, found)


def code_imports(text: str, suffix: str, package: list[str]) -> set[str]:
    """As ``imports_in``, but for a ``.py`` source only its import statements (its docstrings,
    which show users the import paths they type, left out)."""
    if suffix != ".py":
        return imports_in(text, package)
    lines = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            lines += [f"import {a.name}" for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = ", ".join(a.name for a in node.names)
            lines.append(f"from {'.' * node.level}{node.module or ''} import {names}")
    return imports_in("\n".join(lines) + "\n", package)


def test_aliases_only_name_their_module_and_the_package_never_imports_them():
    # fastkafka.otel and fastkafka.prometheus hold no code: each imports only its module of
    # fastkafka.observability and re-exports its public names; no module of the package goes
    # through them
    through_alias = []
    for path in sources():
        me = ".".join(package_of(path) + ([] if path.name == "__init__.py" else [path.stem]))
        targets = code_imports(path.read_text(encoding="utf-8"), path.suffix, package_of(path))
        if me in ALIASES:
            assert targets == {ALIASES[me]}, (me, targets)
        else:
            through_alias += [f"{me} imports {t}" for t in sorted(targets & ALIASES.keys())]
    assert through_alias == []
    for alias, home in ALIASES.items():
        a, h = importlib.import_module(alias), importlib.import_module(home)   # the test extra
        assert a.__all__ == h.__all__ and all(getattr(a, n) is getattr(h, n) for n in h.__all__)


def test_the_alias_check_sees_code_importing_an_alias_but_not_a_docstring():
    text = ('"""Example::\n\n    from fastkafka.otel import TracingInterceptor\n"""\n'
            "def f():\n    from ..prometheus import register\n")
    found = code_imports(text, ".py", ["fastkafka", "observability"])
    assert found & ALIASES.keys() == {"fastkafka.prometheus"}
