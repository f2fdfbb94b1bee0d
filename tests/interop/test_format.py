"""FORMAT.md §1-4 read with pyarrow: layout, manifest, schemas, zero-copy,
batching. Run over the generated, EIA and nasty snapshots."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import snaplib
from snaplib import ARROW_TYPE_NAMES, DATA_FIXED, INDEX_FIXED, INDEX_LOOKUP


def test_dataset_layout(built):
    ds = built.dataset_dir
    assert (ds / "CURRENT").read_bytes() == b"manifests/000001.json\n"
    assert (ds / "LOCK").is_file() and (ds / "LOCK").stat().st_size == 0
    assert sorted(p.name for p in (ds / "manifests").iterdir()) == ["000001.json"]
    assert sorted(p.name for p in (ds / "snapshots").iterdir()) == ["000001"]
    assert sorted(p.name for p in (ds / "snapshots" / "000001").iterdir()) == ["data.arrow", "index.arrow"]
    tmp = ds / ".tmp"
    assert not tmp.exists() or list(tmp.iterdir()) == [], "a finished build leaves nothing in .tmp/"
    assert not (ds / "CURRENT.tmp").exists()


def test_manifest_fields(built):
    snap = built.snap
    m = snap.manifest
    ds = built.dataset_dir
    assert m["snapshot_id"] == 1 and m["parent_id"] == 0
    assert m["dataset"] == ds.name
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z", m["created"]), m["created"]
    assert m["tool"].startswith("servingsnap "), m["tool"]
    assert m["wal_position"] == 0

    files = {f["role"]: f for f in m["files"]}
    assert sorted(files) == ["data", "index"] and len(m["files"]) == 2
    assert files["data"]["path"] == "snapshots/000001/data.arrow"
    assert files["index"]["path"] == "snapshots/000001/index.arrow"
    assert files["data"]["tier"] == "hot" and files["index"]["tier"] == ""
    data_r, index_r = snap.data_reader(), snap.index_reader()
    for role, reader in [("data", data_r), ("index", index_r)]:
        f = files[role]
        p = ds / f["path"]
        assert f["format"] == "arrow-ipc-file"
        assert f["size"] == p.stat().st_size
        assert f["checksum"] == snaplib.xxh64_file(p)
        assert re.fullmatch(r"xxh64:[0-9a-f]{16}", f["checksum"])
        assert f["batches"] == reader.num_record_batches
        assert f["rows"] == reader.read_all().num_rows

    st = m["stats"]
    assert st["rows"] == files["data"]["rows"]
    assert st["series"] == files["index"]["rows"]
    assert st["duplicates_dropped"] == 0

    b = m["build"]
    assert (b["series_column"], b["period_column"], b["value_column"]) == ("series_id", "period", "value")
    assert b["on_duplicate"] == "error"
    assert b["batch_rows"] == built.batch_rows

    lin = m["lineage"]
    assert lin["kind"] == "parquet"
    assert lin["source"] == str(built.lake)
    assert lin["lake_snapshot_id"] == ""
    inputs = snaplib.parquet_files(built.lake)
    assert sorted(i["path"] for i in lin["inputs"]) == sorted(
        p.relative_to(built.lake).as_posix() for p in inputs
    )
    for i in lin["inputs"]:
        p = built.lake / i["path"]
        assert i["size"] == p.stat().st_size, i["path"]
        assert i["rows"] == pq.ParquetFile(p).metadata.num_rows, i["path"]
        assert i["checksum"] == snaplib.xxh64_file(p), i["path"]


def test_json_report(built):
    r = built.report
    m = built.snap.manifest
    for k in ["snapshot_id", "parent_id", "dataset", "manifest", "rows", "series",
              "duplicates_dropped", "files", "index_data_ratio", "phases", "seconds"]:
        assert k in r, f"--json output lacks {k}: {sorted(r)}"
    assert (r["snapshot_id"], r["parent_id"], r["dataset"]) == (1, 0, built.dataset_dir.name)
    assert (r["rows"], r["series"], r["duplicates_dropped"]) == (
        m["stats"]["rows"], m["stats"]["series"], 0)
    mp = Path(r["manifest"])
    candidates = [mp] if mp.is_absolute() else [built.dataset_dir / mp, Path.cwd() / mp]
    assert any(c.is_file() and os.path.samefile(c, built.snap.manifest_path) for c in candidates), (
        f"--json manifest {r['manifest']!r} does not name {built.snap.manifest_path}")
    got = sorted((f["role"], f["size"], Path(f["path"]).name) for f in r["files"])
    want = sorted((f["role"], f["size"], Path(f["path"]).name) for f in m["files"])
    assert got == want
    sizes = {f["role"]: f["size"] for f in m["files"]}
    assert r["index_data_ratio"] == pytest.approx(sizes["index"] / sizes["data"], rel=1e-3)
    assert isinstance(r["phases"], dict) and r["phases"], r["phases"]
    assert all(isinstance(v, (int, float)) and v >= 0 for v in r["phases"].values())
    assert r["seconds"] >= 0


def _check_schema(schema: pa.Schema, fixed: list, manifest_cols: list[dict], role: str):
    md = schema.metadata or {}
    assert md.get(b"servingsnap.file") == role.encode()
    # FORMAT.md "Versions": data.arrow is still version 1, index.arrow version 5
    assert md.get(b"servingsnap.format_version") == (b"1" if role == "data" else b"5")
    assert len(schema) >= len(fixed), f"{role}: {schema.names} lacks fixed columns"
    for (name, typ, nullable), field in zip(fixed, schema):
        assert (field.name, field.type, field.nullable) == (name, typ, nullable), f"{role}.{name}"
    for field in schema:
        assert not pa.types.is_large_string(field.type) and not pa.types.is_string_view(field.type)
    # the manifest describes the file's real schema
    assert [c["name"] for c in manifest_cols] == schema.names
    for c, field in zip(manifest_cols, schema):
        assert c["nullable"] == field.nullable, c
        if field.type in ARROW_TYPE_NAMES:
            assert c["type"] == ARROW_TYPE_NAMES[field.type], (c, field.type)
    dicts = [f.name for f in schema if snaplib.is_dictionary_anywhere(f.type)]
    if role == "data":
        assert not dicts, f"data: dictionary-encoded fields {dicts} (FORMAT.md §3: no dictionaries)"
    else:
        # FORMAT.md §4: an index since version 2 holds no dictionaries (it is mapped;
        # version 1 allowed string attribute columns as dictionaries; version 4's code
        # columns are plain integers)
        assert not dicts, f"index: dictionary-encoded fields {dicts} (FORMAT.md §4)"


def test_schemas(built):
    snap = built.snap
    m = snap.manifest
    data_schema = snap.data_reader().schema
    index_schema = snap.index_reader().schema

    _check_schema(data_schema, DATA_FIXED, m["schema"]["data"], "data")
    assert data_schema.names[2] == "value" and data_schema.field("value").nullable
    assert all(f.nullable for f in list(data_schema)[2:]), "value and extra columns are nullable"
    vtype = data_schema.field("value").type

    _check_schema(index_schema, INDEX_FIXED + [("latest_value", vtype, True)] + INDEX_LOOKUP,
                  m["schema"]["index"], "index")
    attrs = m["schema"]["attributes"]
    assert index_schema.names[len(INDEX_FIXED) + 1 + len(INDEX_LOOKUP):] == attrs
    index = snap.index_reader().read_all()
    for name in attrs:
        f = index.schema.field(name)
        if snaplib.is_code_field(f):
            # FORMAT.md §4, version 4: int8/int16 codes into a JSON array of distinct
            # values sorted bytewise; a null row's code is 0
            assert f.type in (pa.int8(), pa.int16()), (name, f.type)
            values = json.loads(f.metadata[snaplib.META_DICTIONARY])
            assert all(isinstance(v, str) for v in values), name
            assert values == sorted(set(values), key=lambda v: v.encode()), f"{name}: values not sorted bytewise, or repeated"
            codes = index[name].combine_chunks()
            valid = pc.drop_null(codes).to_pylist()
            assert all(0 <= c < len(values) for c in valid), f"{name}: a code outside its {len(values)} values"
    assert all(index_schema.field(a).nullable for a in attrs)
    assert not set(attrs) & set(data_schema.names), "an attribute must not stay in the data file"
    assert "series_id" not in data_schema.names


def test_generated_lake_columns(gen_built):
    """gen writes units/frequency/name/category constant per series: all four
    are attributes, in input order, and the data file keeps only the keys."""
    snap = gen_built.snap
    assert snap.data_reader().schema.names == ["series_code", "period", "value"]
    schema = pq.read_schema(snaplib.parquet_files(gen_built.lake)[0])
    want = [n for n in schema.names if n not in ("series_id", "period", "value")]
    assert snap.manifest["schema"]["attributes"] == want
    assert set(want) >= {"units", "frequency", "name", "category"}


def test_memory_map_is_zero_copy(built):
    """No compression, no dictionaries, aligned buffers: pyarrow reading the
    mapped files allocates (almost) nothing and every buffer points into the map."""
    snap = built.snap
    for path in [snap.data_path, snap.index_path]:
        size = path.stat().st_size
        mm = pa.memory_map(str(path))
        whole = mm.read_buffer(size)
        base = whole.address
        before = pa.total_allocated_bytes()
        table = pa.ipc.open_file(mm).read_all()
        allocated = pa.total_allocated_bytes() - before
        assert allocated < 64 * 1024, f"{path.name}: reading allocated {allocated} bytes of {size}"
        for col in table.columns:
            for chunk in col.chunks:
                for buf in chunk.buffers():
                    if buf is not None and buf.size:
                        assert base <= buf.address and buf.address + buf.size <= base + size, (
                            f"{path.name}.{col}: a buffer lies outside the mapped file (copied)")
        del table


def test_index_one_batch_and_data_batches(built):
    snap = built.snap
    assert snap.index_reader().num_record_batches == 1
    index = snap.index()
    batches = snap.data_batches()
    limit = snap.manifest["build"]["batch_rows"]
    assert limit == built.batch_rows
    if built.batch_rows == snaplib.DEFAULT_BATCH_ROWS:
        assert len(batches) == 1  # the EIA lake is far below the default target
    else:
        # gen: ~44 batches; nasty: small series, the 100k-row series alone, small series
        assert len(batches) >= 3, "the small --batch-rows must produce several batches"

    seen: dict[int, int] = {}
    for bi, b in enumerate(batches):
        codes = pc.unique(b.column("series_code")).to_pylist()
        if b.num_rows > limit:
            assert len(codes) == 1, f"batch {bi}: {b.num_rows} rows > {limit} but {len(codes)} series"
        for c in codes:
            assert c not in seen, f"series_code {c} in batches {seen[c]} and {bi}"
            seen[c] = bi
    assert len(seen) == index.num_rows
    for code, (bi, boff, n) in enumerate(zip(index["batch"].to_pylist(),
                                            index["batch_offset"].to_pylist(),
                                            index["row_count"].to_pylist())):
        assert seen[code] == bi
        part = batches[bi].column("series_code").slice(boff, n)
        assert len(part) == n and pc.all(pc.equal(part, code)).as_py()

    # the packing is not degenerate: a series only starts a new batch when
    # adding it would overflow the current one (no empty or needlessly tiny batches).
    sizes = [b.num_rows for b in batches]
    assert all(s > 0 for s in sizes), sizes
    first_len = {}
    for bi, n in zip(index["batch"].to_pylist(), index["row_count"].to_pylist()):
        first_len.setdefault(bi, n)
    for bi in range(len(batches) - 1):
        if sizes[bi] <= limit:
            assert sizes[bi] + first_len[bi + 1] > limit, (
                f"batch {bi} ({sizes[bi]} rows) was cut though its next series "
                f"({first_len[bi + 1]} rows) fits under {limit}")


def test_data_sorted_unique(built):
    data = built.snap.data()
    if data.num_rows < 2:
        return
    code = data["series_code"].cast(pa.int64())
    per = data["period"].cast(pa.int32()).cast(pa.int64())
    dc = pc.pairwise_diff(code.combine_chunks())[1:]
    dp = pc.pairwise_diff(per.combine_chunks())[1:]
    ok = pc.or_(pc.greater(dc, 0), pc.and_(pc.equal(dc, 0), pc.greater(dp, 0)))
    assert pc.all(ok).as_py(), "data rows are not strictly increasing in (series_code, period)"
