"""The wheels and the sdist carry the library only: fastkafka_tools (the local brokers, the Apache
Kafka rig, the TLS certificate makers, the perf tool and the demo) serves the project's own tests,
demo and benchmarks, and stays in the source tree.

The builds are the session's (``dist`` in tests/conftest.py), the same the other packaging tests
read.
"""
from __future__ import annotations

import zipfile

import pytest
from distbuild import REPO, claimed_versions, sdist_names, targets_under_test, wheel_names

pytestmark = pytest.mark.timeout(2400)     # the first test to ask for a wheel waits for its build

TOOLS = "fastkafka_tools"
TARGETS = targets_under_test(claimed_versions())


def _tool_members(names) -> list[str]:
    return sorted(n for n in names if n.split("/", 1)[0] == TOOLS or n.startswith(f"{TOOLS}-"))


def test_the_tools_exist_in_the_source_tree():
    """What the assertions below look for is real: a package of that name in the checkout."""
    assert (REPO / TOOLS / "__init__.py").is_file()
    assert (REPO / TOOLS / "localbroker.py").is_file()


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: f"{t[0]}-{t[1]}")
def test_wheel_has_no_tools(dist, target):
    wheel = dist.wheel(*target).wheel
    names = wheel_names(wheel)
    assert any(n.startswith("fastkafka/") for n in names), "the wheel has no fastkafka package at all"
    assert _tool_members(names) == [], f"{TOOLS} in the wheel"
    top_level = [n for n in names if n.endswith(".dist-info/top_level.txt")]
    entry_points = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    with zipfile.ZipFile(wheel) as z:
        for member in top_level + entry_points:
            text = z.read(member).decode("utf-8")
            assert TOOLS not in text, f"{member} names {TOOLS}:\n{text}"


def test_sdist_has_no_tools(dist):
    names = sdist_names(dist.get_sdist())
    assert "fastkafka/__init__.py" in names
    assert _tool_members(names) == [], f"{TOOLS} in the sdist"
