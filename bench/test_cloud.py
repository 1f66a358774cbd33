"""Tests of bench/cloud.py: its configurations, values, keys, the Java tool's settings, the delivery
checks and the target table (no broker), then a tiny run end to end (one Apache Kafka node with a
SASL_SSL listener, every client once, the read-back). Run: python -m pytest bench/test_cloud.py -q"""
from __future__ import annotations

import os
import sys
import zlib

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cloud  # noqa: E402


def test_configs_parse_and_refuse():
    assert cloud.parse_configs("lz4:6:100, zstd:100:1000") == [("lz4", 6, 100), ("zstd", 100, 1000)]
    assert len(cloud.parse_configs(",".join(cloud.DEFAULT_CONFIGS))) == 8
    for bad in ("lz5:6:100", "lz4:0:100", "lz4:6", "lz4:6:10", "", "zstd:x:100"):
        with pytest.raises(ValueError):
            cloud.parse_configs(bad)
    assert cloud.records_for(100, 200_000) == 200_000
    assert cloud.records_for(1000, 200_000) == 50_000


@pytest.mark.parametrize("size", [100, 1000])
def test_values_are_distinct_text_of_the_size_and_compress_some(size):
    values = cloud.make_values(size)
    assert len(values) == cloud.DISTINCT_VALUES == len(set(values))
    assert all(len(v) == size and b"\n" not in v and v.isascii() for v in values)
    blob = b"".join(values[:256])
    ratio = len(blob) / len(zlib.compress(blob, 1))
    assert 1.1 < ratio < 3.0, ratio   # neither random bytes nor one repeated payload
    assert cloud.make_values(size) == values   # the same values for every run (fixed seed)


def test_keys_cycle_through_the_distinct_keys():
    keys = cloud.keys_for(cloud.KEYS + 5)
    assert len(set(keys)) == cloud.KEYS
    assert keys[cloud.KEYS:] == keys[:5]


def test_java_config_logs_in_with_scram_over_ssl():
    text = cloud.java_config("127.0.0.1:9094", "ca.pem", "zstd", "s3cret")
    props = dict(line.split("=", 1) for line in text.splitlines())
    assert props["security.protocol"] == "SASL_SSL"
    assert props["sasl.mechanism"] == "SCRAM-SHA-512"
    assert props["sasl.jaas.config"] == ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                         'username="bench" password="s3cret";')
    assert props["ssl.truststore.type"] == "PEM" and props["ssl.truststore.location"] == "ca.pem"
    assert props["compression.type"] == "zstd"
    assert (props["acks"], props["enable.idempotence"], props["linger.ms"]) == ("all", "true", "5")


def test_check_counts_every_record():
    ok = {"records": 100, "delivered": 100, "errors": 0, "warmup_records": 6, "seconds": 0.5, "cpu_s": 0.01,
          "child_cpu_s": 1.0}
    r = cloud.check(dict(ok), 106)
    assert r["rate"] == 200 and r["cpu_us"] == pytest.approx(100.0) and "failed" not in r
    assert "failed" in cloud.check(dict(ok), 105)            # the topic is one short
    assert "failed" in cloud.check(dict(ok), 107)            # or has one too many
    assert "failed" in cloud.check(dict(ok, delivered=99), 106)
    assert "failed" in cloud.check(dict(ok, errors=1), 106)
    java = {"records": 100, "delivered": 100, "errors": 0, "warmup_records": 100, "tool_total": 200,
            "seconds": 1.0, "child_cpu_s": 2.0}
    r = cloud.check(dict(java), 200)
    assert r["cpu_us"] == pytest.approx(10_000.0)             # the whole JVM over every record it sent
    assert "failed" in cloud.check(dict(java), 199)
    assert cloud.check({"failed": "exit 1"}, None) == {"failed": "exit 1"}


def test_expected_read_back():
    done = [("fk_send", {"records": 10, "warmup_records": 6}), ("java", {"records": 10, "tool_total": 20}),
            ("fk_nokey", {"records": 10, "warmup_records": 6}), ("ck", {"failed": "x"})]
    assert cloud.expected_read_back(done) == {"records": 52, "keyed": 10, "sized": 40}


def _rounds(*rates, cpu=1.0):
    return [{"rate": r, "cpu_us": cpu} for r in rates]


def test_summary_uses_per_round_ratios_and_targets():
    cfg = ("lz4", 6, 100)
    res = {"fk_send": _rounds(300, 200, cpu=1.2), "fk_produce": _rounds(300, 300), "fk_batch": _rounds(250, 210),
           "ck": _rounds(100, 100), "java": _rounds(150, 100), "fk_nokey": _rounds(200, 90),
           "fk_plain": _rounds(400, 400, cpu=1.0)}
    names = list(cloud.CLIENTS)
    lines, met = cloud.summary_table([cfg], {cfg: res}, names)
    row = lines[-1]
    assert "2.50 ✓" in row and "3.00 ✓" in row and "2.30 ✓" in row     # medians of 3/2, 3/3, 2.5/2.1
    assert met["ck"] == [True]
    assert met["java"] == [True] and "1.12 ✓" in row   # unkeyed send / Java: rounds 1.33 and 0.90
    assert met["tls"] == [True]            # 1.2 / 1.0
    res["ck"][1] = {"failed": "x"}
    lines, met = cloud.summary_table([cfg], {cfg: res}, names)
    assert met["ck"] == [None] and "n/a" in lines[-1]
    table = "\n".join(cloud.config_table(cfg, res, names))
    assert "FAILED" in table and table.count("\n| ") == len(names) + 1


def test_tiny_run_end_to_end(tmp_path):
    """Every client once on one configuration against a real SASL_SSL listener: no failure, the
    read-back matches, one row per client, the command and the load in the results."""
    out = tmp_path / "cloud.md"
    assert cloud.main(["--configs", "lz4:6:100", "--records", "3000", "--rounds", "1",
                       "--warmup-records", "0", "--out", str(out)]) == 0
    text = out.read_text()
    assert "FAILED" not in text and "MISMATCH" not in text, text
    assert "lz4, 6 partitions, 100 B values: read" in text and ": ok" in text
    assert ("python bench/cloud.py --rounds 1 --records 3000 --warmup-records 0 --configs lz4:6:100" in text
            and "load average" in text)
    start = text.index("### lz4, 6 partitions, 100 B values")
    rows = [ln for ln in text[start:].splitlines()[4:] if ln.startswith("| ")]
    assert len(rows) == len(cloud.CLIENTS)
    for ln in rows:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        assert float(cells[4].replace(",", "")) > 0 and float(cells[5].rstrip("†")) > 0, ln
    password = os.environ.get(cloud.PASSWORD_ENV, "")
    assert password and password not in text   # the run's SCRAM password is in no result


def test_glance_table_has_every_configuration_and_client():
    cfgs = [("lz4", 6, 100), ("zstd", 100, 1000)]
    res = {cfg: {n: _rounds(1000, 3000, cpu=2.0) for n in cloud.CLIENTS} for cfg in cfgs}
    res[cfgs[1]]["java"] = [{"failed": "exit 1"}]
    lines = cloud.glance_table(cfgs, res, list(cloud.CLIENTS))
    assert len(lines) == 2 + len(cfgs)
    assert lines[2].count("2,000 (2.00)") == len(cloud.CLIENTS) - 1 and "2,000 (2.0)" in lines[2]
    assert lines[3].startswith("| zstd, 100 partitions, 1 KB values |") and "FAILED" in lines[3]
