"""The seed profile's table, from its JSON: used by its own report (seed.py) and by
bench/report.py's `bench:seed` region, so both print the same figures.

Standard library only: bench/report.py runs with the system python3.
"""

GOAL_PEAK_ABOVE_IDLE = 2**30   # a compaction's peak RssAnon above the server's idle (issue 41)
GOAL_RETAINED = 64 * 2**20     # RssAnon held 30 s after the compaction


def mib(x):
    return f"{x / 2**20:,.0f} MiB" if x is not None else "–"


def ms(us):
    return f"{us / 1e3:.2f}" if us is not None else "–"


def secs(x):
    if x is None:
        return "–"
    return f"{x:.3f} s" if x < 1 else f"{x:,.1f} s"


def ratio(a, b):
    if a is None or not b:
        return ""
    r = a / b
    return f"{r:.2f}" if r >= 0.5 else f"1/{1 / r:,.0f}" if 1 / r >= 10 else f"1/{1 / r:.1f}"


def lat(S, w, p, mode="warm"):
    x = (S or {}).get("latency" if mode == "warm" else "latency_cold", {}).get(w)
    return x.get(p) if x else None


def peer_cell(gp, fn):
    """A peer's cell: its figure when it served, else what stopped it (once, in the first row)."""
    if gp and gp.get("served"):
        return fn(gp)
    return "–"


def peer_note(name, gp):
    if not gp:
        return None
    if gp.get("served"):
        return None
    if gp.get("killed"):
        return (f"{name}: the Go rebuild was stopped after {gp['elapsed_s']:,.1f} s without answering: {gp.get('reason')}"
                f" (its peak RSS {mib(gp['peak_rss'])}; its start-up estimated at {mib(gp.get('estimated_peak'))},"
                f" about 100 bytes a row): it does not fit under that limit on this machine.")
    return f"{name}: the Go rebuild did not serve: {gp.get('error', 'not run')}."


def goal(ok):
    return "met" if ok else "**not met**"


def table(shapes):
    """Markdown lines: one column pair (servingsnap, Go rebuild) per lake shape.

    shapes: [(title, shape dict)] where a shape dict has gen, build, serve, go_peer, live."""
    head = "| figure | " + " | ".join(f"{t}: servingsnap | {t}: Go rebuild | ratio" for t, _ in shapes) + " |"
    L = [head, "|---|" + "---|---|---|" * len(shapes)]

    def row(label, ours, peer=None, r=True):
        cells = []
        for _, S in shapes:
            o = ours(S)
            p = peer(S) if peer else ""
            rr = ""
            if peer and r:
                ov, pv = r(S) if callable(r) else (None, None)
                rr = ratio(ov, pv)
            cells += [o, p, rr]
        L.append(f"| {label} | " + " | ".join(cells) + " |")

    def gp(S):
        return S.get("go_peer") or {}

    def served(S):
        return gp(S).get("served")

    row("series, rows", lambda S: f"{S['build']['series']:,}, {S['build']['rows']:,}")
    row("build (`--memory` budget): wall time, peak RSS",
        lambda S: f"{secs(S['build']['wall_s'])}, {mib(S['build']['peak_rss'])} ({mib(S['budget'])})")
    if all("verify" in S for _, S in shapes):
        row("verify gate (`snapverify --deep --against` the lake): wall time, against the build, peak RSS "
            "(the mapped snapshot's pages included)",
            lambda S: f"{secs(S['verify']['wall_s'])}, {S['verify']['wall_s'] / S['build']['wall_s']:.2f}× the build, "
                      f"{mib(S['verify']['peak_rss'])}" + ("" if S["verify"].get("ok") else " (**findings**)"))
    row("start-up to the first answer, warm", lambda S: secs(S["serve"]["open_s"]),
        lambda S: peer_cell(gp(S), lambda g: secs(g["open_s"])),
        lambda S: (S["serve"]["open_s"], gp(S).get("open_s") if served(S) else None))
    row("start-up to the first answer, cold", lambda S: secs(S["serve"]["open_cold_s"]),
        lambda S: peer_cell(gp(S), lambda g: secs(g["open_cold_s"])),
        lambda S: (S["serve"]["open_cold_s"], gp(S).get("open_cold_s") if served(S) else None))
    row("peak RSS while starting (VmHWM)", lambda S: mib(S["serve"]["mem_open"]["VmHWM"]),
        lambda S: mib(gp(S)["mem_open"]["VmHWM"]) if served(S) else mib(gp(S).get("peak_rss")),
        lambda S: (S["serve"]["mem_open"]["VmHWM"], gp(S)["mem_open"]["VmHWM"] if served(S) else None))
    row("RssAnon after start-up / after the warm queries",
        lambda S: f"{mib(S['serve']['mem_open']['RssAnon'])} / {mib(S['serve']['mem_after']['RssAnon'])}",
        lambda S: peer_cell(gp(S), lambda g: f"{mib(g['mem_open']['RssAnon'])} / {mib(g['mem_after']['RssAnon'])}"),
        lambda S: (S["serve"]["mem_after"]["RssAnon"], gp(S)["mem_after"]["RssAnon"] if served(S) else None))
    for w, label in (("one", "one series"), ("batch100", "100-series batch"), ("latest1000", "latest of 1000 series")):
        for mode in ("warm", "cold"):
            row(f"{label}, p50 / p99 {mode} (ms)",
                lambda S, w=w, mode=mode: f"{ms(lat(S['serve'], w, 'p50', mode))} / {ms(lat(S['serve'], w, 'p99', mode))}",
                lambda S, w=w, mode=mode: peer_cell(gp(S), lambda g: f"{ms(lat(g, w, 'p50', mode))} / {ms(lat(g, w, 'p99', mode))}"),
                lambda S, w=w, mode=mode: (lat(S["serve"], w, "p50", mode), lat(gp(S), w, "p50", mode) if served(S) else None))

    def live(S):
        return S.get("live") or {}

    row("DoPut: rows sent (batches), wall time, rows/s",
        lambda S: f"{live(S)['put_rows']:,} ({live(S)['put_batches']}), {secs(live(S)['put_s'])}, "
                  f"{live(S)['put_rows'] / live(S)['put_s']:,.0f}" if live(S) else "–")
    row("… rows in the delta (the server's count)", lambda S: f"{live(S).get('delta_rows', 0):,}" if live(S) else "–")
    for w, label in (("one", "one series"), ("latest1000", "latest of 1000 series")):
        row(f"{label} with that delta, p50 / p99 (ms)",
            lambda S, w=w: f"{ms(lat(live(S), w, 'p50'))} / {ms(lat(live(S), w, 'p99'))}" if live(S) else "–")
    row("compaction (`DoAction compact`): time, against the build",
        lambda S: f"{secs(live(S)['compact_s'])}, {live(S)['compact_s'] / S['build']['wall_s']:.2f}× the build"
        if live(S) else "–")
    row("… RssAnon: idle before it, peak during it (above idle; goal ≤ 1 GiB)",
        lambda S: f"{mib(live(S)['idle_anon'])}, {mib(live(S)['peak_anon'])} (+{mib(live(S)['peak_anon'] - live(S)['idle_anon'])}: "
                  f"{goal(live(S)['peak_anon'] - live(S)['idle_anon'] <= GOAL_PEAK_ABOVE_IDLE)})" if live(S) else "–")
    row("… RssAnon held 30 s after it (goal ≤ 64 MiB)",
        lambda S: f"{mib(live(S)['retained_anon'])} ({goal(live(S)['retained_anon'] <= GOAL_RETAINED)})" if live(S) else "–")
    notes = [n for n in (peer_note(t, S.get("go_peer")) for t, S in shapes) if n]
    if notes:
        L += [""] + notes
    return L
