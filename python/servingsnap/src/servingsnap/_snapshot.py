"""An open snapshot: the mapped data and index files and the lookups over
them (docs/FORMAT.md §3, §4, §9)."""

from __future__ import annotations

import bisect
import calendar
import datetime as dt
import json
import mmap
import os
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.compute as pc

import xxhash

from ._dataset import Lease, current_id, load_manifest
from ._errors import ColdTierUnavailable, CorruptSnapshot, SeriesNotFound, ServingSnapError

EPOCH = dt.date(1970, 1, 1)
META_FILE = b"servingsnap.file"
META_VERSION = b"servingsnap.format_version"
META_TIERED = b"servingsnap.tiered"
META_DICTIONARY = b"servingsnap.dictionary"
# The index version each manifest version implies (FORMAT.md, Versions).
INDEX_VERSION = {1: b"1", 2: b"2", 3: b"3", 4: b"4", 5: b"5"}
DATA_VERSION = b"1"
FIXED_DATA = ("series_code", "period")
CATEGORY = "category"
# Lookups bisect a sample of every SAMPLE-th id first (Snapshot._sampled).
SAMPLE = 1024


def open(dataset, snapshot: int | None = None) -> "Snapshot":
    """Open ROOT/DATASET at the vintage CURRENT names, or at vintage
    `snapshot`. Holds the vintage's gc lease until close()."""
    ds = Path(dataset)
    if not ds.is_dir():
        raise ServingSnapError(f"dataset directory {ds} does not exist")
    for attempt in range(3):
        sid = snapshot if snapshot is not None else current_id(ds)
        lease = Lease(ds, sid)
        try:
            m = load_manifest(ds, sid)
        except ServingSnapError:
            lease.release()
            # CURRENT moved and gc removed what it named in between: follow it.
            if snapshot is None and attempt < 2 and current_id(ds) != sid:
                continue
            raise
        try:
            return Snapshot(ds, m, lease)
        except BaseException:
            lease.release()
            raise
    raise ServingSnapError(f"{ds}: CURRENT kept moving")


def to_days(v, end: bool = False) -> int | None:
    """A period bound as date32 days: a date, a datetime, or a string
    YYYY, YYYY-MM or YYYY-MM-DD; an end bound includes the whole period."""
    if v is None:
        return None
    if isinstance(v, dt.datetime):
        v = v.date()
    if isinstance(v, dt.date):
        return (v - EPOCH).days
    if isinstance(v, int):
        return v
    s = str(v)
    try:
        parts = [int(p) for p in s.split("-")]
        if len(parts) == 1:
            d = dt.date(parts[0], 12, 31) if end else dt.date(parts[0], 1, 1)
        elif len(parts) == 2:
            y, m = parts
            d = dt.date(y, m, calendar.monthrange(y, m)[1] if end else 1)
        elif len(parts) == 3:
            d = dt.date(*parts)
        else:
            raise ValueError
    except ValueError:
        raise ServingSnapError(f"period {s!r}: want YYYY, YYYY-MM or YYYY-MM-DD (or a date)") from None
    return (d - EPOCH).days


def from_days(n: int) -> dt.date:
    return EPOCH + dt.timedelta(days=n)


class Snapshot:
    """One open vintage. Use as a context manager, or call close()."""

    def __init__(self, ds: Path, manifest: dict, lease: Lease):
        self.dataset_dir = ds
        self.manifest = manifest
        self.id: int = manifest["snapshot_id"]
        self.dataset: str = manifest["dataset"]
        self.version: int = manifest["format_version"]
        self.attributes: list[str] = list(manifest["schema"]["attributes"])
        self._lease = lease
        files = {}
        for f in manifest["files"]:
            path = ds / f["path"]
            try:
                size = os.stat(path).st_size
            except FileNotFoundError:
                raise CorruptSnapshot(f"{path}: missing (the manifest lists it)") from None
            if size != f["size"]:
                raise CorruptSnapshot(f"{path}: {size} bytes, the manifest says {f['size']}")
            files[f["role"]] = (path, f)
        for role in ("data", "index"):
            if role not in files:
                raise CorruptSnapshot(f"snapshot {self.id}: the manifest lists no {role} file")
        if self.version < 4 and (self.version == 3) != ("cold" in files):
            raise CorruptSnapshot(f"snapshot {self.id}: format_version {self.version} with{'out' if 'cold' not in files else ''} a cold file")
        # Tiered: the index locates cold rows (version 3; version 4 with a cold file).
        self.tiered: bool = "cold" in files
        self._files = files
        self._data = self._open_arrow("data", b"data", DATA_VERSION)
        self._index_reader = self._open_arrow("index", b"index", INDEX_VERSION[self.version])
        if self._index_reader.num_record_batches != 1:
            raise CorruptSnapshot(f"{files['index'][0]}: {self._index_reader.num_record_batches} record batches, want 1")
        if self.version >= 4 and (self._index_reader.schema.metadata.get(META_TIERED) == b"true") != self.tiered:
            raise CorruptSnapshot(f"{files['index'][0]}: {META_TIERED.decode()}={self._index_reader.schema.metadata.get(META_TIERED)!r} "
                                  f"in a snapshot with{'out' if not self.tiered else ''} a cold file")
        self.index: pa.RecordBatch = self._index_reader.get_batch(0)
        self._attrs: dict[str, pa.Array] = {}
        self.series_count: int = self.index.num_rows
        if self.series_count != manifest["stats"]["series"]:
            raise CorruptSnapshot(f"{files['index'][0]}: {self.series_count} series, the manifest says {manifest['stats']['series']}")
        names = self._data.schema.names
        if tuple(names[:2]) != FIXED_DATA:
            raise CorruptSnapshot(f"{files['data'][0]}: columns {names[:2]}, want {list(FIXED_DATA)} first")
        self.data_columns: list[str] = names[2:]  # value, then the varying columns
        self._batches: list[pa.RecordBatch | None] = [None] * self._data.num_record_batches
        self._views: dict[str, memoryview] = {}
        self._cold_file = None
        self._zeros = pa.array([], pa.int32())
        self._sample: list[bytes] | None = None
        self._id_field = pa.field("series_id", pa.dictionary(pa.int32(), pa.string()), nullable=False)

    # -- opening ------------------------------------------------------------

    def _open_arrow(self, role: str, kind: bytes, version: bytes) -> pa.ipc.RecordBatchFileReader:
        path = self._files[role][0]
        try:
            m = pa.memory_map(str(path))
            self._maps = getattr(self, "_maps", {})
            self._maps[role] = m
            r = pa.ipc.open_file(m)
        except (pa.ArrowInvalid, OSError) as e:
            raise CorruptSnapshot(f"{path}: not an Arrow IPC file: {e}") from None
        md = r.schema.metadata or {}
        if md.get(META_FILE) != kind or md.get(META_VERSION) != version:
            raise CorruptSnapshot(f"{path}: {META_FILE.decode()}={md.get(META_FILE)!r} version {md.get(META_VERSION)!r}, want {kind!r} version {version!r}")
        return r

    def close(self) -> None:
        """Drop the gc lease. Tables already returned stay valid: their
        buffers keep the mappings alive, and a removed file's mapping lasts
        until the last of them goes."""
        self._lease.release()

    def __enter__(self) -> "Snapshot":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        lease = getattr(self, "_lease", None)
        if lease is not None:
            lease.release()

    def __repr__(self) -> str:
        return f"<servingsnap.Snapshot {self.dataset} {self.id}: {self.series_count} series, {self.manifest['stats']['rows']} rows>"

    # -- the mapped index, as Python sequences -------------------------------

    def _view(self, name: str, fmt: str) -> memoryview:
        """Column name of the index as a memoryview of its values (no copy)."""
        v = self._views.get(name)
        if v is None:
            col = self.index.column(name)
            width = {"i": 4, "I": 4, "q": 8}[fmt]
            buf = col.buffers()[1]
            v = memoryview(buf).cast(fmt)[col.offset: col.offset + len(col)]
            if len(v) != len(col):
                raise CorruptSnapshot(f"{self._files['index'][0]}: column {name} has {len(buf) // width} values, want {len(col)}")
            self._views[name] = v
        return v

    def _ids(self) -> tuple[memoryview, object, int]:
        """series_id's offsets (int32), and where its bytes are: a Python
        mmap of the index file (slicing it yields bytes in one call, the
        cost of a binary search step) and the bytes' position in it."""
        v = self._views.get("series_id")
        if v is None:
            col = self.index.column("series_id")
            if col.type != pa.string():
                raise CorruptSnapshot(f"{self._files['index'][0]}: series_id is {col.type}, want utf8")
            _, offsets, data = col.buffers()
            off = memoryview(offsets).cast("i")[col.offset: col.offset + len(col) + 1]
            path = self._files["index"][0]
            with path.open("rb") as f:
                mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
            base = self._maps["index"]
            base.seek(0)
            at = data.address - base.read_buffer(1).address if data is not None else 0
            if not 0 <= at <= len(mm) or off[len(col)] > len(mm) - at or off[0] < 0:
                raise CorruptSnapshot(f"{path}: series_id's offsets point outside the file")
            self._views["series_id"] = off
            self._id_bytes = (mm, at)
        return self._views["series_id"], self._id_bytes[0], self._id_bytes[1]

    def _id_at(self, i: int) -> bytes:
        off, mm, at = self._ids()
        return mm[at + off[i]: at + off[i + 1]]

    def _sampled(self) -> list[bytes]:
        """Every SAMPLE-th id, read on the first lookup (not at open): the
        first steps of every binary search, done by bisect in C. At 2.8M
        series: 2,735 ids, about a millisecond, once."""
        if self._sample is None:
            self._sample = [self._id_at(i) for i in range(0, self.series_count, SAMPLE)]
        return self._sample

    def code(self, series_id: str) -> int:
        """The series' row in the index (its code): through a version-5
        index's lookup table (FORMAT.md §4: a hash, about one code to
        compare), else, or when the table holds no code whose id is equal,
        a binary search over the mapped ids. SeriesNotFound when absent."""
        key = series_id.encode()
        off, mm, at = self._ids()
        n = self.series_count
        if self.version >= 5 and n > 0:
            start, codes = self._view("lookup_start", "I"), self._view("lookup_code", "I")
            b = ((xxhash.xxh64_intdigest(key) >> 32) * n) >> 32
            lo, hi = start[b], start[b + 1] if b + 1 < n else n
            if lo <= hi <= n:
                for c in codes[lo:hi]:
                    if c < n and mm[at + off[c]: at + off[c + 1]] == key:
                        return c
        j = bisect.bisect_left(self._sampled(), key)
        # The id lies in (sample[j-1], sample[j]]: rows ((j-1)*SAMPLE, j*SAMPLE].
        lo, hi = max((j - 1) * SAMPLE + 1, 0), min(j * SAMPLE, self.series_count - 1) + 1
        while lo < hi:
            mid = (lo + hi) >> 1
            if mm[at + off[mid]: at + off[mid + 1]] < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < self.series_count and mm[at + off[lo]: at + off[lo + 1]] == key:
            return lo
        raise SeriesNotFound(f"series {series_id!r} is not in {self.dataset} snapshot {self.id}")

    def _prefix_range(self, prefix: str) -> tuple[int, int]:
        p = prefix.encode()
        n = len(p)
        lo, hi = 0, self.series_count
        while lo < hi:
            mid = (lo + hi) >> 1
            if self._id_at(mid) < p:
                lo = mid + 1
            else:
                hi = mid
        first, hi = lo, self.series_count
        while lo < hi:
            mid = (lo + hi) >> 1
            if self._id_at(mid)[:n] <= p:
                lo = mid + 1
            else:
                hi = mid
        return first, lo

    def _attribute(self, name: str) -> pa.Array:
        """Attribute column `name` as the index stores it (utf8 or another
        type, or a version-1 dictionary), except that a version-4 code
        column (FORMAT.md §4) comes as a DictionaryArray over the values in
        its field's metadata: the codes stay mapped, the values are decoded
        on first use (their number, not the series', is the cost)."""
        col = self._attrs.get(name)
        if col is None:
            col = self.index.column(name)
            md = self.index.schema.field(name).metadata or {}
            if self.version >= 4 and META_DICTIONARY in md:
                path = self._files["index"][0]
                try:
                    values = json.loads(md[META_DICTIONARY])
                    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                        raise ValueError("not a JSON array of strings")
                    col = pa.DictionaryArray.from_arrays(col, pa.array(values, pa.string()), safe=True)
                except (ValueError, pa.ArrowException) as e:
                    raise CorruptSnapshot(f"{path}: column {name}: {e}") from None
            self._attrs[name] = col
        return col

    def _is_coded(self, name: str) -> bool:
        return self.version >= 4 and META_DICTIONARY in (self.index.schema.field(name).metadata or {})

    # -- selecting series -----------------------------------------------------

    def _codes(self, ids: Iterable[str] | None, prefix: str | None, category: str | None) -> pa.Array | slice:
        given = sum(x is not None for x in (ids, prefix, category))
        if given > 1:
            raise ServingSnapError("select series by ids, by prefix or by category, not several")
        if ids is not None:
            if isinstance(ids, str):
                ids = [ids]
            return pa.array([self.code(i) for i in ids], pa.int64())
        if prefix is not None:
            lo, hi = self._prefix_range(prefix)
            return slice(lo, hi)
        if category is not None:
            if CATEGORY not in self.attributes:
                raise ServingSnapError(f"{self.dataset} snapshot {self.id} has no {CATEGORY} attribute (attributes: {self.attributes})")
            col = self._attribute(CATEGORY)
            if pa.types.is_dictionary(col.type):  # a version-1 dictionary or a version-4 code column
                col = col.dictionary_decode()
            c = category.rstrip("/")
            mask = pc.or_(pc.equal(col, c), pc.starts_with(col, c + "/"))
            return pc.indices_nonzero(pc.fill_null(mask, False))
        return slice(0, self.series_count)

    def ids(self, prefix: str | None = None, category: str | None = None) -> pa.Array:
        """Series ids, in order: all of them, those starting with prefix, or
        those of a category (the attribute equals it or continues it at a
        '/': "Petroleum" matches "Petroleum/Prices", not "PetroleumCoke")."""
        sel = self._codes(None, prefix, category)
        col = self.index.column("series_id")
        if isinstance(sel, slice):
            return col.slice(sel.start, sel.stop - sel.start)
        return col.take(sel)

    # -- answers --------------------------------------------------------------

    def schema(self, attributes: bool = False) -> pa.Schema:
        """The schema of series() answers (an empty answer has it too)."""
        fields = [self._id_field] + [self._data.schema.field(i) for i in range(1, len(self._data.schema))]
        if attributes:
            for name in self.attributes:
                t = self._attribute(name).type
                t = t.value_type if pa.types.is_dictionary(t) else t
                fields.append(pa.field(name, pa.dictionary(pa.int32(), t)))
        return pa.schema(fields)

    def bounds(self, series_id: str) -> tuple[dt.date, dt.date]:
        """The series' first and last period (over every tier)."""
        k = self.code(series_id)
        return from_days(self._view("first_period", "i")[k]), from_days(self._view("last_period", "i")[k])

    def latest(self, ids: Iterable[str] | None = None, prefix: str | None = None,
               category: str | None = None, attributes: bool = True) -> pa.Table:
        """Each selected series' latest non-null value and its period, read
        from the index (no data row is touched): series_id, latest_period,
        latest_value, then the attributes."""
        sel = self._codes(ids, prefix, category)
        cols = ["series_id", "latest_period", "latest_value"] + (self.attributes if attributes else [])
        plain = [c for c in cols if not self._is_coded(c)]
        b = self.index.select(plain)
        b = b.slice(sel.start, sel.stop - sel.start) if isinstance(sel, slice) else b.take(sel)
        t = pa.Table.from_batches([b])
        for name in cols[3:]:
            if self._is_coded(name):  # decoded: the answer is version 2's
                v = self._attribute(name)
                v = v.slice(sel.start, sel.stop - sel.start) if isinstance(sel, slice) else v.take(sel)
                t = t.add_column(cols.index(name), name, v.dictionary_decode())
        return t.rename_columns(["series_id", "period", "value"] + cols[3:])

    def series(self, series_id: str, start=None, end=None, attributes: bool = False) -> pa.Table:
        """The series' rows with start <= period <= end (each bound optional;
        strings YYYY, YYYY-MM, YYYY-MM-DD, an end including its whole
        period): series_id, period, value and the varying columns, then the
        attributes if asked. The data columns of hot rows are a zero-copy
        slice of the mapped data file; series_id is a one-entry dictionary.
        Rows in the cold tier are read through vortex-data, or raise
        ColdTierUnavailable without it."""
        k = self.code(series_id)
        lo, hi = to_days(start), to_days(end, end=True)
        parts = []
        if self.tiered:
            n = self._view("cold_rows", "q")[k]
            if n > 0 and (lo is None or lo <= self._view("cold_last_period", "i")[k]) and \
                    (hi is None or hi >= self._view("cold_first_period", "i")[k]):
                cold = self._cold_slice(self._view("cold_start", "q")[k], n)
                parts.append(_in_range(cold, lo, hi))
        n = self._view("row_count", "q")[k]
        if n > 0:
            hot = self._hot_slice(k, n, lo, hi)
            if not parts and not attributes:
                # The common answer: one slice, its series_code column
                # replaced by the id (one RecordBatch operation).
                b = hot.set_column(0, self._id_field, self._id_dictionary(k, hot.num_rows))
                return pa.Table.from_batches([b])
            parts.append(hot)
        if not parts:
            t = self._data.schema.empty_table()
        elif len(parts) == 1:
            t = pa.Table.from_batches([parts[0]]) if isinstance(parts[0], pa.RecordBatch) else parts[0]
        else:
            t = pa.concat_tables([p if isinstance(p, pa.Table) else pa.Table.from_batches([p]) for p in parts])
        return self._with_ids(t, k, attributes)

    def _hot_slice(self, k: int, n: int, lo: int | None, hi: int | None) -> pa.RecordBatch:
        b = self._view("batch", "I")[k]
        off = self._view("batch_offset", "I")[k]
        if b >= len(self._batches):
            raise CorruptSnapshot(f"{self._files['index'][0]}: series {k} is in batch {b}, the data file has {len(self._batches)}")
        rb = self._batch(b)
        if off + n > rb.num_rows:
            raise CorruptSnapshot(f"{self._files['index'][0]}: series {k} rows {off}..{off + n} past batch {b}'s {rb.num_rows}")
        if lo is not None or hi is not None:
            per = rb.column(1)
            pv = memoryview(per.buffers()[1]).cast("i")[per.offset + off: per.offset + off + n]
            a = bisect.bisect_left(pv, lo) if lo is not None else 0
            z = bisect.bisect_right(pv, hi) if hi is not None else n
            off, n = off + a, max(z - a, 0)
        return rb.slice(off, n)

    def _batch(self, i: int) -> pa.RecordBatch:
        b = self._batches[i]
        if b is None:
            b = self._batches[i] = self._data.get_batch(i)
        return b

    def _zeros_of(self, n: int) -> pa.Array:
        if n > len(self._zeros):
            self._zeros = pa.repeat(pa.scalar(0, pa.int32()), max(n, 4096))
        return self._zeros.slice(0, n)

    def _id_dictionary(self, k: int, n: int) -> pa.DictionaryArray:
        """n rows of series k's id: a one-entry dictionary over the index."""
        return pa.DictionaryArray.from_arrays(self._zeros_of(n), self.index.column("series_id").slice(k, 1))

    def _with_ids(self, t: pa.Table, k: int, attributes: bool) -> pa.Table:
        n = t.num_rows
        zeros = self._zeros_of(n)
        t = t.drop_columns(["series_code"])
        t = t.add_column(0, self._id_field, self._id_dictionary(k, n))
        if attributes:
            for name in self.attributes:
                v = self._attribute(name).slice(k, 1)
                if pa.types.is_dictionary(v.type):
                    v = v.dictionary_decode()
                t = t.append_column(name, pa.DictionaryArray.from_arrays(zeros, v))
        return t

    # -- the cold tier --------------------------------------------------------

    def _vortex(self):
        if self._cold_file is None:
            try:
                import vortex
            except ImportError:
                raise ColdTierUnavailable(
                    f"{self.dataset} snapshot {self.id} keeps older rows in {self._files['cold'][0].name} "
                    "and this answer needs them: install the vortex-data package "
                    "(pip install 'servingsnap[vortex]') to read them") from None
            self._cold_file = (vortex, vortex.open(str(self._files["cold"][0])))
        return self._cold_file

    def _cold_table(self, arr) -> pa.Table:
        t = pa.Table.from_struct_array(arr.to_arrow_array())
        return t.cast(self._data.schema.remove_metadata()).replace_schema_metadata(self._data.schema.metadata)

    def _cold_slice(self, start: int, n: int) -> pa.Table:
        vx, f = self._vortex()
        idx = vx.array(pa.array(range(start, start + n), pa.uint64()))
        return self._cold_table(f.scan(indices=idx).read_all())

    def table(self, attributes: bool = True) -> pa.Table:
        """Every row, in (series_id, period) order, with series_id and the
        attributes put back as dictionary columns over the index's own
        columns (no string is copied per row): the snapshot as a table for
        polars (pl.from_arrow) or pyarrow. Hot rows are the mapped batches;
        a tiered snapshot's cold rows are read through vortex-data."""
        hot = self._data.read_all()
        if self.tiered and self._files["cold"][1]["rows"] > 0:
            vx, f = self._vortex()
            cold = self._cold_table(f.scan().read_all())
            both = pa.concat_tables([cold, hot])
            t = both.take(pc.sort_indices(both, [("series_code", "ascending"), ("period", "ascending")]))
        else:
            t = hot
        codes = t.column("series_code").cast(pa.int32())
        ids = self.index.column("series_id")
        out = t.drop_columns(["series_code"])
        out = out.add_column(0, "series_id", _dictionary(codes, ids))
        if attributes:
            for name in self.attributes:
                v = self._attribute(name)
                if pa.types.is_dictionary(v.type):
                    v = v.dictionary_decode()
                out = out.append_column(name, _dictionary(codes, v))
        return out

    def to_polars(self, attributes: bool = True):
        """table() as a polars DataFrame (series_id and attributes
        categorical)."""
        import polars as pl
        return pl.from_arrow(self.table(attributes))


def _dictionary(codes: pa.ChunkedArray, values: pa.Array) -> pa.ChunkedArray:
    return pa.chunked_array([pa.DictionaryArray.from_arrays(c, values) for c in codes.chunks],
                            type=pa.dictionary(pa.int32(), values.type))


def _in_range(t: pa.Table, lo: int | None, hi: int | None) -> pa.Table:
    if lo is None and hi is None:
        return t
    p = t.column("period").cast(pa.int32())
    mask = None
    if lo is not None:
        mask = pc.greater_equal(p, lo)
    if hi is not None:
        m = pc.less_equal(p, hi)
        mask = m if mask is None else pc.and_(mask, m)
    return t.filter(mask)
