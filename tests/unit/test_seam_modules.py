"""A test-only compiled module that is not built fails what imports it, saying how to build it
(tests/seam_modules.py)."""
from __future__ import annotations

import subprocess
import sys

import pytest
import seam_modules


def test_every_test_module_is_a_compiled_module_of_the_package():
    for name in seam_modules.TEST_MODULES:
        assert name.startswith("fastkafka."), name


def test_the_finder_names_how_to_build_a_missing_test_module():
    finder = seam_modules._Finder()
    assert finder.find_spec("fastkafka._producer.sendpath") is None      # not its business
    with pytest.raises(seam_modules.TestModuleMissing) as e:
        finder.find_spec("fastkafka._producer.testing")
    assert isinstance(e.value, ModuleNotFoundError)
    assert e.value.module == "fastkafka._producer.testing"
    assert "FASTKAFKA_TEST_MODULES=1" in str(e.value) and "scripts/setup.sh" in str(e.value)
    assert "FASTKAFKA_EXT=_producer.testing" in str(e.value)


def test_an_import_of_a_missing_test_module_fails_with_the_message(tmp_path):
    """In a child whose path finder cannot see the module (as where it was not built)."""
    tests_dir = str(__import__("pathlib").Path(seam_modules.__file__).parent)
    code = f"""
import importlib.machinery, sys
sys.path.insert(0, {tests_dir!r})
real = importlib.machinery.PathFinder.find_spec.__func__
def hiding(cls, name, path=None, target=None):
    return None if name == "fastkafka._producer.testing" else real(cls, name, path, target)
importlib.machinery.PathFinder.find_spec = classmethod(hiding)
import seam_modules
seam_modules.install()
try:
    from fastkafka._producer import testing  # the form that hides an error naming the module
except ModuleNotFoundError as e:
    print(type(e).__name__, getattr(e, "module", None), e, sep="|")
else:
    print("imported")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    kind, name, message = out.stdout.strip().split("|", 2)
    assert (kind, name) == ("TestModuleMissing", "fastkafka._producer.testing"), out.stdout
    assert "FASTKAFKA_TEST_MODULES=1" in message, message


def test_the_finder_is_installed_after_the_path_finder_by_the_suite():
    """Asked only about what the import system's own finders did not find: it comes after them
    (a third-party package may append a finder of its own names later: six does)."""
    import importlib.machinery

    finders = [f for f in sys.meta_path if isinstance(f, seam_modules._Finder)]
    assert len(finders) == 1
    assert sys.meta_path.index(finders[0]) > sys.meta_path.index(importlib.machinery.PathFinder)
