"""Shard builds that read only their share, on lakes without Iceberg's
partition spec: a Delta table written by the `deltalake` package, and a
hive-style Parquet folder written by pyarrow, each partitioned by a column
holding bucket(16, series_id) as pyiceberg's bucket transform computes it
(not us). Built as 4 shards with `--shard-function iceberg-bucket
--shard-by-partition sid_bucket:16`, each shard job reads a quarter of the
data files (the build's own counters say so), every series is in the shard
the bucket transform puts it in, and the shards' rows together equal the
unsharded build's, row for row. A column holding something else stops the
build naming the row.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.dataset as pads
import pytest
from deltalake import write_deltalake
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import StringType

import snaplib

SHARDS = 4
BUCKETS = 16
SERIES = 300
PERIODS = 6


def _lake_rows() -> pa.Table:
    bucket = BucketTransform(BUCKETS).transform(StringType())
    ids, periods, values, buckets = [], [], [], []
    for i in range(SERIES):
        sid = f"PET.S{i:04d}.M"
        for k in range(PERIODS):
            ids.append(sid)
            periods.append(dt.date(2020, 1 + k, 1))
            values.append(i * 10.0 + k)
            buckets.append(bucket(sid))
    return pa.table({
        "series_id": pa.array(ids, pa.string()),
        "period": pa.array(periods, pa.date32()),
        "value": pa.array(values, pa.float64()),
        "sid_bucket": pa.array(buckets, pa.int32()),
    })


@pytest.fixture(scope="module", params=["delta", "parquet"])
def partitioned(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"part-{request.param}")
    lake = root / "lake"
    rows = _lake_rows()
    if request.param == "delta":
        write_deltalake(str(lake), rows, partition_by=["sid_bucket"])
    else:
        pads.write_dataset(rows, lake, format="parquet", partitioning=["sid_bucket"], partitioning_flavor="hive")
    return root, lake


def _rows(dataset_dir) -> pa.Table:
    snap = snaplib.open_current(dataset_dir)
    data, index = snap.data(), snap.index()
    ids = index.column("series_id").to_pylist()
    codes = data.column("series_code").to_pylist()
    return pa.table({"series_id": [ids[c] for c in codes], "period": data.column("period"), "value": data.column("value")})


def test_shard_jobs_read_their_partitions(snapbuild, partitioned):
    root, lake = partitioned
    files = sorted(p for p in lake.glob("**/*.parquet") if "_delta_log" not in p.parts)
    assert len(files) == BUCKETS, f"the writer wrote {len(files)} data files, want one per bucket: {files}"
    assert all(f.parent.name.startswith("sid_bucket=") for f in files), files
    whole = snaplib.build(snapbuild, lake, root / "out" / "WHOLE")
    assert whole["inputs"] == BUCKETS

    bucket = BucketTransform(BUCKETS).transform(StringType())
    got = []
    read_bytes = 0
    for i in range(SHARDS):
        rep = snaplib.build(snapbuild, lake, root / "out" / "PET", "--shard", f"{i}/{SHARDS}",
                            "--shard-function", "iceberg-bucket", "--shard-by-partition", f"sid_bucket:{BUCKETS}")
        s = rep["shards"][0]
        assert (s["inputs"], s["inputs_pruned"]) == (BUCKETS // SHARDS, BUCKETS - BUCKETS // SHARDS), s
        assert s["input_bytes"] + s["input_bytes_pruned"] == whole["input_bytes"], s
        read_bytes += s["input_bytes"]
        rows = _rows(root / "out" / f"PET.shard-{i:04d}")
        for sid in set(rows.column("series_id").to_pylist()):
            b = bucket(sid)
            assert b % SHARDS == i, f"series {sid}: bucket {b}, in shard {i}"
        got.append(rows)
    # The four jobs read the lake once between them.
    assert read_bytes == whole["input_bytes"]

    key = [("series_id", "ascending"), ("period", "ascending")]
    union = pa.concat_tables(got).sort_by(key)
    ref = _rows(root / "out" / "WHOLE").sort_by(key)
    assert union.num_rows == ref.num_rows == SERIES * PERIODS
    assert union.equals(ref)

    # snapverify recomputes every shard's membership with the recorded function.
    snapverify = snapbuild.parent / "snapverify"
    assert snapverify.is_file(), f"{snapverify} missing: `make build` builds it beside snapbuild"
    v = snaplib.run(snapverify, root / "out" / "PET", "--deep")
    assert v.returncode == 0, v.stdout + v.stderr


def test_a_column_of_another_function_is_refused(snapbuild, partitioned):
    """The lake's buckets are murmur3's; read as xxhash64 buckets, the first
    row out of place stops the build, naming its file and series."""
    root, lake = partitioned
    p = snaplib.run(snapbuild, "build", "--input", lake, "--out", root / "out" / "XX", "--shard", f"1/{SHARDS}",
                    "--shard-by-partition", f"sid_bucket:{BUCKETS}")
    assert p.returncode == 1, p.stderr
    assert "sid_bucket=" in p.stderr and "under xxhash64" in p.stderr and "--shard-function iceberg-bucket" in p.stderr, p.stderr
    assert not (root / "out" / "XX.shard-0001" / "CURRENT").exists()
