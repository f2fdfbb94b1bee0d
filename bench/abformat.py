"""A/B of two snapbuild binaries, end to end: one-series and period-range DoGet latency
(pyarrow.flight on loopback, warm page cache) of the benchmark's 100k-series lake built by
each, served by the old binary's server on its own snapshot (old-v4), by the new server on the
old snapshot (new-v4) and on its own (new-v5); the order rotates each repetition.

    python bench/abformat.py OLD_SNAPBUILD NEW_SNAPBUILD [RUNS] [WORK]

bench/results/2026-12-07-format-ab.txt: OLD at 983bded (index format 4), NEW at 68bbe21 (5).
"""
import pathlib
import sys

import numpy as np

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from snapbench import client, lakes, launch, procs  # noqa: E402

procs.install_signal_handlers()
DATASET = "bench"
OLD, NEW = sys.argv[1], sys.argv[2]      # snapbuild binaries (snapserve beside)
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 7
work = REPO / "bench" / "work"
ab = pathlib.Path(sys.argv[4]) if len(sys.argv) > 4 else work / "ab"
lake = lakes.cached_lake(NEW, work, 100_000)
r4, r5 = ab / "root-v4", ab / "root-v5"
for b, r in ((OLD, r4), (NEW, r5)):
    if not (r / DATASET / "CURRENT").exists():
        lakes.build_root(b, lake, r, DATASET)
files, _ = lakes.snapshot_files(r5 / DATASET)
ids, years, _ = lakes.index_summary(files["index"])
servers = [launch.ours(OLD, r4, DATASET, key="old-v4"), launch.ours(NEW, r4, DATASET, key="new-v4"),
           launch.ours(NEW, r5, DATASET, key="new-v5")]
first = client.ticket({"dataset": DATASET, "series": [ids[len(ids) // 2]]})
res = {}
logs = ab / "logs"
logs.mkdir(parents=True, exist_ok=True)
for rep in range(runs):
    T = client.make_tickets(DATASET, ids, years, {"one": 4000, "range": 4000, "batch100": 0, "latest1000": 0}, seed=1000 + rep)
    W = client.make_tickets(DATASET, ids, years, {"one": 200, "range": 0, "batch100": 0, "latest1000": 0}, seed=2000 + rep)["one"]
    k = rep % len(servers)
    for s in servers[k:] + servers[:k]:
        procs.warm(s.files)
        port = procs.free_port()
        p, secs, _ = client.start(s, port, first, logs / f"{s.key}-{rep}.log", 300)
        try:
            loc = f"grpc+tcp://127.0.0.1:{port}"
            client.latencies(loc, W, 60)
            for w in ("one", "range"):
                lat, _ = client.latencies(loc, T[w], 120)
                res.setdefault((s.key, w), []).append((np.percentile(lat, 50), np.percentile(lat, 99)))
        finally:
            procs.stop(p)
        print(rep, s.key, [(w, [round(x) for x in res[(s.key, w)][-1]]) for w in ("one", "range")], flush=True)
print("\nmedians over reps (µs): p50 p99")
for (k, w), v in sorted(res.items()):
    a = np.array(v)
    print(f"{k:8s} {w:6s} {np.median(a[:,0]):8.1f} {np.median(a[:,1]):8.1f}   p99 reps {sorted(round(x) for x in a[:,1])}")
