"""Spark's own discovery of the data source ``fastkafka``: no ``spark_sink.register(spark)`` needed.

When a Spark 4 session first looks up a Python data source, Spark imports every top-level module
of the Python path whose name starts with ``pyspark_`` and registers its ``DefaultSource`` (a
``pyspark.sql.datasource.DataSource``) under ``DefaultSource.name()``, for every session of that
JVM (``pyspark.sql.worker.lookup_data_sources``). This module is that entry for
:class:`spark_sink.datasource.FastKafkaDataSource`, so that ``df.write.format("fastkafka")``
works in a new session as it is.

It offers the data source on Spark 4.2 and later only: ``spark_sink.register(spark)`` must keep
working beside it (it attaches the accumulators, and it is what batch_writer calls), and Spark 4.2
lets a session register a name that discovery already registered (logging that it replaced it),
where an earlier Spark 4 may refuse it (DATA_SOURCE_ALREADY_EXISTS). On those, and on Spark 3.5,
which has no Python data sources, ``register`` stays the way (docs/spark.md).

Spark imports every such module in one worker and a module that raises there fails the discovery
of all of them: nothing here may raise.
"""
from __future__ import annotations

import logging
import re

#: the first Spark version this module offers the data source to
SPARK_VERSION_NEEDED = (4, 2)


def _spark_version() -> tuple[int, int]:
    import pyspark

    m = re.match(r"(\d+)\.(\d+)", pyspark.__version__)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


try:
    if _spark_version() >= SPARK_VERSION_NEEDED:
        from spark_sink.datasource import FastKafkaDataSource as DefaultSource  # noqa: F401
except Exception:   # discovery of the other sources must go on; register(spark) still works
    logging.getLogger("spark_sink").exception(
        "the data source 'fastkafka' cannot be offered to Spark's discovery: "
        "call spark_sink.register(spark), which says why")
