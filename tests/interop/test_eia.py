"""The real EIA lake (gen --eia) built into a snapshot equals the source CSV
files of data/eia-prices, read here with the csv module: no DuckDB, no gen
code in between."""

from __future__ import annotations

import csv
import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from snaplib import REPO

# file → (EIA series id, frequency), from data/eia-prices/README.md
EIA_FILES = {
    "brent-daily.csv": ("PET.RBRTE.D", "daily"),
    "brent-weekly.csv": ("PET.RBRTE.W", "weekly"),
    "brent-monthly.csv": ("PET.RBRTE.M", "monthly"),
    "brent-year.csv": ("PET.RBRTE.A", "annual"),
    "wti-daily.csv": ("PET.RWTC.D", "daily"),
    "wti-weekly.csv": ("PET.RWTC.W", "weekly"),
    "wti-monthly.csv": ("PET.RWTC.M", "monthly"),
    "wti-year.csv": ("PET.RWTC.A", "annual"),
    "henryhub-daily.csv": ("NG.RNGWHHD.D", "daily"),
    "henryhub-monthly.csv": ("NG.RNGWHHD.M", "monthly"),
}


def csv_series(name: str, freq: str) -> list[tuple[dt.date, float | None]]:
    out = []
    with open(REPO / "data" / "eia-prices" / name, newline="") as f:
        rows = list(csv.reader(f))[1:]
    for day, price in rows:
        if len(day) == 7:  # YYYY-MM (henryhub-monthly)
            day += "-01"
        d = dt.date.fromisoformat(day)
        # observations dated mid-period belong to the period's start (§5)
        if freq == "monthly":
            d = d.replace(day=1)
        elif freq == "annual":
            d = d.replace(month=1, day=1)
        out.append((d, float(price) if price else None))
    return sorted(out)


def test_eia_series_ids(eia_built):
    ids = eia_built.snap.index()["series_id"].to_pylist()
    assert ids == sorted(sid for sid, _ in EIA_FILES.values())


@pytest.mark.parametrize("name", sorted(EIA_FILES))
def test_eia_matches_csv(eia_built, name):
    sid, freq = EIA_FILES[name]
    want = csv_series(name, freq)
    snap = eia_built.snap
    index = snap.index()
    row = pc.index(index["series_id"], sid).as_py()
    assert row >= 0, f"{sid} missing"
    rec = index.slice(row, 1).to_pylist()[0]
    s = snap.data().slice(rec["row_offset"], rec["row_count"])
    got = list(zip(s["period"].to_pylist(), s["value"].to_pylist()))
    assert len(got) == len(want)
    assert got == want
    assert (rec["first_period"], rec["last_period"]) == (want[0][0], want[-1][0])
    latest = [w for w in want if w[1] is not None][-1]
    assert (rec["latest_period"], rec["latest_value"]) == latest


def test_eia_real_data_quirks(eia_built):
    """The real data's traps: a missing Henry Hub price is a null value, and
    WTI's negative close of 2020-04-20 survives."""
    snap = eia_built.snap
    index = snap.index()
    data = snap.data()

    def obs(sid, day):
        row = pc.index(index["series_id"], sid).as_py()
        rec = index.slice(row, 1).to_pylist()[0]
        s = data.slice(rec["row_offset"], rec["row_count"])
        hit = s.filter(pc.equal(s["period"], pa.scalar(day, pa.date32())))
        assert hit.num_rows == 1, (sid, day)
        return hit["value"][0].as_py()

    assert obs("NG.RNGWHHD.D", dt.date(2018, 1, 5)) is None
    assert obs("PET.RWTC.D", dt.date(2020, 4, 20)) == -36.98
