"""The Spark schema of a snapshot record, derived from audit/schema.py's SCHEMA
(one source of truth): int -> long, str -> string, bool -> boolean, object -> struct,
list -> array. A field a record lacks reads as null; a line that is not JSON lands in
`_corrupt_record`."""

from __future__ import annotations

from pyspark.sql import types as T

from audit.schema import SCHEMA, Field

CORRUPT = "_corrupt_record"

_SCALARS = {"int": T.LongType(), "str": T.StringType(), "bool": T.BooleanType()}


def _type(f: Field) -> T.DataType:
    if f.kind in _SCALARS:
        return _SCALARS[f.kind]
    if f.kind == "object":
        return _struct(f.fields or {})
    if f.kind == "list":
        item = _struct(f.of) if isinstance(f.of, dict) else _SCALARS[f.of]
        return T.ArrayType(item, True)
    raise ValueError(f"unknown field kind {f.kind!r}")


def _struct(fields: dict[str, Field]) -> T.StructType:
    return T.StructType([T.StructField(name, _type(f), True) for name, f in fields.items()])


def record_schema() -> T.StructType:
    """The schema the audit reads snapshot files with (plus the corrupt-line column)."""
    return T.StructType([*_struct(SCHEMA).fields, T.StructField(CORRUPT, T.StringType(), True)])
