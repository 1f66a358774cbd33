"""Fixtures of the packaging tests (helpers: distbuild.py).

* ``claimed`` and ``dist`` (the session's sdist and repaired wheels, built by ``scripts/wheel.sh``,
  :class:`distbuild.Dist`) are fixtures of tests/conftest.py: the Spark cluster tests
  (tests/spark_cluster) ship the same wheel to their executors, so it is built once per session.

Every test here that uses ``dist`` is marked ``packaging`` (the builds take minutes): ``-m "not
packaging"`` leaves them out of a quick run.
"""
from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # distbuild


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "dist" in getattr(item, "fixturenames", ()) and str(item.path).startswith(HERE + os.sep):
            item.add_marker(pytest.mark.packaging)
