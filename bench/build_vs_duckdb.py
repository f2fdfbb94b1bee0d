"""Build benchmark: `snapbuild build` against DuckDB's sort-and-write on the same lake.

Both peers run as child processes in the same invocation, alternating, and each run's
wall time and peak RSS (from wait4's rusage, so the child alone) are recorded. Prints
medians, spread and the ratios ours/peer; writes a Markdown table with --md.
The same comparison is section 4 of the full harness (bench/harness.py, `make bench`).

    python bench/build_vs_duckdb.py --bin bin/snapbuild [--series 100000] [--runs 3]
"""
import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from snapbench import buildcmp, lakes, procs  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="bin/snapbuild")
    ap.add_argument("--series", type=int, default=100000, help="series in the generated lake (100k ≈ 15M rows)")
    ap.add_argument("--lake", help="reuse this lake instead of generating one")
    ap.add_argument("--work", default="bench/work", help="scratch directory (lakes are cached here)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--md", help="write the result table to this Markdown file")
    a = ap.parse_args()

    procs.install_signal_handlers()
    work = pathlib.Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    lake = pathlib.Path(a.lake) if a.lake else lakes.cached_lake(a.bin, work, a.series)
    res = buildcmp.compare(a.bin, lake, work, a.runs)
    lines = buildcmp.table(res, lakes.parquet_bytes(lake))
    print("\n".join(lines))
    if a.md:
        pathlib.Path(a.md).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
