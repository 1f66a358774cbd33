# path:
#   a value:  AvroEncoder.encode -> _write_obj (the _Op tree) -> the Buf writers -> bytes
#   columns:  encode_arrow -> _plan (checked once per Arrow type) -> _run -> _bind (per chunk)
#             -> _encode_rows (without the GIL) -> _write_col / _write_json -> _narrow

# Contract of fastkafka.schema_registry._encode: nothing at the C level. The encoders are used
# through Python (AvroEncoder.encode, encode_arrow, check_arrow; JsonEncoder.encode_arrow): one
# call encodes one value or every row of a batch, so a Python attribute lookup per call costs
# nothing that matters, and no other compiled module needs their structs.
