"""The command line of fastkafka_tools.localbroker: its help, and the options it refuses before
starting anything (the start itself: tests/integration/test_localbroker_cli.py)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fastkafka_tools import localbroker

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_help_run_as_a_module_says_what_it_does():
    r = subprocess.run([sys.executable, "-m", "fastkafka_tools.localbroker", "--help"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("usage: python -m fastkafka_tools.localbroker"), out[:200]
    for word in ("tansu", "noida", "kafka", "--port", "--topic", "Ctrl-C", "bootstrap"):
        assert word in out, f"{word!r} not in --help:\n{out}"


@pytest.mark.parametrize("text, expected", [("events", ("events", 1)), ("events:6", ("events", 6)),
                                            ("a.b-c:12", ("a.b-c", 12))])
def test_topic_argument(text, expected):
    assert localbroker.build_parser().parse_args(["--topic", text]).topic == [expected]


@pytest.mark.parametrize("text", [":3", "events:x", "events:0"])
def test_bad_topic_argument_is_a_usage_error(text, capsys):
    with pytest.raises(SystemExit) as e:
        localbroker.build_parser().parse_args(["--topic", text])
    assert e.value.code == 2
    assert "--topic" in capsys.readouterr().err


def test_unknown_broker_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        localbroker.main(["--broker", "redpanda"])
    assert e.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--broker", "kafka", "--port", "9092"], "--port applies to tansu and noida"),
    (["--broker", "tansu", "--nodes", "3"], "--nodes applies to --broker kafka"),
    (["--broker", "noida", "--storage", "null"], "--storage null is a tansu option"),
    (["--broker", "tansu", "--data-dir", "d"], "--data-dir is a noida option"),
])
def test_options_of_another_broker_are_refused_before_a_start(argv, message, capsys, monkeypatch):
    def no_start(*a, **k):
        raise AssertionError("a broker was started")

    monkeypatch.setattr(localbroker.LocalBroker, "start", no_start)
    assert localbroker.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err, err
