"""Delta tables written by deltalake (delta-rs) 1.6.6, and the deletion-vector
fixture Spark wrote (testdata/delta/spark_dv): every version built by
snapbuild holds exactly the rows deltalake reads at that version.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake

import lakelib
import snaplib
from snaplib import REPO

COLUMNS = ["series_id", "period", "value", "region", "unit"]


def _rows(series, region, start, n, base, unit=None):
    d0 = dt.date.fromisoformat(start)
    t = {
        "series_id": [series] * n,
        "period": [d0 + dt.timedelta(days=i) for i in range(n)],
        "value": [base + i * 0.5 for i in range(n)],
        "region": [region] * n,
    }
    if unit is not None:
        t["unit"] = [unit] * n
    return pa.table(t)


@pytest.fixture(scope="module")
def delta_table(tmp_path_factory) -> Path:
    """Versions 0-5: appends, schema evolution, a delete, a checkpoint, an
    overwrite of one partition; commit times set one hour apart."""
    p = tmp_path_factory.mktemp("delta") / "prices"
    write_deltalake(p, pa.concat_tables([_rows("PET.A.D", "east", "2024-01-01", 30, 10), _rows("PET.B.D", "west", "2024-01-01", 30, 50)]),
                    partition_by=["region"])                                                           # v0
    write_deltalake(p, _rows("PET.C.D", "east", "2024-02-01", 20, 100), mode="append")                 # v1
    write_deltalake(p, _rows("PET.D.D", "west", "2024-03-01", 10, 7, unit="$/bbl"), mode="append",
                    schema_mode="merge")                                                               # v2: new column
    DeltaTable(p).delete("series_id = 'PET.A.D' AND value > 15")                                       # v3
    DeltaTable(p).create_checkpoint()
    write_deltalake(p, _rows("PET.E.D", "east", "2024-04-01", 5, 1, unit="$/MMBtu"), mode="append")    # v4
    write_deltalake(p, _rows("PET.B.D", "west", "2024-05-01", 3, 70, unit="$/bbl"), mode="overwrite",
                    predicate="region = 'west'")                                                       # v5
    base = dt.datetime(2024, 6, 1, tzinfo=dt.timezone.utc)
    for v in range(6):
        t = (base + dt.timedelta(hours=v)).timestamp()
        os.utime(p / "_delta_log" / f"{v:020d}.json", (t, t))
    return p


def _expected(path, version=None, as_of=None):
    dt_ = DeltaTable(path, version=version) if version is not None else DeltaTable(path)
    if as_of is not None:
        dt_.load_as_version(as_of)
    t = dt_.to_pyarrow_table()
    return lakelib.rows_of_table(t, [c for c in COLUMNS if c in t.column_names]), dt_.version()


def test_every_version_matches_deltalake(snapbuild, delta_table, tmp_path):
    assert DeltaTable(delta_table).version() == 5
    assert any(n.endswith(".checkpoint.parquet") for n in os.listdir(delta_table / "_delta_log"))
    for v in range(6):
        want, _ = _expected(delta_table, version=v)
        out = tmp_path / f"v{v}" / "PRICES"
        rep = snaplib.build(snapbuild, delta_table, out, "--table-version", v)
        cols = [c for c in COLUMNS if want and c in want[0]]
        got = lakelib.snapshot_rows(out, cols)
        assert got == want, f"version {v}"
        lin = rep["lineage"]
        assert lin["kind"] == "delta" and lin["lake_snapshot_id"] == str(v) and lin["table_version"] == v
        assert lin["snapshot_timestamp"].startswith(f"2024-06-01T0{v}:00:00")
        m = snaplib.open_current(out).manifest
        assert m["lineage"]["location"] == str(delta_table) and m["lineage"]["table_version"] == v


def test_as_of_matches_deltalake(snapbuild, delta_table, tmp_path):
    when = dt.datetime(2024, 6, 1, 3, 30, tzinfo=dt.timezone.utc)
    want, version = _expected(delta_table, as_of=when)
    assert version == 3
    out = tmp_path / "PRICES"
    rep = snaplib.build(snapbuild, delta_table, out, "--as-of", "2024-06-01T03:30:00Z")
    assert rep["lineage"]["table_version"] == 3
    assert lakelib.snapshot_rows(out, [c for c in COLUMNS if c in want[0]]) == want
    p = snaplib.run(snapbuild, "build", "--input", delta_table, "--out", out, "--as-of", "2024-05-01")
    assert p.returncode == 1 and "no version" in p.stderr and "2024-05-01" in p.stderr


def test_raw_files_reads_every_file(snapbuild, delta_table, tmp_path):
    """--raw-files is the old behaviour: removed files come back."""
    out = tmp_path / "RAW"
    rep = snaplib.build(snapbuild, delta_table, out, "--raw-files", "--on-duplicate=last")
    assert rep["lineage"]["kind"] == "parquet"
    table_rows, _ = _expected(delta_table)
    assert rep["rows"] > len(table_rows)


def test_if_changed(snapbuild, delta_table, tmp_path):
    t = tmp_path / "t"
    shutil.copytree(delta_table, t)
    out = tmp_path / "PRICES"
    snaplib.build(snapbuild, t, out)
    p = snaplib.run(snapbuild, "build", "--input", t, "--out", out, "--if-changed", "--json")
    assert p.returncode == 3, p.stderr
    assert json.loads(p.stdout)["unchanged"] is True
    assert len(list((out / "manifests").iterdir())) == 1
    write_deltalake(t, _rows("PET.F.D", "east", "2024-07-01", 2, 5, unit="x"), mode="append")
    p = snaplib.run(snapbuild, "build", "--input", t, "--out", out, "--if-changed", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["lineage"]["table_version"] == 6


@pytest.mark.parametrize("case", ["unknown reader feature", "corrupt log entry", "missing data file", "missing version"])
def test_bad_input_names_it_and_publishes_nothing(snapbuild, delta_table, tmp_path, case):
    t = tmp_path / "t"
    shutil.copytree(delta_table, t)
    args = []
    if case == "unknown reader feature":
        (t / "_delta_log" / f"{6:020d}.json").write_text(json.dumps({"protocol": {
            "minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors", "hyperSpace"],
            "writerFeatures": ["deletionVectors", "hyperSpace"]}}) + "\n")
        want = "hyperSpace"
    elif case == "corrupt log entry":
        with open(t / "_delta_log" / f"{4:020d}.json", "a") as f:
            f.write('{"add": {"path": 3}}\n')
        want = f"{4:020d}.json: line"
    elif case == "missing data file":
        files = DeltaTable(t).file_uris()
        os.remove(files[-1])
        want = os.path.basename(files[-1])
    else:
        args = ["--table-version", "17"]
        want = "table version 17 does not exist"
    out = tmp_path / "PRICES"
    p = snaplib.run(snapbuild, "build", "--input", t, "--out", out, *args)
    assert p.returncode in (1, 2), p.stdout
    assert want in p.stderr, p.stderr
    assert not (out / "CURRENT").exists()


def test_spark_deletion_vectors_match_deltalake(snapbuild, tmp_path):
    """The Spark fixture (deletion vectors, column mapping, V2 checkpoints
    with sidecars): deltalake, Spark (the committed expectation) and
    snapbuild agree at every version."""
    fixture = REPO / "testdata" / "delta" / "spark_dv"
    spark = json.loads((REPO / "testdata" / "delta" / "spark_dv.expected.json").read_text())
    for v in range(1, 9):
        cols = spark[str(v)]["columns"]
        # deltalake's pyarrow path refuses these reader features; its
        # DataFusion path (the Rust kernel) reads them.
        r = QueryBuilder().register("t", DeltaTable(fixture, version=v)).execute("select * from t")
        t = pa.RecordBatchReader.from_stream(r).read_all()
        want = lakelib.rows_of_table(t, cols)
        assert want == lakelib.rows_of_table(pa.Table.from_pylist(spark[str(v)]["rows"]), cols), f"deltalake vs Spark at {v}"
        out = tmp_path / f"v{v}" / "DV"
        snaplib.build(snapbuild, fixture, out, "--table-version", v)
        assert lakelib.snapshot_rows(out, cols) == want, f"version {v}"
