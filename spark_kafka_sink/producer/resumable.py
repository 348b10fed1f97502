"""Moved to :mod:`spark_kafka_sink.producer.transactions.resumable`; this name stays for
configurations that name it, and for ``ResumableTransaction`` values pickled under it (a pickle
names a class by its module path)."""
from .transactions.resumable import (  # noqa: F401
    FencedId, ResumableTransaction, abort_resumable, commit_resumable, fence_transactional_ids,
)
