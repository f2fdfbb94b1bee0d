"""Interop between pkg/vortexio and the reference implementation vortex-data.

(a) files written by our Go writer are read by vortex-data into tables equal
    to the source;
(b) files written by vortex-data now (default and compact options) are read
    by our Go reader into equal tables. The checked-in fixtures under
    pkg/vortexio/testdata cover (b) in the Go tests as well.

Run from the repo root: .venv/bin/python -m pytest tests/vortex
"""

import glob
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
import vortex as vx

sys.path.insert(0, os.path.dirname(__file__))
import make_fixtures as mf  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TESTDATA = os.path.join(REPO, "pkg", "vortexio", "testdata")


def tables():
    out = {"lake": mf.lake_table(), "lake_big": mf.lake_table(seed=3, nseries=300, per=150)}
    out["series"] = mf.series_table()
    out.update(mf.encoding_tables())
    out.update(mf.pco_tables())
    out["empty"] = pa.table({"i": pa.array([], pa.int64()), "s": pa.array([], pa.string())})
    out["one_row"] = pa.table({"i": pa.array([-5], pa.int64()), "s": pa.array(["x"], pa.string())})
    out["long_strings"] = pa.table({"s": pa.array(["\u00e9" * 5000 + str(i) for i in range(50)], pa.string())})
    return out


def write_ipc(path, table):
    with ipc.new_file(path, table.schema) as w:
        w.write_table(table)


def read_ipc(path):
    with ipc.open_file(path) as r:
        return r.read_all()


def assert_same(want, got, label):
    assert got.num_rows == want.num_rows, label
    assert got.schema.names == want.schema.names, label
    for i, name in enumerate(want.schema.names):
        assert mf.same_values(want.column(i).combine_chunks(), got.column(i).combine_chunks()), f"{label}: column {name}"


TABLES = tables()


@pytest.mark.parametrize("name", sorted(TABLES))
@pytest.mark.parametrize("chunk,zones", [(1000, 0), (65536, 0), (1000, 300)])
def test_go_writes_vortex_reads(vxconv, tmp_path, name, chunk, zones):
    """zones > 0: with zone maps of that many rows on every integer and
    temporal column (tests/vortex/test_zones.py checks their values)."""
    table = TABLES[name]
    src = tmp_path / "in.arrow"
    dst = tmp_path / "out.vortex"
    write_ipc(str(src), table)
    subprocess.run([vxconv, str(src), str(dst), str(chunk), str(zones)], check=True)
    f = vx.open(str(dst))
    assert len(f) == table.num_rows
    got = f.to_arrow().read_all()
    assert_same(table, got, name)


@pytest.mark.parametrize("chunk", [1000, 8192, 65536])
def test_go_writes_delta_vortex_reads(vxconv, tmp_path, chunk):
    """The snapshot-shaped table must make our writer use the encodings that
    are outside edition core2025.06.0 (fastlanes.delta, vortex.masked) and
    patched bit-packing, so that (a) covers them; vortex-data must read them."""
    table = TABLES["series"]
    src = tmp_path / "in.arrow"
    dst = tmp_path / "out.vortex"
    write_ipc(str(src), table)
    subprocess.run([vxconv, str(src), str(dst), str(chunk)], check=True)
    raw = dst.read_bytes()
    for enc in (b"fastlanes.delta", b"vortex.masked", b"vortex.dict", b"fastlanes.bitpacked"):
        assert enc in raw, f"chunk {chunk}: writer did not use {enc.decode()}"
    got = vx.open(str(dst)).to_arrow().read_all()
    assert_same(table, got, f"series/{chunk}")
    # Row selections that start inside a delta block exercise the
    # reference's sliced-delta path.
    f = vx.open(str(dst))
    for a, b in [(1, 151), (1000, 1150), (table.num_rows - 150, table.num_rows)]:
        arr = f.scan(indices=vx.array(list(range(a, b)))).read_all().to_arrow_array()
        assert_same(table.slice(a, b - a), pa.Table.from_struct_array(arr), f"series/{chunk}[{a}:{b}]")


@pytest.mark.parametrize("name", sorted(TABLES))
@pytest.mark.parametrize("compact", [False, True])
def test_vortex_writes_go_reads(vxconv, tmp_path, name, compact):
    table = TABLES[name]
    src = tmp_path / "in.vortex"
    dst = tmp_path / "out.arrow"
    if compact:
        vx.io.VortexWriteOptions.compact().write(table, str(src))
    else:
        vx.io.write(table, str(src))
    res = subprocess.run([vxconv, str(src), str(dst)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert_same(table, read_ipc(str(dst)), name)


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(TESTDATA, "*.vortex"))), ids=os.path.basename)
def test_checked_in_fixtures_still_read_by_reference(path):
    """The fixtures must stay readable by the pinned reference version."""
    want = read_ipc(path[: -len(".vortex")] + ".arrow")
    got = vx.open(path).to_arrow().read_all()
    assert_same(want, got, os.path.basename(path))
