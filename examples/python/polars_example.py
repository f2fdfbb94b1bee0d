"""Fetch series from a `snapbuild serve` Flight server into polars.

    python polars_example.py DATASET [--uri grpc+tcp://127.0.0.1:8815] [--prefix P] [--token-file F]

polars has no Flight client of its own; pyarrow.flight fetches the Arrow
stream and pl.from_arrow wraps it without copying the numeric columns
(series_id and attribute columns arrive dictionary-encoded and become
polars Categoricals).
"""

from __future__ import annotations

import argparse
import json

import polars as pl
import pyarrow.flight as flight


def query(client, opts, **q) -> pl.DataFrame:
    table = client.do_get(flight.Ticket(json.dumps(q).encode()), options=opts).read_all()
    return pl.from_arrow(table)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("--uri", default="grpc+tcp://127.0.0.1:8815")
    ap.add_argument("--prefix", default="", help="series id prefix (default: all series)")
    ap.add_argument("--token-file")
    a = ap.parse_args()

    client = flight.connect(a.uri)
    headers = []
    if a.token_file:
        token = next(l.split()[0] for l in open(a.token_file) if l.strip() and not l.lstrip().startswith("#"))
        headers.append((b"authorization", f"Bearer {token}".encode()))
    opts = flight.FlightCallOptions(headers=headers)

    # 1. The latest value of every series under the prefix, with its attributes.
    latest = query(client, opts, dataset=a.dataset, prefix=a.prefix, latest=True, attributes=True)
    print(f"latest values: {latest.height} series")
    print(latest.head(10))

    # 2. Per attribute group (category if the dataset has one): how many series,
    #    and how recent their latest observation is.
    group = "category" if "category" in latest.columns else "series_id"
    print(
        latest.group_by(group)
        .agg(pl.len().alias("series"), pl.col("period").max().alias("newest"), pl.col("period").min().alias("oldest"))
        .sort("series", descending=True)
        .head(10)
    )

    # 3. A few full series over a period range, then yearly means, one column per series.
    ids = latest["series_id"].cast(pl.Utf8).head(3).to_list()
    rows = query(client, opts, dataset=a.dataset, series=ids, start="2015", end="2024")
    yearly = (
        rows.with_columns(pl.col("series_id").cast(pl.Utf8), pl.col("period").dt.year().alias("year"))
        .group_by("series_id", "year")
        .agg(pl.col("value").mean())
        .pivot(on="series_id", index="year", values="value")
        .sort("year")
    )
    print(yearly)


if __name__ == "__main__":
    main()
