"""The `seed` profile: the replaced system's real size, built under a memory budget.

2.82M series (~420M rows with the generator's 2000-2024 range) built with
`snapbuild build --memory 6GiB`, then served: build time, peak RSS and spill bytes of the
build, generation time and peak RSS (the generator must stay bounded), open time (process
start to the first answered series, and the server's own startup_ms), RssAnon after open
and after 10k one-series queries, and the one-series p50. The Go rebuild peer
(bench/gobaseline: the lake read, interned and radix-sorted at every start) is measured the same
way where it fits in memory: its start-up peak is about GO_PEER_BYTES_PER_ROW bytes a row (VmHWM of
the default profile), so it runs only when that estimate is under PEER_MEMORY_SHARE of the
machine's available memory; otherwise the report gives the estimate and says it did not fit.

--reuse-build serves the snapshot an earlier run built (its build figures are reported as
that run's): the serving half re-measured without a rebuild.

--fraction F runs the same shape at F of the size (series and budget both scaled, so the
build spills as it would at full size): on a small machine the full run does not fit in the
time or disk at hand. The fraction is written into the result file name and report.
"""
import datetime
import json
import pathlib
import shutil

import numpy as np

from . import client, lakes, procs
from .stats import pct

SEED_SERIES = 2_820_000
SEED_MEMORY = 6 * 2**30
DATASET = "bench"
# The Go rebuild's start-up peak per row: VmHWM 1.52 GB for 15.06M rows in the default
# profile (bench/results/2026-12-01-default.json, serve.mem_start.go).
GO_PEER_BYTES_PER_ROW = 101
PEER_MEMORY_SHARE = 0.8


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def _serve(srv, first, ids, years, work, name, timeout, queries, log):
    """Start srv cold (its files evicted from the page cache) and time its open; then start it
    warm (files read once), time its open and send the one-series queries; memory before and
    after."""
    lp = pathlib.Path(work) / "logs" / f"{name}.log"
    lp.parent.mkdir(parents=True, exist_ok=True)
    procs.evict(srv.files)
    port = procs.free_port()
    p, cold_s, _ = client.start(srv, port, first, lp, timeout)
    procs.stop(p)
    cold_ms = client.reported_startup_ms(lp)
    procs.warm(srv.files)
    port = procs.free_port()
    p, open_s, _ = client.start(srv, port, first, lp, timeout)
    try:
        m0 = procs.proc_status(p.pid)
        tickets = client.make_tickets(DATASET, ids, years, {"one": queries, "range": 0, "batch100": 0, "latest1000": 0},
                                      seed=1000)
        lat, _ = client.latencies(f"grpc+tcp://127.0.0.1:{port}", tickets["one"], 600)
        m1 = procs.proc_status(p.pid)
    finally:
        procs.stop(p)
    out = {"open_s": open_s, "startup_ms": client.reported_startup_ms(lp), "open_cold_s": cold_s, "startup_ms_cold": cold_ms, "mem_open": m0, "mem_after": m1,
           "queries": len(lat), "one_p50_us": pct(lat, 50), "one_p99_us": pct(lat, 99)}
    log(f"  {srv.key}: open cold {cold_s:.3f}s, warm {open_s:.3f}s, RssAnon {m0['RssAnon'] / 2**20:.0f} -> {m1['RssAnon'] / 2**20:.0f} MiB after "
        f"{len(lat):,} queries, one-series p50 {out['one_p50_us'] / 1e3:.2f} ms")
    return out


def _lake(snapbuild, work, series, log):
    """A cached lake like lakes.cached_lake, but generated under run_measured (time, peak RSS)."""
    lake = pathlib.Path(work) / "lakes" / f"s{series}-seed1"
    meta = lake / ".gen.json"
    if (lake / ".complete").exists() and meta.exists():
        return lake, json.loads(meta.read_text())
    tmp = lake.with_name(lake.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(lake, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    log(f"  generating {lake} ({series:,} series)…")
    secs, rss, out = procs.run_measured([str(snapbuild), "gen", "--out", str(tmp), "--series", str(series),
                                         "--seed", "1", "--json"])
    g = json.loads(out)
    g.update({"wall_s": secs, "peak_rss": rss})
    tmp.rename(lake)
    (lake / ".complete").write_text(f"snapbuild gen --series {series} --seed 1\n")
    meta.write_text(json.dumps(g) + "\n")
    log(f"  generated {g['rows']:,} rows in {secs:.0f}s, peak RSS {rss / 2**20:.0f} MiB")
    return lake, g


def run(snapbuild, work, out, fraction, machine, loadavg, log, timeout=900, queries=10_000, gobaseline=None,
        reuse_build=False):
    series = max(1000, round(SEED_SERIES * fraction))
    memory = int(SEED_MEMORY * fraction)
    R = {"meta": {"date": datetime.date.today().isoformat(), "profile": "seed", "fraction": fraction,
                  "series_target": series, "memory_budget": memory, "reuse_build": reuse_build, "machine": machine,
                  "loadavg_start": loadavg()}}
    lake, R["gen"] = _lake(snapbuild, work, series, log)

    root = pathlib.Path(work) / "roots" / f"seed-{series}"
    record = root / ".build.json"
    if reuse_build and record.exists():
        # The serving half again over the snapshot an earlier run built: its build figures are
        # that run's, and the report says so.
        R["build"] = json.loads(record.read_text())
        log(f"  reusing the build of {R['build'].get('built_at')} (commit {R['build'].get('commit')})")
    else:
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        log(f"  building with --memory {memory / 2**30:.2f} GiB…")
        secs, rss, o = procs.run_measured([str(snapbuild), "build", "--input", str(lake), "--out", str(root / DATASET),
                                           "--memory", str(memory), "--json"])
        s = json.loads(o)
        R["build"] = {"wall_s": secs, "peak_rss": rss, "rows": s["rows"], "series": s["series"],
                      "external": s.get("external"), "runs": s.get("runs"), "spill_bytes": s.get("spill_bytes"),
                      "phases": s["phases"], "input_bytes": s["input_bytes"],
                      "files": {f["role"]: f["size"] for f in s["files"]},
                      "built_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                      "commit": machine.get("commit"), "loadavg_end": loadavg()}
        record.write_text(json.dumps(R["build"], indent=1) + "\n")
        log(f"  built {s['rows']:,} rows / {s['series']:,} series in {secs:.1f}s, peak RSS {rss / 2**20:.0f} MiB, "
            f"{s.get('runs')} runs, {(s.get('spill_bytes') or 0) / 2**30:.2f} GiB spilled")

    files, _ = lakes.snapshot_files(root / DATASET)
    ids, years, _ = lakes.index_summary(files["index"])
    srv = client.Server("ours", "servingsnap",
                        lambda port: client.servingsnap_cmd(snapbuild) + ["--root", str(root), "--addr", f"127.0.0.1:{port}"],
                        [str(p) for p in files.values()])
    first = client.ticket({"dataset": DATASET, "series": [ids[len(ids) // 2]]})
    R["serve"] = _serve(srv, first, ids, years, work, f"seed-{series}", timeout, queries, log)

    need, avail = GO_PEER_BYTES_PER_ROW * R["build"]["rows"], mem_available()
    R["go_peer"] = {"estimated_peak": need, "mem_available": avail,
                    "fits": gobaseline is not None and need < PEER_MEMORY_SHARE * avail}
    if R["go_peer"]["fits"]:
        peer = client.Server("go", "Go rebuild (sortwrite.Rebuild)",
                             lambda port: [str(gobaseline), "--lake", str(lake), "--dataset", DATASET,
                                           "--addr", f"127.0.0.1:{port}"],
                             [str(p) for p in sorted(pathlib.Path(lake).rglob("*.parquet"))])
        R["go_peer"].update(_serve(peer, first, ids, years, work, f"seed-{series}-go", max(timeout, 3600), queries, log))
    else:
        log(f"  Go rebuild not run: its start-up needs about {need / 2**30:.1f} GiB, {avail / 2**30:.1f} GiB available")
    R["meta"]["loadavg_end"] = loadavg()

    tag = "seed" if fraction == 1 else f"seed-f{fraction:g}"
    name = f"{R['meta']['date']}-{tag}"
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(R, indent=1, default=str) + "\n")
    (out / f"{name}.md").write_text(markdown(R))
    log(f"wrote {out / name}.md and .json")
    return R


def markdown(R):
    m, g, b, s = R["meta"], R["gen"], R["build"], R["serve"]
    mib = lambda x: f"{x / 2**20:,.0f} MiB" if x is not None else "–"
    reused = f" (built {b['built_at']}, commit {b['commit']}, by an earlier run of this profile)" if m.get("reuse_build") else ""
    frac = "" if m["fraction"] == 1 else f" at fraction {m['fraction']:g} of the seed (series and budget scaled)"
    lines = [
        f"# seed profile{frac}, {m['date']}",
        "",
        f"{b['series']:,} series, {b['rows']:,} rows; build budget `--memory {m['memory_budget'] / 2**30:.2f}GiB`"
        f" ({m['memory_budget']:,} bytes). Machine: {m['machine']}. Load average at start {m['loadavg_start']},"
        f" at end {m.get('loadavg_end')}.",
        "",
        "| measure | value |",
        "|---|---|",
        f"| gen: wall time, peak RSS | {g['wall_s']:.1f} s, {mib(g['peak_rss'])} |",
        f"| build: wall time | {b['wall_s']:.1f} s{reused} (phases: " + ", ".join(f"{k} {v:.1f}s" for k, v in b['phases'].items()) + ") |",
        f"| build: peak RSS (wait4 maxrss) | {mib(b['peak_rss'])} (budget {mib(m['memory_budget'])}) |",
        f"| build: external sort, runs, spill bytes | {b['external']}, {b['runs']}, {mib(b['spill_bytes'])} |",
        f"| sizes: input, data.arrow, index.arrow | {mib(b['input_bytes'])}, {mib(b['files'].get('data'))}, {mib(b['files'].get('index'))} |",
        f"| open, warm: process start to first answered series | {s['open_s'] * 1e3:.0f} ms (server's startup_ms {s['startup_ms']}) |",
        f"| open, cold (files evicted): process start to first answered series | "
        + (f"{s['open_cold_s'] * 1e3:.0f} ms (server's startup_ms {s['startup_ms_cold']}) |" if "open_cold_s" in s else "not measured |"),
        f"| RssAnon after open / after {s['queries']:,} one-series queries | {mib(s['mem_open']['RssAnon'])} / {mib(s['mem_after']['RssAnon'])} |",
        f"| one-series latency p50 / p99 | {s['one_p50_us'] / 1e3:.2f} ms / {s['one_p99_us'] / 1e3:.2f} ms |",
        "",
    ]
    gp = R.get("go_peer")
    if gp and gp.get("fits"):
        lines += [
            "Against the Go rebuild (bench/gobaseline: reads, interns and sorts the lake at every start), same tickets:",
            "",
            "| measure | servingsnap | Go rebuild | ratio |",
            "|---|---|---|---|",
            f"| open, warm: process start to first answered series | {s['open_s']:.3f} s | {gp['open_s']:.1f} s | 1/{gp['open_s'] / s['open_s']:.0f} |",
            f"| open, cold | {s['open_cold_s']:.3f} s | {gp['open_cold_s']:.1f} s | 1/{gp['open_cold_s'] / s['open_cold_s']:.0f} |",
            f"| peak RSS while opening (VmHWM) | {mib(s['mem_open']['VmHWM'])} | {mib(gp['mem_open']['VmHWM'])} | |",
            f"| RssAnon after open | {mib(s['mem_open']['RssAnon'])} | {mib(gp['mem_open']['RssAnon'])} | 1/{gp['mem_open']['RssAnon'] / max(s['mem_open']['RssAnon'], 1):.0f} |",
            f"| RssAnon after {s['queries']:,} queries | {mib(s['mem_after']['RssAnon'])} | {mib(gp['mem_after']['RssAnon'])} | 1/{gp['mem_after']['RssAnon'] / max(s['mem_after']['RssAnon'], 1):.0f} |",
            f"| one-series p50 / p99 | {s['one_p50_us'] / 1e3:.2f} / {s['one_p99_us'] / 1e3:.2f} ms | {gp['one_p50_us'] / 1e3:.2f} / {gp['one_p99_us'] / 1e3:.2f} ms | {s['one_p50_us'] / gp['one_p50_us']:.2f} (p50) |",
            "",
        ]
    elif gp:
        lines += [
            f"The Go rebuild peer was not run: its start-up would need about {gp['estimated_peak'] / 2**30:.1f} GiB"
            f" ({GO_PEER_BYTES_PER_ROW} B a row, its VmHWM in the default profile) and"
            f" {gp['mem_available'] / 2**30:.1f} GiB were available.",
            "",
        ]
    lines += [
        "Method: `bench/harness.py --profile seed [--fraction F]` (bench/snapbench/seed.py): the lake is generated",
        "once and cached; gen and build run as child processes measured with wait4 (peak RSS of the child alone);",
        "each server is started cold (its files evicted with fadvise) and then warm (files read once); after the warm",
        "start one pyarrow.flight client sends the queries one after another.",
        "",
    ]
    return "\n".join(lines)
