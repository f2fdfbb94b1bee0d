"""Reference equality: every row of data.arrow and every field of index.arrow
equal what DuckDB computes from the same Parquet files (snaplib.duck_reference:
read_parquet(union_by_name=true), periods normalised in SQL, ordered by the
id's bytes)."""

from __future__ import annotations

import datetime as dt

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakes
import snaplib
from snaplib import PERIOD_CASES, period_series_id


def test_matches_duckdb(built):
    ref = snaplib.duck_reference(built.lake)
    assert ref.rows.num_rows > 0
    snaplib.assert_matches_reference(built.snap, ref)


def test_nasty_reference_is_nasty(nasty_built):
    """Guard the fixture: the reference must actually contain the traps."""
    ref = snaplib.duck_reference(nasty_built.lake)
    assert set(ref.attributes) == {"units", "scale", "source", "active", "released", "factor"}
    assert set(ref.varying) == {"note", "revision", "flag", "sparse"}
    idx = {r["series_id"]: r for r in ref.index.to_pylist()}
    assert idx["ONE"]["row_count"] == 1
    assert idx["BIG.D"]["row_count"] == lakes.BIG_ROWS
    assert idx["NULLS.ALL"]["latest_period"] is None and idx["NULLS.ALL"]["latest_value"] is None
    assert idx["NOUNITS"]["units"] is None
    assert lakes.LONG_ID in idx and lakes.LONG_ID + ".X" in idx
    ids = list(idx)
    assert ids.index("A") < ids.index("A.B") < ids.index("A.B.C") < ids.index("AB") < ids.index("a")


def test_nasty_special_series(nasty_built):
    """A few hand-checked facts, independent of DuckDB."""
    snap = nasty_built.snap
    index = snap.index()
    data = snap.data()
    ids = index["series_id"].to_pylist()
    # bytewise order: '.' (0x2E) < 'B' (0x42) < 'Z' < 'a' (0x61) < 'e' < 'é' (0xC3 0xA9)
    assert ids.index("A") < ids.index("A.B") < ids.index("A.B.C") < ids.index("AB")
    assert ids.index("Z") < ids.index("a") < ids.index("e\u0301") < ids.index("\u00e9")
    assert "GAS.Ü€漢字.M" in ids and "OIL.🛢️🔥.D" in ids
    assert ids.index(lakes.LONG_ID) + 1 == ids.index(lakes.LONG_ID + ".X")

    rec = {r["series_id"]: r for r in index.to_pylist()}
    big = rec["BIG.D"]
    assert big["row_count"] == lakes.BIG_ROWS
    assert big["first_period"] == dt.date(1750, 1, 1)
    assert big["last_period"] == dt.date(1750, 1, 1) + dt.timedelta(days=lakes.BIG_ROWS - 1)
    # a series longer than batch_rows gets a batch of its own
    batch = snap.data_batches()[big["batch"]]
    assert big["batch_offset"] == 0 and batch.num_rows == lakes.BIG_ROWS

    allnull = rec["NULLS.ALL"]
    assert allnull["latest_period"] is None and allnull["latest_value"] is None
    assert allnull["first_period"] == dt.date(2010, 1, 1)
    assert rec["ONE"]["row_count"] == 1 and rec["ONE"]["first_period"] == dt.date(2020, 2, 29)
    assert rec["NOUNITS"]["units"] is None and rec["A"]["units"] == "USD/bbl"

    # series "A" came from two files: 40 rows from f01 + 15 from f02
    a = data.slice(rec["A"]["row_offset"], rec["A"]["row_count"])
    assert a.num_rows == 55
    assert a["revision"].null_count == 15  # f02 has no revision column


@pytest.mark.parametrize("case", PERIOD_CASES, ids=[c[0] for c in PERIOD_CASES])
def test_period_forms(nasty_built, case):
    """Each accepted period form (its own file in the nasty lake) lands on the
    start-of-period date FORMAT.md §5 gives (hand-written table)."""
    name, _, _, want = case
    snap = nasty_built.snap
    index = snap.index()
    row = pc.index(index["series_id"], period_series_id(name)).as_py()
    assert row >= 0, f"series {period_series_id(name)} missing"
    s = snap.data().slice(index["row_offset"][row].as_py(), index["row_count"][row].as_py())
    assert s["period"].to_pylist() == sorted(want)


@pytest.mark.parametrize("case", PERIOD_CASES, ids=[c[0] for c in PERIOD_CASES])
def test_reference_period_sql(tmp_path, case):
    """The SQL normaliser of the reference agrees with the hand-written table
    (so the reference cannot silently share a bug with the builder)."""
    name, ptype, values, want = case
    lakes.write_table(tmp_path / "p.parquet", {"period": values}, {"period": ptype})
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    got = con.sql(
        f"SELECT {snaplib.period_sql('CAST(period AS VARCHAR)')} AS d "
        f"FROM read_parquet('{tmp_path / 'p.parquet'}')"
    ).fetchall()
    assert [r[0] for r in got] == want


def test_custom_key_columns(snapbuild, tmp_path):
    """--series-column/--period-column/--value-column pick the keys; the
    snapshot still calls them series_id/period/value; a float32 value column
    keeps its type."""
    lake = tmp_path / "lake"
    lakes.write_table(
        lake / "x.parquet",
        {
            "price": [1.5, None, 2.25, 3.0, 4.0],
            "month": ["2020-02", "2020-01", "2019-12", "2020-01", "2020-03"],
            "code": ["S2", "S2", "S1", "S1", "S2"],
            "label": ["decoy-a", "decoy-b", "decoy-c", "decoy-c", "decoy-a"],
        },
        {"price": pa.float32()},
    )
    ds = tmp_path / "root" / "custom"
    snaplib.build(snapbuild, lake, ds, "--series-column", "code", "--period-column", "month",
                  "--value-column", "price")
    snap = snaplib.open_current(ds)
    b = snap.manifest["build"]
    assert (b["series_column"], b["period_column"], b["value_column"]) == ("code", "month", "price")
    index = snap.index()
    data = snap.data()
    assert index["series_id"].to_pylist() == ["S1", "S2"]
    assert data.schema.field("value").type == pa.float32()
    assert index.schema.field("latest_value").type == pa.float32()
    # "label" varies within S2, so it stays in the data file
    assert data.schema.names[3:] == ["label"]
    assert data["period"].to_pylist() == [dt.date(2019, 12, 1), dt.date(2020, 1, 1),
                                          dt.date(2020, 1, 1), dt.date(2020, 2, 1), dt.date(2020, 3, 1)]
    assert data["value"].to_pylist() == [2.25, 3.0, None, 1.5, 4.0]
    assert index["latest_period"].to_pylist() == [dt.date(2020, 1, 1), dt.date(2020, 3, 1)]
    assert index["latest_value"].to_pylist() == [3.0, 4.0]


def test_integer_value_column(snapbuild, tmp_path):
    """A non-float value column keeps its type in data.value and index.latest_value."""
    lake = tmp_path / "lake"
    lakes.write_table(lake / "x.parquet", {
        "series_id": ["S", "S", "S", "T"],
        "period": ["2019-Q1", "2019-Q3", "2019-Q2", "2019-W10"],
        "value": [7, None, -(2**40), None],
    }, {"value": pa.int64()})
    ds = tmp_path / "root" / "ints"
    snaplib.build(snapbuild, lake, ds)
    snap = snaplib.open_current(ds)
    snaplib.assert_matches_reference(snap, snaplib.duck_reference(lake))
    index = snap.index()
    assert index["latest_value"].to_pylist() == [-(2**40), None]
    assert index["latest_period"].to_pylist() == [dt.date(2019, 4, 1), None]


def test_empty_input(snapbuild, tmp_path):
    """An empty dataset: zero data batches, one empty index batch, empty stats."""
    lake = tmp_path / "lake"
    lakes.write_table(lake / "empty.parquet",
                      {"series_id": [], "period": [], "value": []},
                      {"series_id": pa.string(), "period": pa.string(), "value": pa.float64()})
    ds = tmp_path / "root" / "empty"
    r = snaplib.build(snapbuild, lake, ds, "--allow-empty")
    assert (r["rows"], r["series"]) == (0, 0)
    snap = snaplib.open_current(ds)
    assert snap.data_reader().num_record_batches == 0
    assert snap.index_reader().num_record_batches == 1
    assert snap.index().num_rows == 0
    st = snap.manifest["stats"]
    assert (st["rows"], st["series"], st["first_period"], st["last_period"]) == (0, 0, "", "")
