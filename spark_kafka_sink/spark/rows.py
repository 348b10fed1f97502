"""One Spark ``Row`` -> the arguments of one ``KafkaProducer.send``, by the driver-validated columns.

The writer gets rows as ``foreachPartition`` hands them to Python: a ``pyspark.sql.Row`` (a tuple)
whose fields carry Spark's Python values. :class:`RowConverter` reads the sink columns by their
position in the :class:`~spark_kafka_sink.spark.schema.WriteSchema` (no name lookup per row):

==============  ============================  ===========================================
column          Python value from Spark       sent as
==============  ============================  ===========================================
``value``       ``str`` / ``bytearray``       UTF-8 bytes / bytes; ``None``: a tombstone
``key``         ``str`` / ``bytearray``       UTF-8 bytes / bytes; ``None``: no key
``topic``       ``str``                       the record's topic unless the option is set;
                                              ``None`` (or an invalid name) is an error
``partition``   ``int``                       the partition; ``None``: the partitioner picks
``headers``     list of ``Row(key, value)``   ``[(str, bytes | None), ...]``; a null key is
                                              an error
``timestamp``   ``datetime``                  epoch milliseconds; ``None``: stamped on send
==============  ============================  ===========================================

Timestamps. Spark gives Python a ``TimestampType`` value as a *naive* datetime in the Python
process's local time zone (``TimestampType.fromInternal`` is ``datetime.fromtimestamp(seconds)``
plus the microseconds; the session time zone plays no part). ``datetime.timestamp()`` is its exact
inverse: it reads a naive datetime in local time, honouring ``fold`` for the repeated hour at the
end of daylight saving time (which ``fromtimestamp`` sets), and reads an aware datetime by its own
offset. Milliseconds are floored, as Spark's Kafka sink floors microseconds
(``DateTimeUtils.toMillis``).
"""

from __future__ import annotations

import datetime
from typing import Any, NamedTuple, Sequence

from ..errors import RecordContentError
from .dead_letters import CONVERT, BadRecord, as_bytes
from .options import TOPIC, topic_name_problem
from .schema import WriteSchema


class RowError(RecordContentError):
    """A row the sink cannot write (a null topic without the option, a header with a null key).
    Raised in the task; the message names the row's position in its partition."""


class SendArguments(NamedTuple):
    """The arguments of ``KafkaProducer.send`` for one row."""

    topic: str
    value: bytes | None
    key: bytes | None = None
    partition: int | None = None
    timestamp_ms: int | None = None
    headers: list[tuple[str, bytes | None]] | None = None


def to_bytes(value: Any) -> bytes | None:
    """A key or value as bytes: ``str`` as UTF-8, ``bytearray``/``memoryview`` copied, ``None`` kept."""
    kind = type(value)
    if kind is bytes or value is None:
        return value
    if kind is str:
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"expected str or binary, got {kind.__name__}")


def to_epoch_ms(value: datetime.datetime | None) -> int | None:
    """Epoch milliseconds (floored) of a Spark timestamp; see the module docstring."""
    if value is None:
        return None
    seconds = int(value.replace(microsecond=0).timestamp())  # whole seconds: exact as a float
    return seconds * 1000 + value.microsecond // 1000


def to_headers(value: Sequence[Any] | None, position: int) -> list[tuple[str, bytes | None]] | None:
    """Spark's ``array<struct<key,value>>`` as ``[(key, value bytes or None), ...]``."""
    if value is None:
        return None
    headers = []
    for header in value:
        if header is None or header[0] is None:
            what = "a null header" if header is None else "a header with a null key"
            raise RowError(f"row {position} of this partition has {what} in column 'headers'; "
                           f"Kafka headers need a string key (filter or coalesce them first)")
        headers.append((header[0], to_bytes(header[1])))
    return headers


class RowConverter:
    """Turns rows of one validated schema into :class:`SendArguments` values (one instance per
    task)."""

    __slots__ = ("_value", "_key", "_topic", "_partition", "_headers", "_timestamp",
                 "_default_topic", "_topics_checked")

    def __init__(self, schema: WriteSchema, default_topic: str | None):
        if schema.topic is None and default_topic is None:
            raise ValueError("no 'topic' column and no 'topic' option: validate_schema should have "
                             "refused this schema")
        self._value = schema.value.index
        self._key = None if schema.key is None else schema.key.index
        self._topic = None if default_topic is not None or schema.topic is None else schema.topic.index
        self._partition = None if schema.partition is None else schema.partition.index
        self._headers = None if schema.headers is None else schema.headers.index
        self._timestamp = None if schema.timestamp is None else schema.timestamp.index
        self._default_topic = default_topic
        self._topics_checked: set[str] = set()

    def convert(self, row: Sequence[Any], position: int) -> SendArguments:
        """The record for ``row``, the ``position``-th (from 0) row of the task's partition."""
        topic = self._default_topic if self._topic is None else self._row_topic(row[self._topic], position)
        index = self._key
        key = None if index is None else to_bytes(row[index])
        index = self._partition
        partition = None if index is None else row[index]
        index = self._timestamp
        timestamp_ms = None if index is None else to_epoch_ms(row[index])
        index = self._headers
        headers = None if index is None else to_headers(row[index], position)
        return SendArguments(topic, to_bytes(row[self._value]), key, partition, timestamp_ms, headers)

    def salvage(self, row: Sequence[Any], error: BaseException, position: int) -> BadRecord:
        """What can be read of a row :meth:`convert` refused, for the error policy: its topic
        (as given: perhaps null or invalid), key, value (as JSON when it is no bytes: an Avro
        side's value as Spark gave it), partition and the headers that have a key."""
        topic = self._default_topic if self._topic is None else row[self._topic]
        key = None if self._key is None else as_bytes(row[self._key])
        partition = None if self._partition is None else row[self._partition]
        headers: list[tuple[str, bytes | None]] = []
        if self._headers is not None and row[self._headers] is not None:
            headers = [(h[0], to_bytes(h[1])) for h in row[self._headers]
                       if h is not None and h[0] is not None]
        return BadRecord(CONVERT, topic, partition, key, as_bytes(row[self._value]), headers, error,
                         position)

    def _row_topic(self, topic: Any, position: int) -> str:
        if topic in self._topics_checked:
            return topic
        if topic is None:
            raise RowError(f"row {position} of this partition has a null 'topic' and no {TOPIC!r} option "
                           f"is set; fill the column or set the option")
        problem = topic_name_problem(topic)
        if problem:
            raise RowError(f"row {position} of this partition has an invalid 'topic': {problem}")
        self._topics_checked.add(topic)
        return topic
