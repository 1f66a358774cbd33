"""``python -m fastkafka_tools.localbroker`` as a user runs it: it starts a broker, creates the topics
asked for, prints the bootstrap address, serves a producer until SIGINT (Ctrl-C), then stops the
broker process and exits 0."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from fastkafka import Producer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``, from /proc (no ``ps`` needed: the Debian roots of the
    packaging tests have none)."""
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                stat = f.read()
        except OSError:         # gone meanwhile
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:    # field 4, after "(comm) state"
            kids.append(int(entry))
    return kids


@pytest.mark.broker
@pytest.mark.parametrize("kind", ["tansu", "noida"])
def test_starts_serves_and_stops_on_sigint(kind):
    proc = subprocess.Popen([sys.executable, "-m", "fastkafka_tools.localbroker", "--broker", kind,
                             "--topic", "cli-events:3"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 60
        bootstrap = None
        while bootstrap is None:
            assert time.monotonic() < deadline, "no bootstrap line within 60 s:\n" + "".join(lines)
            line = proc.stdout.readline()
            assert line, f"exited {proc.wait()} before the bootstrap line:\n" + "".join(lines)
            lines.append(line)
            if line.startswith("bootstrap_servers="):
                bootstrap = line.strip().split("=", 1)[1]
        assert any("created topic 'cli-events' (3 partitions)" in x for x in lines), lines
        broker_pids = _children(proc.pid)
        assert broker_pids, "no broker process under the command"
        with Producer(bootstrap_servers=bootstrap) as p:
            md = p.send("cli-events", b"hello", partition=2).get(timeout=30)
        assert (md.topic, md.partition, md.offset) == ("cli-events", 2, 0)
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, "".join(lines) + rest
        assert "stopping" in rest, rest
        for pid in broker_pids:
            assert not os.path.exists(f"/proc/{pid}"), f"broker process {pid} left running"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
