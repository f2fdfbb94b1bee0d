"""Benchmark of the Python package (python/servingsnap): open and
one-series lookup + slice at 2.8M series, warm page cache.

    python bench/pkgread.py --bin bin/snapbuild [--series 2800000] [--out bench/results]

Writes a lake of SERIES series with ROWS monthly rows each (pyarrow), builds
it with snapbuild, then in this process times servingsnap.open (follow
CURRENT, lease, manifest checksum, map both files, read the footers) and
Snapshot.series(id) (binary search on the mapped ids, zero-copy slice,
series_id put back) for random ids, and prints the medians and p99s. The
goals: open <= 5 ms, lookup + slice <= 50 us.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python" / "servingsnap" / "src"))
import servingsnap  # noqa: E402


def write_lake(lake: Path, series: int, rows: int) -> None:
    lake.mkdir(parents=True)
    step = 500_000
    for part, lo in enumerate(range(0, series, step)):
        hi = min(series, lo + step)
        n = (hi - lo) * rows
        ids = pa.array([f"BENCH.{i:07d}.M" for i in range(lo, hi) for _ in range(rows)])
        per = pa.array([f"2024-{m + 1:02d}" for _ in range(lo, hi) for m in range(rows)])
        val = pa.array([float(i % 1000) for i in range(n)])
        cat = pa.array([f"C{(i // rows) % 7}" for i in range(lo * rows, hi * rows)])
        pq.write_table(pa.table({"series_id": ids, "period": per, "value": val, "category": cat}),
                       lake / f"part-{part:03d}.parquet")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(REPO / "bin" / "snapbuild"))
    ap.add_argument("--series", type=int, default=2_800_000)
    ap.add_argument("--rows", type=int, default=3)
    ap.add_argument("--opens", type=int, default=200)
    ap.add_argument("--lookups", type=int, default=20_000)
    ap.add_argument("--work", help="directory to keep the lake and dataset in (default: a temporary one)")
    ap.add_argument("--out", help="write DATE-python-package.{json,md} here")
    a = ap.parse_args()
    work = Path(a.work or tempfile.mkdtemp(prefix="pkgread-"))
    lake, ds = work / f"lake-{a.series}", work / "snaps" / f"S{a.series}"
    if not ds.exists():
        if not lake.exists():
            write_lake(lake, a.series, a.rows)
        subprocess.run([a.bin, "build", "--input", str(lake), "--out", str(ds), "--progress", "none"],
                       check=True, stdout=subprocess.DEVNULL)
    servingsnap.open(ds).close()  # warm the page cache
    opens = []
    for _ in range(a.opens):
        t = time.perf_counter()
        s = servingsnap.open(ds)
        opens.append(time.perf_counter() - t)
        s.close()
    snap = servingsnap.open(ds)
    rnd = random.Random(1)
    ids = [f"BENCH.{rnd.randrange(a.series):07d}.M" for _ in range(a.lookups)]
    for sid in ids[:1000]:  # first touches of batches and index pages
        snap.series(sid)
    looks = []
    for sid in ids:
        t = time.perf_counter()
        r = snap.series(sid)
        looks.append(time.perf_counter() - t)
        assert r.num_rows == a.rows
    res = {
        "date": dt.date.today().isoformat(),
        "series": snap.series_count, "rows": snap.manifest["stats"]["rows"],
        "open_ms_p50": statistics.median(opens) * 1e3, "open_ms_p99": pct(opens, 0.99) * 1e3,
        "lookup_us_p50": statistics.median(looks) * 1e6, "lookup_us_p99": pct(looks, 0.99) * 1e6,
        "opens": a.opens, "lookups": a.lookups, "python": sys.version.split()[0], "pyarrow": pa.__version__,
    }
    snap.close()
    print(json.dumps(res, indent=2))
    if a.out:
        out = Path(a.out)
        (out / f"{res['date']}-python-package.json").write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
