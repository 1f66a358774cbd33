"""The sink's ``timestamp`` column without Spark running: ``check_schema`` (the driver's check of
the DataFrame's types) and the row path's conversion of a datetime to ms."""
from __future__ import annotations

import datetime

import pytest
from pyspark.sql.types import (ArrayType, BinaryType, DoubleType, IntegerType, LongType, StringType,
                               StructField, StructType, TimestampNTZType, TimestampType)

from fastkafka.errors import InvalidRecordError
from spark_sink.options import settings_from_kwargs
from spark_sink.task import SchemaError, _datetime_ms, check_schema

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def schema(ts_type, name="timestamp"):
    return StructType([StructField("value", BinaryType()), StructField("headers", HEADERS),
                       StructField(name, ts_type)])


def settings():
    return settings_from_kwargs("t", False, None, None, {"bootstrap_servers": "127.0.0.1:1"})


@pytest.mark.parametrize("ts_type", [TimestampType(), LongType()])
def test_a_timestamp_or_bigint_column_is_read(ts_type):
    assert check_schema(schema(ts_type), settings()).columns == ("value", "headers", "timestamp")
    assert check_schema(schema(ts_type, "TimeStamp"), settings()).columns[-1] == "TimeStamp"


@pytest.mark.parametrize("ts_type,name", [(StringType(), "string"), (IntegerType(), "int"),
                                          (DoubleType(), "double"),
                                          (TimestampNTZType(), "timestamp_ntz")])
def test_a_timestamp_column_of_another_type_is_a_schema_error_naming_it(ts_type, name):
    with pytest.raises(SchemaError, match=f"column 'timestamp' must be timestamp .*not {name};"):
        check_schema(schema(ts_type), settings())


def test_datetimes_are_ms_since_the_epoch_truncated():
    utc = datetime.timezone.utc
    aware = datetime.datetime(2023, 11, 14, 22, 13, 20, 123999, tzinfo=utc)
    assert _datetime_ms(aware) == 1_700_000_000_123
    naive = datetime.datetime.fromtimestamp(1_700_000_000)        # local time, as pyspark gives
    assert _datetime_ms(naive.replace(microsecond=999_999)) == 1_700_000_000_999
    with pytest.raises(InvalidRecordError, match="not str"):
        _datetime_ms("2023-11-14")
