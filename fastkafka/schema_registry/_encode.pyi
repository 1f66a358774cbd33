"""Compiled Avro and JSON encoders (see _encode.pyx)."""
from typing import Any, Union, final

import pyarrow

from fastkafka.schema_registry._avro_schema import ParsedAvro

_Schema = Union[str, dict[str, Any], list[Any], ParsedAvro]

@final
class AvroEncoder:
    parsed: ParsedAvro
    def __init__(self, schema: _Schema) -> None: ...
    def encode(self, obj: Any, header: bytes = b"") -> bytes: ...
    def encode_arrow(self, data: Any, header: bytes = b"") -> pyarrow.Array: ...
    def check_arrow(self, arrow_type: Union[pyarrow.DataType, pyarrow.Schema, pyarrow.Field]) -> None: ...

@final
class JsonEncoder:
    def __init__(self, arrow_type: Union[pyarrow.DataType, pyarrow.Schema, None] = None) -> None: ...
    def encode_arrow(self, data: Any, header: bytes = b"") -> pyarrow.Array: ...
