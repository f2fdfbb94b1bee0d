"""Rewrite the benchmark figures of README.md, bench/README.md and docs/*.md from the committed runs.

    python bench/report.py [--results bench/results] [--profile default] [--check]

Every figure the documentation quotes lives between markers

    <!-- bench:NAME -->
    ... generated, do not edit ...
    <!-- /bench -->

and is regenerated here from bench/results/*.json (what bench/harness.py writes), so no figure
can drift from its run: each table row links the run(s) it comes from. NAME is one of:

  serve    servers side by side: start-up, memory, latency (cold and warm), median (min–max)
           over the repetitions of the newest run, and the second invocation's median when the
           newest date has two runs of the profile
  ratios   ours / peer of the newest run next to the oldest committed run of the profile
  build    snapbuild build against DuckDB's sort-and-write, from the newest run with a build
  sizes    data file, index sidecar and the same index as JSON, from the newest run with sizes
  runs     the list of runs these figures come from
  replica  a --read-only replica beside a writer (pkg/serve BenchmarkReplica): staleness and
           one-series latency, median (min–max) over the newest *-replica-go-bench.txt
  live     the live-write figures (build against compaction, WAL replay, DoGet over a delta,
           paced ingest) from the newest *-live-go-bench.txt
  seed     the seed profile (bench/snapbench/seed.py): both lake shapes against the Go rebuild,
           live writes and a compaction, from the newest *-seed*.json that has them (a full-size
           run before a --fraction run of the same date; a fraction run says so)

--check exits 1 (rewriting nothing) when a file is not what the runs generate.
Standard library only.
"""
import argparse
import json
import os
import pathlib
import re
import statistics
import sys

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
ORDER = ["ours", "go", "py", "duck"]
SHORT = {"ours": "servingsnap", "go": "Go rebuild", "py": "Python rebuild (Polars)", "duck": "DuckDB table"}
RESULTS = str(HERE / "results")
REGION = re.compile(r"(<!-- bench:(\w+) -->\n)(.*?)(<!-- /bench -->)", re.S)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def g3(x):
    if x is None:
        return "–"
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def spread(xs, scale=1.0):
    """median (min–max) of one run's repetitions."""
    xs = [x / scale for x in xs if x is not None]
    if not xs:
        return "–"
    return g3(med(xs)) if len(xs) == 1 else f"{g3(med(xs))} ({g3(min(xs))}–{g3(max(xs))})"


def ratio(a, b):
    a, b = med(a or []), med(b or [])
    if a is None or not b:
        return "–"
    r = a / b
    if r < 0.5:
        n = 1 / r
        return f"1/{n:,.0f}" if n >= 10 else f"1/{n:.1f}"
    return f"{r:.2f}"


class Run:
    def __init__(self, path):
        self.path = path
        self.R = json.loads(path.read_text())
        self.meta = self.R["meta"]
        self.md = path.with_suffix(".md")

    @property
    def date(self):
        return self.meta["date"]

    def link(self, here):
        rel = os.path.relpath(self.md, here.parent)
        return f"[{self.md.stem}]({rel})"

    # ---- what a figure reads ----

    def serve(self):
        return self.R.get("serve") or {}

    def startup(self, k, mode="warm"):
        return self.serve().get(f"startup_{mode}", {}).get(k, [])

    def mem(self, k, which, field):
        return [x[field] for x in self.serve().get(which, {}).get(k, [])]

    def lat(self, k, w, p, mode="warm"):
        key = "latency" if mode == "warm" else "latency_cold"
        return [x[p] for x in self.serve().get(key, {}).get(k, {}).get(w, [])]

    def keys(self):
        return [k for k in ORDER if k in self.serve().get("labels", {})]


def load_runs(results, profile):
    runs = []
    for p in sorted(pathlib.Path(results).glob("*.json")):
        try:
            r = Run(p)
        except (ValueError, KeyError):
            continue
        if r.meta.get("profile") == profile and not r.R.get("error") and r.md.exists():
            runs.append(r)
    runs.sort(key=lambda r: (r.date, invocation(r.path.stem)))
    return runs


def invocation(stem):
    """The invocation number of a result file DATE-PROFILE[-N] (`make bench`
    names the second invocation's files PROFILE-2, ...): 1 for none. Sorting
    by name would put DATE-default-2 before DATE-default ('-' < '.')."""
    last = stem.rsplit("-", 1)[-1]
    return int(last) if last.isdigit() and len(last) < 3 else 1


# ---- regions ----

SERVE_ROWS = [
    # label, getter(run, key) -> list, scale
    ("start-up to first answered query, warm (s)", lambda r, k: r.startup(k, "warm"), 1),
    ("start-up to first answered query, cold (s)", lambda r, k: r.startup(k, "cold"), 1),
    ("private memory (RssAnon) after start-up (MiB)", lambda r, k: r.mem(k, "mem_start", "RssAnon"), 2**20),
    ("peak RSS during start-up, VmHWM (MiB)", lambda r, k: r.mem(k, "mem_start", "VmHWM"), 2**20),
    ("RssAnon after the queries, warm (MiB)", lambda r, k: r.mem(k, "mem_after", "RssAnon"), 2**20),
    ("RssFile after the queries, cold / warm (MiB)", None, 2**20),
    ("one series, p50 warm (ms)", lambda r, k: r.lat(k, "one", "p50"), 1e3),
    ("one series, p99 warm (ms)", lambda r, k: r.lat(k, "one", "p99"), 1e3),
    ("one series, p50 cold (ms)", lambda r, k: r.lat(k, "one", "p50", "cold"), 1e3),
    ("one series, p99 cold (ms)", lambda r, k: r.lat(k, "one", "p99", "cold"), 1e3),
    ("100-series batch, p50 warm (ms)", lambda r, k: r.lat(k, "batch100", "p50"), 1e3),
    ("latest values of 1000 series, p50 warm (ms)", lambda r, k: r.lat(k, "latest1000", "p50"), 1e3),
]


def region_serve(runs, here):
    newest = [r for r in runs if r.date == runs[-1].date and r.serve()]
    if not newest:
        return None
    r0 = newest[0]
    keys = r0.keys()
    second = newest[1] if len(newest) > 1 else None
    links = " and ".join(r.link(here) for r in newest[:2])
    L = ["| | " + " | ".join(SHORT[k] for k in keys) + " | run |", "|---" * (len(keys) + 2) + "|"]
    for label, get, scale in SERVE_ROWS:
        cells = []
        for k in keys:
            if get is None:  # RssFile cold / warm
                c = spread(r0.mem(k, "mem_after_cold", "RssFile"), scale) + " / " + spread(r0.mem(k, "mem_after", "RssFile"), scale)
            else:
                xs = get(r0, k)
                if not xs:
                    c = "–"
                else:
                    c = spread(xs, scale)
                    if second is not None and get(second, k):
                        c += f"; 2nd: {g3(med(get(second, k)) / scale)}"
            cells.append(c)
        if all(c.startswith("–") for c in cells):
            continue
        L.append(f"| {label} | " + " | ".join(cells) + f" | {links} |")
    reps = r0.meta.get("runs")
    inv = "two invocations (the second's median after `2nd:`)" if second is not None else "one invocation"
    L += ["", f"Median (min–max) over {reps} repetitions, {inv}; {r0.R['lake']['rows']:,} rows, "
          f"{r0.R['lake']['series']:,} series, {r0.meta['machine'].get('cores')} cores, load average "
          f"{' '.join(r0.meta.get('loadavg_start') or [])} at the start."]
    return "\n".join(L)


RATIO_ROWS = [
    ("start-up, warm", lambda r, k: r.startup(k, "warm")),
    ("start-up, cold", lambda r, k: r.startup(k, "cold")),
    ("RssAnon after start-up", lambda r, k: r.mem(k, "mem_start", "RssAnon")),
    ("peak RSS during start-up", lambda r, k: r.mem(k, "mem_start", "VmHWM")),
    ("one series p50, warm", lambda r, k: r.lat(k, "one", "p50")),
    ("latest values of 1000 series p50, warm", lambda r, k: r.lat(k, "latest1000", "p50")),
]


def region_ratios(runs, here):
    served = [r for r in runs if r.serve()]
    if not served:
        return None
    old = served[0]
    new = [r for r in served if r.date == served[-1].date][0]  # the newest date's first invocation
    peers = [k for k in ORDER[1:] if k in old.keys() or k in new.keys()]
    cols = []
    for k in peers:
        if old is not new and k in old.keys():
            cols.append((k, old))
        if k in new.keys():
            cols.append((k, new))
    L = ["| ours / peer | " + " | ".join(f"{SHORT[k]}, {r.date}" for k, r in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for label, get in RATIO_ROWS:
        cells = [ratio(get(r, "ours"), get(r, k)) for k, r in cols]
        if all(c == "–" for c in cells):
            continue
        L.append(f"| {label} | " + " | ".join(cells) + " |")
    L += ["", "Runs: " + ", ".join(r.link(here) for r in ([old, new] if old is not new else [new])) +
          ". Below 1 favours servingsnap; `1/N` is N times less."]
    return "\n".join(L)


def region_build(runs, here):
    rs = [r for r in runs if r.R.get("build")]
    if not rs:
        return None
    r = rs[-1]
    B = r.R["build"]
    o_t, p_t = [x["seconds"] for x in B["ours"]], [x["seconds"] for x in B["duckdb"]]
    o_m, p_m = [x["peak_rss"] for x in B["ours"]], [x["peak_rss"] for x in B["duckdb"]]
    ln = r.link(here)
    return "\n".join([
        "| | snapbuild build | DuckDB `COPY (SELECT * … ORDER BY series_id, period) TO parquet` | ours / peer | run |",
        "|---|---|---|---|---|",
        f"| wall time (s) | {spread(o_t)} | {spread(p_t)} | {ratio(o_t, p_t)} | {ln} |",
        f"| peak RSS (GiB) | {spread(o_m, 2**30)} | {spread(p_m, 2**30)} | {ratio(o_m, p_m)} | {ln} |",
        f"| output (MiB) | data {B['data_bytes'] / 2**20:.1f} + index {B['index_bytes'] / 2**20:.1f}, uncompressed Arrow "
        f"| {B['duckdb'][-1]['bytes'] / 2**20:.1f}, compressed Parquet of every column | | {ln} |",
        "",
        f"{len(o_t)} alternating runs each, median (min–max), in the same invocation (`make bench`, section 4). "
        "DuckDB sorts every input column and writes them as compressed Parquet; it neither normalises periods "
        "nor builds an index.",
    ])


def region_sizes(runs, here):
    rs = [r for r in runs if r.R.get("sizes")]
    if not rs:
        return None
    r = rs[-1]
    Z = r.R["sizes"]
    return (f"Index sidecar {Z['index_bytes'] / 2**20:.1f} MiB ({Z['index_bytes'] / Z['data_bytes'] * 100:.1f}% of the "
            f"{Z['data_bytes'] / 2**20:.1f} MiB data file) against {Z['json_bytes'] / 2**20:.1f} MiB for the same index as "
            f"JSON; loading it takes {Z['load_index_arrow_s'] * 1e3:.1f} ms against {Z['load_index_json_s'] * 1e3:.0f} ms "
            f"for `json.load` ({r.link(here)}).")


def region_runs(runs, here):
    return "\n".join(f"- {r.link(here)}: {r.meta.get('profile')} profile, {r.meta.get('runs')} repetitions, commit "
                     f"{r.meta['machine'].get('commit')}, load average {' '.join(r.meta.get('loadavg_start') or [])} "
                     f"→ {' '.join(r.meta.get('loadavg_end') or [])}" for r in runs)


# Results of benchmarks other than the profile's runs (make bench-copies, make bench-python):
# the newest file of each kind under --results (RESULTS, set by main).


def newest(pattern):
    files = sorted(pathlib.Path(RESULTS).glob(pattern))
    return files[-1] if files else None


def region_copies(runs, here):
    p = newest("*-copies.json")
    if p is None:
        return None
    sys.path.insert(0, str(HERE))
    from snapbench.buildcmp import copy_table
    R = json.loads(p.read_text())
    B = R["build"]
    rel = os.path.relpath(p.with_suffix(".md"), here.parent)
    lines = copy_table(B)[2:]  # the table, without its lead-in
    b = statistics.median([r["seconds"] for r in B["ours"]])
    d = statistics.median([r["seconds"] for r in B["duckdb"]])
    load = R.get("meta", {}).get("loadavg_start")
    on = f"on {R['meta']['machine']['cores']} cores at a load average of {load[0]} (1 min) at the start " if load else ""
    return "\n".join(lines + ["", f"{B['rows']:,} rows, {B['series']:,} series; plain build {b:.2f} s, DuckDB COPY … ORDER BY "
                              f"{d:.2f} s; {len(B['ours'])} alternating runs, medians (min–max) {on}"
                              f"([{p.stem}]({rel}), `make bench-copies`)."])


def region_python_package(runs, here):
    p = newest("*-python-package.json")
    if p is None:
        return None
    R = json.loads(p.read_text())
    rel = os.path.relpath(p, here.parent)
    return (f"open {R['open_ms_p50']:.2f} ms (p50, p99 {R['open_ms_p99']:.2f} ms); one-series lookup + slice "
            f"{R['lookup_us_p50']:.1f} µs (p50, p99 {R['lookup_us_p99']:.1f} µs); {R['series']:,} series, {R['rows']:,} rows, "
            f"Python {R['python']}, pyarrow {R['pyarrow']} ([{p.stem}]({rel}), `make bench-python`)")


def go_bench_lines(results, suffix, name):
    """The metrics of every `name` line of the newest results/*-SUFFIX.txt: (path, [{unit: value}])."""
    files = sorted(pathlib.Path(results).glob(f"*-{suffix}.txt"))
    if not files:
        return None, []
    path, rows = files[-1], []
    for line in path.read_text().splitlines():
        f = line.split()
        if not f or not re.match(rf"^{re.escape(name)}(-\d+)?$", f[0]):
            continue
        # name, iterations, then value unit pairs
        rows.append({f[i + 1]: float(f[i]) for i in range(2, len(f) - 1, 2)})
    return path, rows


def region_replica(runs, here):
    path, rows = go_bench_lines(RESULTS, "replica-go-bench", "BenchmarkReplica")
    if not rows:
        return None

    def cell(unit, scale=1.0):
        xs = [r[unit] * scale for r in rows if unit in r]
        return spread(xs)

    link = f"[{path.name}]({os.path.relpath(path, here.parent)})"
    rate = rows[0].get("rows/s-offered", 0)
    return "\n".join([
        f"| writer at {rate:,.0f} rows/s (10k-row batches) | p50 | p99 | run |",
        "|---|---|---|---|",
        f"| staleness: acknowledged by the writer → visible on the replica (ms) | {cell('stale-p50-ms')} | {cell('stale-p99-ms')} | {link} |",
        f"| one-series DoGet on the replica (ms) | {cell('replica-p50-µs', 1e-3)} | {cell('replica-p99-µs', 1e-3)} | {link} |",
        f"| one-series DoGet on the writer, same run (ms) | {cell('writer-p50-µs', 1e-3)} | {cell('writer-p99-µs', 1e-3)} | {link} |",
    ])


def region_live(runs, here):
    """The live-write figures: build against compaction, replay, DoGet over a delta, paced ingest."""
    files = sorted(pathlib.Path(RESULTS).glob("*-live-go-bench.txt"))
    if not files:
        return None
    path = files[-1]

    def rows(name):
        return go_bench_lines(RESULTS, "live-go-bench", name)[1]

    def col(name, unit, scale=1.0):
        return [r[unit] * scale for r in rows(name) if unit in r]

    link = f"[{path.name}]({os.path.relpath(path, here.parent)})"
    build = col("BenchmarkBuild", "ns/op", 1e-9)
    compact = col("BenchmarkCompact", "ns/op", 1e-9)
    replay = col("BenchmarkReplay", "rows/s", 1e-6)
    get = {d: col(f"BenchmarkDoGetDelta/delta={d}%", "p50-µs") for d in ("0", "1", "10")}
    paced = [r for r in rows("BenchmarkIngestPaced/rate=1000k") if "p99-µs" in r]

    def times(a, b):
        a, b = med(a), med(b)
        return f"{a / b:.2f}×" if a is not None and b else "–"

    def p99s(rs):
        xs = [r["p99-µs"] / 1e3 for r in rs]
        return f"{spread(xs)}, ≤ 10 ms in {sum(1 for x in xs if x <= 10)} of {len(xs)} runs" if xs else "–"

    calm = [r for r in paced if r.get("fsync-p99-µs", 0) <= 3000]
    noisy = [r for r in paced if r.get("fsync-p99-µs", 0) > 3000]
    L = ["| figure | median (min–max) | against | run |", "|---|---|---|---|",
         f"| full in-memory build, 15M rows (s) | {spread(build)} | | {link} |",
         f"| compaction: 15M-row base + 150k delta rows (s) | {spread(compact)} | {times(compact, build)} the build | {link} |",
         f"| WAL replay onto the 15M-row base (M rows/s) | {spread(replay)} | | {link} |"]
    for d in ("1", "10"):
        L.append(f"| one-series DoGet p50, {d}% of rows in the delta (µs) | {spread(get[d])} | "
                 f"{times(get[d], get['0'])} no delta's {g3(med(get['0']))} µs | {link} |")
    L += [f"| paced ingest, 1M rows/s offered: rows/s achieved | {spread([r['rows/s'] for r in paced])} | | {link} |",
          f"| … acknowledgement p50 (ms) | {spread([r['p50-µs'] / 1e3 for r in paced])} | | {link} |",
          f"| … acknowledgement p99 (ms) | {p99s(paced)} | | {link} |",
          f"| … acknowledgement p99 in runs whose WAL fsync p99 was ≤ 3 ms / above (ms) | {p99s(calm)} / {p99s(noisy)} | | {link} |",
          f"| … server CPU per row (ns) | {spread([r['server-cpu-ns/row'] for r in paced if 'server-cpu-ns/row' in r])} | | {link} |",
          "",
          f"{len(build)} builds, {len(compact)} compactions (each the mean of 4), {len(replay)} replays, "
          f"{len(get['0'])} DoGet runs per delta size and {len(paced)} paced runs of 2,000 10k-row batches after a 16-batch warm-up."]
    return "\n".join(L)


def region_seed(runs, here):
    """The seed profile's table (snapbench/seedtable.py) from the newest run with both its
    shapes' figures; a run at a fraction of the seed says so first."""
    found = []
    for p in pathlib.Path(RESULTS).glob("*-seed*.json"):
        try:
            R = json.loads(p.read_text())
        except ValueError:
            continue
        if R.get("meta", {}).get("profile") == "seed" and R.get("shapes") and p.with_suffix(".md").exists():
            found.append((R["meta"]["date"], R["meta"].get("fraction", 1), p, R))
    if not found:
        return None
    found.sort(key=lambda x: (x[0], x[1]))
    _, frac, p, R = found[-1]
    sys.path.insert(0, str(HERE))
    from snapbench import seedtable
    rel = os.path.relpath(p.with_suffix(".md"), here.parent)
    m = R["meta"]
    shapes = list(R["shapes"].items())
    if frac == 1:
        lead = "At full size"
    else:
        lead = (f"**A run at fraction {frac:g} of the seed** (series, build budget and DoPut rows scaled; it shows the "
                "profile works end to end, not the seed's figures)")
    load = " ".join(m.get("loadavg_start") or [])
    end = " ".join(m.get("loadavg_end") or [])
    if end:
        load += f" at the start, {end} at the end"
    else:
        load += " at the start"
    L = [f"{lead}: " + "; ".join(f"`{k}` {S['build']['series']:,} series, {S['build']['rows']:,} rows" for k, S in shapes)
         + f"; {m['machine'].get('cores')} cores, load average {load} ([{p.stem}]({rel}), `make bench-seed`).",
         ""]
    return "\n".join(L + seedtable.table(shapes))


REGIONS = {"serve": region_serve, "ratios": region_ratios, "build": region_build, "sizes": region_sizes,
           "runs": region_runs, "replica": region_replica, "live": region_live, "copies": region_copies,
           "python_package": region_python_package, "seed": region_seed}


def rewrite(path, runs):
    text = path.read_text()

    def sub(m):
        name = m.group(2)
        if name not in REGIONS:
            raise SystemExit(f"{path}: unknown region bench:{name} (known: {', '.join(REGIONS)})")
        body = REGIONS[name](runs, path)
        if body is None:
            body = "*(no committed run has this figure)*"
        return f"{m.group(1)}{body}\n{m.group(4)}"

    return text, REGION.sub(sub, text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=str(HERE / "results"))
    ap.add_argument("--profile", default="default")
    ap.add_argument("--check", action="store_true", help="exit 1 if a file differs from what the runs generate")
    a = ap.parse_args()
    global RESULTS
    RESULTS = pathlib.Path(a.results)
    runs = load_runs(a.results, a.profile)
    if not runs:
        sys.exit(f"bench/report.py: no complete {a.profile} run (json + md) in {a.results}")
    files = [REPO / "README.md", HERE / "README.md"] + sorted((REPO / "docs").glob("*.md"))
    stale = []
    for f in files:
        if not f.exists():
            continue
        old, new = rewrite(f, runs)
        if old == new:
            continue
        stale.append(f)
        if not a.check:
            f.write_text(new)
            print(f"rewrote {os.path.relpath(f, REPO)}")
    if a.check and stale:
        print("out of date (run `make bench-report`): " + ", ".join(os.path.relpath(f, REPO) for f in stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
