"""A Spark 3.5 environment for the tests of ``partition_writer`` / ``batch_writer`` on Spark 3.x
(tests/spark35): pyspark 3.5 cannot share a process (or a venv) with the project's pyspark 4.2.

A venv of its own, in the cache outside the work tree (``$FASTKAFKA_CACHE``, default
``~/.cache/fastkafka``), made from the running interpreter's base Python (so the extensions built in
the work tree load in it) and holding only pyspark 3.5 and what the sink needs at run time:
pyarrow, pandas (pyspark's Arrow UDFs, hence ``mapInArrow``, need it on the driver) and
fastkafka's own dependencies. fastkafka itself is not installed there: a process run in it gets
the work tree on ``PYTHONPATH``. Made once (about 90 s, most of it pip building pyspark's wheel;
pip's cache makes a second one take seconds)::

    python -m fastkafka_tools.spark35          # makes it if needed, prints its python
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

from fastkafka_tools.apachekafka import _file_lock, cache_root

#: the newest pyspark 3.5 release (Python 3.8-3.11 and Java 8/11/17 are supported by Spark 3.5)
PYSPARK_VERSION = "3.5.9"
#: what the venv holds besides pyspark; pandas<3: the pandas pyspark 3.5 was released against
PACKAGES = ("pyarrow>=14", "pandas>=2.2,<3", "lz4>=4.3", "cramjam>=2.8")


def env_dir(version: str = PYSPARK_VERSION) -> str:
    tag = f"py{sys.version_info[0]}{sys.version_info[1]}"
    return os.path.join(cache_root(), f"venv-pyspark-{version}-{tag}")


def python(version: str = PYSPARK_VERSION) -> str:
    return os.path.join(env_dir(version), "bin", "python")


def ensure_env(version: str = PYSPARK_VERSION) -> str:
    """The python of the Spark 3.5 venv, made the first time (safe from several processes)."""
    target = env_dir(version)
    marker = os.path.join(target, ".complete")
    if os.path.exists(marker):
        return python(version)
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    with _file_lock(os.path.join(parent, ".venv-pyspark.lock")):
        if os.path.exists(marker):
            return python(version)
        # A venv cannot be moved once made: build it where it stays, after removing a partial one.
        shutil.rmtree(target, ignore_errors=True)
        base = getattr(sys, "_base_executable", sys.executable)
        steps = [[base, "-m", "venv", target],
                 [os.path.join(target, "bin", "python"), "-m", "pip", "install", "-q",
                  "--disable-pip-version-check", f"pyspark=={version}", *PACKAGES]]
        with tempfile.TemporaryFile() as log:
            for cmd in steps:
                if subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                  stderr=subprocess.STDOUT).returncode != 0:
                    log.seek(0)
                    tail = log.read().decode("utf-8", "replace")[-3000:]
                    shutil.rmtree(target, ignore_errors=True)
                    raise RuntimeError(f"making the pyspark {version} venv failed ({cmd[2]}):\n{tail}")
        with open(marker, "w") as f:
            f.write(version + "\n")
    return python(version)


if __name__ == "__main__":
    print(ensure_env())
