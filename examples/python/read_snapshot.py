"""Read one series from a servingsnap snapshot with nothing but pyarrow.

The snapshot is an Arrow IPC data file sorted by (series, period) plus an
index with one row per series, so a query is a lookup and a zero-copy slice.

    python read_snapshot.py ROOT/DATASET SERIES_ID [--last N]
"""
import argparse
import json
import pathlib
import sys

import pyarrow as pa


def open_current(dataset: pathlib.Path):
    manifest_rel = (dataset / "CURRENT").read_text().strip()
    manifest = json.loads((dataset / manifest_rel).read_text())
    files = {f["role"]: dataset / f["path"] for f in manifest["files"]}
    data = pa.ipc.open_file(pa.memory_map(str(files["data"])))
    index = pa.ipc.open_file(pa.memory_map(str(files["index"]))).read_all()
    return manifest, data, index


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset", type=pathlib.Path)
    ap.add_argument("series", nargs="?")
    ap.add_argument("--first-series", action="store_true", help="use the index's first series")
    ap.add_argument("--last", type=int, default=0, help="print only the last N rows")
    a = ap.parse_args()

    manifest, data, index = open_current(a.dataset)
    ids = index["series_id"].to_pylist()
    sid = ids[0] if a.first_series or not a.series else a.series
    try:
        row = ids.index(sid)  # ids are sorted: a real client would bisect
    except ValueError:
        print(f"series {sid!r} not in snapshot {manifest['snapshot_id']}", file=sys.stderr)
        return 1
    entry = index.slice(row, 1).to_pylist()[0]
    batch = data.get_batch(entry["batch"])
    rows = batch.slice(entry["batch_offset"], entry["row_count"])
    attrs = {k: entry[k] for k in manifest["schema"]["attributes"]}
    print(f"{sid}  snapshot {manifest['snapshot_id']}  {entry['row_count']} rows "
          f"{entry['first_period']}..{entry['last_period']}  latest {entry['latest_value']} "
          f"({entry['latest_period']})  {attrs}")
    tail = rows.slice(max(0, rows.num_rows - a.last)) if a.last else rows
    for p, v in zip(tail["period"].to_pylist(), tail["value"].to_pylist()):
        print(f"  {p}  {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
