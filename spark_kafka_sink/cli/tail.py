"""``spark-kafka-sink tail TOPIC``: print records of a topic, read with the package's own Fetch
(:func:`~spark_kafka_sink.admin.read_records`), bounded in count and time.

Each partition is read up to its end as of the call (at read_committed, its last stable offset),
from the last ``--max-records`` offsets by default, from its log start with
``--from-beginning``, or from ``--offset N`` (``-N``: N before the end), at most
``--max-records`` records of each. The partitions' records are merged by timestamp, and the
first ``--max-records`` of them are printed (by default the last ones: the newest). Records go to
stdout (:mod:`.records` formats them); a summary of what was read, and where more is, to stderr.
"""

from __future__ import annotations

import argparse
import heapq
from typing import Sequence

from .arguments import (DEFAULT_TIMEOUT_S, add_client_options, count, offset,
                        partition_number, say, topic_name)

DEFAULT_MAX_RECORDS = 20


def add_tail_parser(commands) -> None:
    tail = commands.add_parser(
        "tail", help="print a topic's records (key, value, headers, partition, offset)",
        description="Print records of TOPIC with their partition, offset, timestamp, key, value and "
                    "headers, read with this package's own Fetch support. Bounded: it reads each "
                    "partition up to its end as of the call, never waits for new records, and stops "
                    f"after --max-records or --timeout (default {DEFAULT_TIMEOUT_S:g} s). Without "
                    "--from-beginning or --offset it prints the newest records.")
    tail.add_argument("topic", type=topic_name, metavar="TOPIC")
    tail.add_argument("--partition", type=partition_number, action="append", metavar="P",
                      help="read only this partition; repeatable (default: all)")
    start = tail.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true",
                       help="start at each partition's first record")
    start.add_argument("--offset", type=offset, metavar="N",
                       help="start at offset N of each partition; -N: N offsets before its end")
    tail.add_argument("--max-records", type=count, default=DEFAULT_MAX_RECORDS, metavar="N",
                      help=f"print at most N records (default {DEFAULT_MAX_RECORDS})")
    tail.add_argument("--isolation", choices=("read_uncommitted", "read_committed"),
                      default="read_uncommitted",
                      help="read_committed leaves out aborted transactions and stops before one "
                           "still open (default read_uncommitted: every record)")
    tail.add_argument("--format", choices=("text", "json"), default="text",
                      help="text (default) or json: one object per line, bytes that are not "
                           "UTF-8 as {\"base64\": ...}")
    add_client_options(tail)
    tail.set_defaults(run=run_tail, parser=tail)


def run_tail(args: argparse.Namespace) -> int:
    from ..admin import read_records
    from .records import json_line, text_lines

    settings = args.settings
    newest = not args.from_beginning and args.offset is None
    start = None if args.from_beginning else (-args.max_records if newest else args.offset)
    reads = read_records(settings.bootstrap, args.topic, args.partition, offset=start,
                         max_records=args.max_records, isolation_level=args.isolation,
                         timeout_s=settings.timeout_s, config=settings.config)
    records = select(reads, args.max_records, newest=newest)
    for record in records:
        if args.format == "json":
            say(json_line(record))
        else:
            for line in text_lines(record):
                say(line)
    for line in tail_summary(args.topic, reads, len(records), newest=newest, offset=args.offset,
                        committed=args.isolation == "read_committed"):
        say(line, err=True)
    return 0


def select(reads: Sequence, max_records: int, *, newest: bool) -> list:
    """The partitions' records merged by timestamp (each partition's in offset order), then the
    first ``max_records`` of them, or with ``newest`` the last ones."""
    merged = list(heapq.merge(*(read.records for read in reads), key=lambda r: r.timestamp_ms))
    return merged[-max_records:] if newest else merged[:max_records]


def tail_summary(topic: str, reads: Sequence, shown: int, *, newest: bool, offset: int | None,
            committed: bool) -> list[str]:
    """The stderr lines after the records: how many, from where, and where more are."""
    read = sum(len(r.records) for r in reads)
    partitions = ", ".join(str(r.partition) for r in reads)
    lines = [f"{shown} record(s) of topic {topic!r}, partition(s) {partitions}"
             + (" (read_committed)" if committed else "")]
    for r in reads:
        if offset is not None and offset >= 0 and offset > r.end:
            lines.append(f"partition {r.partition}: offset {offset} is past its end ({r.end})")
        elif offset is not None and 0 <= offset < r.log_start:
            lines.append(f"partition {r.partition}: offset {offset} is before its first ({r.log_start}); "
                         f"read from {r.log_start}")
        if r.undecided:
            lines.append(f"partition {r.partition}: a transaction open since offset {r.end} hides "
                         f"the records from there to {r.high_watermark} until it is decided")
    if newest and (shown < read or any(r.first > r.log_start for r in reads)):
        lines.append("older records: --from-beginning or --offset N")
    elif not newest and (shown < read or any(r.more for r in reads)):
        lines.append("more records follow: raise --max-records, or --offset N")
    return lines
