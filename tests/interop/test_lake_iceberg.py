"""Iceberg tables written by pyiceberg 0.12.0 (SqlCatalog on sqlite): every
snapshot built by snapbuild holds exactly the rows pyiceberg reads at it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DateType, DoubleType, NestedField, StringType

import lakelib
import snaplib

COLUMNS = ["series_id", "period", "value", "region", "unit", "units"]


def _rows(series, region, start, n, base, unit=None, unit_col="unit"):
    d0 = dt.date.fromisoformat(start)
    cols = {
        "series_id": pa.array([series] * n, pa.string()),
        "period": pa.array([d0 + dt.timedelta(days=i) for i in range(n)], pa.date32()),
        "value": pa.array([base + i * 0.5 for i in range(n)], pa.float64()),
        "region": pa.array([region] * n, pa.string()),
    }
    if unit is not None:
        cols[unit_col] = pa.array([unit] * n, pa.string())
    return pa.table(cols)


@pytest.fixture(scope="module")
def iceberg_table(tmp_path_factory):
    """Snapshots: two appends, an added column, a renamed column (data kept
    by field id), a delete, a partition overwrite; a tag on the second."""
    root = tmp_path_factory.mktemp("iceberg")
    wh = root / "warehouse"
    wh.mkdir()
    cat = SqlCatalog("lake", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{wh}")
    cat.create_namespace("db")
    schema = Schema(
        NestedField(1, "series_id", StringType(), required=False),
        NestedField(2, "period", DateType(), required=False),
        NestedField(3, "value", DoubleType(), required=False),
        NestedField(4, "region", StringType(), required=False),
    )
    spec = PartitionSpec(PartitionField(source_id=4, field_id=1000, transform=IdentityTransform(), name="region"))
    t = cat.create_table("db.prices", schema=schema, partition_spec=spec)
    t.append(pa.concat_tables([_rows("PET.A.D", "east", "2024-01-01", 30, 10), _rows("PET.B.D", "west", "2024-01-01", 30, 50)]))
    t.append(_rows("PET.C.D", "east", "2024-02-01", 20, 100))
    with t.update_schema() as u:
        u.add_column("unit", StringType())
    t.append(_rows("PET.D.D", "west", "2024-03-01", 10, 7, unit="$/bbl"))
    with t.update_schema() as u:
        u.rename_column("unit", "units")
    t.append(_rows("PET.E.D", "east", "2024-04-01", 5, 1, unit="$/MMBtu", unit_col="units"))
    t.delete("series_id == 'PET.A.D' and value > 15")
    t.overwrite(_rows("PET.B.D", "west", "2024-05-01", 3, 70, unit="$/bbl", unit_col="units"), overwrite_filter="region == 'west'")
    t = cat.load_table("db.prices")
    snaps = [s.snapshot_id for s in t.snapshots()]
    t.manage_snapshots().create_tag(snaps[1], "second").commit()
    t = cat.load_table("db.prices")
    return cat, t


def _want(t, **scan):
    a = t.scan(**scan).to_arrow()
    return lakelib.rows_of_table(a, [c for c in COLUMNS if c in a.column_names])


def _location(t) -> Path:
    return Path(t.location().removeprefix("file://"))


def test_every_snapshot_matches_pyiceberg(snapbuild, iceberg_table, tmp_path):
    _, t = iceberg_table
    snaps = list(t.snapshots())
    assert len(snaps) >= 6
    assert {s.summary.operation.value for s in snaps} >= {"append", "delete", "overwrite"}
    loc = _location(t)
    for i, s in enumerate(snaps):
        want = _want(t, snapshot_id=s.snapshot_id)
        out = tmp_path / f"s{i}" / "PRICES"
        if not want:
            p = snaplib.run(snapbuild, "build", "--input", loc, "--out", out, "--snapshot-id", s.snapshot_id)
            assert p.returncode == 1 and "no data files" in p.stderr, p.stderr
            continue
        rep = snaplib.build(snapbuild, loc, out, "--snapshot-id", s.snapshot_id)
        got = lakelib.snapshot_rows(out, list(want[0].keys()))
        assert got == want, f"snapshot {i} ({s.snapshot_id}, {s.summary.operation})"
        lin = rep["lineage"]
        assert lin["kind"] == "iceberg" and lin["lake_snapshot_id"] == str(s.snapshot_id)
        assert lin["table_version"] == s.sequence_number
        ts = dt.datetime.fromisoformat(lin["snapshot_timestamp"].replace("Z", "+00:00"))
        assert round(ts.timestamp() * 1000) == s.timestamp_ms
        assert lin["metadata_location"].endswith(".metadata.json")


def test_current_snapshot_from_dir_file_and_time(snapbuild, iceberg_table, tmp_path):
    _, t = iceberg_table
    want = _want(t)
    cols = list(want[0].keys())
    loc = _location(t)
    snaplib.build(snapbuild, loc, tmp_path / "dir" / "P")
    assert lakelib.snapshot_rows(tmp_path / "dir" / "P", cols) == want
    meta = t.metadata_location.removeprefix("file://")
    rep = snaplib.build(snapbuild, meta, tmp_path / "file" / "P")
    assert rep["lineage"]["lake_snapshot_id"] == str(t.current_snapshot().snapshot_id)
    assert lakelib.snapshot_rows(tmp_path / "file" / "P", cols) == want
    # --as-of the third snapshot's commit time reads the third snapshot.
    s3 = list(t.snapshots())[2]
    when = dt.datetime.fromtimestamp(s3.timestamp_ms / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    rep = snaplib.build(snapbuild, loc, tmp_path / "asof" / "P", "--as-of", when)
    assert rep["lineage"]["lake_snapshot_id"] == str(s3.snapshot_id)
    # --ref: the tag on the second snapshot.
    s2 = list(t.snapshots())[1]
    rep = snaplib.build(snapbuild, loc, tmp_path / "ref" / "P", "--ref", "second")
    assert rep["lineage"]["lake_snapshot_id"] == str(s2.snapshot_id) and rep["lineage"]["ref"] == "second"
    w2 = _want(t, snapshot_id=s2.snapshot_id)
    assert lakelib.snapshot_rows(tmp_path / "ref" / "P", list(w2[0].keys())) == w2


def test_if_changed(snapbuild, iceberg_table, tmp_path):
    _, t = iceberg_table
    loc = _location(t)
    out = tmp_path / "P"
    snaplib.build(snapbuild, loc, out)
    p = snaplib.run(snapbuild, "build", "--input", loc, "--out", out, "--if-changed")
    assert p.returncode == 3, p.stderr
    # that snapshot holds about twice the rows (80 against 39): past the default --max-change
    p = snaplib.run(snapbuild, "build", "--input", loc, "--out", out, "--if-changed",
                    "--snapshot-id", list(t.snapshots())[1].snapshot_id, "--max-change", 0)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("case", ["missing snapshot id", "corrupt metadata", "missing data file", "unknown ref"])
def test_bad_input_names_it_and_publishes_nothing(snapbuild, iceberg_table, tmp_path, case):
    _, t = iceberg_table
    src = _location(t)
    loc = tmp_path / "t"
    shutil.copytree(src, loc)
    # The copy's metadata still names the original's files; rewrite them.
    for m in (loc / "metadata").glob("*.metadata.json"):
        m.write_text(m.read_text().replace(str(src), str(loc)))
    args = []
    if case == "missing snapshot id":
        args, want = ["--snapshot-id", "12345"], "no snapshot 12345"
    elif case == "corrupt metadata":
        metas = sorted((loc / "metadata").glob("*.metadata.json"))
        metas[-1].write_text(metas[-1].read_text()[:200])
        want = metas[-1].name
    elif case == "missing data file":
        # A data file of the current snapshot, gone: read from the original's plan.
        f = next(iter(t.scan().plan_files())).file.file_path.removeprefix("file://")
        os.remove(f.replace(str(src), str(loc)))
        # manifests hold absolute paths of the original: point the table at the copy
        want = os.path.basename(f)
        loc = src  # the original's manifests name it
        shutil.move(f, f + ".bak")
    else:
        args, want = ["--ref", "nope"], 'no branch or tag "nope"'
    out = tmp_path / "P"
    try:
        p = snaplib.run(snapbuild, "build", "--input", loc, "--out", out, *args)
    finally:
        if case == "missing data file":
            shutil.move(f + ".bak", f)
    # a file that cannot be read is exit 2 by the CLI convention; bad content 1
    assert p.returncode == (2 if case == "missing data file" else 1), p.stdout
    assert want in p.stderr, p.stderr
    assert not (out / "CURRENT").exists()
