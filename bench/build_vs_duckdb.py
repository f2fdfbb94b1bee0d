"""Build benchmark: `snapbuild build` against DuckDB's sort-and-write on the same lake.

Both peers run as child processes in the same invocation, alternating, and each run's
wall time and peak RSS (from wait4's rusage, so the child alone) are recorded. Prints
medians, spread and the ratios ours/peer; writes a Markdown table with --md.

    python bench/build_vs_duckdb.py --bin bin/snapbuild [--series 100000] [--runs 3]
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

DUCKDB_SCRIPT = r"""
import duckdb, sys
src, dst = sys.argv[1], sys.argv[2]
con = duckdb.connect()
con.execute(f"COPY (SELECT * FROM read_parquet('{src}/**/*.parquet', hive_partitioning=false, union_by_name=true) "
            f"ORDER BY series_id, period) TO '{dst}' (FORMAT parquet)")
"""


def run(cmd, env=None):
    """Run cmd; return (seconds, peak RSS bytes, stdout)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    secs = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{cmd[0]} failed: {err.decode()[-2000:]}")
    return secs, ru.ru_maxrss * 1024, out


def med(xs):
    return statistics.median(xs)


def spread(xs):
    return f"{min(xs):.2f}–{max(xs):.2f}" if len(xs) > 1 else f"{xs[0]:.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="bin/snapbuild")
    ap.add_argument("--series", type=int, default=100000, help="series in the generated lake (100k ≈ 15M rows)")
    ap.add_argument("--lake", help="reuse this lake instead of generating one")
    ap.add_argument("--work", default="bench/work", help="scratch directory (lakes are cached here)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--md", help="write the result table to this Markdown file")
    a = ap.parse_args()

    work = pathlib.Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    lake = pathlib.Path(a.lake) if a.lake else work / f"lake-{a.series}"
    if not lake.exists():
        print(f"generating {lake} ({a.series} series)…", flush=True)
        subprocess.run([a.bin, "gen", "--out", str(lake), "--series", str(a.series), "--seed", "1"], check=True)
    lake_bytes = sum(p.stat().st_size for p in lake.rglob("*.parquet"))

    ours, peer = [], []
    summary = None
    for i in range(a.runs):
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            secs, rss, out = run([a.bin, "build", "--input", str(lake), "--out", f"{tmp}/DS", "--json"])
            summary = json.loads(out)
            ours.append((secs, rss))
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            dst = f"{tmp}/sorted.parquet"
            secs, rss, _ = run([sys.executable, "-c", DUCKDB_SCRIPT, str(lake), dst])
            peer.append((secs, rss, os.path.getsize(dst)))
        print(f"run {i+1}: snapbuild {ours[-1][0]:.2f}s {ours[-1][1]/2**30:.2f} GiB | "
              f"duckdb {peer[-1][0]:.2f}s {peer[-1][1]/2**30:.2f} GiB", flush=True)

    o_t, o_m = [x[0] for x in ours], [x[1] / 2**30 for x in ours]
    p_t, p_m = [x[0] for x in peer], [x[1] / 2**30 for x in peer]
    data = next(f["size"] for f in summary["files"] if f["role"] == "data")
    index = next(f["size"] for f in summary["files"] if f["role"] == "index")
    lines = [
        f"Build: {summary['rows']:,} rows, {summary['series']:,} series, input {lake_bytes/2**20:.0f} MiB Parquet; "
        f"{a.runs} alternating runs, medians (min–max).",
        "",
        "| | snapbuild build | DuckDB COPY … ORDER BY | ours / peer |",
        "|---|---|---|---|",
        f"| wall time (s) | {med(o_t):.2f} ({spread(o_t)}) | {med(p_t):.2f} ({spread(p_t)}) | {med(o_t)/med(p_t):.2f} |",
        f"| peak RSS (GiB) | {med(o_m):.2f} ({spread(o_m)}) | {med(p_m):.2f} ({spread(p_m)}) | {med(o_m)/med(p_m):.2f} |",
        f"| output (MiB) | data {data/2**20:.1f} + index {index/2**20:.1f} | {peer[-1][2]/2**20:.1f} | |",
        "",
        f"index / data = {index/data*100:.2f}%",
    ]
    print("\n".join(lines))
    if a.md:
        pathlib.Path(a.md).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
