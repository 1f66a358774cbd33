"""zstd's C path by default with a recent libzstd: the host's Python with Debian unstable's libzstd
(1.5.7 or newer, from the root of buildtools/roots.py, ``sid-amd64``, which scripts/test.sh makes
before the suite) found first by ``dlopen("libzstd.so.1")``. The host's own libzstd (Debian 12:
1.5.4, below ``ccodecs.ZSTD_C_FROM``) is tested in tests/unit/fastkafka/_wire/test_ccodecs.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from buildtools import roots

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(1200)     # roots.ensure makes the root when a machine has none yet

# A child: the default choice, one batch closed by BatchBuilder, which path compressed it, and its
# records read back (the reference decoder, zstd by cramjam's own library).
CHILD = r"""
import json
from fastkafka._wire import ccodecs, compression
from fastkafka._wire.records import BatchBuilder
import reference_records as ref

before = compression.counters()
b = BatchBuilder(1 << 16, "zstd")
for i in range(200):
    b.append(1_700_000_000_000 + i, b"key-%d" % i, b'{"id":%d,"user":"user-%05d"}' % (i, i * 7), None)
b.close()
b.stamp(-1, -1, -1)
batch = ref.decode_batch(b"".join(bytes(p) for p in b.buffers()))
after = compression.counters()
print(json.dumps({
    "versions": ccodecs.versions(), "in_c": ccodecs.in_c("zstd"),
    "c_calls": after["c"]["zstd"]["calls"] - before["c"]["zstd"]["calls"],
    "python_calls": after["python"]["zstd"] - before["python"]["zstd"],
    "codec": batch.compression_type,
    "records": [[r.key.decode(), r.value.decode()] for r in batch.records]}))
"""


def run_child(library_dir: Path, only: str | None) -> dict:
    env = dict(os.environ)
    env.pop("FASTKAFKA_C_CODECS", None)
    if only is not None:
        env["FASTKAFKA_C_CODECS"] = only
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        [str(library_dir)] + [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p])
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests")]
                                        + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def recent_libzstd(tmp_path_factory) -> Path:
    """A folder holding only ``libzstd.so.1``: the unstable root's."""
    lib = Path(roots.ensure("sid-amd64")) / "usr" / "lib" / "x86_64-linux-gnu" / "libzstd.so.1"
    assert lib.exists(), f"{lib} is missing from the sid-amd64 root"
    d = tmp_path_factory.mktemp("libzstd")
    (d / "libzstd.so.1").symlink_to(lib.resolve())
    return d


WANT = [[f"key-{i}", '{"id":%d,"user":"user-%05d"}' % (i, i * 7)] for i in range(200)]


def test_a_recent_libzstd_compresses_zstd_in_c_by_default(recent_libzstd):
    got = run_child(recent_libzstd, None)
    major, minor, release = (int(x) for x in got["versions"]["zstd"].split("."))
    assert (major, minor, release) >= (1, 5, 7), got["versions"]
    assert got["in_c"] is True
    assert (got["c_calls"], got["python_calls"]) == (1, 0)
    assert got["codec"] == 4 and got["records"] == WANT


def test_a_recent_libzstd_left_out_is_the_python_codec(recent_libzstd):
    got = run_child(recent_libzstd, "gzip,snappy,lz4")
    assert got["versions"] == {"lz4": got["versions"]["lz4"]}      # zstd's library not even loaded
    assert got["in_c"] is False
    assert (got["c_calls"], got["python_calls"]) == (0, 1)
    assert got["codec"] == 4 and got["records"] == WANT
