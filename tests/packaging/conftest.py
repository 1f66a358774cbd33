"""Fixtures of the packaging tests (helpers: distbuild.py).

* ``claimed``: the CPython versions pyproject.toml's classifiers claim as tested.
* ``dist``: the session's sdist and repaired wheels, built by ``scripts/wheel.sh`` into a temporary
  directory, each once, when a test first needs it (:class:`distbuild.Dist`).

Every test here that uses ``dist`` is marked ``packaging`` (the builds take minutes): ``-m "not
packaging"`` leaves them out of a quick run.
"""
from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # distbuild

from distbuild import Dist, claimed_versions, primary_version  # noqa: E402


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "dist" in getattr(item, "fixturenames", ()) and str(item.path).startswith(HERE + os.sep):
            item.add_marker(pytest.mark.packaging)


@pytest.fixture(scope="session")
def claimed() -> list[str]:
    versions = claimed_versions()
    assert versions, "pyproject.toml has no 'Programming Language :: Python :: 3.X' classifier"
    return versions


@pytest.fixture(scope="session")
def dist(tmp_path_factory, claimed) -> Dist:
    return Dist(root=tmp_path_factory.mktemp("dist"), versions=claimed, primary=primary_version(claimed))
