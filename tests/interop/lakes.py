"""Lakes written with pyarrow.parquet for the interop tests."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from snaplib import PERIOD_CASES, period_series_id

# Column types shared by every nasty-lake file that has the column.
TYPES = {
    "series_id": pa.string(),
    "value": pa.float64(),
    "units": pa.string(),  # constant per series (null for a whole series where missing)
    "scale": pa.int32(),  # constant per series
    "source": pa.string(),  # constant per series, all-null for some series
    "note": pa.string(),  # varies within series
    "revision": pa.int32(),  # varies within series
    "flag": pa.string(),  # constant within every series but one → must stay in data
    "sparse": pa.string(),  # "k" or null within a series (f02 lacks it) → must stay in data
    "active": pa.bool_(),  # constant per series
    "released": pa.date32(),  # constant per series
    "factor": pa.float64(),  # constant per series
}

LONG_ID = "L" * 10_000
BIG_ROWS = 100_000


def write(path: Path, rows: list[dict], columns: list[str], period_type: pa.DataType,
          row_group_size: int) -> None:
    """Write rows (dicts) with exactly `columns`, in that order."""
    arrays = []
    for c in columns:
        t = period_type if c == "period" else TYPES[c]
        arrays.append(pa.array([r.get(c) for r in rows], t))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_arrays(arrays, names=columns), path, row_group_size=row_group_size)


def _attrs(sid: str) -> dict:
    """Per-series constants."""
    return {
        "units": "USD/bbl" if sid[:1] in "AB" else "€/MWh ünits",
        "scale": len(sid.encode("utf-8")) % 7,
        "source": None if len(sid) % 2 else f"src:{sid[:20]}",
        "active": len(sid) % 3 == 0,
        "released": dt.date(2000, 1, 1) + dt.timedelta(days=len(sid)),
        "factor": 1.0 / (1 + len(sid) % 5),
    }


def _series(sid: str, periods: list, rng: random.Random, *, all_null=False, flag_varies=False) -> list[dict]:
    out = []
    a = _attrs(sid)
    for i, p in enumerate(periods):
        v = None if all_null or (i % 7 == 3) else round(rng.uniform(-50, 150), 3)
        out.append({
            "series_id": sid, "period": p, "value": v, **a,
            "note": None if i % 5 == 0 else f"n{i % 4}·{sid[:3]}",
            "revision": i % 3,
            "flag": (("x" if i % 2 else "y") if flag_varies else f"f{len(sid) % 3}"),
            "sparse": None if (sid == "AB" and i % 9 == 0) else "k",
        })
    return out


def daily(start: dt.date, n: int, step: int = 1) -> list[str]:
    return [(start + dt.timedelta(days=i * step)).isoformat() for i in range(n)]


def write_nasty_lake(lake: Path) -> dict:
    """The nasty lake. Returns facts the tests need (ids of special series)."""
    rng = random.Random(20190315)
    all_cols = ["series_id", "period", "value", "units", "scale", "source", "note", "revision", "flag",
                "sparse", "active", "released", "factor"]

    # f01: ids that are prefixes of each other, bytewise-vs-collation traps,
    # a one-row series, an all-null series, a series whose "flag" varies;
    # rows shuffled, many small row groups. Periods YYYY-MM-DD strings.
    rows = []
    rows += _series("A", daily(dt.date(2018, 1, 1), 40, 3), rng)
    rows += _series("A.B", daily(dt.date(2018, 1, 1), 25, 2), rng)
    rows += _series("A.B.C", daily(dt.date(2018, 1, 1), 10), rng)
    rows += _series("AB", daily(dt.date(2017, 6, 1), 30), rng)
    rows += _series("B", daily(dt.date(2016, 1, 1), 12), rng, flag_varies=True)
    rows += _series("a", daily(dt.date(2016, 1, 1), 5), rng)
    rows += _series("ONE", ["2020-02-29"], rng)
    rows += _series("NULLS.ALL", daily(dt.date(2010, 1, 1), 6, 30), rng, all_null=True)
    rng.shuffle(rows)
    write(lake / "f01-prefixes.parquet", rows, all_cols, pa.string(), row_group_size=7)

    # f02: different column order, no "revision" column (→ null there), unicode
    # and very long ids, more rows of series "A" (a series spread over files).
    rows = []
    rows += _series("A", daily(dt.date(2030, 1, 1), 15, 7), rng)
    rows += _series("GAS.Ü€漢字.M", daily(dt.date(2019, 1, 1), 12, 31), rng)
    rows += _series("OIL.🛢️🔥.D", daily(dt.date(2019, 1, 1), 20), rng)
    rows += _series("\u00e9", daily(dt.date(2019, 1, 1), 3), rng)  # é precomposed
    rows += _series("e\u0301", daily(dt.date(2019, 1, 1), 4), rng)  # e + combining acute
    rows += _series("Z", daily(dt.date(2019, 1, 1), 2), rng)
    rows += _series(LONG_ID, daily(dt.date(2001, 1, 1), 9), rng)
    rows += _series(LONG_ID + ".X", daily(dt.date(2001, 1, 1), 8), rng)
    rng.shuffle(rows)
    write(lake / "f02-unicode.parquet", rows,
          ["value", "note", "period", "flag", "series_id", "units", "factor", "scale", "source",
           "released", "active"],
          pa.string(), row_group_size=10)

    # f03: no "units" column at all (→ null, constant within its series).
    rows = _series("NOUNITS", daily(dt.date(2015, 1, 1), 11, 10), rng)
    write(lake / "f03-no-units.parquet", rows,
          ["series_id", "period", "value", "scale", "source", "note", "revision", "flag", "sparse",
           "active", "released", "factor"],
          pa.string(), row_group_size=4)

    # f04: a 100k-row daily series, YYYYMMDD integers, ~274 years from 1750.
    start = dt.date(1750, 1, 1)
    big_periods = []
    for i in range(BIG_ROWS):
        d = start + dt.timedelta(days=i)
        big_periods.append(d.year * 10000 + d.month * 100 + d.day)
    rows = _series("BIG.D", big_periods, rng)
    rows.reverse()  # descending input order
    write(lake / "f04-big.parquet", rows,
          ["period", "series_id", "value", "units", "scale", "source", "note", "revision", "flag",
           "sparse", "active", "released", "factor"],
          pa.int64(), row_group_size=16_384)

    # f10+: one file per accepted period form, each its own series.
    for k, (case, ptype, values, _) in enumerate(PERIOD_CASES):
        rows = _series(period_series_id(case), list(reversed(values)), rng)
        cols = list(all_cols)
        rng.shuffle(cols)
        write(lake / f"f{10 + k:02d}-period-{case}.parquet", rows, cols, ptype, row_group_size=2)

    return {"long_id": LONG_ID, "big_id": "BIG.D", "big_rows": BIG_ROWS}


def write_table(path: Path, columns: dict, types: dict | None = None, row_group_size=None) -> None:
    """Small helper for ad-hoc lakes: columns {name: values}."""
    types = types or {}
    arrays = [pa.array(v, types.get(k)) for k, v in columns.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_arrays(arrays, names=list(columns)), path, row_group_size=row_group_size)
