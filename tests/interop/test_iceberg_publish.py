"""The vintages as an Iceberg table (`snapbuild build --portable --iceberg`,
`snapbuild iceberg sync`), read by implementations nobody here wrote:
pyiceberg 0.12 reads every tag vintage-NNNNNN equal, row for row, to that
vintage's portable copy, after builds that evolve the schema, a rollback, a
roll-forward and gc; its point filter plans one file (and none for an id
outside the file's bounds); polars' scan_iceberg reads main, which names
CURRENT; DuckDB reads the file list pyiceberg plans with read_parquet.
DuckDB's own iceberg extension is not used: it is downloaded at run time,
which cannot be done offline. A flip the table missed (a crash between
CURRENT's flip and the Iceberg commit) is repaired by `iceberg sync`.

Written from docs/FORMAT.md §10 and docs/CLI.md ("snapbuild iceberg sync").
"""

from __future__ import annotations

import json
import shutil

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.expressions import EqualTo
from pyiceberg.table import StaticTable

import snaplib

SORT = [("series_id", "ascending"), ("period", "ascending")]


def write_lake(lake, series, months, extra=None, drop=()):
    """One Parquet file of monthly rows: series_id, period, value, units,
    category, and the extra attribute columns given (name -> f(series))."""
    shutil.rmtree(lake, ignore_errors=True)
    lake.mkdir(parents=True)
    cols = {"series_id": [], "period": [], "value": [], "units": [], "category": []}
    for name in extra or {}:
        cols[name] = []
    for s in range(series):
        sid = f"S{s:03d}"
        for m in range(months):
            cols["series_id"].append(sid)
            cols["period"].append(f"{2020 + m // 12}-{m % 12 + 1:02d}")
            cols["value"].append(None if (s + m) % 17 == 0 else float(s * 100 + m))
            cols["units"].append("USD" if s % 2 else "EUR")
            cols["category"].append(f"C{s % 3}")
            for name, f in (extra or {}).items():
                cols[name].append(f(s))
    for name in drop:
        del cols[name]
    pq.write_table(pa.table(cols), lake / "part-0.parquet")


def portable_of(ds, vintage):
    m = json.loads((ds / "manifests" / f"{vintage:06d}.json").read_text())
    entry = next(f for f in m["files"] if f["role"] == "portable")
    return ds / entry["path"]


def current(ds):
    return int((ds / "CURRENT").read_text().strip()[len("manifests/"):-len(".json")])


def table(ds):
    # The Hadoop table: pyiceberg follows metadata/version-hint.text.
    return StaticTable.from_metadata(str(ds / "iceberg"))


def canon(t: pa.Table) -> pa.Table:
    return t.sort_by(SORT).combine_chunks()


def check_tags(ds, vintages):
    """Every tag reads its vintage's rows; main reads CURRENT's."""
    tbl = table(ds)
    tags = {name for name, ref in tbl.metadata.refs.items() if ref.snapshot_ref_type == "tag"}
    assert tags == {f"vintage-{v:06d}" for v in vintages}
    for v in vintages:
        snap = tbl.snapshot_by_name(f"vintage-{v:06d}")
        assert snap.summary["servingsnap.snapshot-id"] == str(v), snap.summary
        got = canon(tbl.scan(snapshot_id=snap.snapshot_id).to_arrow())
        want = canon(pq.read_table(portable_of(ds, v)))
        assert got.column_names == want.column_names, (v, got.schema, want.schema)
        assert got.num_rows == want.num_rows, v
        for name in want.column_names:
            assert got[name].to_pylist() == want[name].to_pylist(), (v, name)
    main = tbl.metadata.refs["main"].snapshot_id
    assert tbl.snapshot_by_id(main).summary["servingsnap.snapshot-id"] == str(current(ds))


@pytest.fixture(scope="module")
def published(snapbuild, tmp_path_factory):
    d = tmp_path_factory.mktemp("icebergpub")
    lake, ds = d / "lake", d / "root" / "PUB"
    write_lake(lake, 40, 30)
    snaplib.build(snapbuild, lake, ds, "--portable", "--iceberg")
    # Vintage 2 adds an attribute; the dataset's ICEBERG.json makes the
    # build commit without --iceberg.
    write_lake(lake, 44, 31, extra={"region": lambda s: f"R{s % 4}"})
    snaplib.build(snapbuild, lake, ds, "--portable")
    # Vintage 3 drops one.
    write_lake(lake, 44, 32, extra={"region": lambda s: f"R{s % 4}"}, drop=("units",))
    snaplib.build(snapbuild, lake, ds, "--portable")
    return snapbuild, lake, ds


def test_tags_after_builds_with_schema_changes(published):
    _, _, ds = published
    check_tags(ds, [1, 2, 3])
    tbl = table(ds)
    # The table declares the copies' order and leaves their files alone.
    order = tbl.sort_order()
    assert [tbl.schema().find_field(f.source_id).name for f in order.fields] == ["series_id", "period"]
    assert tbl.properties["gc.enabled"] == "false"
    assert [f.name for f in tbl.schema().fields] == pq.read_schema(portable_of(ds, 3)).names
    snap = tbl.snapshot_by_name("vintage-000002")
    assert snap.summary["servingsnap.parent-id"] == "1"
    assert snap.summary["servingsnap.lake.kind"] == "parquet"


def test_rollback_roll_forward_and_gc(published):
    snapbuild, _, ds = published
    snaplib.run_ok(snapbuild, "rollback", "--to", 2, ds)
    check_tags(ds, [1, 2, 3])
    snaplib.run_ok(snapbuild, "rollback", "--to", 3, ds)
    check_tags(ds, [1, 2, 3])
    snaplib.run_ok(snapbuild, "gc", "--keep", 1, ds)
    check_tags(ds, [2, 3])
    assert [s.summary["servingsnap.snapshot-id"] for s in table(ds).snapshots()] == ["2", "3"]
    # Vintage 2's copy is still there: Iceberg deleted no file.
    assert portable_of(ds, 2).is_file()
    p = snaplib.run_ok(snapbuild, "iceberg", "sync", ds, "--json")
    assert json.loads(p.stdout)["changed"] is False


def test_point_filter_plans_one_file(published):
    _, _, ds = published
    tbl = table(ds)
    tasks = list(tbl.scan(row_filter=EqualTo("series_id", "S007")).plan_files())
    assert [t.file.file_path for t in tasks] == [f"file://{portable_of(ds, current(ds))}"]
    # An id outside the file's series_id bounds plans nothing.
    assert list(tbl.scan(row_filter=EqualTo("series_id", "ZZZ")).plan_files()) == []


def test_polars_reads_main(published, monkeypatch):
    _, _, ds = published
    # polars plans through pyiceberg (its own planner is another package).
    monkeypatch.setenv("POLARS_ICEBERG_PLANNER", "pyiceberg")
    got = pl.scan_iceberg(table(ds)).collect().to_arrow()
    want = canon(pq.read_table(portable_of(ds, current(ds))))
    got = canon(got.cast(want.schema))
    assert got.equals(want)


def test_duckdb_reads_the_planned_files(published):
    _, _, ds = published
    files = [t.file.file_path.removeprefix("file://") for t in table(ds).scan().plan_files()]
    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    got = con.sql(f"SELECT * FROM read_parquet([{', '.join(snaplib.ql(f) for f in files)}])").to_arrow_table()
    want = canon(pq.read_table(portable_of(ds, current(ds))))
    assert canon(got).to_pylist() == want.to_pylist()


def test_sync_repairs_a_flip_the_table_missed(snapbuild, tmp_path):
    lake, ds = tmp_path / "lake", tmp_path / "root" / "CRASH"
    write_lake(lake, 10, 12)
    snaplib.build(snapbuild, lake, ds, "--portable", "--iceberg")
    # A flip whose Iceberg commit never happened: the build runs while the
    # dataset does not name its table, as if it died right after the flip.
    cfg = ds / "ICEBERG.json"
    cfg.rename(tmp_path / "ICEBERG.json")
    write_lake(lake, 11, 12)
    snaplib.build(snapbuild, lake, ds, "--portable")
    (tmp_path / "ICEBERG.json").rename(cfg)
    tbl = table(ds)
    assert set(tbl.metadata.refs) == {"main", "vintage-000001"}
    p = snaplib.run_ok(snapbuild, "iceberg", "sync", ds, "--json")
    res = json.loads(p.stdout)
    assert res["added"] == [2] and res["main"] == 2 and res["changed"], res
    check_tags(ds, [1, 2])
