"""``send_arrow``'s column check names the INPUT row of a null header or header key, before the
rows are reordered by partition (the encoder's own check counts rows in partition order)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from spark_kafka_sink.producer.arrow.input import resolve_columns

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def table(headers: list, headers_type=HEADERS) -> pa.Table:
    return pa.table({"value": [b"v"] * len(headers), "partition": pa.array([1, 0] * (len(headers) // 2), pa.int32()),
                     "headers": pa.array(headers, headers_type)})


@pytest.mark.parametrize("headers_type", [HEADERS, pa.large_list(HEADERS.value_type)], ids=["list", "large_list"])
@pytest.mark.parametrize("headers, row, what", [
    ([[("k", b"1")], [("a", b"x"), (None, b"2")], [], None], 1, "a header with a null key"),
    ([None, [], [("k", None)], [None]], 3, "a null header"),
])
def test_the_row_of_the_input_is_named(headers, row, what, headers_type):
    with pytest.raises(ValueError, match=f"headers: row {row} of the input has {what}") as info:
        resolve_columns(table(headers, headers_type))
    assert info.value.row == row


def test_a_slice_counts_rows_from_its_own_start():
    data = table([[("k", None)], [(None, b"x")], [("k", b"y")], [(None, b"z")]]).slice(2)
    with pytest.raises(ValueError, match="row 1 of the input has a header with a null key") as info:
        resolve_columns(data)
    assert info.value.row == 1


def test_null_header_lists_and_null_values_are_fine():
    columns = resolve_columns(table([None, [("k", None)], [], [("k", b"v")]]))
    assert columns.rows == 4
