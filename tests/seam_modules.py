"""The compiled modules only the tests use (setup.py's ``TEST_MODULES``), which no wheel carries.

They are built only with ``FASTKAFKA_TEST_MODULES=1`` (``scripts/setup.sh`` sets it). Where one is
missing, importing it fails with :class:`TestModuleMissing`, which says how to build it, instead of
a bare ``No module named ...``: a test that needs one fails, it is never skipped.
tests/packaging/test_dist_artifacts.py checks that this list is setup.py's.
"""
from __future__ import annotations

import importlib.abc
import sys

TEST_MODULES = ("fastkafka._net.failpoints", "fastkafka._producer.testing")

class TestModuleMissing(ModuleNotFoundError):
    """Its ``module`` is the missing module's name. (``name`` stays None: ``from package import
    module`` turns an error whose ``name`` is the module into a bare "cannot import name".)"""
    __test__ = False

    def __init__(self, module: str):
        super().__init__(missing_message(module))
        self.module = module


def missing_message(name: str) -> str:
    short = name.split(".", 1)[1]
    return (f"{name} is a test-only compiled module and is not built here (no wheel carries it). "
            f"Build it with FASTKAFKA_TEST_MODULES=1: `bash scripts/setup.sh` does, or, in a work "
            f"tree already set up, `FASTKAFKA_TEST_MODULES=1 FASTKAFKA_EXT={short} "
            f".venv/bin/python setup.py build_ext --inplace`")


class _Finder(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path``: asked only about a module no other finder found."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in TEST_MODULES:
            raise TestModuleMissing(fullname)
        return None


def install() -> None:
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())
