"""What the CPU running the tests says about CRC-32C instructions, read independently of the code
under test, so a detection that always says "no" is caught (the table path gives the same results,
only slower).

``crc32c_hw()`` -> ``(name, present)``: the name ``fastkafka._wire.crc32c.implementation()`` gives
for this machine's hardware path (``"sse4.2"`` on x86_64, ``"armv8-crc"`` on aarch64, None
elsewhere) and whether the CPU has it (None when that cannot be told).
"""
from __future__ import annotations

import ctypes
import platform

AT_HWCAP = 16
HWCAP_CRC32 = 1 << 7        # arch/arm64/include/uapi/asm/hwcap.h


def machine() -> str:
    """``"x86_64"``, ``"aarch64"`` or the lowercased platform.machine() of anything else."""
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


def _cpuinfo_has(key: str, flag: str) -> bool | None:
    """Whether the first ``key:`` line of /proc/cpuinfo lists ``flag``; None without such a line."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.split(":", 1)[0].strip() == key:
                    return flag in line.split(":", 1)[1].split()
    except OSError:
        pass
    return None


def _hwcap_has(bit: int) -> bool | None:
    """Whether getauxval(AT_HWCAP) has ``bit`` (what the kernel, or qemu, tells this process)."""
    try:
        getauxval = ctypes.CDLL(None).getauxval
    except (OSError, AttributeError):
        return None
    getauxval.restype = ctypes.c_ulong
    getauxval.argtypes = [ctypes.c_ulong]
    return bool(getauxval(AT_HWCAP) & bit)


def crc32c_hw() -> tuple[str | None, bool | None]:
    m = machine()
    if m == "x86_64":
        return "sse4.2", _cpuinfo_has("flags", "sse4_2")
    if m == "aarch64":
        present = _hwcap_has(HWCAP_CRC32)
        if present is None:
            present = _cpuinfo_has("Features", "crc32")
        return "armv8-crc", present
    return None, False
