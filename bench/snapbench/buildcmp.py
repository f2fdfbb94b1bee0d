"""Build cost: `snapbuild build` against DuckDB's sort-and-write on the same lake.

With it, the two ways to get a Parquet copy of a snapshot: `snapbuild build --portable`
(the build's own portable.parquet, its `extra` phase) and `snapbuild export DS out.parquet`
of the whole snapshot, each set against the plain build and against the same DuckDB COPY.

Both peers run as child processes, alternating, in the same invocation; each run's wall time
and peak RSS (wait4's rusage, so the child alone) are recorded. The DuckDB peer is what a data
engineer would write instead: COPY (SELECT * FROM read_parquet(...) ORDER BY series_id, period)
TO a Parquet file. It neither normalises periods nor builds an index, so it is a lower bound
for "sort and write".
"""
import json
import os
import sys
import tempfile

from . import procs
from .stats import med, spread

DUCKDB_SCRIPT = r"""
import duckdb, sys
src, dst = sys.argv[1], sys.argv[2]
con = duckdb.connect()
con.execute(f"COPY (SELECT * FROM read_parquet('{src}/**/*.parquet', hive_partitioning=false, union_by_name=true) "
            f"ORDER BY series_id, period) TO '{dst}' (FORMAT parquet)")
"""


def build_ours(snapbuild, lake, dataset_dir):
    """snapbuild build --json; returns (seconds, peak RSS bytes, parsed summary, CPU seconds)."""
    secs, rss, out, cpu = procs.run_measured_cpu([str(snapbuild), "build", "--input", str(lake), "--out", str(dataset_dir), "--json"])
    return secs, rss, json.loads(out), cpu


def build_portable(snapbuild, lake, dataset_dir):
    """snapbuild build --portable --json; returns (seconds, peak RSS, the portable copy's seconds, CPU seconds)."""
    secs, rss, out, cpu = procs.run_measured_cpu([str(snapbuild), "build", "--input", str(lake), "--out", str(dataset_dir),
                                                  "--portable", "--json"])
    return secs, rss, json.loads(out)["phases"].get("extra", 0.0), cpu


def export_whole(snapbuild, dataset_dir, dst):
    """snapbuild export DS out.parquet (every row); returns (seconds, peak RSS, output bytes, CPU seconds)."""
    secs, rss, _, cpu = procs.run_measured_cpu([str(snapbuild), "export", str(dataset_dir), str(dst), "--json"])
    return secs, rss, os.path.getsize(dst), cpu


def duckdb_copy(lake, dst, python=sys.executable):
    """DuckDB COPY ... ORDER BY ... TO parquet in a child Python; returns (seconds, peak RSS, output bytes)."""
    secs, rss, _ = procs.run_measured([python, "-c", DUCKDB_SCRIPT, str(lake), str(dst)])
    return secs, rss, os.path.getsize(dst)


def compare(snapbuild, lake, work, runs, log=print):
    """Alternate `runs` builds of each peer; return the raw numbers."""
    ours, peer, portable, export, summary = [], [], [], [], None
    for i in range(runs):
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            secs, rss, summary, cpu = build_ours(snapbuild, lake, f"{tmp}/DS")
            ours.append({"seconds": secs, "peak_rss": rss, "cpu_seconds": cpu})
            secs, rss, size, cpu = export_whole(snapbuild, f"{tmp}/DS", f"{tmp}/export.parquet")
            export.append({"seconds": secs, "peak_rss": rss, "bytes": size, "cpu_seconds": cpu})
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            secs, rss, copy, cpu = build_portable(snapbuild, lake, f"{tmp}/DS")
            portable.append({"seconds": secs, "peak_rss": rss, "copy_seconds": copy, "cpu_seconds": cpu})
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            secs, rss, size = duckdb_copy(lake, f"{tmp}/sorted.parquet")
            peer.append({"seconds": secs, "peak_rss": rss, "bytes": size})
        log(f"  build run {i + 1}/{runs}: snapbuild {ours[-1]['seconds']:.2f}s {ours[-1]['peak_rss'] / 2**30:.2f} GiB | "
            f"duckdb {peer[-1]['seconds']:.2f}s {peer[-1]['peak_rss'] / 2**30:.2f} GiB | "
            f"--portable copy {portable[-1]['copy_seconds']:.2f}s | export {export[-1]['seconds']:.2f}s")
    files = {f["role"]: f["size"] for f in summary["files"]}
    return {"ours": ours, "duckdb": peer, "portable": portable, "export": export, "rows": summary["rows"], "series": summary["series"],
            "data_bytes": files.get("data"), "index_bytes": files.get("index"), "phases": summary.get("phases", {})}


def table(res, lake_bytes):
    """The build comparison as Markdown lines."""
    o_t = [r["seconds"] for r in res["ours"]]
    p_t = [r["seconds"] for r in res["duckdb"]]
    o_m = [r["peak_rss"] / 2**30 for r in res["ours"]]
    p_m = [r["peak_rss"] / 2**30 for r in res["duckdb"]]
    data, index = res["data_bytes"], res["index_bytes"]

    def c(xs):
        return f"{med(xs):.2f} ({spread(xs)})" if len(xs) > 1 else f"{xs[0]:.2f}"

    runs = f"{len(o_t)} alternating runs, medians (min–max)." if len(o_t) > 1 else "one run each."
    return [
        f"Build: {res['rows']:,} rows, {res['series']:,} series, input {lake_bytes / 2**20:.0f} MiB Parquet; {runs}",
        "",
        "| | snapbuild build | DuckDB COPY … ORDER BY | ours / peer |",
        "|---|---|---|---|",
        f"| wall time (s) | {c(o_t)} | {c(p_t)} | {med(o_t) / med(p_t):.2f} |",
        f"| peak RSS (GiB) | {c(o_m)} | {c(p_m)} | {med(o_m) / med(p_m):.2f} |",
        f"| output (MiB) | data {data / 2**20:.1f} + index {index / 2**20:.1f} | {res['duckdb'][-1]['bytes'] / 2**20:.1f} | |",
        "",
        f"index / data = {index / data * 100:.2f}%",
    ] + copy_table(res)


def copy_table(res):
    """The Parquet copies against the build and DuckDB, as Markdown lines (none for results
    recorded before they were measured)."""
    if not res.get("portable"):
        return []
    b = med([r["seconds"] for r in res["ours"]])
    d = med([r["seconds"] for r in res["duckdb"]])
    cp = [r["copy_seconds"] for r in res["portable"]]
    ex = [r["seconds"] for r in res["export"]]

    def c(xs):
        return f"{med(xs):.2f} ({spread(xs)})" if len(xs) > 1 else f"{xs[0]:.2f}"

    lines = [
        "",
        "Parquet copies of the snapshot, same runs (the portable copy: `build --portable`'s extra phase; "
        "export: `snapbuild export DS out.parquet`, a process of its own):",
        "",
        "| | seconds | / build | / DuckDB COPY |",
        "|---|---|---|---|",
        f"| portable copy | {c(cp)} | {med(cp) / b:.2f} | {med(cp) / d:.2f} |",
        f"| export to Parquet | {c(ex)} | {med(ex) / b:.2f} | {med(ex) / d:.2f} |",
        f"| export output (MiB) | {res['export'][-1]['bytes'] / 2**20:.1f} | | |",
    ]
    if all("cpu_seconds" in r for k in ("ours", "portable", "export") for r in res[k]):
        # CPU seconds (user + system) of the same processes: the copy's is the median of
        # `build --portable` less the median of the plain build.
        bc = med([r["cpu_seconds"] for r in res["ours"]])
        pc = med([r["cpu_seconds"] for r in res["portable"]]) - bc
        ec = [r["cpu_seconds"] for r in res["export"]]
        lines += [
            "",
            "CPU seconds (user + system) of the same processes, which a shared machine's load moves far less "
            "than the wall time (the portable copy's: the median of `build --portable` less the plain build's):",
            "",
            "| | CPU seconds | / build's CPU |",
            "|---|---|---|",
            f"| build | {c([r['cpu_seconds'] for r in res['ours']])} | 1 |",
            f"| portable copy | {pc:.2f} | {pc / bc:.2f} |",
            f"| export to Parquet | {c(ec)} | {med(ec) / bc:.2f} |",
        ]
    return lines
