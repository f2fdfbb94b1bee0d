"""The report: Markdown tables (medians, min–max, ratios ours/peer) and PNG plots."""
import numpy as np

from .stats import med, pct, ratio

PEERS = ["go", "py", "duck"]
ORDER = ["ours", "go", "py", "duck"]
COLORS = {"ours": "#1b7837", "go": "#2166ac", "py": "#b2182b", "duck": "#e08214"}
SHORT = {"ours": "servingsnap", "go": "Go rebuild", "py": "Python rebuild", "duck": "DuckDB"}
WORKLOADS = [("one", "one series"), ("range", "one series, period range"),
             ("batch100", "100-series batch"), ("latest1000", "latest values, 1000 series")]
CDF_Q = [0, 1, 2, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 97.5, 99, 99.5, 99.9, 100]


def summarize(lat, rows):
    """Latency summary of one workload run, in µs."""
    return {"n": int(len(lat)), "rows": int(rows), "p50": pct(lat, 50), "p90": pct(lat, 90), "p99": pct(lat, 99),
            "p999": pct(lat, 99.9), "mean": float(np.mean(lat)) if len(lat) else None,
            "max": float(np.max(lat)) if len(lat) else None}


def cdf_points(lat):
    return {"q": CDF_Q, "us": [pct(lat, q) for q in CDF_Q] if len(lat) else []}


# ---- formatting ----

def g3(x):
    if x is None:
        return "–"
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def cell(xs, scale=1.0):
    """median (min–max) of repeated measurements."""
    xs = [x / scale for x in xs if x is not None]
    if not xs:
        return "–"
    m = med(xs)
    return g3(m) if len(xs) == 1 else f"{g3(m)} ({g3(min(xs))}–{g3(max(xs))})"


def rcell(a, b):
    """ours / peer, and how many times less when below one."""
    r = ratio(med([x for x in a if x is not None]) if a else None, med([x for x in b if x is not None]) if b else None)
    if r is None:
        return "–"
    if r < 0.5:
        return f"{r:.3g} (1/{1 / r:,.0f})" if 1 / r >= 10 else f"{r:.3g} (1/{1 / r:.1f})"
    return f"{r:.3g}"


def mib(x):
    return x / 2**20


# ---- Markdown ----

def markdown(R, plots):
    m = R["meta"]
    L = [f"# servingsnap benchmark: `{m['profile']}` profile, {m['date']}", ""]
    lk = R.get("lake")
    if lk:
        L += [f"Lake: {lk['rows']:,} rows, {lk['series']:,} series, {lk['files']} Parquet files, "
              f"{mib(lk['bytes']):.1f} MiB (`{lk['path']}`). {m['runs']} repetition(s) of every measurement, in one "
              f"invocation; cells are **median (min–max)**; ratios are ours / peer from the same invocation "
              f"(below 1 is better for servingsnap; `1/N` means N times less).", ""]
    if R.get("error"):
        err = " ".join(R["error"].split())[:500]
        L += [f"**The run did not complete:** `{err}`. Sections below are what was measured before.", ""]
    h = headline(R)
    if h:
        L += ["## Headline", "", h, ""]
    S = R.get("serve")
    if S:
        L += serve_tables(S, plots)
    if R.get("build"):
        L += build_table(R["build"], R["lake"]["bytes"])
    if R.get("sizes"):
        L += sizes_table(R["sizes"])
    if R.get("scaling"):
        L += scaling_table(R["scaling"], plots)
    L += method(R)
    return "\n".join(L) + "\n"


def serve_tables(S, plots):
    n_q = med(S["queries"].get("ours") or [0]) or 0
    keys = [k for k in ORDER if k in S["labels"]]
    head = "| | " + " | ".join(S["labels"][k] for k in keys) + " | " + " | ".join(f"ours / {SHORT[k]}" for k in keys if k != "ours") + " |"
    sep = "|---" * (1 + len(keys) + len([k for k in keys if k != "ours"])) + "|"

    def row(label, get, scale=1.0):
        vals = {k: get(k) for k in keys}
        return (f"| {label} | " + " | ".join(cell(vals[k], scale) for k in keys) + " | "
                + " | ".join(rcell(vals["ours"], vals[k]) for k in keys if k != "ours") + " |")

    mem = lambda which, field: (lambda k: [x[field] for x in S.get(which, {}).get(k, [])])  # noqa: E731
    cold = bool(any(S.get("startup_cold", {}).values()))
    L = ["## 1–3. Start-up, resident memory, query latency", "",
         "Start-up is measured from process spawn until the pyarrow.flight client has the first series, "
         "for every server alike (interpreter start and imports included). Each repetition runs every server "
         "twice, each time a new process: **cold**, with every input file of every server evicted from the page "
         "cache first (`posix_fadvise(DONTNEED)`; binaries and libraries stay cached) and the workloads sent at "
         "once, no warm-up, so servingsnap's first queries fault its mapped pages in from disk; and **warm**, "
         "with the server's own input files read into the page cache first and "
         f"{S['warmup']} warm-up queries. Memory is the server process's `RssAnon` / `RssFile` from "
         "`/proc/PID/status`; `VmHWM` is its peak RSS during start-up. Latency is one query at a time "
         "through one pyarrow.flight client (`do_get(...).read_all()`).", "",
         head, sep,
         row("start-up to first series, warm (s)", lambda k: S["startup_warm"][k])]
    if cold:
        L.append(row("start-up to first series, cold (s)", lambda k: S["startup_cold"][k]))
    L += [row("… of which the server reports (peers: from process start; servingsnap: from main, after Go init) (s)", lambda k: S["reported_ms"][k], 1000.0),
          row("RssAnon after start-up (MiB)", mem("mem_start", "RssAnon"), 2**20),
          row("RssFile after start-up (MiB)", mem("mem_start", "RssFile"), 2**20),
          row("peak RSS during start-up, VmHWM (MiB)", mem("mem_start", "VmHWM"), 2**20),
          row(f"RssAnon after {n_q:,.0f} queries, warm (MiB)", mem("mem_after", "RssAnon"), 2**20),
          row(f"RssFile after {n_q:,.0f} queries, warm (MiB)", mem("mem_after", "RssFile"), 2**20)]
    if cold:
        L += [row(f"RssAnon after {n_q:,.0f} queries, cold (MiB)", mem("mem_after_cold", "RssAnon"), 2**20),
              row(f"RssFile after {n_q:,.0f} queries, cold (MiB)", mem("mem_after_cold", "RssFile"), 2**20)]
    for w, label in WORKLOADS:
        for p in ("p50", "p99"):
            L.append(row(f"{label}: {p}, warm (ms)", lambda k, w=w, p=p: [x[p] for x in S["latency"][k][w]], 1000.0))
            if cold:
                L.append(row(f"{label}: {p}, cold (ms)", lambda k, w=w, p=p: [x[p] for x in S["latency_cold"][k][w]], 1000.0))
    L.append("")
    qc = S["query_counts"]
    rows_per = {w: med([x["rows"] / max(x["n"], 1) for x in S["latency"]["ours"][w]]) or 0 for w, _ in WORKLOADS}
    L += ["Queries per repetition and server: " + ", ".join(
        f"{label} × {qc[w]:,} (≈{rows_per[w]:,.0f} rows each)" for w, label in WORKLOADS) + ". "
        "The same tickets, in the same order, go to every server."]
    capped = []
    for k in keys:
        for lk in ("latency", "latency_cold"):
            for w, label in WORKLOADS:
                ns = [x["n"] for x in S.get(lk, {}).get(k, {}).get(w, [])]
                if ns and min(ns) < qc[w]:
                    capped.append(f"{SHORT[k]} {label}{' (cold)' if lk.endswith('cold') else ''}: "
                                  f"{min(ns):,}–{max(ns):,} of {qc[w]:,}")
    if capped:
        L += ["", "Workloads cut by the time cap (each server answers a prefix of the same ticket list; "
              "the percentiles are over what it answered): " + "; ".join(capped) + "."]
    L.append("")
    ok = bool(S["agree"]) and all(S["agree"])
    L += [f"Answers agree: **{'yes' if ok else 'NO'}**: a fixed set of check tickets (single series, period ranges, "
          "100-series batches, latest values with and without an end bound, a prefix) returned identical rows "
          f"(series_id, period, value) from every server in every repetition." if ok else
          f"Answers agree: **NO** ({len(S['mismatches'])} mismatches; first: `{S['mismatches'][0]}`)" if S["mismatches"] else
          "Answers agree: not checked (the run stopped first).", ""]
    for key, title in (("memory", "Resident memory"), ("latency", "Latency CDFs")):
        if key in plots:
            L += [f"![{title}]({plots[key]})", ""]
    return L


def build_table(B, lake_bytes):
    from .buildcmp import table
    return ["## 4. Build: Parquet → snapshot against DuckDB", ""] + table(B, lake_bytes) + [
        "", "DuckDB runs `COPY (SELECT * FROM read_parquet(...) ORDER BY series_id, period) TO 'x.parquet'`: it "
        "sorts every column and writes them as compressed Parquet (DuckDB's default codec), so its output is smaller and its write "
        "does more encoding work than snapbuild's uncompressed Arrow; it neither normalises periods nor builds an "
        "index. "
        "snapbuild's own phase timings (last run): " + ", ".join(f"{k} {v:.2f}s" for k, v in B.get("phases", {}).items()) + ".", ""]


def sizes_table(Z):
    d = Z["data_bytes"]
    L = ["## 5. Sizes", "", "| file | MiB | / data file |", "|---|---|---|",
         f"| input Parquet (zstd) | {mib(Z['input_bytes']):.1f} | {Z['input_bytes'] / d:.2f} |",
         f"| data.arrow (uncompressed, mapped) | {mib(d):.1f} | 1 |",
         f"| index.arrow (sidecar) | {mib(Z['index_bytes']):.2f} | {Z['index_bytes'] / d:.3f} |",
         f"| the same index as JSON (old design) | {mib(Z['json_bytes']):.2f} | {Z['json_bytes'] / d:.3f} |",
         f"| manifest | {Z['manifest_bytes'] / 1024:.1f} KiB | |"]
    if "duckdb_parquet_bytes" in Z:
        L.append(f"| DuckDB's sorted Parquet | {mib(Z['duckdb_parquet_bytes']):.1f} | {Z['duckdb_parquet_bytes'] / d:.2f} |")
    L += ["", f"index.arrow / JSON = {Z['index_bytes'] / Z['json_bytes']:.3f}. Loading it in Python: index.arrow "
          f"{Z['load_index_arrow_s'] * 1e3:.1f} ms (mapped, read_all) against json.load {Z['load_index_json_s'] * 1e3:.0f} ms "
          f"(ratio {Z['load_index_arrow_s'] / Z['load_index_json_s']:.3g}). The JSON holds every index column "
          "(dates as YYYY-MM-DD) keyed by series_id.", ""]
    return L


def scaling_table(P, plots):
    keys = [k for k in ORDER if any(k in p["startup"] or k in p["skipped"] for p in P)]
    L = ["## 6. Scaling: start-up and index size against lake size", "",
         "| series | rows | input MiB | data MiB | index MiB | JSON index MiB | " + " | ".join(f"start-up {SHORT[k]} (s)" for k in keys) + " |",
         "|---" * (6 + len(keys)) + "|"]
    for p in P:
        cells = []
        for k in keys:
            cells.append(cell(p["startup"][k]) if k in p["startup"] else ("skipped" if k in p["skipped"] else "–"))
        L.append(f"| {p['series']:,} | {p['rows']:,} | {mib(p['input_bytes']):.1f} | {mib(p['data_bytes']):.1f} | "
                 f"{mib(p['index_bytes']):.2f} | {mib(p['json_bytes']):.2f} | " + " | ".join(cells) + " |")
    L.append("")
    for p in P:
        for k, why in p["skipped"].items():
            L.append(f"- {p['series']:,} series, {SHORT[k]}: skipped ({why}).")
    if len(P) >= 2 and all(k in P[0]["startup"] and k in P[-1]["startup"] for k in keys):
        g = P[-1]["rows"] / P[0]["rows"]
        L.append(f"From {P[0]['series']:,} to {P[-1]['series']:,} series rows grow {g:,.0f}×; start-up grows " + ", ".join(
            f"{SHORT[k]} {med(P[-1]['startup'][k]) / med(P[0]['startup'][k]):,.1f}×" for k in keys) + ".")
    L.append("")
    if "startup" in plots:
        L += [f"![Start-up against lake size]({plots['startup']})", ""]
    return L


def method(R):
    m = R["meta"]
    mc, v = m["machine"], m["versions"]
    return ["## How this was measured", "",
            "- **servingsnap**: `snapbuild serve --root ROOT` maps the snapshot's data file and reads its index "
            "sidecar; a query is a lookup in the index's hash table (a binary search before format version 5) and "
            "zero-copy slices of the mapped batches.",
            "- **Go rebuild** (`bench/gobaseline`): the strongest rebuild this project's code allows: the lake is "
            "read, interned and radix-sorted at every start by the builder's own code (`sortwrite.Rebuild`: "
            "`snapbuild build` without the write), attributes kept once per series, answers are zero-copy slices "
            "of the sorted columns over arrow-go Flight with pkg/serve's gRPC and IPC options.",
            "- **Python rebuild** (`bench/pybaseline.py`, pyarrow.flight + Polars): what the replaced server did at every "
            "start, lean: read every year partition, parse periods (distinct values only), take the attributes into "
            "the per-series index first, sort only (series_id as Categorical, period, value), build series_id → row "
            "range and latest values; answers are zero-copy slices of the sorted Arrow columns.",
            "- **DuckDB** (`bench/duckbaseline.py`, pyarrow.flight + DuckDB): at every start the lake is read into an "
            "in-memory DuckDB table sorted by (series_id, period) (periods parsed, attributes in a per-series table); "
            "each ticket is one SQL query whose Arrow result is streamed back.",
            "- All answer the same JSON tickets (docs/FLIGHT.md); servingsnap and the two rebuilds stream `series_id` "
            "as dictionary<int32, utf8>, DuckDB as utf8. Client and servers share the machine's cores; loopback only.",
            "- Memory: `RssFile` of servingsnap is page cache of the mapped files that queries touched, shared with the "
            "kernel's cache and reclaimable; `RssAnon` is the private heap.",
            "",
            f"Machine: {mc.get('cpu', '?')}, {mc.get('cores')} cores, {mc.get('mem_gib', '?')} GiB, Linux {mc.get('kernel')}; "
            f"{mc.get('go')}; Python {v['python']}, pyarrow {v['pyarrow']}, polars {v['polars']}, duckdb {v['duckdb']}. "
            f"Commit {mc.get('commit')}. Load average at start {' '.join(m.get('loadavg_start') or [])}, "
            f"at end {' '.join(m.get('loadavg_end') or [])}. Harness wall time {m['seconds']:.0f} s.",
            "", f"Command: `{m['command']}`", ""]


def headline(R):
    """A few sentences with the headline ratios (for the README); skips what was not measured."""
    S, B, Z = R.get("serve"), R.get("build"), R.get("sizes")
    out = []

    def scaled(x, k):
        return None if x is None else x / k

    if S:
        def m(get):
            return {k: med(get(k) or []) for k in ORDER}
        w = m(lambda k: S["startup_warm"].get(k))
        a = m(lambda k: [x["RssAnon"] for x in S["mem_start"].get(k, [])])
        p = m(lambda k: [x["p50"] for x in S["latency"].get(k, {}).get("one", [])])
        peers = [k for k in PEERS if S["startup_warm"].get(k)]

        def vs(d, scale=1.0, unit=""):
            return ", ".join(f"{g3(scaled(d[k], scale))}{unit} ({SHORT[k]})" for k in peers)
        if w["ours"] is not None:
            out.append(f"start-up to first series, warm: {g3(w['ours'])} s vs {vs(w, 1, ' s')}: ours/peer " +
                       ", ".join(rcell(S['startup_warm']['ours'], S['startup_warm'].get(k)) for k in peers))
        if a["ours"] is not None:
            out.append(f"private memory (RssAnon) after start-up {g3(scaled(a['ours'], 2**20))} MiB vs {vs(a, 2**20, ' MiB')}")
        if p["ours"] is not None:
            out.append(f"one-series query p50, warm: {g3(scaled(p['ours'], 1e3))} ms vs {vs(p, 1e3, ' ms')}")
        pc = m(lambda k: [x["p99"] for x in S.get("latency_cold", {}).get(k, {}).get("one", [])])
        if pc["ours"] is not None:
            out.append(f"one-series query p99, cold: {g3(scaled(pc['ours'], 1e3))} ms vs {vs(pc, 1e3, ' ms')}")
    if B and B.get("ours") and B.get("duckdb"):
        ot, pt = med([r["seconds"] for r in B["ours"]]), med([r["seconds"] for r in B["duckdb"]])
        om, pm = med([r["peak_rss"] for r in B["ours"]]), med([r["peak_rss"] for r in B["duckdb"]])
        out.append(f"build {ot:.1f} s / {om / 2**30:.2f} GiB peak vs DuckDB sort-and-write {pt:.1f} s / {pm / 2**30:.2f} GiB "
                   f"(ours/peer {ot / pt:.2f} time, {om / pm:.2f} memory)")
    if Z:
        out.append(f"index sidecar {mib(Z['index_bytes']):.1f} MiB ({Z['index_bytes'] / Z['data_bytes'] * 100:.1f}% of the data) "
                   f"vs {mib(Z['json_bytes']):.1f} MiB as JSON ({Z['json_bytes'] / Z['data_bytes'] * 100:.0f}%)")
    return "\n".join("- " + x for x in out)


# ---- plots ----

def plots(R, pooled, out, name):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    made = {}
    S = R.get("serve")
    if pooled and S:
        fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
        for ax, (w, label) in zip(axes.flat, WORKLOADS):
            for k in ORDER:
                if k not in pooled or not pooled[k][w]:
                    continue
                lat = np.sort(np.concatenate(pooled[k][w])) / 1e3
                if not len(lat):
                    continue
                y = np.arange(1, len(lat) + 1) / len(lat)
                ax.plot(lat, y, color=COLORS[k], label=f"{SHORT[k]} (p50 {np.percentile(lat, 50):.2f}, p99 {np.percentile(lat, 99):.2f} ms)")
            ax.set_xscale("log")
            ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_title(label)
            ax.set_xlabel("latency (ms, log scale)")
            ax.set_ylabel("fraction of queries")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8, loc="lower right")
        fig.suptitle(f"Query latency through pyarrow.flight ({R['lake']['rows']:,} rows, {R['lake']['series']:,} series)")
        fig.tight_layout()
        made["latency"] = f"{name}-latency.png"
        fig.savefig(out / made["latency"], dpi=110)
        plt.close(fig)

    if S and any(S["mem_after"].values()):
        fig, ax = plt.subplots(figsize=(9, 4.8))
        groups = [("mem_start", "after start-up"), ("mem_after", f"after {med(S['queries'].get('ours') or [0]) or 0:,.0f} queries")]
        keys = [k for k in ORDER if S["mem_start"].get(k) and S["mem_after"].get(k)]
        width = 0.8 / len(keys)
        for gi, (field, glabel) in enumerate(groups):
            for ki, k in enumerate(keys):
                an = mib(med([x["RssAnon"] for x in S[field][k]]))
                fi = mib(med([x["RssFile"] for x in S[field][k]]))
                x = gi + ki * width
                ax.bar(x, an, width, color=COLORS[k], label=f"{SHORT[k]} RssAnon" if gi == 0 else None)
                ax.bar(x, fi, width, bottom=an, color=COLORS[k], alpha=0.35, hatch="//",
                       label=f"{SHORT[k]} RssFile" if gi == 0 else None)
                ax.text(x, an + fi, f"{an:.0f}+{fi:.0f}", ha="center", va="bottom", fontsize=7)
        ax.set_xticks([g + width * (len(keys) - 1) / 2 for g in range(len(groups))], [g[1] for g in groups])
        ax.set_ylim(top=ax.get_ylim()[1] * 1.3)  # room for the legend
        ax.set_ylabel("MiB (RssAnon + RssFile)")
        ax.set_title("Resident memory of the server process")
        ax.legend(fontsize=7, ncol=2)
        ax.grid(True, axis="y", alpha=0.3)
        fig.tight_layout()
        made["memory"] = f"{name}-memory.png"
        fig.savefig(out / made["memory"], dpi=110)
        plt.close(fig)

    P = R.get("scaling")
    if P:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.8))
        for k in ORDER:
            pts = [(p["rows"], p["startup"][k]) for p in P if k in p["startup"]]
            if not pts:
                continue
            x = [r for r, _ in pts]
            y = [med(s) for _, s in pts]
            lo = [med(s) - min(s) for _, s in pts]
            hi = [max(s) - med(s) for _, s in pts]
            a1.errorbar(x, y, yerr=[lo, hi], marker="o", color=COLORS[k], label=SHORT[k], capsize=3)
        a1.set_xscale("log")
        a1.set_yscale("log")
        a1.set_xlabel("rows in the dataset (log)")
        a1.set_ylabel("start-up to first series (s, log)")
        a1.set_title("Start-up against dataset size (warm cache)")
        a1.grid(True, which="both", alpha=0.3)
        a1.legend()
        for p in P:
            if "ours" in p["startup"]:
                a1.annotate(f"{p['series']:,} series", (p["rows"], med(p["startup"]["ours"])), fontsize=7,
                            textcoords="offset points", xytext=(0, 8), ha="center", alpha=0.7)
        a1.set_ylim(top=a1.get_ylim()[1] * 2)
        x = [p["series"] for p in P]
        a2.plot(x, [mib(p["data_bytes"]) for p in P], "o-", color="#777777", label="data.arrow")
        a2.plot(x, [mib(p["index_bytes"]) for p in P], "o-", color=COLORS["ours"], label="index.arrow")
        a2.plot(x, [mib(p["json_bytes"]) for p in P], "o--", color=COLORS["py"], label="same index as JSON")
        a2.set_xscale("log")
        a2.set_yscale("log")
        a2.set_xlabel("series (log)")
        a2.set_ylabel("MiB (log)")
        a2.set_title("File sizes against number of series")
        a2.grid(True, which="both", alpha=0.3)
        a2.legend()
        fig.tight_layout()
        made["startup"] = f"{name}-startup.png"
        fig.savefig(out / made["startup"], dpi=110)
        plt.close(fig)
    return made
