"""A producer left open at interpreter exit whose broker never answers: the exit is bounded by
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

SCRIPT = r"""
import sys, time
from fastkafka import Producer
p = Producer(bootstrap_servers=sys.argv[1], exit_flush_timeout_ms=int(sys.argv[2]), linger_ms=0,
             request_timeout_ms=30000, delivery_timeout_ms=60000)
p.partitions_for("t")
futs = [p.send("t", value=b"v%d" % i) for i in range(100)]
print("end", time.monotonic(), flush=True)
"""


def _run(fb, exit_flush_timeout_ms: int):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", SCRIPT, fb.bootstrap, str(exit_flush_timeout_ms)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    ended = time.monotonic()
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("end "), (r.stdout, r.stderr)
    return r, ended - float(r.stdout.split()[1])


@pytest.mark.parametrize("timeout_ms", [1000, 0])
def test_exit_with_unanswered_records_is_bounded_and_warns(fb, timeout_ms):
    fb.create_topic("t", 1)
    fb.script.on(ApiKey.PRODUCE, no_response(), times=None)
    r, exit_s = _run(fb, timeout_ms)
    assert exit_s < 5, (exit_s, r.stderr)
    # (no logging configured in the script: logging's last-resort handler prints the WARNING)
    m = re.search(r"(\d+) record\(s\) not delivered within exit_flush_timeout_ms=(\d+)", r.stderr)
    assert m, r.stderr
    assert (int(m.group(1)), int(m.group(2))) == (100, timeout_ms), r.stderr
    if timeout_ms:
        assert fb.received(ApiKey.PRODUCE), "the exit flush sent nothing"
