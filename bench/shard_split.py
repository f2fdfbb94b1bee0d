#!/usr/bin/env python3
"""Sharded builds of one unbucketed lake, each way: N shard builds of the lake
(`build --shard I/N`, each reading the whole lake) against the two-phase split
(N parts of `snapbuild split`, then N `build --from-split`), for N = 1, 2, 4.

Every job runs one after another on this machine; the figures are each job's
own `--json` summary (`seconds`, `bytes_read`), summed per way (job-seconds,
bytes read) and the way's critical path with one pod per job (the longest
split part plus the longest shard build). Every shard built from the split is
checked against the same shard built from the lake (data and index
checksums): a difference stops the run.

    python3 bench/shard_split.py --bin bin/snapbuild --lake /tmp/lake \
        [--series 20000 --files-per-year 2] [--shards 1,2,4] [--runs 3] \
        [--out bench/results] [--tag shard-split]

The lake is generated (`snapbuild gen`) when --lake does not exist.
`--render results/DATE-shard-split.json` rewrites the .md from a run's JSON.
"""

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile


def run_json(cmd):
    """Runs cmd, returns its --json output with "cpu_seconds" (user + system of the child) added."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")
    out = json.loads(p.stdout)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if "shards" in out and isinstance(out["shards"], list):
        out["shards"][0]["cpu_seconds"] = cpu
    else:
        out["cpu_seconds"] = cpu
    return out


def lake_bytes(lake):
    total = 0
    for d, _, files in os.walk(lake):
        total += sum(os.path.getsize(os.path.join(d, f)) for f in files if f.endswith(".parquet"))
    return total


def checksums(manifest):
    with open(manifest) as f:
        m = json.load(f)
    return {f["role"]: f["checksum"] for f in m["files"] if f["role"] in ("data", "index")}


def plain(binary, lake, n, work):
    out = os.path.join(work, f"plain{n}", "PET")
    jobs = []
    for i in range(n):
        s = run_json([binary, "build", "--input", lake, "--out", out, "--shard", f"{i}/{n}", "--json"])
        jobs.append(s["shards"][0])
    return {
        "bytes_read": sum(j["bytes_read"] for j in jobs),
        "job_seconds": sum(j["seconds"] for j in jobs),
        "cpu_seconds": sum(j["cpu_seconds"] for j in jobs),
        "critical_seconds": max(j["seconds"] for j in jobs),
        "builds": [{"seconds": j["seconds"], "cpu_seconds": j["cpu_seconds"], "bytes_read": j["bytes_read"], "rows": j["rows"]} for j in jobs],
        "manifests": [j["manifest"] for j in jobs],
    }


def split(binary, lake, n, work):
    d = os.path.join(work, f"split{n}")
    out = os.path.join(work, f"fromsplit{n}", "PET")
    parts = [run_json([binary, "split", "--input", lake, "--shards", str(n), "--part", f"{j}/{n}", "--out", d, "--json"])
             for j in range(n)]
    builds = [run_json([binary, "build", "--from-split", d, "--out", out, "--shard", f"{i}/{n}", "--json"])["shards"][0]
              for i in range(n)]
    return {
        "bytes_read": sum(p["bytes_read"] for p in parts) + sum(b["bytes_read"] for b in builds),
        "job_seconds": sum(p["seconds"] for p in parts) + sum(b["seconds"] for b in builds),
        "cpu_seconds": sum(p["cpu_seconds"] for p in parts) + sum(b["cpu_seconds"] for b in builds),
        "critical_seconds": max(p["seconds"] for p in parts) + max(b["seconds"] for b in builds),
        "piece_bytes": sum(p["piece_bytes"] for p in parts),
        "parts": [{"seconds": p["seconds"], "cpu_seconds": p["cpu_seconds"], "bytes_read": p["bytes_read"], "piece_bytes": p["piece_bytes"], "rows": p["rows"]} for p in parts],
        "builds": [{"seconds": b["seconds"], "cpu_seconds": b["cpu_seconds"], "bytes_read": b["bytes_read"], "rows": b["rows"]} for b in builds],
        "manifests": [b["manifest"] for b in builds],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="bin/snapbuild")
    ap.add_argument("--lake")
    ap.add_argument("--render", metavar="JSON", help="rewrite the .md of a run's JSON, running nothing")
    ap.add_argument("--series", type=int, default=20000)
    ap.add_argument("--files-per-year", type=int, default=2)
    ap.add_argument("--shards", default="1,2,4")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--tag", default="shard-split")
    a = ap.parse_args()
    if a.render:
        render(a.render)
        return
    if not a.lake:
        ap.error("--lake is required")
    if not os.path.exists(a.lake):
        run_json([a.bin, "gen", "--out", a.lake, "--series", str(a.series), "--files-per-year", str(a.files_per_year), "--json"])
    size = lake_bytes(a.lake)
    ns = [int(x) for x in a.shards.split(",")]
    load = os.getloadavg()
    results = {n: {"plain": [], "split": []} for n in ns}
    rows = None
    for r in range(a.runs):
        for n in ns:
            work = tempfile.mkdtemp(prefix="shard-split-")
            try:
                p = plain(a.bin, a.lake, n, work)
                s = split(a.bin, a.lake, n, work)
                for mp, ms in zip(p.pop("manifests"), s.pop("manifests")):
                    if checksums(mp) != checksums(ms):
                        sys.exit(f"N={n}: {ms} differs from {mp}")
                rows = sum(b["rows"] for b in p["builds"])
                results[n]["plain"].append(p)
                results[n]["split"].append(s)
                print(f"run {r} N={n}: plain {p['job_seconds']:.2f}s ({p['cpu_seconds']:.2f} cpu) {p['bytes_read'] / size:.2f}x, "
                      f"split {s['job_seconds']:.2f}s ({s['cpu_seconds']:.2f} cpu) {s['bytes_read'] / size:.2f}x", file=sys.stderr)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    date = datetime.date.today().isoformat()
    meta = {"date": date, "commit": commit, "lake": a.lake, "lake_bytes": size, "rows": rows,
            "cpus": os.cpu_count(), "machine": platform.machine(), "load_at_start": load, "runs": a.runs,
            "command": " ".join(sys.argv)}
    base = os.path.join(a.out, f"{date}-{a.tag}")
    with open(base + ".json", "w") as f:
        json.dump({"meta": meta, "results": {str(n): v for n, v in results.items()}}, f, indent=1)
    render(base + ".json")


def render(path):
    """Writes the .md beside the .json a run wrote (--render PATH redoes it)."""
    with open(path) as f:
        doc = json.load(f)
    meta = doc["meta"]
    results = {int(n): v for n, v in doc["results"].items()}
    ns = sorted(results)
    size, rows, load, commit, date = meta["lake_bytes"], meta["rows"], meta["load_at_start"], meta["commit"], meta["date"]
    base = path[:-len(".json")]
    name = os.path.basename(base)

    def med(n, way, key):
        return statistics.median(x[key] for x in results[n][way])

    def rng(n, way, key):
        v = [x[key] for x in results[n][way]]
        return f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f})"

    lines = [
        "# Sharded builds of an unbucketed lake: N full reads against the two-phase split",
        "",
        f"{date}, commit {commit}, {meta['cpus']} cores ({meta['machine']}) shared with other work, "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start. Lake: `snapbuild gen` "
        f"(synthetic EIA-like, year partitions), {rows:,} rows, {size / 2**20:.1f} MiB of Parquet. "
        f"Produced by `{meta['command']}` (bench/shard_split.py); every number in "
        f"[{name}.json]({name}.json).",
        "",
        "Each job runs alone, one after another; the lake and the pieces are local and read from "
        "the page cache after the first run, so the seconds measure computing, not fetching, and the bytes are each job's "
        "own `bytes_read` counter (what it would fetch from object storage). *Plain*: N jobs "
        "`build --input LAKE --shard I/N`. *Split*: N jobs `split --part J/N --shards N`, then N "
        "jobs `build --from-split --shard I/N`. *Job-seconds*: the sum of the jobs' `seconds` "
        "(wall, inflated by the machine's load); *CPU seconds*: the jobs' user + system time "
        "(the cluster's work, steadier under load); *critical path*: with one pod per job, the longest job (plain) or "
        "the longest split part plus the longest shard build (split). Median (min–max) over "
        f"{meta['runs']} runs. Every shard built from the split is byte for byte the shard built from "
        "the lake (data and index checksums compared in every run).",
        "",
        "| N | way | bytes read (MiB) | × lake | job-seconds | CPU seconds | critical path (s) | pieces written (MiB) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n in ns:
        for way in ("plain", "split"):
            b = med(n, way, "bytes_read")
            pieces = f"{med(n, way, 'piece_bytes') / 2**20:.1f}" if way == "split" else "–"
            lines.append(f"| {n} | {way} | {b / 2**20:.1f} | {b / size:.2f} | {rng(n, way, 'job_seconds')} | "
                         f"{rng(n, way, 'cpu_seconds')} | {rng(n, way, 'critical_seconds')} | {pieces} |")
    top = ns[-1]
    rp, rs = med(top, "plain", "bytes_read") / size, med(top, "split", "bytes_read") / size
    cp, cs = med(top, "plain", "cpu_seconds"), med(top, "split", "cpu_seconds")
    lines += [
        "",
        f"Reading: at N = {top} the split way reads {rs:.2f} times the lake where {top} shard builds of "
        f"the lake read it {rp:.2f} times. It costs more computing: a part sorts and encodes every row "
        "of its files into compressed runs and a shard's build decompresses and merges them, where a "
        "shard build of the lake decodes every row but sorts and writes only its own: "
        f"{cs:.1f} CPU seconds against {cp:.1f} at N = {top} here. The split is the way when fetching the "
        "lake costs more than that (object storage, a lake larger than the page cache, many shards); "
        "on a local, cached lake the plain shard builds are quicker.",
    ]
    lines.append("")
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines))
    print(base + ".md")


if __name__ == "__main__":
    main()
