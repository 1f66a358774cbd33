"""The public types as a ``mypy --strict`` user meets them.

``typed_usage.py`` (beside this file) holds the documentation's examples with a user's annotations
(a delivery callback taking ``KafkaError | None`` or ``Exception | None``, the Spark sink's calls);
``mypy --strict`` checks it, the package ``spark_sink`` and the module ``pyspark_fastkafka`` (their
own annotations, against pyspark's types), with the stubs the wheel ships (``fastkafka/**/*.pyi``,
``py.typed``)."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
USAGE = os.path.join("tests", "unit", "typed_usage.py")

#: pyarrow and pandas ship no type information: their imports are Any (spark_sink reads Arrow
#: batches; pyspark's Arrow UDFs need pandas). The errors inside fastkafka's own modules are not
#: reported, as for a user's installed package: its public types are what is checked, through the
#: usage.
CONFIG = """\
[mypy]
strict = True
warn_unreachable = True

[mypy-pyarrow.*,pandas.*]
ignore_missing_imports = True

[mypy-fastkafka.*]
ignore_errors = True
"""


def _mypy(tmp_path, *targets: str) -> subprocess.CompletedProcess:
    if importlib.util.find_spec("mypy") is None:
        pytest.fail("mypy is not installed: it is in the test extra (pip install -e '.[test]')")
    config = tmp_path / "mypy.ini"
    config.write_text(CONFIG)
    # From the repository root: mypy reads the packages from the tree (an editable install's
    # import hook is invisible to it), with their .pyi stubs and py.typed markers.
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config),
         "--cache-dir", str(tmp_path / "cache"), "--no-color-output", "--no-error-summary",
         *targets],
        cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_documented_usage_passes_mypy_strict(tmp_path):
    # by module name: from the checkout (the working directory) or, where the tests run against an
    # installed wheel, from site-packages, as a user's mypy finds them
    # (mypy takes files or modules in one run, not both; pyspark_fastkafka is a single module, which
    # PEP 561 cannot mark as typed, so the file Python imports is checked as a copy: mypy refuses a
    # file inside site-packages, whose other modules would then shadow installed ones)
    module = importlib.util.find_spec("pyspark_fastkafka")
    assert module is not None and module.origin, "pyspark_fastkafka is not importable"
    single = tmp_path / "single" / "pyspark_fastkafka.py"
    single.parent.mkdir()
    shutil.copyfile(module.origin, single)
    for targets in ([USAGE], ["-p", "spark_sink"], [str(single)]):
        r = _mypy(tmp_path, *targets)
        assert r.returncode == 0, r.stdout + r.stderr


def test_a_callback_with_a_wrong_error_type_fails(tmp_path):
    """The check can fail: a callback that only takes an unrelated error type is refused."""
    bad = tmp_path / "bad_usage.py"
    bad.write_text(
        "from fastkafka import Producer, RecordMetadata\n\n"
        "def cb(err: KeyError | None, md: RecordMetadata) -> None: ...\n\n"
        "def f(p: Producer) -> None:\n"
        "    p.produce('t', b'v', on_delivery=cb)\n")
    r = _mypy(tmp_path, str(bad))
    assert r.returncode == 1, r.stdout + r.stderr
    assert 'Argument "on_delivery" to "produce"' in r.stdout, r.stdout


def test_spark_sink_ships_py_typed():
    import fastkafka
    import spark_sink
    for package in (spark_sink, fastkafka):     # the package as imported: checkout or wheel
        assert os.path.isfile(os.path.join(os.path.dirname(package.__file__), "py.typed")), package
