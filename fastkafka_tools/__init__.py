"""Tools around fastkafka that are not the library: the producer perf tool (``fastkafka-perf``), the
local broker launcher (tansu / noida-db), the Apache Kafka KRaft rig of the tests, demo and benchmarks
(its Maven poms and log4j2 config in ``rig/``), the certificates of the TLS tests and benchmark, the
Schema Registry server of the tests, and the Spark sink demo.

The library (``fastkafka``, ``spark_sink``) never imports this package.
"""
