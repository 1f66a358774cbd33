"""bench/schema_registry.py: its data (the same records as a Table, as Avro dicts and as JSON dicts),
the checks its encoder children make, its tables, and a tiny run end to end (broker, registry
server, child processes, delivery checks).

    python -m pytest bench/test_schema_registry.py -q
"""
from __future__ import annotations

import base64
import io
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import schema_registry as sr  # noqa: E402


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _rounds(*rates):
    return [{"failed": "x"} if r is None else {"rate": float(r), "records": 100, "cpu_s": 0.001,
                                               "broker_cpu_s": 0.002} for r in rates]


# ------------------------------------------------------------------------------------ data
def test_the_table_has_the_ten_fields_of_the_avro_schema_and_is_the_same_every_time():
    t = sr.make_table(50)
    assert t.column_names == [f["name"] for f in sr.AVRO_SCHEMA["fields"]] and len(t.column_names) == 10
    assert t.equals(sr.make_table(50))                    # fixed seed: every child has the same data
    rows = t.to_pylist()
    assert [r["email"] is None for r in rows[:4]] == [True, False, False, False]
    assert {len(r["tags"]) for r in rows} == {0, 1, 2, 3}
    assert {r["kind"] for r in rows} == set(sr.KIND_SYMBOLS)
    assert any(not r["name"].isascii() for r in rows)


def test_the_avro_dicts_are_what_fastavro_writes_and_reads_back():
    import fastavro
    _, dicts = sr.make_data(20, "avro")
    parsed = fastavro.parse_schema(json.loads(sr.AVRO_SCHEMA_STR))
    for d in dicts:
        back = fastavro.schemaless_reader(io.BytesIO(sr._fastavro_bytes(parsed, d)), parsed)
        assert back == d


def test_the_json_dicts_carry_json_types_by_the_arrow_rules():
    table, dicts = sr.make_data(3, "json")
    avro = table.to_pylist()
    assert dicts[1]["created"] == "2026-01-01T00:00:00.037Z"        # ms, "Z": the JSON rule for timestamp[ms]
    assert base64.b64decode(dicts[1]["payload"]) == avro[1]["payload"]
    assert json.loads(json.dumps(dicts)) == dicts                    # JSON's own types only
    assert set(dicts[0]) == set(sr.JSON_SCHEMA["properties"]) == set(sr.JSON_SCHEMA["required"])


def test_check_names_the_first_record_that_differs():
    ref = [b"a", b"b"]
    sr._check("x", [b"a", b"b"], ref, False, False)
    sr._check("x", [b"\x00\x00\x00\x00\x01a", b"\x00\x00\x00\x00\x01b"], ref, True, False)
    with pytest.raises(AssertionError, match="x: record 1 differs"):
        sr._check("x", [b"a", b"c"], ref, False, False)
    with pytest.raises(AssertionError, match="record 0 has no registry header"):
        sr._check("x", [b"a", b"b"], ref, True, False)
    with pytest.raises(AssertionError, match="1 outputs for 2 records"):
        sr._check("x", [b"a"], ref, False, False)
    sr._check("j", [b'{"a":1}'], [{"a": 1}], False, True)
    with pytest.raises(AssertionError, match="j: record 0 differs"):
        sr._check("j", [b'{"a":2}'], [{"a": 1}], False, True)


# ------------------------------------------------------------------------------------ tables
def test_broker_section_gives_medians_paired_ratios_and_the_targets():
    args = type("A", (), {"rounds": 3})()
    names = ["fk_avro_batch", "fk_avro_send", "ck_avro"]
    results = {"fk_avro_batch": _rounds(1200, 900, 1500), "fk_avro_send": _rounds(250, 300, None),
               "ck_avro": _rounds(100, 100, 100)}
    lines = sr.broker_section(6, names, results, args, 12.0)
    text = "\n".join(lines)
    row = next(_cells(ln) for ln in lines if ln.startswith("| fastkafka | AvroSerializer, send_batch"))
    assert row[2] == "1,200" and row[5] == "1,200, 900, 1,500"
    failed = next(_cells(ln) for ln in lines if ln.startswith("| fastkafka | AvroSerializer, send(dict)"))
    assert failed[2] == "FAILED" and failed[5].endswith("FAILED (x)")
    assert "- `fk_avro_batch` / `ck_avro` >= 10: 12.00, met" in text
    assert "- `fk_avro_send` / `ck_avro` >= 3: n/a (a round failed)" in text
    results["fk_avro_batch"] = _rounds(900, 950, 980)
    assert "- `fk_avro_batch` / `ck_avro` >= 10: 9.50, not met" in "\n".join(
        sr.broker_section(6, names, results, args, 12.0))


def test_encoder_section_ratio_is_how_many_times_faster():
    args = type("A", (), {"encoder_records": 1000, "encoder_rounds": 2})()
    results = {"avro_arrow": [{"ns_per_record": 100.0, "rate": 1e7, "passes": 5},
                              {"ns_per_record": 200.0, "rate": 5e6, "passes": 5}],
               "fastavro": [{"ns_per_record": 1000.0, "rate": 1e6, "passes": 2},
                            {"ns_per_record": 1000.0, "rate": 1e6, "passes": 1}]}
    lines = sr.encoder_section(["avro_arrow", "fastavro"], results, args)
    row = next(_cells(ln) for ln in lines if ln.startswith("| avro_arrow | fastavro |"))
    assert row[2] == "7.50" and row[3] == "10.00, 5.00"
    med = next(_cells(ln) for ln in lines if ln.startswith("| avro_arrow | fastkafka"))
    assert med[2] == "150" and med[3] == "5/5" and med[4] == "100, 200"
    slow = next(_cells(ln) for ln in lines if ln.startswith("| fastavro | `fastavro"))
    assert slow[3] == "2/1"


# ------------------------------------------------------------------------------------ end to end
def test_a_tiny_run_end_to_end(tmp_path):
    out = tmp_path / "sr.md"
    only = ["fk_avro_batch", "fk_avro_send", "ck_avro", "avro_arrow", "avro_dict", "fastavro", "ck_avro_ser"]
    assert sr.main(["--records", "3000", "--rounds", "1", "--encoder-rounds", "1", "--encoder-records", "3000",
                    "--kafka-heap-mb", "512",
                    "--only", ",".join(only), "--out", str(out)]) == 0
    text = out.read_text()
    assert "FAILED" not in text, text
    rows = {tuple(_cells(ln)[:2]): _cells(ln) for ln in text.splitlines() if ln.startswith("| fastkafka |")
            or ln.startswith("| confluent-kafka |")}
    for name in ("fk_avro_batch", "fk_avro_send", "ck_avro"):
        cells = rows[sr.MEASUREMENTS[name]]
        assert float(cells[2].replace(",", "")) > 0 and float(cells[3]) > 0, cells
    for name in ("avro_arrow", "avro_dict", "fastavro", "ck_avro_ser"):
        assert any(ln.startswith(f"| {name} | ") for ln in text.splitlines()), name
    assert "`fk_avro_batch` / `ck_avro` >= 10:" in text and "load average" in text
