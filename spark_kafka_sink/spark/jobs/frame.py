"""Reading the jobs' source and shaping it for the sink: :func:`match_source_columns` checks
``--key-column`` / ``--value-column`` against the source's columns (before anything is written);
:func:`to_kafka_frame` then shapes any DataFrame into the sink's ``key`` / ``value`` columns
(default value: the whole row as JSON, ``to_json(struct(*))``). pyspark is imported inside the
functions that need it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ...errors import JobError
from .args import SCHEME, Columns, Source


def match_source_columns(columns: Columns, available: Sequence[str]) -> Columns:
    """``columns`` with each name as the source spells it (Spark matches names without case);
    ``JobError`` naming the flag and listing the source's columns for a name it lacks."""

    def find(flag: str, name: str | None) -> str | None:
        if name is None:
            return None
        if name in available:
            return name
        matches = [col for col in available if col.lower() == name.lower()]
        if len(matches) == 1:
            return matches[0]
        listed = ", ".join(available) if available else "(none)"
        raise JobError(f"{flag} {name!r}: the source has no such column; its columns are: {listed}")

    return Columns(find("--key-column", columns.key), find("--value-column", columns.value))


def to_kafka_frame(df: Any, columns: Columns) -> Any:
    """``df`` as the sink's ``key`` (if a key column is given) and ``value`` columns.

    Text and binary columns are written as they are; structs, arrays and maps as JSON; anything
    else cast to string. Without a value column, the value is the whole row as JSON
    (``to_json(struct(*))``, with the key column still in it).
    """
    from pyspark.sql import functions as F

    resolved = match_source_columns(columns, df.columns)
    types = {f.name: f.dataType for f in df.schema.fields}
    if resolved.value is None:
        value = F.to_json(F.struct(*[_col(name) for name in df.columns]))
    else:
        value = _as_text_or_bytes(resolved.value, types[resolved.value])
    selected = [value.alias("value")]
    if resolved.key is not None:
        selected.insert(0, _as_text_or_bytes(resolved.key, types[resolved.key]).alias("key"))
    return df.select(*selected)


def _col(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")  # names with dots or spaces stay one column


def _as_text_or_bytes(name: str, data_type: Any) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructType

    column = _col(name)
    if isinstance(data_type, (StringType, BinaryType)):
        return column
    if isinstance(data_type, (StructType, ArrayType, MapType)):
        return F.to_json(column)
    return column.cast("string")


# --- reading the source ------------------------------------------------------------------------

def read_source_batch(spark: Any, source: Source) -> Any:
    """The source as a batch DataFrame (CSV with a header line and inferred column types)."""
    reader = spark.read.format(source.format).options(**source.reader_options())
    if source.schema:
        reader = reader.schema(source.schema)
    elif source.format == "csv":
        reader = reader.option("inferSchema", "true")
    return reader.load(source.path)


def read_source_stream(spark: Any, source: Source) -> Any:
    """The source as a streaming DataFrame. A file stream needs its schema up front: the given
    DDL, or the one a batch read of the files there now infers."""
    schema = source.schema or _inferred_schema(spark, source)
    reader = spark.readStream.format(source.format).options(**source.reader_options()).schema(schema)
    if source.max_files_per_trigger is not None:
        reader = reader.option("maxFilesPerTrigger", str(source.max_files_per_trigger))
    return reader.load(source.path)


def _inferred_schema(spark: Any, source: Source) -> Any:
    local = Path(source.path)
    if not SCHEME.match(source.path) and local.is_dir() and not any(
            not p.name.startswith(("_", ".")) for p in local.iterdir()):
        raise JobError(f"--source {source.path!r} has no files to infer the schema from; add files "
                       f"or pass --schema 'col TYPE, ...'")
    return read_source_batch(spark, source).schema
