"""CRC-32C: known vectors on both implementations (the hardware one: SSE4.2 on x86_64, ARMv8 CRC32 on
aarch64), alignment, continuation. The C-level check on each compiler is test_crc32c_c.py."""
import os
import pathlib
import subprocess
import sys

import cpucaps
import crc32c as crc32c_pkg
import pytest
from hypothesis import given, settings, strategies as st

from fastkafka._wire import crc32c as m

# the repository: the first folder above this file that holds pyproject.toml
ROOT = next(str(p) for p in pathlib.Path(__file__).resolve().parents if (p / "pyproject.toml").exists())

# RFC 3720 (iSCSI) appendix B.4 test vectors and the usual check value.
VECTORS = [
    (b"", 0x00000000),
    (b"123456789", 0xE3069283),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (bytes.fromhex(
        "01c00000000000000000000000000000"
        "14000000000004000000001400000018"
        "28000000000000000200000000000000"), 0xD9963A56),
]

IMPLS = {
    "default": m.crc32c,
    "table": m.crc32c_table,
    "hw": m.crc32c_hw,
}


@pytest.fixture(params=sorted(IMPLS))
def fn(request):
    return IMPLS[request.param]


def test_hw_is_used_when_available():
    # the detection agrees with the CPU as the kernel reports it: SSE4.2 in the x86_64 cpu flags,
    # CRC32 in the aarch64 hwcaps (a detection that always said "no" went unnoticed: the table path
    # gives the same results, only slower)
    name, present = cpucaps.crc32c_hw()
    if present is not None:
        assert m.hw_available() is present
    if m.hw_available() and os.environ.get("FASTKAFKA_CRC32C") != "table":
        assert m.implementation() == name
    else:
        assert m.implementation() == "table"


@pytest.mark.parametrize("data,expected", VECTORS)
def test_known_vectors(fn, data, expected):
    assert fn(data) == expected


def test_accepts_any_buffer(fn):
    data = b"123456789"
    for obj in (bytearray(data), memoryview(data), memoryview(b"xx" + data)[2:]):
        assert fn(obj) == 0xE3069283
    import array
    arr = array.array("B", data)
    assert fn(arr) == 0xE3069283


def test_rejects_non_buffers(fn):
    with pytest.raises(TypeError):
        fn("123456789")
    with pytest.raises(BufferError):
        fn(memoryview(b"abcdef")[::2])     # not contiguous


def test_value_range(fn):
    with pytest.raises(OverflowError):
        fn(b"x", -1)
    with pytest.raises(OverflowError):
        fn(b"x", 1 << 32)


def test_lengths_and_alignments_match_package(fn):
    blob = bytes((i * 131 + 7) & 0xFF for i in range(4096))
    for start in range(8):
        for n in range(0, 301):
            data = blob[start:start + n]
            assert fn(memoryview(blob)[start:start + n]) == crc32c_pkg.crc32c(data), (start, n)


@pytest.mark.parametrize("n", [767, 768, 769, 3 * 8192 - 1, 3 * 8192, 3 * 8192 + 17,
                               1 << 20, (1 << 20) + 3, 5 * 1024 * 1024 + 123])
def test_large_buffers_match_package(fn, n):
    data = os.urandom(n)
    for start in (0, 1, 5):
        assert fn(memoryview(data)[start:]) == crc32c_pkg.crc32c(data[start:])


def test_paths_agree_on_large_random_input():
    data = os.urandom(3 * 1024 * 1024 + 11)
    assert m.crc32c_table(data) == m.crc32c_hw(data) == crc32c_pkg.crc32c(data)


@settings(max_examples=300, deadline=None)
@given(a=st.binary(max_size=3000), b=st.binary(max_size=3000), seed=st.integers(0, 2**32 - 1))
def test_continuation_matches_package(a, b, seed):
    for f in IMPLS.values():
        assert f(a + b) == f(b, f(a)) == crc32c_pkg.crc32c(a + b)
        assert f(b, seed) == crc32c_pkg.crc32c(b, seed)


def test_table_path_forced_by_env():
    # Load the extension by file in a fresh interpreter (no package __init__ needed).
    code = (
        "import importlib.util, os, sys, crc32c;"
        "spec = importlib.util.spec_from_file_location('fastkafka._wire.crc32c', sys.argv[1]);"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m);"
        "assert m.implementation() == 'table', m.implementation();"
        "d = os.urandom(100000);"
        "assert m.crc32c(d) == crc32c.crc32c(d);"
        "assert m.crc32c(b'123456789') == 0xE3069283;"
        "print('ok')"
    )
    env = dict(os.environ, FASTKAFKA_CRC32C="table")
    out = subprocess.run([sys.executable, "-c", code, m.__file__], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
