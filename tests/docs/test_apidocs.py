"""The API reference builds from the docstrings with Sphinx, warnings as errors
(``scripts/apidocs.sh``: ``-W --keep-going``, every file read again), and covers the public API."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import docblocks

# The public names the reference must document (an anchor per object in the HTML).
PUBLIC = [
    "fastkafka.Producer", "fastkafka.Producer.send", "fastkafka.Producer.produce",
    "fastkafka.Producer.send_batch", "fastkafka.Producer.flush", "fastkafka.Producer.close",
    "fastkafka.Producer.init_transactions", "fastkafka.Producer.prepare_transaction",
    "fastkafka.RecordMetadata", "fastkafka.FutureRecordMetadata", "fastkafka.BatchFuture",
    "fastkafka.EncodedHeaders", "fastkafka.config.ProducerConfig", "fastkafka.admin.Admin",
    "fastkafka.admin.Admin.commit_transaction", "fastkafka.PreparedTransaction",
    "fastkafka.errors.KafkaError", "fastkafka.errors.ConfigError",
    "fastkafka.errors.InvalidRecordError", "fastkafka.errors.TransactionAbortableError",
    "fastkafka.aws.MSKIAMTokenProvider", "fastkafka.errors.AwsCredentialsError",
    "spark_sink.register", "spark_sink.partition_writer", "spark_sink.batch_writer",
    "spark_sink.read_summaries", "spark_sink.DeliveryError", "spark_sink.SchemaError",
]


@pytest.mark.timeout(300)
def test_api_reference_builds_without_warnings(tmp_path):
    out = tmp_path / "apidocs"
    env = dict(os.environ, PYTHON=sys.executable)
    r = subprocess.run(["bash", os.path.join(docblocks.ROOT, "scripts", "apidocs.sh"), str(out)],
                       cwd=docblocks.ROOT, env=env, capture_output=True, text=True, timeout=280)
    assert r.returncode == 0, f"scripts/apidocs.sh failed:\n{r.stdout[-4000:]}\n{r.stderr[-8000:]}"
    html = (out / "index.html").read_text(encoding="utf-8")
    missing = [name for name in PUBLIC if f'id="{name}"' not in html]
    assert missing == [], f"not in the API reference: {missing}"
