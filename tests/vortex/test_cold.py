"""The cold tier (pkg/coldfile) read by the reference implementation: a
cold.vortex written from a snapshot's data.arrow, all but the last HOT rows
of every series, reads in vortex-data as exactly those rows of the all-Arrow
snapshot, in order; each series' cold rows are the contiguous range the
writer reported, and a scan of that range is the series' rows.

Run from the repo root: .venv/bin/python -m pytest tests/vortex
"""

import json
import os
import shutil
import subprocess

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pytest
import vortex as vx

from test_interop import assert_same

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GO = shutil.which("go") or "/usr/local/go/bin/go"
HOT = 10


@pytest.fixture(scope="module")
def snapshot_data(tmp_path_factory):
    d = tmp_path_factory.mktemp("cold")
    bins = {}
    for name, pkg in (("snapbuild", "./cmd/snapbuild"), ("coldconv", "./pkg/coldfile/internal/coldconv")):
        bins[name] = str(d / name)
        subprocess.run([GO, "build", "-o", bins[name], pkg], cwd=REPO, check=True)
    subprocess.run([bins["snapbuild"], "gen", "--out", str(d / "lake"), "--series", "400", "--seed", "3"], check=True,
                   capture_output=True)
    subprocess.run([bins["snapbuild"], "build", "--input", str(d / "lake"), "--out", str(d / "root" / "SYN"),
                    "--batch-rows", "5000"], check=True, capture_output=True)
    (data,) = (d / "root" / "SYN" / "snapshots").glob("*/data.arrow")
    return bins["coldconv"], data, d


@pytest.mark.parametrize("chunk", [256, 4096])
def test_reference_reads_cold_rows(snapshot_data, chunk):
    coldconv, data, d = snapshot_data
    out = d / f"cold-{chunk}.vortex"
    res = subprocess.run([coldconv, str(data), str(out), str(HOT), str(chunk)], check=True, capture_output=True, text=True)
    locs = [json.loads(line) for line in res.stdout.splitlines()]
    table = ipc.open_file(pa.memory_map(str(data))).read_all()
    codes = table.column("series_code").to_pylist()
    # Expected: each series' rows but its last HOT (and at least its last).
    keep, start, counts = [], 0, {}
    for c in codes:
        counts[c] = counts.get(c, 0) + 1
    for c in sorted(counts):
        n = counts[c]
        cold = max(0, n - HOT)
        keep.extend(range(start, start + cold))
        start += n
    want = table.take(pa.array(keep, pa.int64()))
    f = vx.open(str(out))
    assert len(f) == want.num_rows == sum(l["rows"] for l in locs)
    assert_same(want, f.to_arrow().read_all(), f"cold/{chunk}")
    # Each series' cold rows are its contiguous range; scan a few.
    pos = 0
    for loc in locs:
        assert loc["start"] == pos, loc
        pos += loc["rows"]
    for loc in [l for l in locs if l["rows"] > 0][::97]:
        a, b = loc["start"], loc["start"] + loc["rows"]
        got = pa.Table.from_struct_array(f.scan(indices=vx.array(list(range(a, b)))).read_all().to_arrow_array())
        assert set(got.column("series_code").to_pylist()) == {loc["code"]}
        assert_same(want.slice(a, b - a), got, f"cold/{chunk} series {loc['code']}")
