"""Shared helpers of the interop suite: running snapbuild, opening a snapshot
the way docs/FORMAT.md says a reader must, and computing the reference answer
with DuckDB.

Everything here is written from docs/FORMAT.md alone, never from the Go code.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import subprocess
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import xxhash

REPO = Path(__file__).resolve().parents[2]

DEFAULT_BATCH_ROWS = 1_048_576

# §3: the fixed leading columns of data.arrow.
DATA_FIXED = [
    ("series_code", pa.uint32(), False),
    ("period", pa.date32(), False),
]
# §4: the fixed leading columns of index.arrow (latest_value's type is the
# value column's type, filled in per snapshot).
INDEX_FIXED = [
    ("series_id", pa.string(), False),
    ("row_offset", pa.int64(), False),
    ("row_count", pa.int64(), False),
    ("batch", pa.uint32(), False),
    ("batch_offset", pa.uint32(), False),
    ("first_period", pa.date32(), False),
    ("last_period", pa.date32(), False),
    ("latest_period", pa.date32(), True),
]
# §4, version 5: the lookup table, after latest_value (and a tiered index's
# cold_* columns), before the attributes.
INDEX_LOOKUP = [
    ("lookup_start", pa.uint32(), False),
    ("lookup_code", pa.uint32(), False),
]

# Arrow's type names as the manifest spells them (§2 "schema.data").
ARROW_TYPE_NAMES = {
    pa.uint32(): "uint32",
    pa.int32(): "int32",
    pa.int64(): "int64",
    pa.date32(): "date32",
    pa.float64(): "float64",
    pa.float32(): "float32",
    pa.string(): "utf8",
    pa.bool_(): "bool",
}


# --------------------------------------------------------------------------
# running the CLI


def run(exe: Path, *args, cwd=None, timeout=300) -> subprocess.CompletedProcess:
    """Run snapbuild, never raising on a non-zero exit."""
    return subprocess.run(
        [str(exe), *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_ok(exe: Path, *args, cwd=None) -> subprocess.CompletedProcess:
    p = run(exe, *args, cwd=cwd)
    assert p.returncode == 0, (
        f"snapbuild {' '.join(map(str, args))} exited {p.returncode}\n"
        f"stderr:\n{p.stderr}\nstdout:\n{p.stdout[:2000]}"
    )
    return p


def build(exe: Path, input_dir, out, *extra) -> dict:
    """`snapbuild build --json`; returns the parsed JSON report."""
    p = run_ok(exe, "build", "--input", input_dir, "--out", out, "--json", *extra)
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError as e:  # pragma: no cover - reported as failure
        raise AssertionError(f"--json output is not one JSON object: {e}\n{p.stdout[:2000]}")


# --------------------------------------------------------------------------
# reading a snapshot (the reader side of FORMAT.md)

CURRENT_RE = re.compile(r"manifests/([0-9]{6,})\.json\n")


@dataclasses.dataclass
class Snapshot:
    dataset_dir: Path
    manifest_path: Path
    manifest: dict
    data_path: Path
    index_path: Path

    def file_entry(self, role: str) -> dict:
        entries = [f for f in self.manifest["files"] if f["role"] == role]
        assert len(entries) == 1, f"expected one {role} file in manifest, got {entries}"
        return entries[0]

    def data_reader(self) -> pa.ipc.RecordBatchFileReader:
        return pa.ipc.open_file(pa.memory_map(str(self.data_path)))

    def index_reader(self) -> pa.ipc.RecordBatchFileReader:
        return pa.ipc.open_file(pa.memory_map(str(self.index_path)))

    def data(self) -> pa.Table:
        return self.data_reader().read_all()

    def index(self) -> pa.Table:
        """The index with every code column (FORMAT.md §4, version 4) turned back into the
        attribute's strings, as the snippet in FORMAT.md §3 does: what the index says."""
        return decode_codes(self.index_stored())

    def index_stored(self) -> pa.Table:
        """The index as stored (a version-4 code column reads as its int8/int16 codes)."""
        return self.index_reader().read_all()

    def data_batches(self) -> list[pa.RecordBatch]:
        r = self.data_reader()
        return [r.get_batch(i) for i in range(r.num_record_batches)]


def open_current(dataset_dir: Path) -> Snapshot:
    current = (dataset_dir / "CURRENT").read_bytes().decode("utf-8")
    m = CURRENT_RE.fullmatch(current)
    assert m, f"CURRENT must be one line 'manifests/NNNNNN.json\\n', got {current!r}"
    return open_manifest(dataset_dir, dataset_dir / current.rstrip("\n"))


def open_manifest(dataset_dir: Path, manifest_path: Path) -> Snapshot:
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    assert manifest.get("format") == "servingsnap.manifest", manifest.get("format")
    # FORMAT.md "Versions": builds write 5 (tiered or not); 1 to 4 are
    # still valid (older) snapshots
    assert manifest.get("format_version") in (1, 2, 3, 4, 5), manifest.get("format_version")
    snap = Snapshot(dataset_dir, manifest_path, manifest, None, None)  # type: ignore[arg-type]
    snap.data_path = dataset_dir / snap.file_entry("data")["path"]
    snap.index_path = dataset_dir / snap.file_entry("index")["path"]
    return snap


META_DICTIONARY = b"servingsnap.dictionary"


def is_code_field(f: pa.Field) -> bool:
    """A version-4 code column: int8/int16 codes whose values are in the field's metadata."""
    return bool(f.metadata) and META_DICTIONARY in f.metadata


def decode_codes(index: pa.Table) -> pa.Table:
    """index with each code column replaced by the attribute's strings (utf8)."""
    for i, f in enumerate(index.schema):
        if not is_code_field(f):
            continue
        values = pa.array(json.loads(f.metadata[META_DICTIONARY]), pa.string())
        codes = index.column(i).combine_chunks()
        strings = pa.DictionaryArray.from_arrays(codes, values).dictionary_decode()
        index = index.set_column(i, pa.field(f.name, pa.string(), f.nullable), strings)
    return index


def xxh64_file(path: Path) -> str:
    h = xxhash.xxh64(seed=0)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "xxh64:" + h.hexdigest()


def is_dictionary_anywhere(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return True
    return any(is_dictionary_anywhere(t.field(i).type) for i in range(t.num_fields))


def batch_bounds(batches: list[pa.RecordBatch]) -> list[tuple[int, int]]:
    """(start row, end row) of each batch over the whole file."""
    out, start = [], 0
    for b in batches:
        out.append((start, start + b.num_rows))
        start += b.num_rows
    return out


def utf8_sorted_strictly(ids: list[str]) -> bool:
    enc = [s.encode("utf-8") for s in ids]
    return all(a < b for a, b in zip(enc, enc[1:]))


# --------------------------------------------------------------------------
# the DuckDB reference
#
# Period normalisation is done IN SQL (PERIOD_SQL below), on the period cast
# to VARCHAR. DuckDB's union_by_name unifies mixed period types across files
# to VARCHAR; a DATE renders as 'YYYY-MM-DD', a TIMESTAMP as
# 'YYYY-MM-DD HH:MM:SS[.ffffff]' (its wall-clock date is the first ten
# characters, which is exactly FORMAT.md's "date of the wall-clock value"),
# (a UTC-adjusted TIMESTAMPTZ renders in the session zone, pinned to UTC, with
# a '+00' suffix), and an integer as its decimal digits (FORMAT.md: "integers are read as their
# decimal digits, as strings"). Every accepted text form then has its own
# WHEN; anything else raises, so a fixture with a period the reference cannot
# read fails loudly instead of comparing NULLs.


def period_sql(p: str) -> str:
    y = f"CAST(substr({p}, 1, 4) AS INTEGER)"
    return f"""(CASE
      WHEN regexp_full_match({p}, '[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}( [0-9]{{2}}:[0-9]{{2}}:[0-9]{{2}}(\\.[0-9]+)?(\\+00(:00)?)?)?')
        THEN make_date({y}, CAST(substr({p}, 6, 2) AS INTEGER), CAST(substr({p}, 9, 2) AS INTEGER))
      WHEN regexp_full_match({p}, '[0-9]{{8}}')
        THEN make_date({y}, CAST(substr({p}, 5, 2) AS INTEGER), CAST(substr({p}, 7, 2) AS INTEGER))
      WHEN regexp_full_match({p}, '[0-9]{{4}}-[0-9]{{2}}')
        THEN make_date({y}, CAST(substr({p}, 6, 2) AS INTEGER), 1)
      WHEN regexp_full_match({p}, '[0-9]{{6}}')
        THEN make_date({y}, CAST(substr({p}, 5, 2) AS INTEGER), 1)
      WHEN regexp_full_match({p}, '[0-9]{{4}}-?Q[1-4]')
        THEN make_date({y}, 3 * (CAST(right({p}, 1) AS INTEGER) - 1) + 1, 1)
      WHEN regexp_full_match({p}, '[0-9]{{4}}-W[0-9]{{2}}')
        -- Monday of ISO week 1 is the Monday of the week holding January 4th.
        THEN make_date({y}, 1, 4) - CAST(isodow(make_date({y}, 1, 4)) - 1 AS INTEGER)
             + CAST(7 * (CAST(right({p}, 2) AS INTEGER) - 1) AS INTEGER)
      WHEN regexp_full_match({p}, '[0-9]{{4}}')
        THEN make_date({y}, 1, 1)
      ELSE error('reference cannot normalise period ' || coalesce({p}, 'NULL'))
    END)"""


def qi(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def ql(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


@dataclasses.dataclass
class Reference:
    columns: list[str]  # non-key input columns, DuckDB union order
    attributes: list[str]  # constant within every series
    varying: list[str]  # the rest
    input_types: dict[str, pa.DataType]  # per non-key column, from the Parquet schemas
    value_type: pa.DataType
    rows: pa.Table  # series_id, period, value, varying..., sorted bytewise
    index: pa.Table  # series_id, row_offset, row_count, first/last/latest..., attributes
    stats: dict


def parquet_files(lake: Path) -> list[Path]:
    return sorted(p for p in lake.rglob("*.parquet") if p.is_file())


def input_arrow_types(files: list[Path]) -> dict[str, pa.DataType]:
    types: dict[str, pa.DataType] = {}
    for f in files:
        for field in pq.read_schema(f):
            t = field.type
            if pa.types.is_large_string(t) or pa.types.is_string_view(t):
                t = pa.string()
            prev = types.setdefault(field.name, t)
            assert prev == t or field.name == "period", (
                f"fixture bug: column {field.name} is {prev} and {t} in different files"
            )
    return types


def duck_reference(
    lake: Path,
    series_col: str = "series_id",
    period_col: str = "period",
    value_col: str = "value",
) -> Reference:
    files = parquet_files(lake)
    assert files, f"no parquet files under {lake}"
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")  # TIMESTAMPTZ → VARCHAR renders in UTC
    file_list = "[" + ", ".join(ql(str(f)) for f in files) + "]"
    con.execute(
        f"CREATE TEMP VIEW src AS SELECT * FROM read_parquet({file_list}, "
        f"union_by_name = true, hive_partitioning = false)"
    )
    all_cols = [r[0] for r in con.sql("DESCRIBE src").fetchall()]
    keys = {series_col, period_col, value_col}
    others = [c for c in all_cols if c not in keys]
    sel_others = "".join(f", {qi(c)}" for c in others)
    con.execute(
        f"""CREATE TEMP TABLE norm AS SELECT
              {qi(series_col)} AS series_id,
              {period_sql(f'CAST({qi(period_col)} AS VARCHAR)')} AS period,
              {qi(value_col)} AS value{sel_others}
            FROM src"""
    )
    dups = con.sql(
        "SELECT count(*) FROM (SELECT series_id, period FROM norm GROUP BY ALL HAVING count(*) > 1)"
    ).fetchall()[0][0]
    assert dups == 0, "fixture bug: the reference lake has duplicate (series_id, period)"

    attributes, varying = [], []
    for c in others:
        const = con.sql(
            f"""SELECT coalesce(bool_and(n <= 1), true) FROM (
                  SELECT count(DISTINCT {qi(c)}) + CAST(count(*) > count({qi(c)}) AS INTEGER) AS n
                  FROM norm GROUP BY series_id)"""
        ).fetchall()[0][0]
        (attributes if const else varying).append(c)

    rows = con.sql(
        "SELECT series_id, period, value"
        + "".join(f", {qi(c)}" for c in varying)
        + " FROM norm ORDER BY encode(series_id), period"
    ).to_arrow_table()

    attr_sel = "".join(f", any_value({qi(c)}) AS {qi(c)}" for c in attributes)
    index = con.sql(
        f"""WITH per AS (
              SELECT series_id,
                     count(*) AS row_count,
                     min(period) AS first_period,
                     max(period) AS last_period,
                     max(period) FILTER (WHERE value IS NOT NULL) AS latest_period,
                     arg_max(value, period) FILTER (WHERE value IS NOT NULL) AS latest_value
                     {attr_sel}
              FROM norm GROUP BY series_id)
            SELECT series_id,
                   CAST(coalesce(sum(row_count) OVER (ORDER BY encode(series_id)
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS BIGINT) AS row_offset,
                   row_count, first_period, last_period, latest_period, latest_value
                   {''.join(f', {qi(c)}' for c in attributes)}
            FROM per ORDER BY encode(series_id)"""
    ).to_arrow_table()

    r, s, lo, hi = con.sql(
        "SELECT count(*), count(DISTINCT series_id), min(period), max(period) FROM norm"
    ).fetchall()[0]
    stats = {
        "rows": r,
        "series": s,
        "first_period": lo.isoformat() if lo else "",
        "last_period": hi.isoformat() if hi else "",
    }
    itypes = input_arrow_types(files)
    return Reference(
        columns=others,
        attributes=attributes,
        varying=varying,
        input_types={c: itypes[c] for c in others},
        value_type=itypes[value_col],
        rows=rows,
        index=index,
        stats=stats,
    )


# --------------------------------------------------------------------------
# comparing


def assert_column_equal(what: str, actual, expected) -> None:
    """Equal values (nulls equal), with the first mismatch in the message."""
    if isinstance(actual, pa.ChunkedArray):
        actual = actual.combine_chunks()
    if isinstance(expected, pa.ChunkedArray):
        expected = expected.combine_chunks()
    if pa.types.is_dictionary(actual.type):  # a format bug, reported by the type checks
        actual = actual.dictionary_decode()
    if expected.type != actual.type:
        expected = expected.cast(actual.type)
    assert len(actual) == len(expected), f"{what}: {len(actual)} rows, want {len(expected)}"
    if actual.equals(expected):
        return
    a, e = actual.to_pylist(), expected.to_pylist()
    for i, (x, y) in enumerate(zip(a, e)):
        if x != y:
            raise AssertionError(f"{what}: row {i}: got {x!r}, want {y!r}")
    raise AssertionError(f"{what}: arrays differ but no element mismatch found")


def lookup(index, series_id):
    """FORMAT.md §4's lookup through a version-5 index's table, as printed
    there: the code whose id is series_id, or None."""
    n, ids, start, code = index.num_rows, index["series_id"], index["lookup_start"], index["lookup_code"]
    b = ((xxhash.xxh64_intdigest(series_id.encode()) >> 32) * n) >> 32
    lo, hi = start[b].as_py(), start[b + 1].as_py() if b + 1 < n else n
    return next((c for c in code[lo:hi].to_pylist() if ids[c].as_py() == series_id), None)


def assert_lookup_table(index) -> None:
    """A version-5 index's lookup table, rebuilt here from the ids with the
    reference XXH64 (the xxhash package): the same two columns, and every
    id found at its row by FORMAT.md's lookup."""
    n = index.num_rows
    ids = index["series_id"].to_pylist()
    buckets = [((xxhash.xxh64_intdigest(i.encode()) >> 32) * n) >> 32 for i in ids]
    code = sorted(range(n), key=lambda c: (buckets[c], c))
    counts = [0] * n
    for b in buckets:
        counts[b] += 1
    start, at = [], 0
    for c in counts:
        start.append(at)
        at += c
    assert index["lookup_code"].to_pylist() == code, "lookup_code is not the codes ordered by (bucket, code)"
    assert index["lookup_start"].to_pylist() == start, "lookup_start is not each bucket's first row"
    for i in range(0, n, max(1, n // 200)):
        assert lookup(index, ids[i]) == i, ids[i]
    assert lookup(index, "\u0000not an id") is None


def assert_matches_reference(snap: Snapshot, ref: Reference) -> None:
    data = snap.data()
    index = snap.index()
    batches = snap.data_batches()

    # which columns went where
    assert set(snap.manifest["schema"]["attributes"]) == set(ref.attributes), (
        f"attributes {snap.manifest['schema']['attributes']}, want (as a set) {ref.attributes}"
    )
    assert index.schema.names == [n for n, _, _ in INDEX_FIXED] + ["latest_value"] + [
        n for n, _, _ in INDEX_LOOKUP] + snap.manifest["schema"]["attributes"]
    assert_lookup_table(index)
    assert data.schema.names[:3] == ["series_code", "period", "value"]
    assert set(data.schema.names[3:]) == set(ref.varying), (
        f"data columns {data.schema.names[3:]}, want (as a set) {ref.varying}"
    )
    # the index, field by field
    assert index.num_rows == ref.index.num_rows
    ids = index["series_id"].to_pylist()
    assert utf8_sorted_strictly(ids), "index.series_id is not strictly increasing bytewise"
    for name in ["series_id", "row_offset", "row_count", "first_period", "last_period",
                 "latest_period", "latest_value", *ref.attributes]:
        assert_column_equal(f"index.{name}", index[name], ref.index[name])
    bounds = batch_bounds(batches)
    want_batch, want_boff = [], []
    for off in index["row_offset"].to_pylist():
        b = next(i for i, (lo, hi) in enumerate(bounds) if lo <= off < hi)
        want_batch.append(b)
        want_boff.append(off - bounds[b][0])
    assert_column_equal("index.batch", index["batch"], pa.array(want_batch, pa.uint32()))
    assert_column_equal("index.batch_offset", index["batch_offset"], pa.array(want_boff, pa.uint32()))

    # the data, row by row, joined to the index through series_code
    assert data.num_rows == ref.rows.num_rows
    codes = []
    for i, n in enumerate(ref.index["row_count"].to_pylist()):
        codes.extend([i] * n)
    assert_column_equal("data.series_code", data["series_code"], pa.array(codes, pa.uint32()))
    joined_ids = pc.take(index["series_id"], data["series_code"])
    assert_column_equal("data series_id via index", joined_ids, ref.rows["series_id"])
    for name in ["period", "value", *ref.varying]:
        assert_column_equal(f"data.{name}", data[name], ref.rows[name])

    # the FORMAT.md example: slice one series by row_offset/row_count
    if index.num_rows:
        row = index.num_rows // 2
        sid = index["series_id"][row].as_py()
        assert pc.index(index["series_id"], sid).as_py() == row
        s = data.slice(index["row_offset"][row].as_py(), index["row_count"][row].as_py())
        assert pc.all(pc.equal(s["series_code"], row)).as_py()

    stats = snap.manifest["stats"]
    for k, v in ref.stats.items():
        assert stats[k] == v, f"manifest stats.{k} = {stats[k]!r}, want {v!r}"

    # types follow the input ("strings become utf8"); checked last so that a
    # type bug does not hide value bugs
    assert data.schema.field("value").type == ref.value_type
    assert index.schema.field("latest_value").type == ref.value_type
    for c in ref.varying:
        assert data.schema.field(c).type == ref.input_types[c], (
            f"data.{c} is {data.schema.field(c).type}, input type {ref.input_types[c]}")
    for c in ref.attributes:
        itype = index.schema.field(c).type
        if pa.types.is_dictionary(itype):  # FORMAT.md §4: string attributes may be dictionaries
            itype = itype.value_type
        assert itype == ref.input_types[c], (
            f"index.{c} is {itype}, input type {ref.input_types[c]}")


# --------------------------------------------------------------------------
# period fixtures: every accepted input form, with the date FORMAT.md §5 says

D = dt.date
TS = dt.datetime

# (case id, arrow type, input values, start-of-period dates)
PERIOD_CASES = [
    ("YYYY", pa.string(), ["2019", "1969", "2100"], [D(2019, 1, 1), D(1969, 1, 1), D(2100, 1, 1)]),
    ("YYYYMM", pa.string(), ["201903", "196912", "200002"], [D(2019, 3, 1), D(1969, 12, 1), D(2000, 2, 1)]),
    ("YYYY-MM", pa.string(), ["2019-03", "2019-12", "1969-01"], [D(2019, 3, 1), D(2019, 12, 1), D(1969, 1, 1)]),
    ("YYYYMMDD", pa.string(), ["20190315", "20200229", "19691231"], [D(2019, 3, 15), D(2020, 2, 29), D(1969, 12, 31)]),
    ("YYYY-MM-DD", pa.string(), ["2019-03-15", "2000-02-29", "1900-12-31"], [D(2019, 3, 15), D(2000, 2, 29), D(1900, 12, 31)]),
    ("YYYYQn", pa.string(), ["2019Q1", "2019Q2", "2019Q3", "2019Q4"], [D(2019, 1, 1), D(2019, 4, 1), D(2019, 7, 1), D(2019, 10, 1)]),
    ("YYYY-Qn", pa.string(), ["2019-Q2", "2020-Q4"], [D(2019, 4, 1), D(2020, 10, 1)]),
    # ISO weeks: week 1 can start in the previous year; 2015 and 2020 have 53 weeks.
    ("YYYY-Www", pa.string(), ["2019-W01", "2019-W02", "2020-W53", "2021-W01", "2015-W53"],
     [D(2018, 12, 31), D(2019, 1, 7), D(2020, 12, 28), D(2021, 1, 4), D(2015, 12, 28)]),
    ("date32", pa.date32(), [D(2019, 3, 15), D(1969, 7, 20)], [D(2019, 3, 15), D(1969, 7, 20)]),
    # wall-clock date: truncation, not rounding, and floor before the epoch
    ("timestamp-us", pa.timestamp("us"),
     [TS(2019, 3, 15), TS(2019, 3, 16, 23, 59, 59, 999999), TS(1969, 12, 31, 23, 0, 0), TS(1969, 12, 30, 0, 0, 1)],
     [D(2019, 3, 15), D(2019, 3, 16), D(1969, 12, 31), D(1969, 12, 30)]),
    ("timestamp-ms", pa.timestamp("ms"), [TS(2019, 3, 15, 12), TS(1969, 12, 31, 23, 59, 59)],
     [D(2019, 3, 15), D(1969, 12, 31)]),
    ("timestamp-ns", pa.timestamp("ns"), [TS(2019, 3, 15, 23, 59, 59, 999999), TS(1970, 1, 1)],
     [D(2019, 3, 15), D(1970, 1, 1)]),
    ("timestamp-us-UTC", pa.timestamp("us", tz="UTC"),
     [TS(2019, 3, 15, 23, 30, tzinfo=dt.timezone.utc), TS(1969, 12, 31, 1, tzinfo=dt.timezone.utc)],
     [D(2019, 3, 15), D(1969, 12, 31)]),
    ("int-YYYY", pa.int32(), [2019, 2020], [D(2019, 1, 1), D(2020, 1, 1)]),
    ("int-YYYYMM", pa.int64(), [201903, 201904], [D(2019, 3, 1), D(2019, 4, 1)]),
    ("int-YYYYMMDD", pa.int64(), [20190315, 20190316], [D(2019, 3, 15), D(2019, 3, 16)]),
    ("uint32-YYYYMMDD", pa.uint32(), [20190315, 19991231], [D(2019, 3, 15), D(1999, 12, 31)]),
]


def period_series_id(case: str) -> str:
    return f"FMT.{case}"
