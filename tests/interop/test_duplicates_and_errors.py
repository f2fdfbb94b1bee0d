"""Duplicate keys (--on-duplicate) and rejected periods (FORMAT.md §5)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

import lakes
import snaplib

# Two hive partitions holding the same (series_id, period). In "normalised"
# the two strings differ but name the same period start.
DUP_CASES = [
    # id, (2019 period, 2020 period), date of the duplicate key, strings that may name it
    ("same-string", ("2019-12-31", "2019-12-31"), dt.date(2019, 12, 31), ["2019-12-31"]),
    ("normalised", ("2019-12", "201912"), dt.date(2019, 12, 1), ["2019-12", "201912"]),
]


def _dup_lake(lake, p2019, p2020):
    lakes.write_table(lake / "year=2019" / "part-0.parquet", {
        "series_id": ["OK.S", "DUP.S", "DUP.S", "OK.S"],
        "period": ["2019-11-01", "2019-11-01", p2019, "2019-11-02"],
        "value": [1.0, 2.0, 3.0, 4.0],
        "units": ["u", "u", "u", "u"],
    })
    lakes.write_table(lake / "year=2020" / "part-0.parquet", {
        "series_id": ["DUP.S", "DUP.S", "OK.S"],
        "period": ["2020-01-01", p2020, "2020-01-01"],
        "value": [5.0, 99.0, 6.0],
        "units": ["u", "u", "u"],
    })


@pytest.mark.parametrize("case", DUP_CASES, ids=[c[0] for c in DUP_CASES])
def test_duplicate_is_an_error_by_default(snapbuild, tmp_path, case):
    _, (p2019, p2020), _, names = case
    lake = tmp_path / "lake"
    _dup_lake(lake, p2019, p2020)
    ds = tmp_path / "root" / "dups"
    for extra in [(), ("--on-duplicate", "error")]:
        p = snaplib.run(snapbuild, "build", "--input", lake, "--out", ds, *extra)
        assert p.returncode != 0, "a duplicate (series_id, period) must fail the build"
        msg = p.stderr
        assert "DUP.S" in msg, msg
        assert any(n in msg for n in names), f"message does not name the period: {msg}"
        assert "year=2019" in msg and "year=2020" in msg, f"message does not name both files: {msg}"
        assert not (ds / "CURRENT").exists(), "a failed build must publish nothing"


@pytest.mark.parametrize("case", DUP_CASES, ids=[c[0] for c in DUP_CASES])
def test_on_duplicate_last_keeps_later_partition(snapbuild, tmp_path, case):
    _, (p2019, p2020), key_date, _ = case
    lake = tmp_path / "lake"
    _dup_lake(lake, p2019, p2020)
    ds = tmp_path / "root" / "dups"
    r = snaplib.build(snapbuild, lake, ds, "--on-duplicate", "last")
    assert r["duplicates_dropped"] == 1
    assert (r["rows"], r["series"]) == (6, 2)
    snap = snaplib.open_current(ds)
    m = snap.manifest
    assert m["stats"]["duplicates_dropped"] == 1 and m["stats"]["rows"] == 6
    assert m["build"]["on_duplicate"] == "last"
    index = {x["series_id"]: x for x in snap.index().to_pylist()}
    data = snap.data()
    d = index["DUP.S"]
    rows = data.slice(d["row_offset"], d["row_count"]).to_pylist()
    assert [(x["period"], x["value"]) for x in rows] == [
        (dt.date(2019, 11, 1), 2.0), (key_date, 99.0), (dt.date(2020, 1, 1), 5.0)]
    assert (d["latest_period"], d["latest_value"]) == (dt.date(2020, 1, 1), 5.0)


# Values FORMAT.md §5 rejects ("strict: no surrounding whitespace, ASCII
# digits, valid month/day/quarter/week"), each with the Arrow type to store it as.
BAD_PERIODS = [
    ("2019-13", pa.string()),
    ("201913", pa.string()),
    ("2019-00", pa.string()),
    ("2019-02-29", pa.string()),
    ("20190229", pa.string()),
    ("2019-04-31", pa.string()),
    ("2019Q5", pa.string()),
    ("2019Q0", pa.string()),
    ("2019-Q5", pa.string()),
    ("2019-W53", pa.string()),  # 2019 has 52 ISO weeks
    ("2019-W00", pa.string()),
    ("2019-3", pa.string()),
    ("19-03-15", pa.string()),
    ("2019/03/15", pa.string()),
    ("2019-03-15T00:00:00", pa.string()),
    (" 2019", pa.string()),
    ("2019 ", pa.string()),
    ("２０１９", pa.string()),  # full-width digits
    ("2019\u0663", pa.string()),  # ARABIC-INDIC DIGIT THREE
    ("+2019", pa.string()),
    ("", pa.string()),
    (None, pa.string()),
    (20191301, pa.int64()),
    (123, pa.int32()),
    (-2019, pa.int32()),
    (None, pa.int64()),
]


@pytest.mark.parametrize("bad,ptype", BAD_PERIODS, ids=[repr(b) + "-" + str(t) for b, t in BAD_PERIODS])
def test_bad_period_is_an_error(snapbuild, tmp_path, bad, ptype):
    lake = tmp_path / "lake"
    good = "2019" if ptype == pa.string() else 2019
    lakes.write_table(lake / "a-good.parquet",
                      {"series_id": ["S"], "period": [good], "value": [1.0]}, {"period": ptype})
    # the bad value sits in row group 1 (row_group_size 4), 3rd row of it
    ids = [f"T{i}" for i in range(8)]
    periods = [good] * 8
    periods[6] = bad
    lakes.write_table(lake / "b-bad.parquet",
                      {"series_id": ids, "period": periods, "value": [float(i) for i in range(8)]},
                      {"period": ptype}, row_group_size=4)
    ds = tmp_path / "root" / "bad"
    p = snaplib.run(snapbuild, "build", "--input", lake, "--out", ds)
    assert p.returncode != 0, f"period {bad!r} ({ptype}) was accepted"
    msg = p.stderr
    assert "b-bad.parquet" in msg, f"error does not name the file: {msg}"
    if bad is None:
        assert "null" in msg.lower(), f"error does not say the period is null: {msg}"
    elif bad != "":
        assert str(bad) in msg, f"error does not name the value: {msg}"
    assert not (ds / "CURRENT").exists()


def test_missing_key_column_is_an_error(snapbuild, tmp_path):
    lake = tmp_path / "lake"
    lakes.write_table(lake / "x.parquet", {"series_id": ["S"], "period": ["2019"], "value": [1.0]})
    p = snaplib.run(snapbuild, "build", "--input", lake, "--out", tmp_path / "r" / "d",
                    "--period-column", "date")
    assert p.returncode != 0
    assert "date" in p.stderr
