#!/usr/bin/env python3
"""What each server spends per query: CPU, garbage collections and page faults, ours against the Go rebuild.

Latency says how long a client waits; this says what the server process does for it. The script
starts servingsnap (snapserve) and the Go rebuild peer (bench/gobaseline) on the same lake in turn,
each with GODEBUG=gctrace=1 and a warm page cache, sends both the same warm-up and then the same
tickets of each workload (one series, a 100-series batch, latest of 1000) with the benchmark's
client, and reads the server's /proc/PID/stat before and after each workload: CPU time (user +
system), minor and major page faults, and the collections the Go runtime logged meanwhile.

    .venv/bin/python bench/servertrace.py [--series 100000] [--queries 4000]
        [--bin bin/snapbuild] [--work bench/work] [--out bench/results]

Results: OUT/DATE-server-trace.txt (per server and workload: queries, CPU µs a query, collections
per 1,000 queries, minor and major faults a query, RssAnon after).
"""
import argparse
import datetime
import os
import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from snapbench import client, launch, lakes, procs  # noqa: E402

DATASET = "bench"


def gc_lines(log_path):
    """How many collections the runtime has logged (gctrace lines start with "gc ")."""
    with open(log_path, errors="replace") as f:
        return sum(1 for line in f if line.startswith("gc "))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--series", type=int, default=100000, help="series of the generated lake")
    ap.add_argument("--queries", type=int, default=4000, help="one-series queries (batches and latest: a tenth)")
    ap.add_argument("--warmup", type=int, default=500, help="warm-up queries of each workload before measuring")
    ap.add_argument("--bin", default=str(REPO / "bin" / "snapbuild"), help="the snapbuild binary (snapserve beside it)")
    ap.add_argument("--work", default=str(HERE / "work"), help="scratch directory; lakes are cached in WORK/lakes")
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--go", default=os.environ.get("GO", "go"))
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    procs.install_signal_handlers()
    work = pathlib.Path(a.work).resolve()
    logs = work / "logs-servertrace"
    logs.mkdir(parents=True, exist_ok=True)
    peer_bin = launch.go_tool(a.go, work, "gobaseline")

    lake = lakes.cached_lake(a.bin, work, a.series)
    root = work / f"root-servertrace-s{a.series}"
    lakes.build_root(a.bin, lake, root, DATASET)
    files, _ = lakes.snapshot_files(root / DATASET)
    ids, years, _ = lakes.index_summary(files["index"])
    traced = [launch.ours(a.bin, root, DATASET), launch.go_peer(peer_bin, lake, DATASET)]
    counts = {"one": a.queries, "range": 0, "batch100": a.queries // 10, "latest1000": a.queries // 10}
    tickets = client.make_tickets(DATASET, ids, years, counts, seed=7)
    warm = client.make_tickets(DATASET, ids, years, {k: min(v, a.warmup) for k, v in counts.items()}, seed=8)
    first = client.ticket({"dataset": DATASET, "series": [ids[len(ids) // 2]]})
    os.environ["GODEBUG"] = "gctrace=1"  # inherited by the servers: one line per collection
    load0 = os.getloadavg()
    lines = []
    for s in traced:
        procs.warm(s.files)
        port = procs.free_port()
        log = logs / f"{s.key}.log"
        p, secs, _ = client.start(s, port, first, log, a.timeout)
        loc = f"grpc+tcp://127.0.0.1:{port}"
        try:
            for w in ("one", "batch100", "latest1000"):
                client.latencies(loc, warm[w], 60)
                cpu0, min0, maj0 = procs.proc_stat(p.pid)
                gc0 = gc_lines(log)
                lat, _ = client.latencies(loc, tickets[w], 120)
                cpu1, min1, maj1 = procs.proc_stat(p.pid)
                gc1 = gc_lines(log)
                n = len(lat)
                rss = procs.proc_status(p.pid).get("RssAnon", 0)
                line = (f"{s.key:5s} {w:10s} {n:6d} queries: CPU {1e6 * (cpu1 - cpu0) / n:8.1f} µs/query, "
                        f"{1000 * (gc1 - gc0) / n:6.2f} collections per 1,000 queries, "
                        f"faults {(min1 - min0) / n:7.2f} minor, {(maj1 - maj0) / n:5.3f} major a query, "
                        f"RssAnon after {rss / 2**20:7.1f} MiB")
                print(line, flush=True)
                lines.append(line)
        finally:
            procs.stop(p)
    os.environ.pop("GODEBUG", None)
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{datetime.date.today().isoformat()}-server-trace.txt"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    with open(path, "w") as f:
        f.write("# bench/servertrace.py: what each server process spends per query (from /proc/PID/stat and\n")
        f.write(f"# GODEBUG=gctrace=1), warm page cache, after {a.warmup} warm-up queries of each workload.\n")
        f.write(f"# {a.series:,} series, pyarrow.flight client on loopback, commit {commit}, {os.cpu_count()} cores,\n")
        f.write(f"# load average {' '.join(f'{x:.2f}' for x in load0)} at the start, "
                f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end.\n")
        for line in lines:
            f.write(line + "\n")
    print(path.read_text())


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"{time.perf_counter() - t0:.0f} s")
