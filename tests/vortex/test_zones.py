"""Zone maps written by pkg/vortexio (WriterOptions.ZoneRows; the cold tier's
cold.vortex always has them) as the reference implementation sees them.

vortex-data 0.93 reads the files into the source rows, its filtered scans
return exactly the rows pyarrow's filter does (so no zone's min/max is too
narrow: that would drop rows), and it prunes with them: a scan for a value
that lies between two zones' [min, max] uses only the zone table's
segments, no data segment (so no min/max is wider than the data: that would
make it read the zone), a one-code scan uses fewer segments than on the same
file without zone maps (which needs every chunk of the filtered column), and
a one-series scan of cold.vortex uses the zone table and the chunks holding
the series only. Segments used are counted with a vortex.SegmentCache given to the
open (its entry_count after the scan).

Run from the repo root: .venv/bin/python -m pytest tests/vortex
"""

import datetime
import random
import subprocess

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pytest
import vortex as vx
import vortex.expr as ve

from test_cold import snapshot_data  # noqa: F401  (fixture)
from test_interop import assert_same

ZONE = 1000
N = 100_000  # far larger than the reference's first read of the file's tail (64 KiB)


def zones_table():
    rng = random.Random(7)
    # Series of 250 rows (so zone edges are series edges), codes with gaps.
    codes, code = [], 0
    for i in range(N):
        if i and i % 250 == 0:
            code += 1 + rng.randrange(4)
        codes.append(code)
    return pa.table({
        "code": pa.array(codes, pa.uint32()),
        "period": pa.array([rng.randrange(-5000, 15000) for _ in range(N)], pa.int32()).cast(pa.date32()),
        "q": pa.array([None if 2000 <= i < 3500 else rng.randrange(-(1 << 62), 1 << 62) for i in range(N)], pa.int64()),
        "value": pa.array([rng.random() for _ in range(N)], pa.float64()),
    })


def segments_used(path, expr):
    """Rows of a filtered scan and the segments it used."""
    cache = vx.SegmentCache(1 << 30)
    f = vx.open(str(path), segment_cache=cache, cache_key=str(path))
    before = cache.entry_count
    rows = pa.Table.from_struct_array(f.scan(expr=expr).read_all().to_arrow_array())
    return rows, cache.entry_count - before


def code_eq(c):
    return ve.column("code") == ve.literal(vx.uint(32), c)


@pytest.fixture(scope="module")
def zoned(vxconv, tmp_path_factory):
    d = tmp_path_factory.mktemp("zones")
    table = zones_table()
    src = d / "in.arrow"
    with ipc.new_file(str(src), table.schema) as w:
        w.write_table(table)
    out = {}
    for name, zone in (("zoned", ZONE), ("plain", 0)):
        out[name] = d / f"{name}.vortex"
        subprocess.run([vxconv, str(src), str(out[name]), "2560", str(zone)], check=True)
    return table, out


def test_reference_reads_zoned_file(zoned):
    table, paths = zoned
    raw = paths["zoned"].read_bytes()
    assert b"vortex.zoned" in raw and b"vortex.null_count" in raw
    assert b"vortex.zoned" not in paths["plain"].read_bytes()
    assert_same(table, vx.open(str(paths["zoned"])).to_arrow().read_all(), "zoned")


def test_filtered_scans_exact(zoned):
    table, paths = zoned
    codes = table.column("code").to_pylist()
    # Every zone's smallest and largest code: a too-narrow zone drops them.
    probes = set()
    for z in range(0, N, 9 * ZONE):
        probes.update((min(codes[z:z + ZONE]), max(codes[z:z + ZONE])))
    for c in sorted(probes):
        got, _ = segments_used(paths["zoned"], code_eq(c))
        assert_same(table.filter(pc.equal(table["code"], c)), got, f"code == {c}")
    # The nullable int64 column, with an all-null zone.
    qs = [x for x in table.column("q").to_pylist() if x is not None]
    for x in (min(qs), max(qs), sorted(qs)[len(qs) // 2]):
        got, _ = segments_used(paths["zoned"], ve.column("q") >= ve.literal(vx.int_(64), x))
        assert_same(table.filter(pc.greater_equal(table["q"], x)), got, f"q >= {x}")
    got, _ = segments_used(paths["zoned"], ve.is_null(ve.column("q")))
    assert_same(table.filter(pc.is_null(table["q"])), got, "q is null")
    # Dates: each zone's bounds.
    ps = table.column("period").to_pylist()
    for z in range(0, N, 23 * ZONE):
        for p in (min(ps[z:z + ZONE]), max(ps[z:z + ZONE])):
            lit = ve.literal(vx.date("days"), (p - datetime.date(1970, 1, 1)).days)
            got, _ = segments_used(paths["zoned"], ve.column("period") == lit)
            assert_same(table.filter(pc.equal(table["period"], pa.scalar(p, pa.date32()))), got, f"period == {p}")


def test_reference_prunes_with_zones(zoned):
    table, paths = zoned
    codes = table.column("code").to_pylist()
    # Nothing matches: every zone is pruned, only the zone table is read.
    _, base = segments_used(paths["zoned"], code_eq(max(codes) + 10))
    _, plain = segments_used(paths["plain"], code_eq(max(codes) + 10))
    assert base < plain, (base, plain)
    # A code between two zones' ranges (absent from the data) reads no
    # more than that: the stored max of the zone below and min of the zone
    # above are not wider than the data.
    gaps = []
    for z in range(ZONE, N, ZONE):
        below, above = max(codes[z - ZONE:z]), min(codes[z:z + ZONE])
        gaps += [c for c in (below + 1, above - 1) if below < c < above]
    assert len(gaps) > 5, "the table has too few gaps between zones"
    for c in gaps[::max(1, len(gaps) // 12)]:
        got, used = segments_used(paths["zoned"], code_eq(c))
        assert got.num_rows == 0
        assert used == base, f"code {c} between zones used {used} segments, an empty scan {base}"
    # One code that is present: its zone's chunks only.
    c = codes[N // 2]
    _, one = segments_used(paths["zoned"], code_eq(c))
    _, one_plain = segments_used(paths["plain"], code_eq(c))
    assert one < one_plain, (one, one_plain)


def test_cold_file_one_series_scan_is_pruned(snapshot_data, tmp_path):  # noqa: F811
    coldconv, data, _ = snapshot_data
    out = tmp_path / "cold.vortex"
    subprocess.run([coldconv, str(data), str(out), "10"], check=True, capture_output=True)
    raw = out.read_bytes()
    assert b"vortex.zoned" in raw
    table = vx.open(str(out)).to_arrow().read_all()
    codes = sorted(set(table.column("series_code").to_pylist()))
    for c in (codes[0], codes[len(codes) // 2], codes[-1]):
        got, used = segments_used(out, ve.column("series_code") == ve.literal(vx.uint(32), c))
        assert_same(table.filter(pc.equal(table["series_code"], c)), got, f"series {c}")
        # The zone table plus the three columns of the one or two chunks
        # (of hundreds) that hold the series.
        assert used <= 1 + 3 * 3, f"series {c}: {used} segments"
