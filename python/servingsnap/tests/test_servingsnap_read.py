"""The package reads what the Go builder writes exactly as the Go exporter
does: every fixture version (v1 dictionary attributes, v2, v3 tiered and all
cold, v4 codes, v5 lookup tables) and fresh builds; lookups, period ranges, latest, bounds, prefixes and
categories; a vintage by id; the gc lease; a damaged manifest."""

from __future__ import annotations

import array
import datetime as dt
import json
import random
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import servingsnap
from pkglib import run


def plain(t: pa.Table) -> pa.Table:
    """Dictionary columns decoded: what the exporter's file holds."""
    cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in t.columns]
    return pa.table(cols, names=t.column_names)


def rows_of(ref: pa.Table, sid: str, lo=None, hi=None) -> pa.Table:
    mask = pc.equal(ref["series_id"], sid)
    if lo is not None:
        mask = pc.and_(mask, pc.greater_equal(ref["period"], pa.scalar(lo, pa.date32())))
    if hi is not None:
        mask = pc.and_(mask, pc.less_equal(ref["period"], pa.scalar(hi, pa.date32())))
    return ref.filter(mask)


def all_cases(fixtures, built):
    return list(fixtures.values()) + list(built.values())


def test_table_equals_export(fixtures, built):
    for ds, ref in all_cases(fixtures, built):
        with servingsnap.open(ds) as snap:
            got = plain(snap.table())
        assert got.column_names == ref.column_names, ds
        assert got.to_pylist() == ref.to_pylist(), ds


def test_every_series_and_ranges_equal_export(fixtures, built):
    rnd = random.Random(7)
    for ds, ref in all_cases(fixtures, built):
        with servingsnap.open(ds) as snap:
            ids = snap.ids().to_pylist()
            assert ids == sorted(set(ref["series_id"].to_pylist()), key=lambda s: s.encode())
            for sid in ids:
                got = plain(snap.series(sid, attributes=True))
                assert got.to_pylist() == rows_of(ref, sid).to_pylist(), (ds, sid)
                first, last = snap.bounds(sid)
                periods = rows_of(ref, sid)["period"].to_pylist()
                assert (first, last) == (periods[0], periods[-1])
                # A random range, with dates inside and around the series.
                span = (last - first).days
                lo = first + dt.timedelta(days=rnd.randint(-30, span + 30))
                hi = lo + dt.timedelta(days=rnd.randint(0, span))
                got = plain(snap.series(sid, lo, hi, attributes=True))
                assert got.to_pylist() == rows_of(ref, sid, lo, hi).to_pylist(), (ds, sid, lo, hi)


def test_lookup_table_is_a_shortcut(built):
    """A version-5 index's lookup table (FORMAT.md §4) finds every series at
    its code; a table of wrong codes changes no answer, because a code is
    taken only when its id is equal and the binary search stays the
    authority."""
    ds, _ = built["HOT"]
    with servingsnap.open(ds) as snap:
        assert snap.version == 5
        ids = snap.ids().to_pylist()
        assert [snap.code(s) for s in ids] == list(range(len(ids)))
        snap._views["lookup_code"] = memoryview(array.array("I", [0] * len(ids)))
        assert [snap.code(s) for s in ids] == list(range(len(ids)))
        with pytest.raises(servingsnap.SeriesNotFound):
            snap.code(ids[0] + "\x00")


def test_latest_prefix_category(built):
    ds, ref = built["TIERED"]
    with servingsnap.open(ds) as snap:
        lat = snap.latest()
        assert lat.num_rows == snap.series_count
        # The latest row is the last non-null value of every series.
        for r in lat.slice(0, 40).to_pylist():
            rows = rows_of(ref, r["series_id"]).to_pylist()
            nonnull = [x for x in rows if x["value"] is not None]
            assert (r["period"], r["value"]) == ((nonnull[-1]["period"], nonnull[-1]["value"]) if nonnull else (None, None))
        ids = snap.ids().to_pylist()
        prefix = ids[17][:5]
        assert snap.ids(prefix=prefix).to_pylist() == [i for i in ids if i.startswith(prefix)]
        assert snap.ids(prefix="\uffff").to_pylist() == []
        cat = ref["category"][0].as_py()
        top = cat.split("/")[0]
        want = sorted({r["series_id"] for r in ref.select(["series_id", "category"]).to_pylist()
                       if r["category"] == top or r["category"].startswith(top + "/")}, key=str.encode)
        assert snap.ids(category=top).to_pylist() == want
        assert snap.latest(category=top)["series_id"].to_pylist() == want
        assert snap.latest(ids=[ids[3], ids[1]])["series_id"].to_pylist() == [ids[3], ids[1]]
        with pytest.raises(servingsnap.SeriesNotFound):
            snap.series("no such series")


def test_cold_rows_without_vortex_are_an_error(built, monkeypatch):
    ds, ref = built["TIERED"]
    monkeypatch.setitem(sys.modules, "vortex", None)  # import vortex fails
    with servingsnap.open(ds) as snap:
        sid = snap.ids()[0].as_py()
        first, last = snap.bounds(sid)
        with pytest.raises(servingsnap.ColdTierUnavailable, match="vortex-data"):
            snap.series(sid)
        with pytest.raises(servingsnap.ColdTierUnavailable):
            snap.table()
        # A range of hot rows only needs no cold file.
        got = plain(snap.series(sid, last, last, attributes=True))
        assert got.to_pylist() == rows_of(ref, sid, last, last).to_pylist()


def test_vintages_and_the_gc_lease(snapbuild, built, tmp_path):
    ds, _ = built["HOT"]
    lake = ds.parent.parent / "lake"
    work = tmp_path / "V"
    run(snapbuild, "build", "--input", lake, "--out", work)
    run(snapbuild, "build", "--input", lake, "--out", work)
    old = servingsnap.open(work, snapshot=1)
    assert old.id == 1
    with servingsnap.open(work) as cur:
        assert cur.id == 2
    # gc skips the vintage a reader holds.
    p = run(snapbuild, "gc", "--keep", 0, "--json", work)
    assert json.loads(p.stdout)["in_use"] == [1]
    old.close()
    p = run(snapbuild, "gc", "--keep", 0, "--json", work)
    assert json.loads(p.stdout)["removed"] == [1]
    with pytest.raises(servingsnap.ServingSnapError, match="does not exist"):
        servingsnap.open(work, snapshot=1)


def test_damaged_manifest_is_refused(built, tmp_path):
    import shutil
    ds, _ = built["HOT"]
    copy = tmp_path / "HOT"
    shutil.copytree(ds, copy)
    m = copy / "manifests" / "000001.json"
    b = bytearray(m.read_bytes())
    i = b.find(b'"rows": ') + len(b'"rows": ')
    b[i] = ord("9") if b[i] != ord("9") else ord("8")
    m.chmod(0o644)
    m.write_bytes(bytes(b))
    with pytest.raises(servingsnap.CorruptSnapshot, match="checksum"):
        servingsnap.open(copy)


def test_code_columns(built, tmp_path):
    """A version-4 index stores a low-cardinality string attribute as int8
    or int16 codes, its values in the field's metadata: read back as the
    strings the exporter wrote (test_table_equals_export), and a code
    outside its values is refused as corruption, not read past."""
    import shutil
    ds, ref = built["HOT"]
    with servingsnap.open(ds) as snap:
        f = snap.index.schema.field("frequency")
        assert f.type == pa.int8() and b"servingsnap.dictionary" in f.metadata
        assert snap.index.schema.field("series_id").type == pa.string()
        assert snap.latest()["frequency"].type == pa.string()
    copy = tmp_path / "HOT"
    shutil.copytree(ds, copy)
    path = next((copy / "snapshots").glob("*/index.arrow"))
    raw = bytearray(path.read_bytes())
    buf = pa.py_buffer(bytes(raw))
    codes = pa.ipc.open_file(buf).get_batch(0).column("frequency")
    at = codes.buffers()[1].address - buf.address + codes.offset
    raw[at + 5] = 120
    path.chmod(0o644)
    path.write_bytes(bytes(raw))
    with servingsnap.open(copy) as snap:
        assert snap.series(snap.ids()[0].as_py()).num_rows > 0  # no attribute: no check
        with pytest.raises(servingsnap.CorruptSnapshot, match="frequency"):
            snap.latest()
