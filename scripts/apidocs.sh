#!/usr/bin/env bash
# Build the API reference from the docstrings with Sphinx autodoc (configuration and index in
# docs/api/), warnings as errors. Output: build/apidocs/index.html (build/ is git-ignored; another
# directory as the first argument). Needs the package built in place and sphinx (the test extra:
# bash scripts/setup.sh installs both).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/apidocs}
PY=${PYTHON:-.venv/bin/python}
exec "$PY" -m sphinx -W --keep-going -E -q -b html docs/api "$OUT"
