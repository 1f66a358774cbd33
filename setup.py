"""Build script: compiles every ``.pyx`` under ``fastkafka/`` (and ``spark_sink/``).

Environment knobs (for development only):
  FASTKAFKA_EXT=a,b     build only the extensions whose dotted name contains one of these
  FASTKAFKA_DEBUG=1     keep Cython bounds/wraparound checks on and build with -O0 -g
"""
import os
import sys
from pathlib import Path

from setuptools import Extension, setup

ROOT = Path(__file__).parent
DEBUG = os.environ.get("FASTKAFKA_DEBUG") == "1"
ONLY = [s for s in os.environ.get("FASTKAFKA_EXT", "").split(",") if s]

# Extra C sources compiled into a given extension (dotted name -> list of paths).
EXTRA_SOURCES = {
    "fastkafka._wire.crc32c": ["fastkafka/_wire/crc32c_impl.c"],
}


def extensions():
    from Cython.Build import cythonize

    exts = []
    for pyx in sorted(ROOT.glob("fastkafka/**/*.pyx")) + sorted(ROOT.glob("spark_sink/**/*.pyx")):
        rel = pyx.relative_to(ROOT)
        name = ".".join(rel.with_suffix("").parts)
        if ONLY and not any(s in name for s in ONLY):
            continue
        cflags = ["-O0", "-g"] if DEBUG else ["-O3"]
        exts.append(
            Extension(
                name,
                [str(rel)] + EXTRA_SOURCES.get(name, []),
                include_dirs=["fastkafka/_wire", "fastkafka/_core"],
                extra_compile_args=cflags + ["-Wno-unused-function"],
            )
        )
    directives = {
        "language_level": "3",
        "boundscheck": DEBUG,
        "wraparound": DEBUG,
        "initializedcheck": DEBUG,
        "cdivision": True,
        "embedsignature": True,
    }
    return cythonize(exts, compiler_directives=directives, nthreads=0, quiet=True)


setup(ext_modules=extensions())
