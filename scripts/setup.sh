#!/usr/bin/env bash
# Create .venv (if needed) and install fastkafka with its test dependencies, compiling the Cython
# extensions in place. Needs only python3 (3.10+) with venv, a C compiler and the Python headers.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"
.venv/bin/python -c "import fastkafka._wire.records, fastkafka._core.accumulator; print('fastkafka built:', fastkafka.__version__)" \
  || { echo "build check failed" >&2; exit 1; }
