"""The Python rebuild-at-start baseline of the benchmark harness (bench/harness.py).

A small pyarrow.flight server that does at every start what the server servingsnap replaces
did, with Polars: read every year partition of the lake, parse the periods to dates,
sort by (series_id, period), dictionary-encode the strings, build series_id -> row range
with each series' date bounds and latest value, and then answer DoGet tickets (the JSON of
docs/FLIGHT.md: "series" | "prefix" | "category", "start"/"end", "columns", "latest") with
slice()s of the sorted table.

    python bench/pybaseline.py --lake LAKE --dataset NAME --addr 127.0.0.1:PORT

Once the index is built it binds the address and prints one JSON line
{"event": "listening", "flight": ..., "startup_ms": ...} to stdout.
"""
import time

T0 = time.perf_counter()  # as early as possible: imports are part of the start-up

import argparse  # noqa: E402
import bisect  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.flight as fl  # noqa: E402

ATTRS = ["units", "frequency", "name", "category"]
EPOCH = np.datetime64("1970-01-01", "D")


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
        strings = [c for c, t in df.schema.items() if t == pl.String]
        df = df.with_columns([pl.col(c).cast(pl.Categorical) for c in strings])  # dictionary-encode
        df = df.sort(["series_id", "period"])  # categoricals sort lexically
        idx = (
            df.lazy()
            .with_row_index("row")
            .group_by("series_id", maintain_order=True)
            .agg(
                offset=pl.col("row").first(),
                count=pl.len(),
                first_period=pl.col("period").first(),
                last_period=pl.col("period").last(),
                latest_period=pl.col("period").filter(pl.col("value").is_not_null()).last(),
                latest_value=pl.col("value").drop_nulls().last(),
                **{a: pl.col(a).first() for a in ATTRS if a in df.columns},
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
        self.category = idx["category"].cast(pl.String).to_list() if "category" in idx.columns else None
        self.table = df.to_arrow().combine_chunks()
        del df
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
            return [c for c, v in enumerate(self.category) if v == q["category"]]  # exact, as snapbuild serve
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


def day(s: str, end: bool) -> int:
    """A ticket period bound as date32 days: the first day of the period, or its last for end."""
    n = len(s)
    y = int(s[:4])
    if n == 4:
        d = (np.datetime64(f"{y + 1}-01-01") - 1) if end else np.datetime64(f"{y}-01-01")
    elif "Q" in s.upper():
        q = int(s[-1])
        first = np.datetime64(f"{y}-{(q - 1) * 3 + 1:02d}", "M")
        d = (first + 3).astype("datetime64[D]") - 1 if end else first.astype("datetime64[D]")
    elif n in (6, 7):
        m = int(s[-2:])
        first = np.datetime64(f"{y}-{m:02d}", "M")
        d = (first + 1).astype("datetime64[D]") - 1 if end else first.astype("datetime64[D]")
    else:
        d = np.datetime64(s if n == 10 else f"{s[:4]}-{s[4:6]}-{s[6:8]}", "D")
    return int((d - EPOCH).astype(int))


class Server(fl.FlightServerBase):
    def __init__(self, location, ds: Dataset):
        super().__init__(location)
        self.ds = ds

    def list_flights(self, context, criteria):
        ds = self.ds
        yield fl.FlightInfo(ds.schema, fl.FlightDescriptor.for_path(ds.name), [], ds.rows, -1)

    def do_get(self, context, ticket):
        try:
            q = json.loads(ticket.ticket)
        except ValueError as e:
            raise fl.FlightServerError(f"ticket: {e}") from None
        return fl.RecordBatchStream(self.ds.query(q))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lake", required=True)
    ap.add_argument("--dataset", default="bench")
    ap.add_argument("--addr", default="127.0.0.1:8817")
    a = ap.parse_args()
    ds = Dataset(a.lake, a.dataset)
    server = Server(f"grpc+tcp://{a.addr}", ds)
    print(json.dumps({"event": "listening", "flight": f"grpc+tcp://{a.addr}",
                      "startup_ms": round((time.perf_counter() - T0) * 1000, 3),
                      "rows": ds.rows, "series": len(ds.ids)}), flush=True)
    server.serve()


if __name__ == "__main__":
    sys.exit(main())
