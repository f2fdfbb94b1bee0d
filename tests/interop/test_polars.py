"""polars reads both files of a snapshot and sees what pyarrow sees."""

from __future__ import annotations

import inspect

import polars as pl
import pyarrow as pa
import pytest
from polars.testing import assert_frame_equal


def read_ipc(path):
    # polars 2 dropped read_ipc(memory_map=...) (it maps by itself); older
    # releases take the flag.
    if "memory_map" in inspect.signature(pl.read_ipc).parameters:
        return pl.read_ipc(path, memory_map=True)
    return pl.read_ipc(path)


def test_polars_equals_pyarrow(built):
    snap = built.snap
    for path, table in [(snap.data_path, snap.data()), (snap.index_path, snap.index_stored())]:
        df = read_ipc(path)
        assert df.columns == table.schema.names
        assert df.height == table.num_rows
        assert_frame_equal(df, pl.from_arrow(table), check_exact=True)
    data = read_ipc(snap.data_path)
    assert data.schema["series_code"] == pl.UInt32
    assert data.schema["period"] == pl.Date
    index = read_ipc(snap.index_path)
    assert index.schema["series_id"] == pl.String
    assert index.schema["row_offset"] == pl.Int64


def test_polars_scan_one_series(built):
    """A lazy scan filtered on series_code returns exactly the index's slice."""
    snap = built.snap
    index = snap.index()
    row = index.num_rows - 1
    off, n = index["row_offset"][row].as_py(), index["row_count"][row].as_py()
    got = pl.scan_ipc(snap.data_path).filter(pl.col("series_code") == row).collect()
    assert_frame_equal(got, pl.from_arrow(snap.data().slice(off, n)), check_exact=True)
