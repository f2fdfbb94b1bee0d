"""Helpers of the lake-table interop tests: a snapshot read back as the table
it was built from, and table rows normalised for comparison.

Written from docs/FORMAT.md: data.arrow's rows, joined to index.arrow on
series_code for series_id and the per-series attribute columns.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import subprocess
from pathlib import Path

import pyarrow as pa

import snaplib


def _norm(v):
    if isinstance(v, dt.datetime):
        return v.isoformat()
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    return v


def rows_of_table(t: pa.Table, columns: list[str] | None = None) -> list[dict]:
    """Every row of a table as a dict of normalised values, sorted by
    (series_id, period); columns (default: all) that a row lacks are None."""
    cols = columns or t.column_names
    out = []
    for r in t.to_pylist():
        out.append({c: _norm(r.get(c)) for c in cols})
    out.sort(key=lambda r: (r["series_id"], str(r["period"])))
    return out


def snapshot_table(dataset_dir: Path) -> pa.Table:
    """The snapshot CURRENT names, as one table: series_id, period, value,
    the other data columns and the attribute columns, under input names."""
    snap = snaplib.open_current(dataset_dir)
    m = snap.manifest
    data = snap.data()
    index = snap.index()
    codes = data.column("series_code").to_pylist()
    cols = {}
    b = m["build"]
    ids = index.column("series_id").to_pylist()
    cols[b["series_column"]] = [ids[c] for c in codes]
    cols[b["period_column"]] = data.column("period").to_pylist()
    for i, name in enumerate(data.column_names[2:]):
        cols[b["value_column"] if i == 0 else name] = data.column(name).to_pylist()
    for a in m["schema"]["attributes"]:
        if a == b["series_column"]:
            continue
        vals = index.column(a).to_pylist()
        cols[a] = [vals[c] for c in codes]
    return pa.table(cols)


def snapshot_rows(dataset_dir: Path, columns: list[str]) -> list[dict]:
    return rows_of_table(snapshot_table(dataset_dir), columns)


@contextlib.contextmanager
def fake_s3(workdir: Path, bucket: str):
    """An S3-compatible server on loopback (internal/fakes3, gofakes3) holding one empty
    bucket, with the AWS environment set for clients while it runs; yields its URL."""
    exe = Path(workdir) / "fakes3"
    subprocess.run(["go", "build", "-o", str(exe), "./internal/fakes3"], cwd=snaplib.REPO, check=True, timeout=600)
    p = subprocess.Popen([str(exe), bucket], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    url = p.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), url
    env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true",
           # gofakes3 wants Content-Length: no aws-chunked uploads with trailing checksums.
           "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required", "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield url
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        p.stdin.close()
        p.wait(timeout=10)
