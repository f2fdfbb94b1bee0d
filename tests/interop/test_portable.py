"""`snapbuild build --portable` read by engines on their own: DuckDB (no
extension, offline) and pyarrow read portable.parquet into exactly the rows
of the all-Arrow snapshot, and a one-series query reads only the row
group(s) holding that series. `snapbuild publish-copy` puts the file and
its sidecar in a directory and on S3 (internal/fakes3).

Written from docs/FORMAT.md ("portable.parquet") and docs/CLI.md.
"""

from __future__ import annotations

import json

import duckdb
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

import lakelib
import snaplib

ROW_GROUP_ROWS = 20000


@pytest.fixture(scope="module")
def portable(snapbuild, tmp_path_factory):
    d = tmp_path_factory.mktemp("portable")
    lake = d / "lake"
    snaplib.run_ok(snapbuild, "gen", "--out", lake, "--series", 3000, "--seed", 7)
    ds = d / "root" / "gen"
    report = snaplib.build(snapbuild, lake, ds, "--batch-rows", 1000, "--portable",
                           "--portable-row-group-rows", ROW_GROUP_ROWS)
    snap = snaplib.open_current(ds)
    entry = snap.file_entry("portable")
    return ds, snap, entry, ds / entry["path"], report


def offline_duckdb():
    con = duckdb.connect()
    # Parquet is built into DuckDB: nothing may be installed or loaded.
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    return con


def test_manifest_lists_the_portable_copy(portable):
    ds, snap, entry, path, report = portable
    assert entry["format"] == "parquet" and entry["tier"] == "", entry
    assert entry["size"] == path.stat().st_size
    assert entry["checksum"] == snaplib.xxh64_file(path)
    assert entry["rows"] == snap.manifest["stats"]["rows"]
    assert entry["batches"] == pq.ParquetFile(path).metadata.num_row_groups > 1
    assert any(f["role"] == "portable" for f in report["files"]), report["files"]


def test_duckdb_reads_the_snapshots_rows(portable):
    ds, snap, entry, path, _ = portable
    t = offline_duckdb().sql(f"SELECT * FROM read_parquet({snaplib.ql(str(path))})").to_arrow_table()
    cols = t.column_names
    assert cols[:3] == ["series_id", "period", "value"], cols
    assert set(cols) == {"series_id", "period", "value", *snap.manifest["schema"]["attributes"]}, cols
    want = lakelib.snapshot_rows(ds, cols)
    got = lakelib.rows_of_table(t, cols)
    assert len(got) == len(want) == snap.manifest["stats"]["rows"]
    assert got == want


def test_layout_metadata(portable):
    """Sorted by (series_id, period), said in sorting_columns; row groups in
    series order with disjoint series_id ranges; statistics everywhere."""
    _, _, _, path, _ = portable
    md = pq.ParquetFile(path).metadata
    prev_max = None
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        assert [(c.column_index, c.descending) for c in rg.sorting_columns] == [(0, False), (1, False)]
        st = rg.column(0).statistics
        assert st is not None and st.has_min_max
        assert prev_max is None or st.min > prev_max, (g, st.min, prev_max)
        prev_max = st.max
        assert all(rg.column(c).compression == "ZSTD" for c in range(rg.num_columns))


class CountingFile:
    """A read-only file that counts the bytes read through it."""

    def __init__(self, path):
        self.f = open(path, "rb")
        self.bytes = 0

    def read(self, n=-1):
        b = self.f.read(n)
        self.bytes += len(b)
        return b

    def seek(self, off, whence=0):
        return self.f.seek(off, whence)

    def tell(self):
        return self.f.tell()

    def seekable(self):
        return True

    def readable(self):
        return True

    def close(self):
        self.f.close()

    @property
    def closed(self):
        return self.f.closed


def test_one_series_reads_only_its_row_group(portable):
    ds, snap, entry, path, _ = portable
    size = path.stat().st_size
    ids = snap.index().column("series_id").to_pylist()
    sid = ids[len(ids) // 2]
    want = [r for r in lakelib.snapshot_rows(ds, ["series_id", "period", "value"]) if r["series_id"] == sid]
    assert want

    # DuckDB's own view of the file: exactly one row group's series_id
    # range contains the series.
    con = offline_duckdb()
    groups = con.execute(
        f"SELECT row_group_id FROM parquet_metadata({snaplib.ql(str(path))}) "
        "WHERE path_in_schema = 'series_id' AND stats_min_value <= ? AND stats_max_value >= ?",
        [sid, sid]).fetchall()
    assert len(groups) == 1, groups
    got = con.sql(f"SELECT series_id, period, value FROM read_parquet({snaplib.ql(str(path))}) WHERE series_id = {snaplib.ql(sid)}").to_arrow_table()
    assert lakelib.rows_of_table(got) == want

    # pyarrow over a byte-counting file: the footer (pyarrow reads the
    # file's last 64 KiB for it), then only the column chunks of the one
    # row group holding the series.
    cols = ["series_id", "period", "value"]
    md = pq.ParquetFile(path).metadata
    names = [md.schema.column(c).name for c in range(md.num_columns)]
    (g,) = groups[0]
    chunk_bytes = sum(md.row_group(g).column(names.index(c)).total_compressed_size for c in cols)
    f = CountingFile(path)
    fmt = pads.ParquetFileFormat(default_fragment_scan_options=pads.ParquetFragmentScanOptions(pre_buffer=False))
    frag = fmt.make_fragment(pa.PythonFile(f, mode="r"))
    (one,) = frag.split_by_row_group(filter=pads.field("series_id") == sid)
    assert one.row_groups[0].id == g
    footer = f.bytes
    t = frag.to_table(filter=pads.field("series_id") == sid, columns=cols)
    assert lakelib.rows_of_table(t) == want
    scanned = f.bytes - footer
    print(f"\none-series read: {f.bytes} of {size} bytes ({100 * f.bytes / size:.1f}%): footer {footer}, "
          f"row group {g} of {md.num_row_groups} {scanned} (its chunks: {chunk_bytes})")
    assert scanned <= chunk_bytes + 4096, (scanned, chunk_bytes)
    assert f.bytes < size / 10, (f.bytes, size)


def test_snapverify_deep_reads_the_copy(portable):
    ds, _, _, _, _ = portable
    exe = snaplib.REPO / "bin" / "snapverify"
    p = snaplib.run(exe, "--deep", "--json", ds)
    rep = json.loads(p.stdout)
    assert p.returncode == 0 and rep["ok"], p.stdout


def test_publish_copy_to_a_directory(snapbuild, portable, tmp_path):
    ds, snap, entry, path, _ = portable
    out = tmp_path / "pub"
    side = json.loads(snaplib.run_ok(snapbuild, "publish-copy", ds, "--to", out, "--json").stdout)
    sid = snap.manifest["snapshot_id"]
    assert side["snapshot_id"] == sid and side["checksum"] == entry["checksum"] and side["rows"] == entry["rows"]
    assert json.loads((out / "gen" / "portable.json").read_text()) == side
    copied = out / "gen" / side["path"]
    assert snaplib.xxh64_file(copied) == entry["checksum"]
    n = offline_duckdb().execute(f"SELECT count(*) FROM read_parquet({snaplib.ql(str(copied))})").fetchone()[0]
    assert n == entry["rows"]


def test_publish_copy_refuses_a_snapshot_without_one(snapbuild, gen_built, tmp_path):
    p = snaplib.run(snapbuild, "publish-copy", gen_built.dataset_dir, "--to", tmp_path / "pub")
    assert p.returncode == 1 and "--portable" in p.stderr, (p.returncode, p.stderr)


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with lakelib.fake_s3(tmp_path_factory.mktemp("fakes3"), "pub") as url:
        yield url


def test_publish_copy_to_s3(snapbuild, portable, s3):
    ds, snap, entry, path, _ = portable
    side = json.loads(snaplib.run_ok(snapbuild, "publish-copy", ds, "--to", "s3://pub/copies",
                                     "--s3-endpoint", s3, "--json").stdout)
    fs = pafs.S3FileSystem(endpoint_override=s3, scheme="http", access_key="test", secret_key="test",
                           region="us-east-1")
    got = json.loads(fs.open_input_file("pub/copies/gen/portable.json").read())
    assert got == side
    t = pq.read_table(f"pub/copies/gen/{side['path']}", filesystem=fs)
    want = pq.read_table(path)
    assert t.equals(want)
