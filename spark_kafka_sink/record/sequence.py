"""Producer sequence numbers, as the record format counts them (Java's
``DefaultRecordBatch.incrementSequence``): a batch's records carry consecutive sequences from its
``base_sequence``; the sequence wraps from int32 max to 0, and the broker compares sequences in
that wrapping space."""

from __future__ import annotations

from ..bytecodec import INT32_MAX
from .layout import NO_SEQUENCE

__all__ = ["NO_SEQUENCE", "increment_sequence", "sequence_after"]


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment``, wrapping past int32 max to 0."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def sequence_after(sequence: int, other: int) -> bool:
    """Whether ``sequence`` comes after ``other`` in the wrapping sequence space (less than half
    of it ahead): 1 comes after ``INT32_MAX``, as the broker counts."""
    distance = (sequence - other) % (INT32_MAX + 1)
    return 0 < distance < (INT32_MAX + 1) // 2
