"""Producers left open at interpreter exit whose broker never answers: the exit is bounded by
exit_flush_timeout_ms (plus the close grace), and a WARNING names the records that failed."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from faultbroker import no_response
from fastkafka.protocol import ApiKey

pytestmark = pytest.mark.faultbroker

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# argv: bootstrap, exit_flush_timeout_ms, producers; each producer queues 100 records
SCRIPT = r"""
import sys, time
from fastkafka import Producer
ps = [Producer(bootstrap_servers=sys.argv[1], exit_flush_timeout_ms=int(sys.argv[2]), linger_ms=0,
               request_timeout_ms=30000, delivery_timeout_ms=60000) for _ in range(int(sys.argv[3]))]
for p in ps:
    p.partitions_for("t")
    futs = [p.send("t", value=b"v%d" % i) for i in range(100)]
print("end", time.monotonic(), flush=True)
"""


def _run(fb, exit_flush_timeout_ms: int, producers: int):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", SCRIPT, fb.bootstrap, str(exit_flush_timeout_ms),
                        str(producers)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    ended = time.monotonic()
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("end "), (r.stdout, r.stderr)
    return r, ended - float(r.stdout.split()[1])


@pytest.mark.parametrize("timeout_ms, producers, bound_s", [(1000, 1, 5), (0, 1, 5), (1500, 3, 3.5)])
def test_exit_with_unanswered_records_is_bounded_and_warns(fb, timeout_ms, producers, bound_s):
    """(1500 ms, 3 producers): their flushes run together, not one after the other (4.5 s)."""
    fb.create_topic("t", 1)
    fb.script.on(ApiKey.PRODUCE, no_response(), times=None)
    r, exit_s = _run(fb, timeout_ms, producers)
    assert exit_s < bound_s, (exit_s, r.stderr)
    # (no logging configured in the script: logging's last-resort handler prints the WARNING)
    found = re.findall(r"(\d+) record\(s\) not delivered within exit_flush_timeout_ms=(\d+)", r.stderr)
    assert sorted(found) == [("100", str(timeout_ms))] * producers, r.stderr
    if timeout_ms:
        assert fb.received(ApiKey.PRODUCE), "the exit flush sent nothing"
