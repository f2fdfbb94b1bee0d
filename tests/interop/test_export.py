"""`snapbuild export` read by other engines: pyarrow (Parquet, Arrow IPC,
CSV) and DuckDB, against the snapshot's own files.

Written from docs/CLI.md, never from the Go code.
"""

from __future__ import annotations

import json

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

import snaplib


def export(snapbuild, ds, out, *flags) -> dict:
    return json.loads(snaplib.run_ok(snapbuild, "export", ds, out, "--json", *flags).stdout)


def expected(snap: snaplib.Snapshot) -> pa.Table:
    """The snapshot's rows as export documents them: series_id (from the
    index by series_code), period, value, other data columns, attributes."""
    data, index = snap.data(), snap.index()
    codes = data["series_code"]
    cols = {"series_id": pc.take(index["series_id"], codes), "period": data["period"]}
    for name in data.column_names:
        if name not in ("series_code", "period"):
            cols[name] = data[name]
    for a in snap.manifest["schema"]["attributes"]:
        col = index[a]
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        cols[a] = pc.take(col, codes)
    return pa.table(cols)


def test_export_formats_agree_with_the_snapshot(snapbuild, eia_built, tmp_path):
    snap = eia_built.snap
    want = expected(snap)
    got = {}
    for ext in ("parquet", "arrow", "csv"):
        out = tmp_path / f"eia.{ext}"
        res = export(snapbuild, eia_built.dataset_dir, out)
        assert res["rows"] == snap.manifest["stats"]["rows"] and res["format"] == ext, res
        assert res["columns"] == want.column_names, res
        if ext == "parquet":
            got[ext] = pq.read_table(out)
        elif ext == "arrow":
            got[ext] = ipc.open_file(out).read_all()
        else:
            got[ext] = pacsv.read_csv(out, convert_options=pacsv.ConvertOptions(column_types=want.schema))
    for ext, t in got.items():
        t = t.select(want.column_names).cast(want.schema)
        assert t.equals(want), f"{ext} export differs from the snapshot"
    # DuckDB reads the Parquet file as a plain table with ids.
    n, ids = duckdb.sql(f"SELECT count(*), count(DISTINCT series_id) FROM read_parquet('{tmp_path / 'eia.parquet'}')").fetchall()[0]
    assert (n, ids) == (snap.manifest["stats"]["rows"], snap.manifest["stats"]["series"])


def test_export_selects_series_and_periods(snapbuild, eia_built, tmp_path):
    out = tmp_path / "brent.parquet"
    res = export(snapbuild, eia_built.dataset_dir, out, "--series", "PET.RBRTE.M", "--from", "2020", "--to", "2020-Q2")
    t = pq.read_table(out)
    assert res["rows"] == t.num_rows == 6, res
    assert set(t["series_id"].to_pylist()) == {"PET.RBRTE.M"}
    assert str(t["period"][0]) == "2020-01-01" and str(t["period"][-1]) == "2020-06-01"


def test_export_of_a_missing_vintage_names_it(snapbuild, eia_built, tmp_path):
    p = snaplib.run(snapbuild, "export", eia_built.dataset_dir, tmp_path / "x.csv", "--snapshot", "99")
    assert p.returncode == 2 and "snapshot 99 of" in p.stderr and "does not exist" in p.stderr, p.stderr
