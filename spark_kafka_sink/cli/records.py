"""How ``tail`` prints a record (:class:`~spark_kafka_sink.admin.FetchedRecord`): pure functions.

Text (:func:`text_lines`), for people: a line with the partition, offset and timestamp (UTC,
with its type), then one line each for the key, the value and every header. Bytes show as text
when they are UTF-8 without control characters other than tab, newline and carriage return
(those three escaped as ``\\t``, ``\\n``, ``\\r``); other bytes show as ``[hex] 00ff...``; a null
as ``(null)``, empty bytes as ``(empty)``.

JSON (:func:`json_line`), for programs: one object per record, on one line::

    {"topic": "events", "partition": 0, "offset": 5, "timestamp": 1714564800123,
     "timestamp_type": "CreateTime", "key": "order-1", "value": {"base64": "AP8="},
     "headers": [["trace", "abc"]]}

Keys, values and header values are a string when they decode as UTF-8 (exactly: JSON escapes
what needs it), ``{"base64": ...}`` otherwise, ``null`` for a null; :func:`bytes_of` turns one
back into bytes.
"""

from __future__ import annotations

import base64
import json
import unicodedata
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..record.layout import TimestampType

if TYPE_CHECKING:
    from ..admin import FetchedRecord

NULL, EMPTY, HEX = "(null)", "(empty)", "[hex] "
_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
TIMESTAMP_TYPES = {TimestampType.CREATE_TIME: "CreateTime", TimestampType.LOG_APPEND_TIME: "LogAppendTime"}


def shown(data: bytes | None) -> str:
    """``data`` for a person (see the module docstring)."""
    if data is None:
        return NULL
    if not data:
        return EMPTY
    text = _text(data)
    if text is None or any(unicodedata.category(c) == "Cc" and c not in _ESCAPES for c in text):
        return HEX + data.hex()
    return "".join(_ESCAPES.get(c, c) for c in text)


def timestamp_text(timestamp_ms: int) -> str:
    """``2025-05-01 12:00:00.123 UTC``; a negative timestamp (none: a record written without
    one) as ``no timestamp``; one past what a date can say (after year 9999) in milliseconds."""
    if timestamp_ms < 0:
        return "no timestamp"
    try:
        moment = datetime.fromtimestamp(timestamp_ms / 1000, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return f"{timestamp_ms} ms since the epoch"
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{timestamp_ms % 1000:03d} UTC"


def text_lines(record: FetchedRecord) -> list[str]:
    """The lines of ``record`` in text format."""
    kind = TIMESTAMP_TYPES.get(record.timestamp_type, str(record.timestamp_type))
    lines = [f"partition {record.partition}, offset {record.offset}, "
             f"{kind} {timestamp_text(record.timestamp_ms)}",
             f"  key:    {shown(record.key)}",
             f"  value:  {shown(record.value)}"]
    lines.extend(f"  header: {shown(key.encode())} = {shown(value)}" for key, value in record.headers)
    return lines


def json_value(data: bytes | None) -> Any:
    """``data`` as JSON: a string (UTF-8), ``{"base64": ...}`` or ``None``."""
    if data is None:
        return None
    text = _text(data)
    return text if text is not None else {"base64": base64.b64encode(data).decode("ascii")}


def bytes_of(value: Any) -> bytes | None:
    """The inverse of :func:`json_value`."""
    if value is None:
        return None
    if isinstance(value, dict):
        return base64.b64decode(value["base64"])
    return value.encode("utf-8")


def json_object(record: FetchedRecord) -> dict[str, Any]:
    return {"topic": record.topic, "partition": record.partition, "offset": record.offset,
            "timestamp": record.timestamp_ms,
            "timestamp_type": TIMESTAMP_TYPES.get(record.timestamp_type, str(record.timestamp_type)),
            "key": json_value(record.key), "value": json_value(record.value),
            "headers": [[key, json_value(value)] for key, value in record.headers]}


def json_line(record: FetchedRecord) -> str:
    """``record`` as one line of JSON (non-ASCII text kept as it is)."""
    return json.dumps(json_object(record), ensure_ascii=False)


def _text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
