"""The benchmark harness: servingsnap against the rebuild-at-start design, side by side, in one run.

    python bench/harness.py [--profile quick|default|large] [--out bench/results] [--lake DIR]

Generates (or reuses, under bench/work/lakes) a lake, builds a snapshot and, in one
invocation, measures:

  1. start-up to the first answered series (process start -> a pyarrow.flight client has
     its first series), warm and cold page cache: `snapbuild serve` against three peers
     that build their state at start and answer the same tickets: a Go rebuild made of the
     builder's own read and radix sort (bench/gobaseline), a Python/Polars rebuild
     (bench/pybaseline.py, what the old server did) and a DuckDB table sorted in memory
     (bench/duckbaseline.py);
  2. resident memory (RssAnon, RssFile from /proc/PID/status) after start-up and after the
     query workloads, cold and warm;
  3. query latency p50/p99 through one pyarrow.flight client, cold (every server's input
     files evicted before its start, no warm-up) and warm: one series, one series with a
     period range, a 100-series batch, latest values of 1000 series;
  4. build: `snapbuild build` against DuckDB COPY (... ORDER BY series_id, period) TO parquet;
  5. sizes: input Parquet, data file, index sidecar, and the same index as JSON;
  6. scaling: start-up and index size at several lake sizes.

Writes OUT/<date>-<profile>.md (tables, medians over repetitions with min–max, ratios
ours/peer from this same invocation), OUT/<date>-<profile>.json (every number) and PNG plots.
Every server is killed at the end, also on error or Ctrl-C. Loopback (127.0.0.1) only.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

from snapbench import buildcmp, client, lakes, launch, procs, report, sizes  # noqa: E402

DATASET = "bench"

# Query counts per workload: the memory "after queries" reading follows all of them.
# time_cap bounds each workload's loop (seconds) per server and pass: a server slower than
# count/time_cap queries a second answers a prefix of the same ticket list (the report says
# how many). Add a profile here to give `--profile` another size.
PROFILES = {
    "quick": dict(series=2000, runs=1, build_runs=1, scaling=[500, 2000], warmup=20,
                  queries={"one": 300, "range": 300, "batch100": 50, "latest1000": 50},
                  time_cap=5, descr="smoke test: 2k series, one repetition, every section (CI)"),
    "default": dict(series=100000, runs=3, build_runs=3, scaling=[1000, 10000, 100000], warmup=100,
                    queries={"one": 4000, "range": 4000, "batch100": 1000, "latest1000": 1000},
                    time_cap=30, descr="100k series (~15M rows), three repetitions"),
    "large": dict(series=100000, runs=3, build_runs=3, scaling=[1000, 10000, 100000, 1000000], warmup=100,
                  queries={"one": 4000, "range": 4000, "batch100": 1000, "latest1000": 1000},
                  time_cap=30, descr="the default profile plus a 1M-series (~150M rows) scaling point"),
    # The default lake's build section alone (`make bench-copies`): build, the portable copy and
    # a whole-snapshot export against DuckDB's sort-and-write, without the serving sections.
    "copies": dict(series=100000, runs=3, build_runs=3, scaling=[], warmup=0, queries={}, time_cap=30,
                   descr="100k series (~15M rows): build, portable copy and export against DuckDB, three repetitions"),
    # Its own runner (bench/snapbench/seed.py); --fraction scales it down.
    "seed": dict(descr="2.82M series (~420M rows, and a short-history lake) built with --memory 6GiB, served cold and warm, "
                       "written to and compacted, against the Go rebuild (bench/snapbench/seed.py)"),
}
SECTIONS = ["serve", "build", "sizes", "scaling"]


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--profile", choices=sorted(PROFILES), default="default")
    ap.add_argument("--out", default=str(HERE / "results"), help="directory for the report, JSON and plots")
    ap.add_argument("--bin", default=str(REPO / "bin" / "snapbuild"), help="the snapbuild binary")
    ap.add_argument("--work", default=str(HERE / "work"), help="scratch directory; lakes are cached in WORK/lakes")
    ap.add_argument("--lake", help="reuse this lake for the main sections instead of a generated one")
    ap.add_argument("--series", type=int, help="series of the main lake (default: the profile's)")
    ap.add_argument("--runs", type=int, help="repetitions of each measurement (default: the profile's)")
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold-cache start-ups")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--go", default=os.environ.get("GO", "go"), help="go command used to build bench/gobaseline")
    ap.add_argument("--gobaseline", help="a prebuilt bench/gobaseline binary")
    ap.add_argument("--timeout", type=float, default=900, help="seconds a server may take to answer its first query")
    ap.add_argument("--tag", help="result file name suffix (default: the profile)")
    ap.add_argument("--fraction", type=float, default=1.0, help="seed profile only: run at this fraction of its size")
    ap.add_argument("--seed-shapes", default="seed,short", help="seed profile only: the lake shapes to run (seed, short)")
    ap.add_argument("--peer-limit", type=float, help="seed profile only: kill the Go rebuild past this RSS in GiB "
                    "(default: 22 GiB or 80%% of MemAvailable, the smaller)")
    ap.add_argument("--reuse-build", action="store_true",
                    help="seed profile only: serve the snapshot an earlier run built (its build figures are that run's)")
    a = ap.parse_args()
    a.sections = [s.strip() for s in a.sections.split(",") if s.strip()]
    bad = set(a.sections) - set(SECTIONS)
    if bad:
        ap.error(f"unknown sections {sorted(bad)}; known: {SECTIONS}")
    return a


def versions():
    import duckdb
    import matplotlib
    import polars
    import pyarrow
    v = {"python": platform.python_version(), "pyarrow": pyarrow.__version__, "polars": polars.__version__,
         "duckdb": duckdb.__version__, "numpy": np.__version__, "matplotlib": matplotlib.__version__}
    return v


def machine(go):
    m = {"kernel": platform.release(), "cores": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            m["cpu"] = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
        with open("/proc/meminfo") as f:
            m["mem_gib"] = round(int(next(ln for ln in f if ln.startswith("MemTotal")).split()[1]) / 2**20, 1)
    except (OSError, StopIteration):
        pass
    try:
        m["go"] = subprocess.run([go, "version"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        m["go"] = "?"
    try:
        sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        m["commit"] = sha + ("-dirty" if dirty else "")
    except OSError:
        m["commit"] = "?"
    return m


def rel(path):
    """path relative to the repository when inside it (results are committed)."""
    try:
        return str(pathlib.Path(path).resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def loadavg():
    try:
        return open("/proc/loadavg").read().split()[:3]
    except OSError:
        return None


def mem_available():
    with open("/proc/meminfo") as f:
        for ln in f:
            if ln.startswith("MemAvailable"):
                return int(ln.split()[1]) * 1024
    return None


def build_gobaseline(a, work):
    if a.gobaseline:
        return pathlib.Path(a.gobaseline)
    log(f"building bench/gobaseline with {a.go}")
    return launch.go_tool(a.go, work, "gobaseline")


def make_servers(snapbuild, gobaseline, root, lake):
    pq = lakes.parquet_files(lake)
    return [
        launch.ours(snapbuild, root, DATASET, label="servingsnap (map + read index)"),
        launch.go_peer(gobaseline, lake, DATASET),
        client.Server("py", "Python rebuild (Polars)",
                      lambda port: [sys.executable, str(HERE / "pybaseline.py"), "--lake", str(lake),
                                    "--dataset", DATASET, "--addr", f"127.0.0.1:{port}"],
                      pq),
        client.Server("duck", "DuckDB table (sorted at start)",
                      lambda port: [sys.executable, str(HERE / "duckbaseline.py"), "--lake", str(lake),
                                    "--dataset", DATASET, "--addr", f"127.0.0.1:{port}"],
                      pq),
    ]


def serve_section(a, prof, servers, ids, years, logs, R):
    """Sections 1-3: start-up, memory and latency, each cold and warm; R['serve'] is filled in place.

    Per repetition and server, a cold pass then a warm pass, each its own process:
    - cold: every input file of every server is evicted from the page cache first
      (posix_fadvise DONTNEED), the server starts, and the latency workloads run at once,
      with no warm-up, so servingsnap's first queries fault its mapped pages in from disk;
    - warm: the server's own input files are read into the page cache first, the check
      tickets are compared across servers, warm-up queries run, then the same workloads.
    """
    keys = [s.key for s in servers]
    modes = ["warm"] if a.no_cold else ["cold", "warm"]
    per = lambda: {k: [] for k in keys}  # noqa: E731
    S = R["serve"] = {
        "labels": {s.key: s.label for s in servers}, "modes": modes,
        "startup_warm": per(), "startup_cold": per(), "reported_ms": per(), "reported_ms_cold": per(),
        "mem_start": per(), "mem_after": per(), "mem_start_cold": per(), "mem_after_cold": per(),
        "queries": per(),
        "latency": {k: {w: [] for w, _ in client.WORKLOADS} for k in keys},
        "latency_cold": {k: {w: [] for w, _ in client.WORKLOADS} for k in keys},
        "agree": [], "mismatches": [], "query_counts": prof["queries"], "warmup": prof["warmup"],
    }
    pooled = {k: {w: [] for w, _ in client.WORKLOADS} for k in keys}
    every_file = sorted({f for s in servers for f in s.files})
    first = client.ticket({"dataset": DATASET, "series": [ids[len(ids) // 2]]})
    checks = client.check_tickets(DATASET, ids, years, seed=7)
    for rep in range(a.runs):
        tickets = client.make_tickets(DATASET, ids, years, prof["queries"], seed=1000 + rep)
        warm_t = client.make_tickets(DATASET, ids, years, {w: max(1, prof["warmup"] // 4) for w, _ in client.WORKLOADS},
                                     seed=2000 + rep)
        warmups = [t for w, _ in client.WORKLOADS for t in warm_t[w]]
        order = servers[rep % len(servers):] + servers[:rep % len(servers)]  # rotate: no fixed order bias
        digests = {}
        for s in order:
            for mode in modes:
                lp = logs / f"{s.key}-rep{rep + 1}-{mode}.log"
                if mode == "cold":
                    procs.evict(every_file)
                else:
                    procs.warm(s.files)
                port = procs.free_port()
                p, secs, _ = client.start(s, port, first, lp, a.timeout)
                sfx = "" if mode == "warm" else "_cold"
                lat_key = "latency" if mode == "warm" else "latency_cold"
                try:
                    S[f"startup_{mode}"][s.key].append(secs)
                    S["reported_ms" + sfx][s.key].append(client.reported_startup_ms(lp))
                    S["mem_start" + sfx][s.key].append(procs.proc_status(p.pid))
                    loc = f"grpc+tcp://127.0.0.1:{port}"
                    if mode == "warm":
                        digests[s.key] = client.answers(loc, checks)
                        client.latencies(loc, warmups, prof["time_cap"])
                    n = 0
                    for w, _ in client.WORKLOADS:
                        lat, rows = client.latencies(loc, tickets[w], prof["time_cap"])
                        n += len(lat)
                        if mode == "warm":
                            pooled[s.key][w].append(lat)
                        S[lat_key][s.key][w].append(report.summarize(lat, rows))
                    if mode == "warm":
                        S["queries"][s.key].append(n)
                    S["mem_after" + sfx][s.key].append(procs.proc_status(p.pid))
                finally:
                    procs.stop(p)
                m0, m1 = S["mem_start" + sfx][s.key][-1], S["mem_after" + sfx][s.key][-1]
                lat1 = S[lat_key][s.key]["one"][-1]
                log(f"  rep {rep + 1} {s.key} {mode}: start {secs:.3f}s, anon {m0['RssAnon'] / 2**20:.0f} -> "
                    f"{m1['RssAnon'] / 2**20:.0f} MiB, file {m0['RssFile'] / 2**20:.0f} -> {m1['RssFile'] / 2**20:.0f} MiB, "
                    f"one-series p50 {lat1['p50'] / 1e3:.2f} ms, {n} queries")
        ref = digests["ours"]
        ok = True
        for k, d in digests.items():
            for (txt, _), x, y in zip(checks, d, ref):
                if x != y:
                    ok = False
                    S["mismatches"].append({"rep": rep + 1, "server": k, "ticket": txt[:300], "got": x, "ours": y})
        S["agree"].append(ok)
        log(f"  rep {rep + 1}: {len(checks)} check tickets {'agree on every server' if ok else 'DISAGREE (see report)'}")
    S["cdf"] = {k: {w: report.cdf_points(np.concatenate(v) if v else np.array([])) for w, v in ws.items()}
                for k, ws in pooled.items()}
    return pooled


def scaling_section(a, prof, snapbuild, gobaseline, work, logs, R, main_info):
    """Section 6: start-up (warm) and index size against the lake size."""
    R["scaling"] = []
    hwm = {}  # server -> (rows, peak RSS) at the largest size measured so far
    for n in prof["scaling"]:
        if main_info and n == main_info["series"]:
            lake, root, summary = main_info["lake"], main_info["root"], main_info["summary"]
        else:
            lake = lakes.cached_lake(snapbuild, work, n, log=log)
            root = work / "roots" / f"s{n}"
            _, _, summary = lakes.build_root(snapbuild, lake, root, DATASET)
        files, _ = lakes.snapshot_files(root / DATASET)
        jpath = work / "roots" / f"index-s{n}.json"
        jpath.parent.mkdir(parents=True, exist_ok=True)
        point = {"series": summary["series"], "rows": summary["rows"], "input_bytes": lakes.parquet_bytes(lake),
                 "data_bytes": files["data"].stat().st_size, "index_bytes": files["index"].stat().st_size,
                 "json_bytes": sizes.write_json_index(files["index"], jpath), "startup": {}, "peak_rss": {}, "skipped": {}}
        jpath.unlink()
        ids, years, _ = lakes.index_summary(files["index"])
        first = client.ticket({"dataset": DATASET, "series": [ids[len(ids) // 2]]})
        servers = make_servers(snapbuild, gobaseline, root, lake)
        reuse = main_info and n == main_info["series"] and "serve" in R
        for s in servers:
            if reuse:
                point["startup"][s.key] = R["serve"]["startup_warm"][s.key]
                point["peak_rss"][s.key] = [m["VmHWM"] for m in R["serve"]["mem_start"][s.key]]
                hwm[s.key] = (point["rows"], max(point["peak_rss"][s.key]))
                continue
            if s.key in hwm and s.key != "ours":  # would it fit? extrapolate peak RSS linearly in rows
                rows0, peak0 = hwm[s.key]
                est = peak0 * point["rows"] / max(rows0, 1)
                avail = mem_available()
                if avail and est > 0.8 * avail:
                    point["skipped"][s.key] = f"estimated peak {est / 2**30:.1f} GiB > 80% of {avail / 2**30:.1f} GiB available"
                    log(f"  scaling {n}: skip {s.key}: {point['skipped'][s.key]}")
                    continue
            secs_l, peaks = [], []
            for rep in range(a.runs):
                procs.warm(s.files)
                lp = logs / f"scaling-s{n}-{s.key}-rep{rep + 1}.log"
                p, secs, _ = client.start(s, procs.free_port(), first, lp, a.timeout)
                peaks.append(procs.proc_status(p.pid)["VmHWM"])
                procs.stop(p)
                secs_l.append(secs)
            point["startup"][s.key], point["peak_rss"][s.key] = secs_l, peaks
            hwm[s.key] = (point["rows"], max(peaks))
            log(f"  scaling {n:,} series: {s.key} start-up {np.median(secs_l):.3f}s")
        R["scaling"].append(point)
        R["scaling"].sort(key=lambda x: x["series"])


def main():
    a = parse_args()
    if a.profile == "seed":
        return seed_profile(a)
    prof = dict(PROFILES[a.profile])
    if a.series:
        prof["series"] = a.series
    a.runs_override = a.runs
    a.runs = a.runs or prof["runs"]
    procs.install_signal_handlers()
    t_start = time.perf_counter()
    work = pathlib.Path(a.work).resolve()
    out = pathlib.Path(a.out).resolve()
    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    snapbuild = pathlib.Path(a.bin).resolve()
    if not snapbuild.exists():
        sys.exit(f"harness: {snapbuild} not found (run `make build`, or pass --bin)")
    stamp = datetime.date.today().isoformat()
    name = f"{stamp}-{a.tag or a.profile}"
    logs = work / "logs" / name
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)

    R = {"meta": {"date": stamp, "profile": a.profile, "profile_descr": prof["descr"], "runs": a.runs,
                  "command": " ".join([pathlib.Path(sys.executable).name] + sys.argv),
                  "machine": machine(a.go), "versions": versions(), "loadavg_start": loadavg(),
                  "sections": a.sections, "cold": not a.no_cold}}
    log(f"profile {a.profile}: {prof['descr']}; {a.runs} run(s); sections {','.join(a.sections)}; results -> {out}/{name}.md")
    status = 0
    try:
        gobaseline = build_gobaseline(a, work)
        if a.lake:
            lake = pathlib.Path(a.lake).resolve()
        else:
            lake = lakes.cached_lake(snapbuild, work, prof["series"], log=log)
        root = work / "roots" / "main"
        log(f"building the serving snapshot of {lake}")
        b_secs, _, summary = lakes.build_root(snapbuild, lake, root, DATASET)
        files, manifest = lakes.snapshot_files(root / DATASET)
        ids, years, _ = lakes.index_summary(files["index"])
        R["lake"] = {"path": rel(lake), "rows": summary["rows"], "series": summary["series"],
                     "files": len(lakes.parquet_files(lake)), "bytes": lakes.parquet_bytes(lake),
                     "years": list(years), "build_seconds": b_secs}
        log(f"lake: {summary['rows']:,} rows, {summary['series']:,} series, {R['lake']['files']} files, "
            f"{R['lake']['bytes'] / 2**20:.1f} MiB; snapshot built in {b_secs:.2f}s")
        main_info = {"series": summary["series"], "lake": lake, "root": root, "summary": summary}

        pooled = None
        if "serve" in a.sections:
            log("sections 1-3: start-up, memory, latency")
            servers = make_servers(snapbuild, gobaseline, root, lake)
            pooled = serve_section(a, prof, servers, ids, years, logs, R)
            if not all(R["serve"]["agree"]):
                status = 1
        if "build" in a.sections:
            log("section 4: build against DuckDB")
            R["build"] = buildcmp.compare(snapbuild, lake, work, a.runs_override or prof["build_runs"],
                                          log=lambda m: log(m.strip()))
        if "sizes" in a.sections:
            log("section 5: sizes")
            jpath = work / "roots" / "index-main.json"
            jb = sizes.write_json_index(files["index"], jpath)
            t_arrow, t_json = sizes.load_times(files["index"], jpath)
            jpath.unlink()
            R["sizes"] = {"input_bytes": R["lake"]["bytes"], "data_bytes": files["data"].stat().st_size,
                          "index_bytes": files["index"].stat().st_size, "json_bytes": jb,
                          "manifest_bytes": files["manifest"].stat().st_size,
                          "load_index_arrow_s": t_arrow, "load_index_json_s": t_json}
            if "build" in R:
                R["sizes"]["duckdb_parquet_bytes"] = R["build"]["duckdb"][-1]["bytes"]
        if "scaling" in a.sections:
            log("section 6: scaling")
            scaling_section(a, prof, snapbuild, gobaseline, work, logs, R, main_info)
    except BaseException as e:
        R["error"] = f"{type(e).__name__}: {e}"
        log(f"ERROR: {R['error']}")
        status = 130 if isinstance(e, KeyboardInterrupt) else (e.code if isinstance(e, SystemExit) and isinstance(e.code, int) else 2)
        pooled = locals().get("pooled")
    finally:
        procs.kill_all()
    R["meta"]["seconds"] = time.perf_counter() - t_start
    R["meta"]["loadavg_end"] = loadavg()
    plots = {}
    if not a.no_plots:
        try:
            plots = report.plots(R, pooled, out, name)
        except Exception as e:  # a report without figures beats no report
            log(f"plots failed: {e}")
    (out / f"{name}.json").write_text(json.dumps(R, indent=1, default=str) + "\n")
    md = report.markdown(R, plots)
    (out / f"{name}.md").write_text(md)
    log(f"wrote {out / name}.md, .json{''.join(', ' + p for p in plots.values())} in {R['meta']['seconds']:.0f}s")
    print()
    print(report.headline(R))
    return status


def seed_profile(a):
    """The seed profile has its own runner: gen, build under --memory, serve, and the Go rebuild
    where it fits in memory."""
    from snapbench import seed
    procs.install_signal_handlers()
    work = pathlib.Path(a.work).resolve()
    try:
        shapes = [x.strip() for x in a.seed_shapes.split(",") if x.strip()]
        bad = set(shapes) - set(seed.SHAPES)
        if bad or not shapes:
            sys.exit(f"harness: unknown --seed-shapes {sorted(bad)}; known: {sorted(seed.SHAPES)}")
        seed.run(pathlib.Path(a.bin).resolve(), work, pathlib.Path(a.out).resolve(),
                 a.fraction, machine(a.go), loadavg, log, timeout=a.timeout, gobaseline=build_gobaseline(a, work),
                 reuse_build=a.reuse_build, shapes=shapes,
                 peer_limit=int(a.peer_limit * 2**30) if a.peer_limit else None)
    finally:
        procs.kill_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
