"""The `seed` profile: the replaced system's real size, built under a memory budget.

Two lake shapes of 2.82M series: `seed` (~420M rows with the generator's 2000-2024 range) and
`short` (2020-2024, ~31 rows a series), each built with `snapbuild build --memory 6GiB`, then:

- gen and build: wall time and peak RSS (the generator must stay bounded), runs, spill bytes;
- serve, cold (the snapshot's files evicted with posix_fadvise DONTNEED, no warm-up) and warm
  (files read once, a warm-up): start-up to the first answer, RssAnon and VmHWM, and p50/p99 of
  one series, a 100-series batch and the latest of 1000 series;
- the Go rebuild peer (bench/gobaseline: the lake read, interned and radix-sorted at every
  start) the same way, always tried, under a watcher that kills it past PEER_RSS_LIMIT of RSS
  (or when the machine runs short): a rebuild that does not fit is itself the figure, its
  peak RSS and how long it ran;
- live writes on a hard-linked copy of the root: a DoPut of 1M rows, the one-series and
  latest-of-1000 latency with that delta, then DoAction compact: its time against the build,
  the server's peak RssAnon during it (sampled every 10 ms) and what it holds 30 s after.

--reuse-build serves the snapshot an earlier run built (its build figures are reported as
that run's): the serving half re-measured without a rebuild.

--fraction F runs the same shapes at F of the size (series, budget and DoPut rows scaled, so
the build spills as it would at full size): on a small machine the full run does not fit in
the time or disk at hand. The fraction is written into the result file name and report.
"""
import datetime
import json
import os
import pathlib
import shutil
import signal
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl

from . import client, lakes, launch, procs, seedtable
from .stats import pct

SEED_MEMORY = 6 * 2**30
# Two lake shapes with the replaced system's 2.82M series: the generator's full 2000-2024
# histories (~150 rows a series, ~420M rows) and short ones (2020-2024: ~31 rows, ~88M rows).
SHAPES = {
    "seed": {"series": 2_820_000, "gen_args": [], "descr": "2.82M series, 2000-2024 (~150 rows a series)"},
    "short": {"series": 2_820_000, "gen_args": ["--from-year", "2020", "--to-year", "2024"],
              "descr": "2.82M series, 2020-2024 (short histories, ~31 rows a series)"},
}
PUT_ROWS = 1_000_000  # the live phase's DoPut at full size (scaled by --fraction)
COUNTS = {"warm": {"one": 10_000, "range": 0, "batch100": 1000, "latest1000": 1000},
          "cold": {"one": 2000, "range": 0, "batch100": 200, "latest1000": 200}, "time_cap": 60}
PEER_RSS_LIMIT = 22 * 2**30  # the Go rebuild is killed past this RSS (the machine has 24 GiB)
MEM_FLOOR = 2**30            # ... or when the machine's MemAvailable falls under this
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


def _watch(pid, limit, floor, stop, st):
    """Sample pid's RSS every 100 ms until stop is set or it exits; SIGKILL its process group
    when its RSS passes limit or the machine's MemAvailable falls under floor. Returns a dict
    st (filled while it runs): peak_rss, killed, reason, thread."""
    st.update({"peak_rss": 0, "killed": False, "reason": None})

    def loop():
        while not stop.is_set():
            try:
                rss = procs.proc_status(pid).get("VmRSS", 0)
            except (OSError, ValueError):
                return
            st["peak_rss"] = max(st["peak_rss"], rss)
            avail = mem_available()
            if rss > limit or (avail and avail < floor):
                st["killed"] = True
                st["reason"] = (f"RSS {rss / 2**20:,.0f} MiB over the limit {limit / 2**20:,.0f} MiB" if rss > limit else
                                f"MemAvailable {avail / 2**20:,.0f} MiB under {floor / 2**20:,.0f} MiB")
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                return
            time.sleep(0.1)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    st["thread"] = t


def _workloads(loc, tickets, time_cap):
    out, n = {}, 0
    for w in ("one", "batch100", "latest1000"):
        lat, rows = client.latencies(loc, tickets[w], time_cap)
        n += len(lat)
        out[w] = {"n": len(lat), "rows": rows, "p50": pct(lat, 50), "p90": pct(lat, 90), "p99": pct(lat, 99)}
    return out, n


def _serve(srv, first, ids, years, work, name, timeout, counts, log, limit=None):
    """srv's start-up, memory and latency, cold then warm, each its own process.

    cold: srv's files evicted from the page cache (posix_fadvise DONTNEED), start, then the
    cold workloads at once (no warm-up: the first reads fault the pages in);
    warm: the files read once, start, a warm-up, then the warm workloads (one series, a
    100-series batch, latest of 1000 series). limit: SIGKILL the process when its RSS passes
    it (a peer that does not fit), recorded with its peak rather than raised."""
    lp = pathlib.Path(work) / "logs" / f"{name}.log"
    lp.parent.mkdir(parents=True, exist_ok=True)
    out = {"served": False}
    tickets = client.make_tickets(DATASET, ids, years, counts["warm"], seed=1000)
    cold_t = client.make_tickets(DATASET, ids, years, counts["cold"], seed=3000)
    warm_up = client.make_tickets(DATASET, ids, years, {"one": 100, "range": 0, "batch100": 10, "latest1000": 10}, seed=2000)
    for mode in ("cold", "warm"):
        if mode == "cold":
            procs.evict(srv.files)
        else:
            procs.warm(srv.files)
        port = procs.free_port()
        stop = threading.Event()
        t0 = time.perf_counter()
        watch = {}

        def on_spawn(proc):
            if limit is not None:
                _watch(proc.pid, limit, MEM_FLOOR, stop, watch)
        try:
            p, open_s, _ = client.start(srv, port, first, lp, timeout, on_spawn=on_spawn)
        except client.StartError as e:
            stop.set()
            if watch.get("killed"):
                out.update({"killed": True, "reason": watch["reason"], "limit": limit, "peak_rss": watch["peak_rss"],
                            "elapsed_s": time.perf_counter() - t0, "mode": mode})
                log(f"  {srv.key}: stopped {mode} after {out['elapsed_s']:.0f}s: {watch['reason']} (peak RSS "
                    f"{watch['peak_rss'] / 2**20:,.0f} MiB)")
                return out
            out["error"] = str(e).splitlines()[0]
            raise
        try:
            m0 = procs.proc_status(p.pid)
            loc = f"grpc+tcp://127.0.0.1:{port}"
            if mode == "warm":
                client.latencies(loc, [t for w in ("one", "batch100", "latest1000") for t in warm_up[w]], 60)
            lat, n = _workloads(loc, tickets if mode == "warm" else cold_t, counts["time_cap"])
            m1 = procs.proc_status(p.pid)
        finally:
            stop.set()
            procs.stop(p)
        if watch:
            watch["thread"].join()
            out["peak_rss"] = max(out.get("peak_rss", 0), watch["peak_rss"])
        sfx = "" if mode == "warm" else "_cold"
        out.update({"open" + sfx + "_s": open_s, "startup_ms" + sfx: client.reported_startup_ms(lp),
                    "mem_open" + sfx: m0, "mem_after" + sfx: m1, "queries" + sfx: n,
                    ("latency" if mode == "warm" else "latency_cold"): lat})
        log(f"  {srv.key} {mode}: open {open_s:.3f}s, RssAnon {m0['RssAnon'] / 2**20:.0f} -> {m1['RssAnon'] / 2**20:.0f} MiB "
            f"after {n:,} queries; p50 one {lat['one']['p50'] / 1e3:.2f} ms, batch100 {lat['batch100']['p50'] / 1e3:.2f} ms, "
            f"latest1000 {lat['latest1000']['p50'] / 1e3:.2f} ms")
    out["served"] = True
    # the earlier report's field names
    out["one_p50_us"], out["one_p99_us"] = out["latency"]["one"]["p50"], out["latency"]["one"]["p99"]
    return out


def _link_copy(src, dst):
    """A serving root a live phase may write to: the snapshot files (immutable) hard-linked, every
    other file (CURRENT, manifests, HISTORY: files a server may rewrite or append to) copied."""
    src, dst = pathlib.Path(src), pathlib.Path(dst)
    shutil.rmtree(dst, ignore_errors=True)
    for f in src.rglob("*"):
        t = dst / f.relative_to(src)
        if f.is_dir():
            t.mkdir(parents=True, exist_ok=True)
            continue
        t.parent.mkdir(parents=True, exist_ok=True)
        if f.name.endswith(".arrow") or f.name.endswith(".vortex"):
            os.link(f, t)
        else:
            shutil.copy2(f, t)


def _status(c):
    (r,) = list(c.do_action(fl.Action("status", b"")))
    st = json.loads(r.body.to_pybytes())
    return next(d for d in st["datasets"] if d.get("name", DATASET) == DATASET)


def _live(snapbuild, root, ids, years, work, name, timeout, put_rows, log, settle=30.0):
    """Live writes and a compaction on a copy of the root: DoPut of put_rows rows (revisions and
    new periods of random known series, in batches of at most 100k rows, one stream), the
    one-series and latest-of-1000 latency with that delta, then DoAction compact timed, the
    server's RssAnon sampled every 10 ms during it (peak) and settle seconds after it (held)."""
    live_root = pathlib.Path(work) / "roots" / f"{name}-live"
    _link_copy(root, live_root)
    files, _ = lakes.snapshot_files(live_root / DATASET)
    procs.warm([str(p) for p in files.values()])
    srv = client.Server("ours-live", "servingsnap (writes)",
                        lambda port: client.servingsnap_cmd(snapbuild) + ["--root", str(live_root), "--addr", f"127.0.0.1:{port}"])
    lp = pathlib.Path(work) / "logs" / f"{name}-live.log"
    first = client.ticket({"dataset": DATASET, "series": [ids[len(ids) // 2]]})
    port = procs.free_port()
    p, _, _ = client.start(srv, port, first, lp, timeout)
    out = {"put_rows": put_rows}
    try:
        loc = f"grpc+tcp://127.0.0.1:{port}"
        out["mem_before_put"] = procs.proc_status(p.pid)
        rng = np.random.default_rng(41)
        y1 = years[1]
        day0 = (datetime.date(y1 - 1, 1, 1) - datetime.date(1970, 1, 1)).days
        batch = 100_000
        batches = []
        id_arr = pa.array(ids, pa.string())
        for i in range(0, put_rows, batch):
            n = min(batch, put_rows - i)
            sid = id_arr.take(pa.array(rng.integers(0, len(ids), n)))
            per = pa.array((day0 + rng.integers(0, 730, n)).astype(np.int32), pa.date32())
            batches.append(pa.record_batch([sid, per, pa.array(rng.normal(50, 10, n))], names=["series_id", "period", "value"]))
        c = fl.FlightClient(loc)
        try:
            t0 = time.perf_counter()
            writer, reader = c.do_put(fl.FlightDescriptor.for_path(DATASET), batches[0].schema)
            with writer:
                for b in batches:
                    writer.write_batch(b)
                    if reader.read() is None:
                        raise RuntimeError("DoPut: no acknowledgement for a batch")
                writer.done_writing()
            out["put_s"] = time.perf_counter() - t0
            out["put_batches"] = len(batches)
            out["delta_rows"] = ((_status(c).get("delta") or {}).get("rows"))
        finally:
            c.close()
        log(f"  DoPut {put_rows:,} rows in {len(batches)} batches: {out['put_s']:.2f}s "
            f"({put_rows / out['put_s']:,.0f} rows/s); delta {out['delta_rows']} rows")
        t = client.make_tickets(DATASET, ids, years, {"one": 2000, "range": 0, "batch100": 0, "latest1000": 200}, seed=4000)
        out["latency"] = {}
        for w in ("one", "latest1000"):
            lat, rows = client.latencies(loc, t[w], 60)
            out["latency"][w] = {"n": len(lat), "rows": rows, "p50": pct(lat, 50), "p90": pct(lat, 90), "p99": pct(lat, 99)}
        log(f"  with the delta: one-series p50 {out['latency']['one']['p50'] / 1e3:.2f} ms, latest1000 p50 "
            f"{out['latency']['latest1000']['p50'] / 1e3:.2f} ms")

        idle = procs.proc_status(p.pid)
        samples = []
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                try:
                    samples.append((time.perf_counter(), procs.proc_status(p.pid)["RssAnon"]))
                except (OSError, KeyError):
                    return
                time.sleep(0.01)
        th = threading.Thread(target=sample, daemon=True)
        th.start()
        c = fl.FlightClient(loc)
        try:
            t0 = time.perf_counter()
            res = [json.loads(r.body.to_pybytes()) for r in c.do_action(fl.Action("compact", DATASET.encode()))]
            t1 = time.perf_counter()
        finally:
            c.close()
        time.sleep(settle)
        stop.set()
        th.join()
        held = procs.proc_status(p.pid)
        during = [a for ts, a in samples if t0 <= ts <= t1] or [idle["RssAnon"]]
        out.update({"compact_s": t1 - t0, "compact_result": res[0] if res else None, "idle": idle,
                    "idle_anon": idle["RssAnon"], "peak_anon": max(during + [idle["RssAnon"]]),
                    "retained_anon": held["RssAnon"], "retained_after_s": settle, "held": held,
                    "samples": len(samples)})
        log(f"  compaction {out['compact_s']:.2f}s: RssAnon idle {idle['RssAnon'] / 2**20:.0f} MiB, peak "
            f"{out['peak_anon'] / 2**20:.0f} MiB, {held['RssAnon'] / 2**20:.0f} MiB {settle:.0f}s after")
    finally:
        procs.stop(p)
        shutil.rmtree(live_root, ignore_errors=True)  # the compaction wrote a whole new snapshot
    return out


def _lake(snapbuild, work, series, gen_args, log):
    """A cached lake like lakes.cached_lake, but generated under run_measured (time, peak RSS)."""
    suffix = "".join(a.replace("--", "-") for a in gen_args)
    lake = pathlib.Path(work) / "lakes" / f"s{series}-seed1{suffix}"
    meta = lake / ".gen.json"
    if (lake / ".complete").exists() and meta.exists():
        g = json.loads(meta.read_text())
        g["out"] = lake.name  # the lake's name, not where this machine keeps it
        return lake, g
    tmp = lake.with_name(lake.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(lake, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    log(f"  generating {lake} ({series:,} series)…")
    cmd = [str(snapbuild), "gen", "--out", str(tmp), "--series", str(series), "--seed", "1", *gen_args, "--json"]
    secs, rss, out = procs.run_measured(cmd)
    g = json.loads(out)
    g.update({"wall_s": secs, "peak_rss": rss, "out": lake.name})
    tmp.rename(lake)
    (lake / ".complete").write_text(" ".join(cmd[1:-1]) + "\n")
    meta.write_text(json.dumps(g) + "\n")
    log(f"  generated {g['rows']:,} rows in {secs:.0f}s, peak RSS {rss / 2**20:.0f} MiB")
    return lake, g


def _shape(key, snapbuild, work, fraction, machine, loadavg, log, timeout, counts, gobaseline, reuse_build, peer_limit):
    """One lake shape end to end: gen, build under the budget, serve (cold and warm), the Go
    rebuild under a memory limit, live writes and a compaction."""
    sh = SHAPES[key]
    series = max(1000, round(sh["series"] * fraction))
    memory = int(SEED_MEMORY * fraction)
    S = {"shape": key, "descr": sh["descr"], "series_target": series, "budget": memory, "gen_args": sh["gen_args"]}
    log(f"shape {key}: {sh['descr']} at fraction {fraction:g}: {series:,} series")
    lake, S["gen"] = _lake(snapbuild, work, series, sh["gen_args"], log)

    root = pathlib.Path(work) / "roots" / f"seed-{key}-{series}"
    record = root / ".build.json"
    if reuse_build and record.exists():
        # The serving half again over the snapshot an earlier run built: its build figures are
        # that run's, and the report says so.
        S["build"] = json.loads(record.read_text())
        log(f"  reusing the build of {S['build'].get('built_at')} (commit {S['build'].get('commit')})")
    else:
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        log(f"  building with --memory {memory / 2**30:.2f} GiB…")
        secs, rss, o = procs.run_measured([str(snapbuild), "build", "--input", str(lake), "--out", str(root / DATASET),
                                           "--memory", str(memory), "--json"])
        b = json.loads(o)
        S["build"] = {"wall_s": secs, "peak_rss": rss, "rows": b["rows"], "series": b["series"],
                      "external": b.get("external"), "runs": b.get("runs"), "spill_bytes": b.get("spill_bytes"),
                      "phases": b["phases"], "input_bytes": b["input_bytes"],
                      "files": {f["role"]: f["size"] for f in b["files"]},
                      "built_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                      "commit": machine.get("commit"), "loadavg_end": loadavg()}
        record.write_text(json.dumps(S["build"], indent=1) + "\n")
        log(f"  built {b['rows']:,} rows / {b['series']:,} series in {secs:.1f}s, peak RSS {rss / 2**20:.0f} MiB, "
            f"{b.get('runs')} runs, {(b.get('spill_bytes') or 0) / 2**30:.2f} GiB spilled")

    # The nightly gate on the snapshot just built: every row checked against the lake it came
    # from, timed against the build (the seed's figure for the issue's "verify as fast as the
    # build"); a reused build is verified again, at this commit.
    snapverify = pathlib.Path(snapbuild).with_name("snapverify")
    log("  verifying: snapverify --deep --against the lake…")
    secs, rss, o = procs.run_measured([str(snapverify), str(root / DATASET), "--deep", "--against", str(lake), "--json"])
    v = json.loads(o)
    S["verify"] = {"wall_s": secs, "peak_rss": rss, "ok": v.get("ok"), "findings": len(v.get("findings") or [])}
    log(f"  verified in {secs:.1f}s ({secs / S['build']['wall_s']:.2f}× the build), peak RSS {rss / 2**20:.0f} MiB, "
        f"ok {v.get('ok')}")

    files, _ = lakes.snapshot_files(root / DATASET)
    ids, years, _ = lakes.index_summary(files["index"])
    srv = launch.ours(snapbuild, root, DATASET, label="servingsnap")
    first = client.ticket({"dataset": DATASET, "series": [ids[len(ids) // 2]]})
    S["serve"] = _serve(srv, first, ids, years, work, f"seed-{key}-{series}", timeout, counts, log)

    # The Go rebuild peer, always tried, under a memory limit: a rebuild that does not fit is
    # stopped at the limit and its peak and elapsed time are the figure.
    if gobaseline is not None:
        avail = mem_available()
        limit = peer_limit or min(PEER_RSS_LIMIT, int(PEER_MEMORY_SHARE * avail))
        S["go_peer"] = {"estimated_peak": GO_PEER_BYTES_PER_ROW * S["build"]["rows"], "mem_available": avail,
                        "limit": limit}
        peer = launch.go_peer(gobaseline, lake, DATASET)
        try:
            S["go_peer"].update(_serve(peer, first, ids, years, work, f"seed-{key}-{series}-go", max(timeout, 3600),
                                       counts, log, limit=limit))
        except client.StartError as e:
            # The first line says how it stopped, the log's last line why (a rebuild that
            # does not fit refuses with its estimate before it reads a row).
            lines = [x for x in str(e).splitlines() if x.strip()]
            S["go_peer"].update({"served": False, "error": " ".join(lines[:1] + lines[-1:] if len(lines) > 1 else lines)})
            log(f"  go peer failed: {S['go_peer']['error']}")

    put_rows = max(10_000, round(PUT_ROWS * fraction))
    S["live"] = _live(snapbuild, root, ids, years, work, f"seed-{key}-{series}", timeout, put_rows, log)
    return S


def run(snapbuild, work, out, fraction, machine, loadavg, log, timeout=900, gobaseline=None,
        reuse_build=False, shapes=("seed", "short"), peer_limit=None, counts=None):
    counts = counts or COUNTS
    R = {"meta": {"date": datetime.date.today().isoformat(), "profile": "seed", "fraction": fraction,
                  "memory_budget": int(SEED_MEMORY * fraction), "reuse_build": reuse_build, "machine": machine,
                  "loadavg_start": loadavg(), "counts": counts}}
    R["shapes"] = {}
    for key in shapes:
        R["shapes"][key] = _shape(key, snapbuild, work, fraction, machine, loadavg, log, timeout, counts, gobaseline,
                                  reuse_build, peer_limit)
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
    m = R["meta"]
    frac = "" if m["fraction"] == 1 else f" at fraction {m['fraction']:g} of the seed (series, budget and delta scaled)"
    shapes = [(k, S) for k, S in R["shapes"].items()]
    lines = [f"# seed profile{frac}, {m['date']}", "",
             f"Machine: {m['machine']}. Load average at start {m['loadavg_start']}, at end {m.get('loadavg_end')}.", ""]
    for k, S in shapes:
        g, b = S["gen"], S["build"]
        reused = f" (built {b['built_at']}, commit {b['commit']}, by an earlier run)" if m.get("reuse_build") else ""
        lines += [f"- **{k}**: {S['descr']}; `" + " ".join(["snapbuild gen --series", str(S["series_target"]), "--seed 1", *S["gen_args"]]) + "`"
                  f" {g['wall_s']:.1f} s at peak RSS {seedtable.mib(g['peak_rss'])}; build `--memory {S['budget'] / 2**30:.2f}GiB`"
                  f"{reused}: external {b['external']}, {b['runs']} runs, {seedtable.mib(b['spill_bytes'])} spilled, phases "
                  + ", ".join(f"{x} {v:.1f}s" for x, v in b["phases"].items())
                  + f"; input {seedtable.mib(b['input_bytes'])}, data.arrow {seedtable.mib(b['files'].get('data'))},"
                  f" index.arrow {seedtable.mib(b['files'].get('index'))}."]
    lines += [""] + seedtable.table(shapes) + [""]
    c = m["counts"]
    lines += [
        "Method: `bench/harness.py --profile seed [--fraction F]` (bench/snapbench/seed.py), `make bench-seed`. Per shape:",
        "the lake is generated once and cached; gen and build run as child processes measured with wait4 (peak RSS of",
        "the child alone). Each server runs twice, each time a fresh process: *cold* (its files evicted with",
        "posix_fadvise DONTNEED, then at once " + ", ".join(f"{n:,} {w}" for w, n in c["cold"].items() if n) + " queries, no warm-up)",
        "and *warm* (its files read once, a warm-up, then " + ", ".join(f"{n:,} {w}" for w, n in c["warm"].items() if n) + "),",
        f"one pyarrow.flight client, one query at a time, {c['time_cap']} s cap per workload. The Go rebuild is run under a",
        "watcher that kills it when its RSS passes the limit (or MemAvailable falls under 1 GiB): the limit, its peak and",
        "how long it ran are then the figure. Live writes run on a copy of the root (snapshot files hard-linked): one",
        "DoPut stream of 100k-row batches of random known series and periods in the last two years, each acknowledged,",
        "then the latencies with that delta, then `DoAction compact`, the server's RssAnon sampled every 10 ms during",
        "it (the peak) and read again 30 s after it.",
        "",
    ]
    return "\n".join(lines)
