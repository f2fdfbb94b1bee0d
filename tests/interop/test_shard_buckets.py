"""Shard builds that read only their share: a table pyiceberg 0.12.0 writes
partitioned by bucket(16, series_id), built as 4 shards with
`--shard-function iceberg-bucket`. Each shard job reads a quarter of the
data files (the build's own counters say so), every series is in the shard
Iceberg's bucket transform puts it in (pyiceberg computes it, not us), and
the shards' rows together equal the unsharded build's, row for row.
"""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import DateType, DoubleType, NestedField, StringType

import snaplib

SHARDS = 4
BUCKETS = 16


@pytest.fixture(scope="module")
def bucketed(tmp_path_factory):
    root = tmp_path_factory.mktemp("buckets")
    wh = root / "warehouse"
    wh.mkdir()
    cat = SqlCatalog("lake", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{wh}")
    cat.create_namespace("db")
    schema = Schema(
        NestedField(1, "series_id", StringType(), required=False),
        NestedField(2, "period", DateType(), required=False),
        NestedField(3, "value", DoubleType(), required=False),
    )
    spec = PartitionSpec(PartitionField(source_id=1, field_id=1000, transform=BucketTransform(BUCKETS), name="sid_bucket"))
    t = cat.create_table("db.prices", schema=schema, partition_spec=spec)
    ids, periods, values = [], [], []
    for i in range(300):
        for k in range(6):
            ids.append(f"PET.S{i:04d}.M")
            periods.append(dt.date(2020, 1 + k, 1))
            values.append(i * 10.0 + k)
    t.append(pa.table({"series_id": pa.array(ids, pa.string()), "period": pa.array(periods, pa.date32()),
                       "value": pa.array(values, pa.float64())}))
    return root, wh / "db" / "prices", t


def _rows(dataset_dir) -> pa.Table:
    snap = snaplib.open_current(dataset_dir)
    data, index = snap.data(), snap.index()
    ids = index.column("series_id").to_pylist()
    codes = data.column("series_code").to_pylist()
    return pa.table({"series_id": [ids[c] for c in codes], "period": data.column("period"), "value": data.column("value")})


def test_shard_jobs_read_their_buckets(snapbuild, bucketed):
    root, table_dir, t = bucketed
    files = len(list(table_dir.glob("data/**/*.parquet")))
    assert files == BUCKETS, f"pyiceberg wrote {files} data files, want one per bucket"
    whole = snaplib.build(snapbuild, table_dir, root / "out" / "WHOLE")
    assert whole["inputs"] == BUCKETS

    bucket = BucketTransform(BUCKETS).transform(StringType())
    got = []
    for i in range(SHARDS):
        rep = snaplib.build(snapbuild, table_dir, root / "out" / "PET", "--shard", f"{i}/{SHARDS}", "--shard-function", "iceberg-bucket")
        s = rep["shards"][0]
        assert (s["inputs"], s["inputs_pruned"]) == (BUCKETS // SHARDS, BUCKETS - BUCKETS // SHARDS), s
        rows = _rows(root / "out" / f"PET.shard-{i:04d}")
        for sid in set(rows.column("series_id").to_pylist()):
            b = bucket(sid)
            assert b % SHARDS == i, f"series {sid}: bucket {b}, in shard {i}"
        got.append(rows)
    shard_map = json.loads((root / "out" / "PET" / "SHARDS.json").read_text())
    assert shard_map["hash"] == "iceberg-bucket" and shard_map["count"] == SHARDS

    key = [("series_id", "ascending"), ("period", "ascending")]
    union = pa.concat_tables(got).sort_by(key)
    ref = _rows(root / "out" / "WHOLE").sort_by(key)
    assert union.num_rows == ref.num_rows == 1800
    assert union.equals(ref)
