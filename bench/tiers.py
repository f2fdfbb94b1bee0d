"""The tier benchmark all-hot against hot+cold and --format vortex.

    python bench/tiers.py [--profile quick|default] [--series N] [--out bench/results] [--snapserve BIN]

On one lake (`snapbuild gen --series N --seed 1`, cached under bench/work/lakes like the
harness's), in one invocation:

  0. calibration: a plain build; from its data.arrow and index the 10% hot window is chosen
     two ways: --hot-since D, D = the distinct period whose share of rows with period >= D is
     closest to 10% (the policy keeps each series' last row hot too, so the built share can be
     a little higher), and --hot-rows N, the smallest N for which
     sum over series of min(rows, N) >= 10% of all rows;
  1. build: plain, --hot-since D, --hot-rows N, --format vortex, --portable, BUILD_RUNS rounds
     each (order rotated per round), wall time and peak RSS (wait4 rusage of the builder);
  2. sizes: every file of each snapshot (data.arrow, cold.vortex, index.arrow, manifest,
     portable.parquet), tiered data bytes as a share of all-hot (goal <= 30%);
  3. serve: bin/snapserve on each snapshot (all-hot; --hot-since with the default cold cache;
     --hot-since with --cold-cache 0 when snapserve has the flag; --hot-rows; --format vortex):
     - memory: a fresh process (snapshot files evicted), MIXED queries (half recent-only, half
       full-history one-series queries, interleaved, random series), RssAnon/RssFile from
       /proc/PID/status after start and after the queries;
     - latency: one-series p50/p90/p99 through pyarrow.flight, recent-only (start = D) and
       full-history tickets, cold (files evicted with posix_fadvise DONTNEED, fresh process,
       no warm-up) and warm (files read into the page cache, the measured ticket list sent
       once before it is measured, so the decoded-chunk cache has seen the same series);
     every answer of a fixed check set must equal all-hot's (exit 1 otherwise);
  4. go: `go test -bench '^BenchmarkTierRead$' ./pkg/coldfile` on the plain snapshot's
     data.arrow (COLDFILE_BENCH_ARROW), -count runs, median ns/op per sub-benchmark (goal:
     chunk=4096 (the builder's DefaultChunkRows) uncached <= 100 µs).

Writes OUT/<date>-tiers[-quick].md and .json. The JSON's meta.profile is "tiers" or
"tiers-quick", so bench/report.py (which renders the harness's default runs) leaves it alone.
Every server is killed at the end, also on error or Ctrl-C. Loopback only.
"""
import argparse
import bisect
import datetime
import json
import os
import pathlib
import random
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from harness import loadavg, machine, rel  # noqa: E402
from snapbench import client, lakes, procs  # noqa: E402

DATASET = "bench"
HOT_SHARE = 0.10

PROFILES = {
    "quick": dict(series=5000, runs=1, build_runs=3, mixed=10000, latency=1000, time_cap=30,
                  go_benchtime="500x", go_count=3,
                  descr="QUICK (development) profile: {series:,} series, 1 serve repetition, 10k mixed queries"),
    "default": dict(series=100000, runs=3, build_runs=3, mixed=10000, latency=2000, time_cap=60,
                    go_benchtime="2000x", go_count=5,
                    descr="{series:,} series (~15M rows at 100k), 3 serve repetitions, 10k mixed queries"),
}

# Build configurations: key -> (label, extra snapbuild build flags; HOT_SINCE/HOT_ROWS are filled in).
BUILDS = [
    ("plain", "plain build (all hot)", []),
    ("hot_since", "--hot-since D", ["--hot-since", "HOT_SINCE"]),
    ("hot_rows", "--hot-rows N", ["--hot-rows", "HOT_ROWS"]),
    ("vortex", "--format vortex", ["--format", "vortex"]),
    ("portable", "--portable", ["--portable"]),
]


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--profile", choices=sorted(PROFILES), default="default")
    ap.add_argument("--series", type=int, help="series of the lake (default: the profile's)")
    ap.add_argument("--runs", type=int, help="serve repetitions (default: the profile's)")
    ap.add_argument("--build-runs", type=int, help="builds per configuration (default: the profile's)")
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--work", default=str(HERE / "work"))
    ap.add_argument("--bin", default=str(REPO / "bin" / "snapbuild"), help="the snapbuild binary")
    ap.add_argument("--snapserve", help="the server binary (default: snapserve beside --bin)")
    ap.add_argument("--go", default=os.environ.get("GO", "go"))
    ap.add_argument("--sections", default="build,sizes,serve,go", help="comma-separated subset of build,sizes,serve,go")
    ap.add_argument("--tag", help="result file name suffix (default: tiers or tiers-quick)")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--render", metavar="JSON", help="only rewrite the .md beside this result JSON from it (no run)")
    a = ap.parse_args()
    a.sections = [s.strip() for s in a.sections.split(",") if s.strip()]
    return a


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summary(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return {"median": med(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def pct(lat):
    if len(lat) == 0:
        return {"n": 0}
    return {"n": int(len(lat)), "p50": float(np.percentile(lat, 50)), "p90": float(np.percentile(lat, 90)),
            "p99": float(np.percentile(lat, 99)), "mean": float(lat.mean())}


# ---- 0. calibration ----

def calibrate(snapbuild, lake, work):
    """A plain build; the --hot-since date and --hot-rows count that leave ~10% of rows hot."""
    root = work / "calib"
    lakes.build_root(snapbuild, lake, root, DATASET)
    files, _ = lakes.snapshot_files(root / DATASET)
    with pa.memory_map(str(files["data"])) as m:
        data = pa.ipc.open_file(m).read_all()
    periods = np.sort(data.column("period").cast(pa.int32()).to_numpy())
    n = len(periods)
    # Of the distinct periods, the one whose share of rows on or after it is closest to 10%
    # (periods tie: many series share month and year starts, so the 90th percentile row's
    # period itself can keep noticeably more than 10%).
    uniq = np.unique(periods)
    shares = (n - np.searchsorted(periods, uniq, side="left")) / n
    j = int(np.argmin(np.abs(shares - HOT_SHARE)))
    d, share_since = int(uniq[j]), float(shares[j])
    hot_since = (datetime.date(1970, 1, 1) + datetime.timedelta(days=d)).isoformat()
    _, years, idx = lakes.index_summary(files["index"])
    counts = np.sort(idx.column("row_count").to_numpy())
    # sum(min(c, N)) over series is increasing in N; the smallest N reaching 10% of rows.
    prefix = np.concatenate([[0], np.cumsum(counts)])
    target = HOT_SHARE * n

    def hot_total(N):
        k = bisect.bisect_left(counts, N)  # series with fewer than N rows keep them all
        return prefix[k] + N * (len(counts) - k)

    lo, hi = 1, int(counts.max())
    while lo < hi:
        mid = (lo + hi) // 2
        if hot_total(mid) >= target:
            hi = mid
        else:
            lo = mid + 1
    ids = idx.column("series_id").to_pylist()
    return {"hot_since": hot_since, "hot_since_rows_share": share_since, "hot_rows": lo,
            "hot_rows_share": float(hot_total(lo) / n), "rows": n, "series": len(ids), "years": list(years),
            "method": ("hot_since = of the distinct periods in data.arrow of a plain build, the one D whose "
                       "share of rows with period >= D is closest to 10%; hot_rows = the smallest N with "
                       "sum over series of min(row_count, N) >= 0.1 * rows")}, ids


# ---- 1. build, 2. sizes ----

def build_args(key, cal):
    flags = next(f for k, _, f in BUILDS if k == key)
    return [str(cal["hot_since"]) if x == "HOT_SINCE" else str(cal["hot_rows"]) if x == "HOT_ROWS" else x for x in flags]


def build_section(snapbuild, lake, work, cal, rounds, R):
    R["flags"] = {k: build_args(k, cal) for k, _, _ in BUILDS}
    B = R["build"] = {"configs": {k: {"label": lab, "flags": build_args(k, cal), "runs": []} for k, lab, _ in BUILDS}}
    keys = [k for k, _, _ in BUILDS]
    for rnd in range(rounds):
        order = keys[rnd % len(keys):] + keys[:rnd % len(keys)]
        for k in order:
            root = work / "roots" / k
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True)
            cmd = [str(snapbuild), "build", "--input", str(lake), "--out", str(root / DATASET), "--json",
                   "--progress", "none"] + build_args(k, cal)
            secs, rss, out = procs.run_measured(cmd)
            s = json.loads(out)
            B["configs"][k]["runs"].append({"seconds": secs, "peak_rss": rss, "rows": s["rows"]})
            log(f"  build round {rnd + 1} {k}: {secs:.2f}s, peak {rss / 2**20:.0f} MiB")
    for k, c in B["configs"].items():
        c["seconds"] = summary([x["seconds"] for x in c["runs"]])
        c["peak_rss"] = summary([x["peak_rss"] for x in c["runs"]])


def sizes_section(work, R):
    Z = R["sizes"] = {}
    for k, _, _ in BUILDS:
        files, man = lakes.snapshot_files(work / "roots" / k / DATASET)
        per = {role: p.stat().st_size for role, p in files.items() if role != "current"}
        rows = {f["role"]: f.get("rows") for f in man["files"]}
        Z[k] = {"bytes": per, "rows": rows, "format_version": man.get("format_version"), "flags": R["flags"][k],
                "build": man.get("build", {})}
    base = Z["plain"]["bytes"]
    for k, z in Z.items():
        b = z["bytes"]
        data = b.get("data", 0) + b.get("cold", 0)
        snap = sum(v for r, v in b.items() if r != "portable")
        z["data_bytes"] = data
        z["snapshot_bytes"] = snap
        z["data_share_of_allhot"] = data / base["data"]
        z["snapshot_share_of_allhot"] = snap / sum(v for r, v in base.items() if r != "portable")
        hot = (z["rows"].get("data") or 0)
        total = hot + (z["rows"].get("cold") or 0)
        z["hot_rows_share"] = hot / total if total else None


# ---- 3. serve ----

def snapserve_has(snapserve, flag):
    try:
        out = subprocess.run([str(snapserve), "--help"], capture_output=True, text=True, timeout=30)
        return flag in (out.stdout + out.stderr)
    except (OSError, subprocess.TimeoutExpired):
        return False


def serve_configs(snapserve, work, has_cc):
    def mk(key, label, build, extra):
        root = work / "roots" / build
        files, _ = lakes.snapshot_files(root / DATASET)
        files = [str(p) for r, p in files.items() if r != "portable"]
        argv = lambda port: [str(snapserve), "--root", str(root), "--addr", f"127.0.0.1:{port}",  # noqa: E731
                             "--reload-interval", "0"] + extra
        return client.Server(key, label, argv, files)

    out = [mk("allhot", "all hot (plain build)", "plain", []),
           mk("hot_since", "--hot-since D, default --cold-cache", "hot_since", [])]
    if has_cc:
        out.append(mk("hot_since_cc0", "--hot-since D, --cold-cache 0", "hot_since", ["--cold-cache", "0"]))
    out += [mk("hot_rows", "--hot-rows N, default --cold-cache", "hot_rows", []),
            mk("vortex", "--format vortex, default --cold-cache", "vortex", [])]
    return out


def one(series, start=None):
    t = {"dataset": DATASET, "series": [series]}
    if start:
        t["start"] = start
    return t


def serve_section(a, prof, snapserve, work, cal, ids, logs, R):
    has_cc = snapserve_has(snapserve, "--cold-cache")
    servers = serve_configs(snapserve, work, has_cc)
    keys = [s.key for s in servers]
    S = R["serve"] = {
        "snapserve": rel(snapserve), "cold_cache_flag": has_cc,
        "cold_cache_note": None if has_cc else
        f"{rel(snapserve)} has no --cold-cache flag (not in `snapserve --help`): the --cold-cache 0 rows are skipped",
        "labels": {s.key: s.label for s in servers}, "mixed_queries": prof["mixed"],
        "latency_queries": prof["latency"], "runs": a.runs,
        "mem": {k: [] for k in keys}, "mixed_latency": {k: [] for k in keys},
        "latency": {k: {f"{w}_{m}": [] for w in ("recent", "full") for m in ("cold", "warm")} for k in keys},
        "agree": [], "mismatches": [],
    }
    if not has_cc:
        log(f"  note: {S['cold_cache_note']}")
    hs = cal["hot_since"]
    crng = random.Random(7)
    checks = []
    for sid in crng.sample(ids, min(20, len(ids))):
        checks += [one(sid), one(sid, hs)]
    checks.append({"dataset": DATASET, "series": crng.sample(ids, min(100, len(ids))), "latest": True})
    checks.append({"dataset": DATASET, "series": [crng.choice(ids)], "start": f"{cal['years'][0] + 2}-01-01",
                   "end": f"{cal['years'][0] + 5}-12-31"})
    checks = [(json.dumps(t), client.ticket(t)) for t in checks]
    first = client.ticket(one(ids[len(ids) // 2]))
    for rep in range(a.runs):
        rng = random.Random(1000 + rep)
        mixed = [client.ticket(one(rng.choice(ids), hs if rng.random() < 0.5 else None)) for _ in range(prof["mixed"])]
        lat_t = {"recent": [client.ticket(one(rng.choice(ids), hs)) for _ in range(prof["latency"])],
                 "full": [client.ticket(one(rng.choice(ids))) for _ in range(prof["latency"])]}
        order = servers[rep % len(servers):] + servers[:rep % len(servers)]  # rotated: no fixed order bias
        digests = {}
        for s in order:
            # memory after the mixed queries: a fresh process on evicted files
            procs.evict(s.files)
            port = procs.free_port()
            p, secs, _ = client.start(s, port, first, logs / f"{s.key}-rep{rep + 1}-mixed.log", a.timeout)
            loc = f"grpc+tcp://127.0.0.1:{port}"
            try:
                m0 = procs.proc_status(p.pid)
                lat, _ = client.latencies(loc, mixed, prof["time_cap"] * 4)
                m1 = procs.proc_status(p.pid)
                digests[s.key] = client.answers(loc, checks)
            finally:
                procs.stop(p)
            S["mem"][s.key].append({"start": m0, "after": m1, "queries": int(len(lat)), "startup_s": secs})
            S["mixed_latency"][s.key].append(pct(lat))
            log(f"  rep {rep + 1} {s.key} mixed: {len(lat)} queries, RssAnon {m0['RssAnon'] / 2**20:.1f} -> "
                f"{m1['RssAnon'] / 2**20:.1f} MiB, RssFile {m0['RssFile'] / 2**20:.1f} -> {m1['RssFile'] / 2**20:.1f} MiB")
        # Latency: each (workload, pass) on every server in turn, so a change in machine load
        # during the run falls on all servers alike rather than on whichever ran then.
        for w in ("recent", "full"):
            for mode in ("cold", "warm"):
                for s in order:
                    if mode == "cold":
                        procs.evict(s.files)
                    else:
                        procs.warm(s.files)
                    port = procs.free_port()
                    p, _, _ = client.start(s, port, first, logs / f"{s.key}-rep{rep + 1}-{w}-{mode}.log", a.timeout)
                    loc = f"grpc+tcp://127.0.0.1:{port}"
                    try:
                        if mode == "warm":
                            client.latencies(loc, lat_t[w], prof["time_cap"])
                        lat, rows = client.latencies(loc, lat_t[w], prof["time_cap"])
                    finally:
                        procs.stop(p)
                    r = pct(lat)
                    r["rows"] = rows
                    S["latency"][s.key][f"{w}_{mode}"].append(r)
                    log(f"  rep {rep + 1} {s.key} {w} {mode}: p50 {r['p50'] / 1e3:.3f} ms, p99 {r['p99'] / 1e3:.3f} ms "
                        f"({r['n']} queries, {rows / max(r['n'], 1):.0f} rows each)")
        ok = True
        for k, d in digests.items():
            for (txt, _), x, y in zip(checks, d, digests["allhot"]):
                if x != y:
                    ok = False
                    S["mismatches"].append({"rep": rep + 1, "server": k, "ticket": txt[:300], "got": x, "allhot": y})
        S["agree"].append(ok)
        log(f"  rep {rep + 1}: {len(checks)} check tickets {'agree with all-hot' if ok else 'DISAGREE'}")


# ---- 4. go ----

BENCH_LINE = re.compile(r"^(BenchmarkTierRead/\S+?)(?:-\d+)?\s+(\d+)\s+([\d.]+) ns/op(.*)$")


def go_section(a, prof, work, R):
    data = lakes.snapshot_files(work / "roots" / "plain" / DATASET)[0]["data"]
    cmd = [a.go, "test", "-run", "^$", "-bench", "^BenchmarkTierRead$", "-benchtime", prof["go_benchtime"],
           "-count", str(prof["go_count"]), "./pkg/coldfile"]
    env = dict(os.environ, COLDFILE_BENCH_ARROW=str(data))
    log(f"  {' '.join(cmd)} (COLDFILE_BENCH_ARROW={rel(data)})")
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"go test -bench failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    per = {}
    for ln in out.stdout.splitlines():
        m = BENCH_LINE.match(ln.strip())
        if m:
            extra = dict((u, float(v)) for v, u in re.findall(r"([\d.]+) (\S+)", m.group(4)))
            per.setdefault(m.group(1), []).append({"ns_op": float(m.group(3)), **extra})
    if not per:
        raise RuntimeError(f"no BenchmarkTierRead lines in:\n{out.stdout[-2000:]}")
    R["go"] = {"command": " ".join(cmd), "env": f"COLDFILE_BENCH_ARROW={rel(data)}", "raw": out.stdout,
               "bench": {name: {"ns_op": summary([x["ns_op"] for x in xs]),
                                "rows_read": med([x.get("rows/read") for x in xs]),
                                "allocs_op": med([x.get("allocs/op") for x in xs]),
                                "bytes_op": med([x.get("B/op") for x in xs])} for name, xs in per.items()}}
    for name, b in R["go"]["bench"].items():
        log(f"  {name}: median {b['ns_op']['median'] / 1e3:.1f} µs ({b['ns_op']['n']} runs)")


# ---- report ----

def g3(x):
    """Three significant digits, without exponents."""
    if x is None:
        return "–"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def sp(s, scale=1.0):
    """median (min–max) of a summary()."""
    if not s:
        return "–"
    m = g3(s["median"] / scale)
    return m if s["n"] == 1 else f"{m} ({g3(s['min'] / scale)}–{g3(s['max'] / scale)})"


def flags(fl):
    return f"`{' '.join(fl)}`" if fl else "(none)"


def goal_rows(R):
    """(figure, goal, measured, met) for each goal of tiered snapshots that this run measured."""
    out = []
    Z = R.get("sizes")
    if Z:
        for k in ("hot_since", "hot_rows"):
            x = Z[k]["data_share_of_allhot"]
            out.append((f"{k}: data files on disk / all-hot", "≤ 30%", f"{x * 100:.1f}%", x <= 0.30))
    S = R.get("serve")
    if S:
        p50 = lambda k, c: med([x.get("p50") for x in S["latency"][k][c]])  # noqa: E731
        # The goals are the tiers' (hot+cold); --format vortex has none (its rows are in the table).
        # "recent" (start = D) is the hot tier only for the --hot-since snapshot.
        for k in [k for k in S["labels"] if k.startswith("hot_")]:
            for w, lim, g in (("recent", 1.25, "≈ 1"), ("full", 2.0, "≤ 2")):
                if w == "recent" and not k.startswith("hot_since"):
                    continue
                for m in ("cold", "warm"):
                    a, b = p50(k, f"{w}_{m}"), p50("allhot", f"{w}_{m}")
                    if a and b:
                        out.append((f"{k}: one-series p50 {w}, {m} / all-hot", g, f"{a / b:.2f}", a / b <= lim))
    G = R.get("go")
    if G:
        b = G["bench"].get("BenchmarkTierRead/chunk=4096/cached=false")
        if b:
            us = b["ns_op"]["median"] / 1e3
            out.append(("BenchmarkTierRead chunk=4096 uncached (Go, one series)", "≤ 100 µs", f"{us:.0f} µs", us <= 100))
    return out


def markdown(R):
    M = R["meta"]
    L = [f"# Tier benchmark {M['date']} ({M['profile']})", ""]
    if M["profile"].endswith("quick"):
        L += ["> **Quick (development) profile** — a small lake on a shared, loaded machine: these numbers "
              "check that the script works; they are not the figures of record (run `make bench-tiers` "
              "on a quiet machine for those).", ""]
    L += [f"{M['profile_descr']}. Command `{M['command']}`, commit {M['machine'].get('commit')}, "
          f"{M['machine'].get('cores')} cores, {M['machine'].get('cpu', '?')}; load average "
          f"{' '.join(M.get('loadavg_start') or [])} at the start, {' '.join(M.get('loadavg_end') or [])} at the end; "
          f"{M.get('seconds', 0):.0f} s.", ""]
    if R.get("error"):
        L += [f"**Error: {R['error']}** (the sections below are what completed)", ""]
    goals = goal_rows(R)
    if goals:
        L += ["## Goals", "", "| figure | goal | measured | met |", "|---|---|---|---|"]
        L += [f"| {f} | {g} | {m} | {'yes' if ok else 'no'} |" for f, g, m, ok in goals]
        L += ["", "\"≈ all-hot\" is read here as a p50 ratio ≤ 1.25 (the script's choice). Recent-only goals are checked for "
              "the --hot-since snapshot (where start = D reads the hot tier only); --format vortex has no stated goal: "
              "its figures are in the tables below.", ""]
    C = R.get("calibration")
    if C:
        L += ["## The 10% hot window", "",
              f"Lake `{R['lake']['path']}`: {C['rows']:,} rows, {C['series']:,} series, years {C['years'][0]}–{C['years'][1]}.",
              "",
              f"- `--hot-since {C['hot_since']}`: {C['hot_since_rows_share'] * 100:.1f}% of rows have a period on or after it.",
              f"- `--hot-rows {C['hot_rows']}`: keeps {C['hot_rows_share'] * 100:.1f}% of rows hot.",
              f"- How: {C['method']}. The policy also keeps every series' last row hot, so the built "
              "snapshots' hot share (below) can be a little higher.", ""]
    Z = R.get("sizes")
    if Z:
        L += ["## Sizes on disk", "",
              "| build | data.arrow | cold.vortex | index.arrow | manifest | portable.parquet | hot rows | data files / all-hot | snapshot / all-hot |",
              "|---|---|---|---|---|---|---|---|---|"]
        def mib(b, r):
            if r not in b:
                return "–"
            return f"{g3(b[r] / 2**20)} MiB" if b[r] >= 2**20 / 10 else f"{g3(b[r] / 1024)} KiB"
        for k, z in Z.items():
            b = z["bytes"]
            hr = f"{z['hot_rows_share'] * 100:.1f}%" if z.get("hot_rows_share") is not None else "–"
            L.append(f"| {k} {flags(z['flags'])} "
                     f"| {mib(b, 'data')} | {mib(b, 'cold')} | {mib(b, 'index')} | {b['manifest'] / 1024:.1f} KiB "
                     f"| {mib(b, 'portable')} | {hr} | {z['data_share_of_allhot'] * 100:.1f}% | {z['snapshot_share_of_allhot'] * 100:.1f}% |")
        L += ["", "*data files* = data.arrow + cold.vortex; *snapshot* = those + index.arrow + manifest "
              "(portable.parquet is an extra copy, not counted). Goal for the 10% window: data files ≤ 30% of all-hot.", ""]
    S = R.get("serve")
    if S:
        keys = list(S["labels"])
        L += ["## Server memory after the mixed queries", "",
              f"`{S['snapserve']}` on each snapshot; a fresh process on evicted files, then {S['mixed_queries']:,} one-series "
              "queries through pyarrow.flight, half recent-only (start = the hot-since date), half full-history, "
              f"interleaved, random series; /proc/PID/status. Median (min–max) over {S['runs']} repetition(s).", ""]
        if S.get("cold_cache_note"):
            L += [f"*Note: {S['cold_cache_note']}.*", ""]
        L += ["| server | RssAnon after start (MiB) | RssAnon after (MiB) | RssFile after (MiB) | VmHWM (MiB) | mixed p50 (ms) | queries |",
              "|---|---|---|---|---|---|---|"]
        for k in keys:
            ms = S["mem"][k]
            g = lambda w, f: summary([m[w][f] for m in ms])  # noqa: E731
            L.append(f"| {S['labels'][k]} | {sp(g('start', 'RssAnon'), 2**20)} | {sp(g('after', 'RssAnon'), 2**20)} "
                     f"| {sp(g('after', 'RssFile'), 2**20)} | {sp(g('after', 'VmHWM'), 2**20)} "
                     f"| {sp(summary([x.get('p50') for x in S['mixed_latency'][k]]), 1e3)} | {ms[0]['queries'] if ms else '–'} |")
        L += ["", "## One-series latency through pyarrow.flight", "",
              f"{S['latency_queries']:,} tickets per workload and pass, one client, one query at a time, a fresh server "
              "process per (workload, pass). *recent*: `start` = the hot-since date (only the hot tier for --hot-since); "
              "*full*: the whole history (both tiers). *cold*: the snapshot's files evicted (posix_fadvise DONTNEED), "
              "no warm-up; *warm*: files read into the page cache and the same ticket list sent once before it is "
              "measured. p50 / p90 / p99 in ms, median over repetitions; ratio = p50 / all-hot's p50 of the same column.", ""]
        cols = [(w, m) for w in ("recent", "full") for m in ("cold", "warm")]
        L += ["| server | " + " | ".join(f"{w} {m}: p50 / p90 / p99" for w, m in cols) + " | " +
              " | ".join(f"{w} {m} ratio" for w, m in cols) + " |", "|---" * (1 + 2 * len(cols)) + "|"]
        p50 = lambda k, c: med([x.get("p50") for x in S["latency"][k][c]])  # noqa: E731
        for k in keys:
            cells, ratios = [], []
            for w, m in cols:
                xs = S["latency"][k][f"{w}_{m}"]
                cells.append(" / ".join(f"{med([x.get(p) for x in xs]) / 1e3:.3f}" if xs else "–" for p in ("p50", "p90", "p99")))
                a, b = p50(k, f"{w}_{m}"), p50("allhot", f"{w}_{m}")
                ratios.append(f"{a / b:.2f}" if a and b else "–")
            L.append(f"| {S['labels'][k]} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
        L += ["", "Goals: recent-only ≈ all-hot; full-history ≤ 2× all-hot.",
              f"Check tickets ({'agree with all-hot on every server' if all(S['agree']) else 'DISAGREE: see the JSON mismatches'}).", ""]
    G = R.get("go")
    if G:
        L += ["## Vortex one-series read in Go (`BenchmarkTierRead`)", "",
              f"`{G['env']} {G['command']}`: a one-series read of all its cold rows from cold.vortex (all rows but the "
              "last), chunk size per sub-benchmark, no cache / cache hit. Median (min–max) ns/op over the -count runs.", "",
              "| sub-benchmark | µs/op | rows/read | allocs/op | B/op |", "|---|---|---|---|---|"]
        for name, b in G["bench"].items():
            L.append(f"| {name} | {sp(b['ns_op'], 1e3)} | {g3(b['rows_read'])} | {g3(b['allocs_op'])} | {g3(b['bytes_op'])} |")
        L += ["", "Goal: ≤ 100 µs for the builder's chunk size (4096 rows), uncached.", ""]
    B = R.get("build")
    if B:
        L += ["## Build time", "",
              f"`snapbuild build --input LAKE --out ROOT/{DATASET} --json --progress none FLAGS`, a fresh root each run, "
              "configurations rotated per round; wall time and peak RSS (wait4 rusage of the builder). Median (min–max).", "",
              "| build | flags | wall time (s) | / plain | peak RSS (MiB) | / plain |", "|---|---|---|---|---|---|"]
        p = B["configs"]["plain"]
        for k, c in B["configs"].items():
            L.append(f"| {c['label']} | {flags(c['flags'])} | {sp(c['seconds'])} | {c['seconds']['median'] / p['seconds']['median']:.2f} "
                     f"| {sp(c['peak_rss'], 2**20)} | {c['peak_rss']['median'] / p['peak_rss']['median']:.2f} |")
        L.append("")
    return "\n".join(L)


def main():
    a = parse_args()
    if a.render:
        j = pathlib.Path(a.render)
        j.with_suffix(".md").write_text(markdown(json.loads(j.read_text())))
        return 0
    prof = dict(PROFILES[a.profile])
    if a.series:
        prof["series"] = a.series
    a.runs = a.runs or prof["runs"]
    prof["descr"] = prof["descr"].format(series=prof["series"])
    build_runs = a.build_runs or prof["build_runs"]
    procs.install_signal_handlers()
    t0 = time.perf_counter()
    work = pathlib.Path(a.work).resolve()
    twork = work / "tiers"
    out = pathlib.Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    snapbuild = pathlib.Path(a.bin).resolve()
    snapserve = pathlib.Path(a.snapserve).resolve() if a.snapserve else snapbuild.with_name("snapserve")
    for b in (snapbuild, snapserve):
        if not b.exists():
            sys.exit(f"tiers: {b} not found (run `make build`)")
    stamp = datetime.date.today().isoformat()
    profile = "tiers" if a.profile == "default" else f"tiers-{a.profile}"
    name = f"{stamp}-{a.tag or profile}"
    logs = work / "logs" / name
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    R = {"meta": {"date": stamp, "profile": profile, "profile_descr": prof["descr"], "runs": a.runs,
                  "build_runs": build_runs, "command": " ".join([pathlib.Path(sys.executable).name] + sys.argv),
                  "machine": machine(a.go), "pyarrow": pa.__version__, "loadavg_start": loadavg(),
                  "sections": a.sections}}
    log(f"profile {a.profile}: {prof['descr']}; results -> {out}/{name}.md")
    status = 0
    try:
        lake = lakes.cached_lake(snapbuild, work, prof["series"], log=log)
        R["lake"] = {"path": rel(lake), "bytes": lakes.parquet_bytes(lake), "series_option": prof["series"]}
        log("calibration: a plain build, the 10% hot window")
        R["calibration"], ids = calibrate(snapbuild, lake, twork)
        c = R["calibration"]
        log(f"  --hot-since {c['hot_since']} ({c['hot_since_rows_share'] * 100:.1f}% of rows), "
            f"--hot-rows {c['hot_rows']} ({c['hot_rows_share'] * 100:.1f}%)")
        # The builds make the snapshots every other section reads.
        log(f"build: {len(BUILDS)} configurations x {build_runs} rounds" + ("" if "build" in a.sections else " (1 round: not timed)"))
        build_section(snapbuild, lake, twork, c, build_runs if "build" in a.sections else 1, R)
        if "build" not in a.sections:
            del R["build"]
        if "sizes" in a.sections:
            sizes_section(twork, R)
            for k, z in R["sizes"].items():
                log(f"  sizes {k}: data files {z['data_bytes'] / 2**20:.2f} MiB = {z['data_share_of_allhot'] * 100:.1f}% of all-hot")
        if "serve" in a.sections:
            log("serve: memory after mixed queries, one-series latency cold and warm")
            serve_section(a, prof, snapserve, twork, c, ids, logs, R)
            if not all(R["serve"]["agree"]):
                status = 1
        if "go" in a.sections:
            log("go: BenchmarkTierRead")
            go_section(a, prof, twork, R)
    except BaseException as e:
        R["error"] = f"{type(e).__name__}: {e}"
        log(f"ERROR: {R['error']}")
        status = 130 if isinstance(e, KeyboardInterrupt) else 2
    finally:
        procs.kill_all()
    R["meta"]["seconds"] = time.perf_counter() - t0
    R["meta"]["loadavg_end"] = loadavg()
    (out / f"{name}.json").write_text(json.dumps(R, indent=1, default=str) + "\n")
    (out / f"{name}.md").write_text(markdown(R))
    log(f"wrote {out / name}.md and .json in {R['meta']['seconds']:.0f}s")
    return status


if __name__ == "__main__":
    sys.exit(main())
