"""Every compiled module of the library has a .pxd beside it: its contract (the C-level names other
modules may cimport), so that nothing crosses modules through Python attribute lookups by accident."""
from __future__ import annotations

import pathlib

import fastkafka

PACKAGE = pathlib.Path(fastkafka.__file__).resolve().parent


def test_every_compiled_module_has_a_pxd_contract():
    modules = sorted(PACKAGE.rglob("*.pyx"))
    assert len(modules) >= 15, [str(m) for m in modules]   # the package's own, found
    missing = [str(m.relative_to(PACKAGE)) for m in modules if not m.with_suffix(".pxd").exists()]
    assert missing == []
