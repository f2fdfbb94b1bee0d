"""The Python rebuild-at-start baseline of the benchmark harness (bench/harness.py).

A small pyarrow.flight server that does at every start what the server servingsnap replaces
did, with Polars, as lean as that design allows: read every year partition of the lake,
parse the distinct periods to dates, take the per-series attributes into the index first
(one value per series) so the sort moves only series_id, period and value, sort by
(series_id, period) with series_id as a Categorical, build series_id -> row range with each
series' latest value, and then answer DoGet tickets (the JSON of docs/FLIGHT.md: "series" |
"prefix" | "category", "start"/"end", "columns", "latest") with zero-copy slices of the
sorted columns (Polars hands the sorted frame to Arrow without a copy when it is one chunk).

    python bench/pybaseline.py --lake LAKE --dataset NAME --addr 127.0.0.1:PORT

Once the index is built it binds the address and prints one JSON line
{"event": "listening", "flight": ..., "startup_ms": ...} to stdout; startup_ms counts from
the process's start (interpreter and imports included).
"""
import bisect
import pathlib
import sys

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.flight as fl

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from peerlib import day, serve  # noqa: E402

ATTRS = ["units", "frequency", "name", "category"]


def parse_periods(col: pl.Expr) -> pl.Expr:
    """EIA-style period strings (YYYY, YYYY-MM, YYYY-Qn, YYYY-MM-DD) to the period's first day."""
    n = col.str.len_bytes()
    year = col.str.slice(0, 4).cast(pl.Int32)
    return (
        pl.when(n == 10).then(col.str.to_date("%Y-%m-%d", strict=False))
        .when(n == 4).then(pl.date(year, 1, 1))
        .when(col.str.slice(5, 1) == "Q").then(pl.date(year, (col.str.slice(6, 1).cast(pl.Int32) - 1) * 3 + 1, 1))
        .otherwise(pl.date(year, col.str.slice(5, 2).cast(pl.Int32), 1))
    )


class Dataset:
    """The rebuilt dataset: a sorted table and a per-series index."""

    def __init__(self, lake: str, name: str):
        self.name = name
        df = pl.read_parquet(f"{lake}/**/*.parquet", hive_partitioning=False)
        if df.schema["period"] == pl.String:
            # a lake has a few thousand distinct period strings: parse those, then map
            u = df.select(pl.col("period").unique())
            u = u.with_columns(parse_periods(pl.col("period")).alias("date"))
            if u["date"].null_count():
                raise SystemExit(f"pybaseline: unparseable period in {u.filter(pl.col('date').is_null()).head(3)}")
            df = df.with_columns(pl.col("period").replace_strict(u["period"], u["date"]))
        # Attributes go into the index before the sort: one value per series, not per row.
        attrs = [a for a in ATTRS if a in df.columns]
        per_series = (df.lazy().group_by("series_id").agg([pl.col(a).first() for a in attrs])
                      .sort("series_id").collect())
        df = df.select(pl.col("series_id").cast(pl.Categorical), "period", "value")
        df = df.sort(["series_id", "period"]).rechunk()  # categoricals sort lexically; rechunk is a no-op on one chunk
        idx = (
            df.lazy()
            .with_row_index("row")
            .group_by("series_id", maintain_order=True)
            .agg(
                offset=pl.col("row").first(),
                count=pl.len(),
                latest_period=pl.col("period").filter(pl.col("value").is_not_null()).last(),
                latest_value=pl.col("value").drop_nulls().last(),
            )
            .collect()
        )
        self.ids = idx["series_id"].cast(pl.String).to_list()  # sorted
        self.by_id = {s: i for i, s in enumerate(self.ids)}
        self.offset = idx["offset"].to_numpy().astype(np.int64)
        self.count = idx["count"].to_numpy().astype(np.int64)
        self.latest_ok = idx["latest_value"].is_not_null().to_numpy()
        self.latest_period = idx["latest_period"].cast(pl.Int32).fill_null(0).to_numpy()
        self.latest_value = idx["latest_value"].fill_null(0.0).to_numpy()
        assert per_series["series_id"].to_list() == self.ids, "index and attributes disagree on the series order"
        self.category = per_series["category"].to_list() if "category" in attrs else None
        self.table = df.to_arrow()
        del df
        if any(self.table.column(c).num_chunks != 1 for c in ("period", "value")):
            self.table = self.table.combine_chunks()  # only if Polars left several chunks
        self.period_arr = self.table.column("period").chunk(0)
        self.period_np = self.period_arr.cast(pa.int32()).to_numpy()
        self.value_arr = self.table.column("value").chunk(0)
        self.value_np = self.value_arr.to_numpy(zero_copy_only=False)
        self.rows = self.table.num_rows
        self.schema = pa.schema([("series_id", pa.dictionary(pa.int32(), pa.string())),
                                 ("period", pa.date32()), ("value", pa.float64())])

    def select(self, q):
        if "prefix" in q:
            p = q["prefix"]
            lo = bisect.bisect_left(self.ids, p)
            codes = []
            for c in range(lo, len(self.ids)):
                if not self.ids[c].startswith(p):
                    break
                codes.append(c)
            return codes
        if "category" in q:
            cat = q["category"].rstrip("/")  # the category or below it, as snapbuild serve
            return [c for c, v in enumerate(self.category) if v == cat or (v or "").startswith(cat + "/")]
        try:
            return sorted({self.by_id[s] for s in q["series"]})
        except KeyError as e:
            raise fl.FlightServerError(f"unknown series {e}") from None

    def query(self, q) -> pa.Table:
        if q.get("dataset") != self.name:
            raise fl.FlightServerError(f"no dataset {q.get('dataset')!r}")
        codes = self.select(q)
        lo_d = day(q["start"], False) if "start" in q else -2**31
        hi_d = day(q["end"], True) if "end" in q else 2**31 - 1
        keep, lens, starts = [], [], []
        lat_p, lat_v = [], []
        pn = self.period_np
        for k, c in enumerate(codes):
            off, n = int(self.offset[c]), int(self.count[c])
            seg = pn[off:off + n]
            a = off + int(np.searchsorted(seg, lo_d, "left"))
            b = off + int(np.searchsorted(seg, hi_d, "right"))
            if q.get("latest"):
                # the last non-null row in range: from the index unless the range ends before it
                if not self.latest_ok[c]:
                    continue
                lp = int(self.latest_period[c])
                if lp <= hi_d:
                    if lp >= lo_d:
                        keep.append(k); lat_p.append(lp); lat_v.append(self.latest_value[c])
                    continue
                for i in range(b - 1, a - 1, -1):
                    if self.value_arr[i].is_valid:
                        keep.append(k); lat_p.append(int(pn[i])); lat_v.append(self.value_np[i])
                        break
            elif b > a:
                keep.append(k); starts.append(a); lens.append(b - a)
        dictionary = pa.array([self.ids[c] for c in codes], pa.string())
        if q.get("latest"):
            indices = pa.array(np.array(keep, dtype=np.int32))
            per = pa.array(np.array(lat_p, dtype=np.int32)).cast(pa.date32())
            val = pa.array(np.array(lat_v, dtype=np.float64))
        else:
            indices = pa.array(np.repeat(np.array(keep, dtype=np.int32), lens), pa.int32())
            # zero-copy slices of the sorted table, concatenated into one batch
            per = pa.concat_arrays([self.period_arr.slice(s, n) for s, n in zip(starts, lens)] or [pa.array([], pa.date32())])
            val = pa.concat_arrays([self.value_arr.slice(s, n) for s, n in zip(starts, lens)] or [pa.array([], pa.float64())])
        cols = [pa.DictionaryArray.from_arrays(indices, dictionary), per, val]
        schema = self.schema
        if "columns" in q and "value" not in q["columns"]:
            cols, schema = cols[:2], pa.schema(list(schema)[:2])
        return pa.Table.from_arrays(cols, schema=schema)


def main():
    serve(__doc__, Dataset, "127.0.0.1:8817")


if __name__ == "__main__":
    sys.exit(main())
