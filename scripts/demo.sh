#!/usr/bin/env bash
# Set up, then run the Spark sink demo. With no arguments it starts a local broker and a local[2]
# Spark session, writes 3,000,000 rows (16-byte key, 100-byte value) to a 6-partition topic through
# the fastkafka data source, prints the throughput and reads the topic back to verify the count.
# Arguments go to `python -m fastkafka_tools.spark_demo` (--rows, --topic, --bootstrap-servers, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m fastkafka_tools.spark_demo "$@"
