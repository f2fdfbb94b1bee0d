"""The cold tier (pkg/coldfile) read by the reference implementation: a
cold.vortex written from a snapshot's data.arrow, all but the last HOT rows
of every series, reads in vortex-data as exactly those rows of the all-Arrow
snapshot, in order; each series' cold rows are the contiguous range the
writer reported, and a scan of that range is the series' rows.

Then the cold files `snapbuild build` writes (--hot-since, --hot-rows, both,
--format vortex): vortex-data reads each, and the snapshot's hot data.arrow
and cold.vortex together are exactly the all-Arrow snapshot's data.arrow;
each series' cold rows are where its version-3 index (cold_start,
cold_rows, cold_first_period, cold_last_period) says, in vortex-data too.

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


# --------------------------------------------------------------------------
# cold.vortex as snapbuild build writes it (FORMAT.md §4 version 3, §9)

POLICIES = {
    "hot-since": ["--hot-since", "2020-01-01"],
    "hot-rows": ["--hot-rows", str(HOT)],
    "both": ["--hot-since", "2023-01-01", "--hot-rows", "3"],
    "vortex": ["--format", "vortex"],
}


@pytest.fixture(scope="module")
def tiered(snapshot_data):
    """The lake of snapshot_data built with each tier policy: per policy,
    (hot data table, cold table as vortex-data reads it, index table,
    manifest)."""
    bins_dir = snapshot_data[2]
    snapbuild = str(bins_dir / "snapbuild")
    out = {}
    for name, flags in POLICIES.items():
        ds = bins_dir / "root" / f"T-{name}"
        subprocess.run([snapbuild, "build", "--input", str(bins_dir / "lake"), "--out", str(ds),
                        "--batch-rows", "5000", *flags], check=True, capture_output=True)
        current = (ds / "CURRENT").read_text().strip()
        m = json.loads((ds / current).read_text())
        files = {f["role"]: f for f in m["files"]}
        hot = ipc.open_file(pa.memory_map(str(ds / files["data"]["path"]))).read_all()
        cold_file = vx.open(str(ds / files["cold"]["path"]))
        cold = cold_file.to_arrow().read_all()
        index = ipc.open_file(pa.memory_map(str(ds / files["index"]["path"]))).read_all()
        out[name] = (hot, cold, cold_file, index, m)
    return out


def all_hot(snapshot_data):
    _, data, _ = snapshot_data
    return ipc.open_file(pa.memory_map(str(data))).read_all()


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_reference_reads_built_cold_file(snapshot_data, tiered, policy):
    """hot data.arrow + cold.vortex (vortex-data), concatenated and sorted by
    (series_code, period), are the all-Arrow snapshot's data.arrow."""
    hot, cold, cold_file, index, m = tiered[policy]
    want = all_hot(snapshot_data)
    files = {f["role"]: f for f in m["files"]}
    assert m["format_version"] == 5  # FORMAT.md "Versions": tiered because it lists a cold file
    assert files["cold"]["format"] == "vortex" and files["cold"]["tier"] == "cold"
    assert len(cold_file) == cold.num_rows == files["cold"]["rows"] > 0
    assert hot.num_rows == files["data"]["rows"]
    assert hot.num_rows + cold.num_rows == m["stats"]["rows"] == want.num_rows
    if policy == "vortex":
        assert hot.num_rows == 0 and m["build"]["format"] == "vortex"
        assert_same(want, cold, "vortex: cold.vortex is the whole data file, in order")
        return
    # Every series keeps its last row hot, so the hot file has every series.
    assert set(hot.column("series_code").to_pylist()) == set(range(index.num_rows))
    both = pa.concat_tables([cold.cast(hot.schema), hot])
    both = both.sort_by([("series_code", "ascending"), ("period", "ascending")])
    assert_same(want, both, f"{policy}: hot + cold")


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_index_locates_cold_rows(snapshot_data, tiered, policy):
    """The tiered index's cold_* columns (version 5 with servingsnap.tiered,
    as version 3 had them) locate each series' rows in
    cold.vortex, and row_offset/row_count its hot rows; a scan of a few
    series' cold ranges in vortex-data returns exactly them."""
    hot, cold, cold_file, index, m = tiered[policy]
    want = all_hot(snapshot_data)
    assert index.schema.metadata[b"servingsnap.format_version"] == b"5"
    assert index.schema.metadata[b"servingsnap.tiered"] == b"true"
    assert index.schema.names[9:13] == ["cold_start", "cold_rows", "cold_first_period", "cold_last_period"]
    x = index.select(["series_id", "row_offset", "row_count", "first_period", "last_period",
                      "cold_start", "cold_rows", "cold_first_period", "cold_last_period"]).to_pylist()
    codes = want.column("series_code").to_pylist()
    starts = {}
    for i, c in enumerate(codes):
        starts.setdefault(c, i)
    pos = 0
    for code, e in enumerate(x):
        n = (starts.get(code + 1, len(codes))) - starts[code]
        assert e["cold_start"] == pos, (code, e)
        assert e["cold_rows"] + e["row_count"] == n, (code, e)
        whole = want.slice(starts[code], n)
        periods = whole.column("period").to_pylist()
        assert (e["first_period"], e["last_period"]) == (periods[0], periods[-1]), (code, e)
        if e["cold_rows"]:
            assert (e["cold_first_period"], e["cold_last_period"]) == (periods[0], periods[e["cold_rows"] - 1])
            assert_same(whole.slice(0, e["cold_rows"]), cold.slice(e["cold_start"], e["cold_rows"]), f"{policy} series {code} cold")
        assert_same(whole.slice(e["cold_rows"]), hot.slice(e["row_offset"], e["row_count"]), f"{policy} series {code} hot")
        pos += e["cold_rows"]
    assert pos == cold.num_rows
    for code in range(0, len(x), 53):
        e = x[code]
        if not e["cold_rows"]:
            continue
        a, b = e["cold_start"], e["cold_start"] + e["cold_rows"]
        got = pa.Table.from_struct_array(cold_file.scan(indices=vx.array(list(range(a, b)))).read_all().to_arrow_array())
        assert set(got.column("series_code").to_pylist()) == {code}
        assert_same(want.slice(starts[code], e["cold_rows"]), got, f"{policy} series {code} scan")
