"""The one pyarrow.flight client that drives every server: start-up timing, workloads, latency.

Every server (snapbuild serve and the two rebuild baselines) answers the same JSON tickets, so
the same ticket bytes go to each of them, in the same order.
"""
import hashlib
import json
import pathlib
import random
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl

from . import procs

PLAIN = pa.schema([("series_id", pa.string()), ("period", pa.date32()), ("value", pa.float64())])

WORKLOADS = [
    # key, label
    ("one", "one series"),
    ("range", "one series, period range"),
    ("batch100", "100-series batch"),
    ("latest1000", "latest values, 1000 series"),
]


@dataclass
class Server:
    key: str                 # "ours", "go", "py"
    label: str
    argv: object             # callable: port -> argv list
    files: list = field(default_factory=list)  # what it reads at start (evicted for cold starts)


class StartError(RuntimeError):
    pass


def tail(path, n=3000):
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def reported_startup_ms(log_path):
    """The startup_ms of the server's "listening" JSON line, if it printed one."""
    try:
        with open(log_path, errors="replace") as f:
            for line in f:
                if line.startswith("{") and '"listening"' in line:
                    return json.loads(line).get("startup_ms")
    except (OSError, ValueError):
        pass
    return None


def ticket(obj):
    return fl.Ticket(json.dumps(obj, separators=(",", ":")).encode())


def start(server, port, first, log_path, timeout, on_spawn=None):
    """Start server on port; return (proc, seconds from process start to the first answered
    series, that answer). Polls the port every 2 ms, then asks for the first series with a
    fresh client per attempt (so no gRPC reconnect back-off hides in the number). on_spawn(proc)
    is called once the process exists (e.g. to watch its memory while it starts)."""
    open(log_path, "wb").close()
    t0 = time.perf_counter()
    p = procs.spawn(server.argv(port), log_path)
    if on_spawn is not None:
        on_spawn(p)
    deadline = t0 + timeout
    try:
        while not procs.port_open(port):
            if p.poll() is not None:
                raise StartError(f"{server.label} exited {p.returncode} before listening:\n{tail(log_path)}")
            if time.perf_counter() > deadline:
                raise StartError(f"{server.label} not listening after {timeout:.0f}s:\n{tail(log_path)}")
            time.sleep(0.002)
        loc = f"grpc+tcp://127.0.0.1:{port}"
        while True:
            c = fl.FlightClient(loc)
            try:
                tbl = c.do_get(first).read_all()
                t1 = time.perf_counter()
                c.close()
                break
            except (fl.FlightUnavailableError, fl.FlightTimedOutError):
                c.close()
                if p.poll() is not None or time.perf_counter() > deadline:
                    raise StartError(f"{server.label} did not answer:\n{tail(log_path)}") from None
                time.sleep(0.002)
        if tbl.num_rows == 0:
            raise StartError(f"{server.label}: the first query returned no rows")
        return p, t1 - t0, tbl
    except BaseException:
        procs.stop(p)
        raise


def make_tickets(dataset, ids, years, counts, seed):
    """Ticket lists per workload (JSON-encoded once), drawn with a seeded RNG.

    ids: every series id of the dataset; years: (first, last) calendar year of the data."""
    rng = random.Random(seed)
    y0, y1 = years
    out = {}
    out["one"] = [ticket({"dataset": dataset, "series": [rng.choice(ids)]}) for _ in range(counts["one"])]

    def ranged():
        a = rng.randint(y0, max(y0, y1 - 1))
        b = min(y1, a + rng.randint(0, 4))
        return {"dataset": dataset, "series": [rng.choice(ids)], "start": f"{a}-01-01", "end": f"{b}-12-31"}

    out["range"] = [ticket(ranged()) for _ in range(counts["range"])]
    k100, k1000 = min(100, len(ids)), min(1000, len(ids))
    out["batch100"] = [ticket({"dataset": dataset, "series": rng.sample(ids, k100)}) for _ in range(counts["batch100"])]
    out["latest1000"] = [ticket({"dataset": dataset, "series": rng.sample(ids, k1000), "latest": True})
                         for _ in range(counts["latest1000"])]
    return out


def check_tickets(dataset, ids, years, seed):
    """A fixed mix of tickets whose answers must be identical on every server."""
    rng = random.Random(seed)
    y0, y1 = years
    mid = (y0 + y1) // 2
    t = []
    for _ in range(3):
        t.append({"dataset": dataset, "series": [rng.choice(ids)]})
        t.append({"dataset": dataset, "series": [rng.choice(ids)], "start": f"{mid - 3}-01-01", "end": f"{mid}-12-31"})
    t.append({"dataset": dataset, "series": rng.sample(ids, min(100, len(ids)))})
    t.append({"dataset": dataset, "series": rng.sample(ids, min(100, len(ids))), "start": f"{mid}-Q2", "end": f"{mid + 1}-03"})
    t.append({"dataset": dataset, "series": rng.sample(ids, min(1000, len(ids))), "latest": True})
    t.append({"dataset": dataset, "series": rng.sample(ids, min(1000, len(ids))), "latest": True, "end": f"{mid}-06"})
    t.append({"dataset": dataset, "prefix": rng.choice(ids)[:-2]})
    return [(json.dumps(x, separators=(",", ":")), ticket(x)) for x in t]


def digest(tbl):
    """Content hash of an answer: rows of (series_id, period, value) in order, types normalised."""
    tbl = tbl.select(["series_id", "period", "value"]).cast(PLAIN)
    h = hashlib.sha256()
    for name in PLAIN.names:
        h.update(repr(tbl.column(name).to_pylist()).encode())
    return f"{tbl.num_rows}:{h.hexdigest()[:16]}"


def answers(loc, checks):
    c = fl.FlightClient(loc)
    try:
        return [digest(c.do_get(t).read_all()) for _, t in checks]
    finally:
        c.close()


def latencies(loc, tickets, time_cap):
    """Send the tickets one after another; return (latency per query in µs, rows received).

    Bounded by len(tickets) and by time_cap seconds."""
    c = fl.FlightClient(loc)
    lat = np.empty(len(tickets))
    rows = 0
    n = 0
    t_start = time.perf_counter()
    try:
        for t in tickets:
            t0 = time.perf_counter_ns()
            tbl = c.do_get(t).read_all()
            lat[n] = (time.perf_counter_ns() - t0) / 1e3
            rows += tbl.num_rows
            n += 1
            if time.perf_counter() - t_start > time_cap:
                break
    finally:
        c.close()
    return lat[:n], rows


def servingsnap_cmd(snapbuild):
    """servingsnap's server command: snapserve beside snapbuild (the same server, in the
    binary that links no lake readers, so its start-up is the design's), else snapbuild serve."""
    snapserve = pathlib.Path(snapbuild).with_name("snapserve")
    return [str(snapserve)] if snapserve.exists() else [str(snapbuild), "serve"]
