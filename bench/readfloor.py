#!/usr/bin/env python3
"""The read floor: servingsnap's one-series latency against a server that sends pre-encoded bytes.

bench/readfloor (Go) answers each one-series ticket {"dataset":D,"series":[ID]} of a serving root
with the messages servingsnap's own DoGet produced for it, encoded before it listens: its latency
is gRPC, loopback and the client alone, the physical limit of the path. This script starts
snapserve, the floor and the Go rebuild peer (bench/gobaseline, the `make bench` peer) on the same
root and lake in turn (warm page cache, warm-up queries first, the order rotating), sends all
three the same one-series tickets with the benchmark's client (bench/snapbench/client.py) and
reports p50 and p99 of each, ours / floor, peer / floor and ours / peer: a p99 that is the
machine's (every server within a few percent of the floor) shows as such here, with the
repetitions to say so, where `make bench` has three.

--cold measures `make bench`'s cold rows the same way: before each server starts, every input
file of the three (the snapshot's files and the lake's) is evicted from the page cache, and the
queries are sent at once, with no warm-up. servingsnap then faults its mapped pages in while it
answers; the floor and the Go rebuild read their inputs whole before they listen.

    .venv/bin/python bench/readfloor.py [--series 100000] [--runs 3] [--queries 4000]
        [--cold] [--bin bin/snapbuild] [--work bench/work] [--out bench/results]

Results: OUT/DATE-read-floor.txt (with --cold: DATE-read-floor-cold.txt) (one line per run and server, then the medians and the ratios).
"""
import argparse
import datetime
import math
import os
import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

from snapbench import client, launch, lakes, procs  # noqa: E402

DATASET = "bench"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--series", type=int, default=100000, help="series of the generated lake")
    ap.add_argument("--runs", type=int, default=5, help="repetitions (each: every server once, the order rotating)")
    ap.add_argument("--queries", type=int, default=4000, help="one-series queries per server and repetition")
    ap.add_argument("--warmup", type=int, default=200, help="warm-up queries before each measurement")
    ap.add_argument("--bin", default=str(REPO / "bin" / "snapbuild"), help="the snapbuild binary (snapserve beside it)")
    ap.add_argument("--work", default=str(HERE / "work"), help="scratch directory; lakes are cached in WORK/lakes")
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--go", default=os.environ.get("GO", "go"))
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--cold", action="store_true", help="evict every server's input files before it starts and send no warm-up queries")
    ap.add_argument("--tag", default="", help="added to the result's file name (DATE-read-floor-TAG.txt), so a second run of the day keeps the first")
    a = ap.parse_args()
    procs.install_signal_handlers()
    work = pathlib.Path(a.work).resolve()
    logs = work / "logs-readfloor"
    logs.mkdir(parents=True, exist_ok=True)
    floor_bin = launch.go_tool(a.go, work, "readfloor")
    peer_bin = launch.go_tool(a.go, work, "gobaseline")

    lake = lakes.cached_lake(a.bin, work, a.series)
    root = work / f"root-readfloor-s{a.series}"
    lakes.build_root(a.bin, lake, root, DATASET)
    files, _ = lakes.snapshot_files(root / DATASET)
    ids, years, _ = lakes.index_summary(files["index"])

    ours = launch.ours(a.bin, root, DATASET)
    started = [
        ours,
        client.Server("floor", "read floor (pre-encoded bytes)",
                      lambda port: [str(floor_bin), "--root", str(root), "--dataset", DATASET, "--addr", f"127.0.0.1:{port}"],
                      ours.files),
        launch.go_peer(peer_bin, lake, DATASET),
    ]
    every_file = sorted({f for s in started for f in s.files})
    first = client.ticket({"dataset": DATASET, "series": [ids[len(ids) // 2]]})
    lines, res = [], {s.key: {"p50": [], "p99": [], "major": []} for s in started}
    load0 = os.getloadavg()
    for rep in range(a.runs):
        tickets = client.make_tickets(DATASET, ids, years, {"one": a.queries, "range": 0, "batch100": 0, "latest1000": 0},
                                      seed=1000 + rep)["one"]
        warm = client.make_tickets(DATASET, ids, years, {"one": a.warmup, "range": 0, "batch100": 0, "latest1000": 0},
                                   seed=2000 + rep)["one"]
        k = rep % len(started)
        order = started[k:] + started[:k]
        for s in order:
            if a.cold:
                procs.evict(every_file)
            else:
                procs.warm(s.files)
            port = procs.free_port()
            p, secs, _ = client.start(s, port, first, logs / f"{s.key}-rep{rep + 1}.log", a.timeout)
            try:
                loc = f"grpc+tcp://127.0.0.1:{port}"
                if not a.cold:
                    client.latencies(loc, warm, 60)
                _, min0, maj0 = procs.proc_stat(p.pid)
                lat, rows = client.latencies(loc, tickets, 120)
                _, min1, maj1 = procs.proc_stat(p.pid)
            finally:
                procs.stop(p)
            p50, p99 = np.percentile(lat, 50), np.percentile(lat, 99)
            res[s.key]["p50"].append(p50)
            res[s.key]["p99"].append(p99)
            res[s.key]["major"].append(maj1 - maj0)
            line = (f"rep {rep + 1} {s.key:5s}: {len(lat)} queries, {rows} rows, p50 {p50:.1f} µs, p99 {p99:.1f} µs "
                    f"(start-up {secs:.2f} s; during the queries {maj1 - maj0} major, {min1 - min0} minor faults)")
            print(line, flush=True)
            lines.append(line)
    med = {k: {q: float(np.median(v[q])) for q in ("p50", "p99")} for k, v in res.items()}
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    tag = "".join(f"-{t}" for t in ("cold" if a.cold else "", a.tag) if t)
    path = out / f"{datetime.date.today().isoformat()}-read-floor{tag}.txt"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    with open(path, "w") as f:
        f.write(f"# bench/readfloor.py: one-series DoGet latency, servingsnap and the Go rebuild against the read\n")
        f.write(f"# floor (bench/readfloor: the same answers pre-encoded, sent from a map). {a.series:,} series,\n")
        if a.cold:
            f.write(f"# {a.runs} repetitions of {a.queries} queries each, cold: every input file evicted before each start, no warm-up,\n")
        else:
            f.write(f"# {a.runs} repetitions of {a.queries} queries each after {a.warmup} warm-up queries, warm page cache,\n")
        f.write(f"# pyarrow.flight client on loopback, commit {commit}, {os.cpu_count()} cores,\n")
        f.write(f"# load average {' '.join(f'{x:.2f}' for x in load0)} at the start, "
                f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end.\n")
        for line in lines:
            f.write(line + "\n")
        f.write("\nmedians (µs)      p50      p99\n")
        for k in res:
            f.write(f"  {k:10s} {med[k]['p50']:8.1f} {med[k]['p99']:8.1f}\n")
        for x, y in (("ours", "floor"), ("go", "floor"), ("ours", "go")):
            name = f"{x}/{y}"
            f.write(f"  {name:10s} {med[x]['p50'] / med[y]['p50']:8.2f} {med[x]['p99'] / med[y]['p99']:8.2f}\n")
        f.write("\nmajor page faults during a repetition's queries, median (range): "
                + ", ".join(f"{k} {np.median(v['major']):.0f} ({min(v['major'])}–{max(v['major'])})" for k, v in res.items()) + "\n")
        f.write("\nrepetitions where ours is below the Go rebuild (the two measured minutes apart at most, so a\n"
                "slow spell of the machine hits both; the sign test's two-sided p: how likely so uneven a split\n"
                "is between two servers of equal latency)\n")
        for q in ("p50", "p99"):
            wins = sum(o < g for o, g in zip(res["ours"][q], res["go"][q]))
            f.write(f"  {q}: {wins} of {a.runs}, p = {sign_test(wins, a.runs):.3g}\n")
    print(path.read_text())


def sign_test(wins, n):
    """Two-sided sign test: the probability of a split at least as uneven as wins of n under a
    fair coin."""
    k = min(wins, n - wins)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"{time.perf_counter() - t0:.0f} s")
