"""Object storage: an Iceberg table that pyiceberg 0.12.0 writes to an
S3-compatible store (internal/fakes3, gofakes3 on loopback, started here)
builds from s3:// to exactly the rows pyiceberg reads, at every snapshot.
(Plain folders and Delta tables from S3 against local disk:
pkg/sortwrite's TestBuildFromS3EqualsLocal.)
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import DateType, DoubleType, NestedField, StringType

import lakelib
import snaplib


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with lakelib.fake_s3(tmp_path_factory.mktemp("fakes3"), "lake") as url:
        yield url


def _rows(series, start, n, base):
    d0 = dt.date.fromisoformat(start)
    return pa.table({
        "series_id": pa.array([series] * n, pa.string()),
        "period": pa.array([d0 + dt.timedelta(days=i) for i in range(n)], pa.date32()),
        "value": pa.array([base + i for i in range(n)], pa.float64()),
    })


def test_iceberg_on_s3_matches_pyiceberg(snapbuild, s3, tmp_path):
    cat = SqlCatalog("s3lake", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse="s3://lake/wh", **{
        "s3.endpoint": s3, "s3.access-key-id": "test", "s3.secret-access-key": "test", "s3.region": "us-east-1",
        "s3.force-virtual-addressing": "false"})
    cat.create_namespace("db")
    t = cat.create_table("db.prices", schema=Schema(
        NestedField(1, "series_id", StringType(), required=False),
        NestedField(2, "period", DateType(), required=False),
        NestedField(3, "value", DoubleType(), required=False)))
    t.append(pa.concat_tables([_rows("A", "2024-01-01", 20, 1), _rows("B", "2024-01-01", 10, 100)]))
    t.append(_rows("C", "2024-02-01", 5, 7))
    t.delete("series_id == 'A' and value > 10")
    t = cat.load_table("db.prices")
    loc = t.location()
    assert loc.startswith("s3://lake/")
    for s in t.snapshots():
        want = lakelib.rows_of_table(t.scan(snapshot_id=s.snapshot_id).to_arrow(), ["series_id", "period", "value"])
        out = tmp_path / str(s.snapshot_id) / "P"
        rep = snaplib.build(snapbuild, loc, out, "--s3-endpoint", s3, "--snapshot-id", s.snapshot_id)
        assert rep["lineage"]["kind"] == "iceberg" and rep["lineage"]["location"] == loc
        assert rep["lineage"]["metadata_location"].startswith("s3://lake/")
        assert lakelib.snapshot_rows(out, ["series_id", "period", "value"]) == want
    # The metadata file named directly, on S3.
    rep = snaplib.build(snapbuild, t.metadata_location, tmp_path / "meta" / "P", "--s3-endpoint", s3)
    assert rep["lineage"]["lake_snapshot_id"] == str(t.current_snapshot().snapshot_id)
