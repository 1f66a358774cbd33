#!/usr/bin/env bash
# Set up, then run the producer perf tool. With no arguments it starts a local broker itself and
# sends 1,000,000 records of 100 bytes to a 6-partition topic. Arguments go to `python -m fastkafka_tools.perf`
# (--help lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m fastkafka_tools.perf "$@"
