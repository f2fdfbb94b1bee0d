"""Time a whole-dataset read of a sharded dataset over several servers
against the same rows from one server (docs/OPERATIONS.md, Sharding).

    snapbuild build --input LAKE --out ROOT/ONE
    snapbuild build --input LAKE --out ROOT/SH --shards 3
    python shard_read_bench.py --snapbuild bin/snapbuild --root ROOT --runs 9

Starts, on loopback: one server of everything (ONE, and SH with all three
shards), and three servers holding one shard of SH each; then, interleaved,
reads ONE whole from the one server (one stream), SH's three endpoints from
the one server in parallel, and SH's three endpoints from the three servers
in parallel. Prints the median and the spread of each, and the ratios.

With --sql (needs adbc_driver_flightsql), also times `SELECT * FROM ONE`
and `SELECT * FROM SH` through ADBC's Flight SQL driver against the first
shard server (which reads every shard's endpoint at its location), and the
aggregate `SELECT count(*), min(period), max(period)` of each (SH's combines
the shards' totals).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow.flight as flight


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(exe: str, root: str, port: int, *flags) -> subprocess.Popen:
    p = subprocess.Popen([exe, "serve", "--root", root, "--addr", f"127.0.0.1:{port}", "--reload-interval", "0", *flags],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    if not line:
        raise SystemExit(f"server on port {port} did not start")
    return p


def read_info(uri: str, desc: flight.FlightDescriptor) -> int:
    with flight.connect(uri) as c:
        info = c.get_flight_info(desc)

    def one(ep):
        loc = ep.locations[0].uri.decode() if ep.locations else uri
        with flight.connect(loc) as cc:
            return cc.do_get(ep.ticket).read_all().num_rows

    with ThreadPoolExecutor(len(info.endpoints)) as ex:
        n = sum(ex.map(one, info.endpoints))
    assert n == info.total_records, (n, info.total_records)
    return n


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--snapbuild", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--one", default="ONE")
    ap.add_argument("--sharded", default="SH")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--sql", action="store_true", help="also time the same reads through ADBC Flight SQL")
    a = ap.parse_args()
    n = json.loads((Path(a.root) / a.sharded / "SHARDS.json").read_text())["count"]
    ports = [free_port() for _ in range(n)]
    cluster = Path(tempfile.mkdtemp()) / "cluster.json"
    cluster.write_text(json.dumps({"shards": {str(i): [f"grpc://127.0.0.1:{p}"] for i, p in enumerate(ports)}}))
    single_port = free_port()
    procs = [start(a.snapbuild, a.root, single_port)]
    procs += [start(a.snapbuild, a.root, ports[i], "--shards", str(i), "--cluster", str(cluster)) for i in range(n)]
    single = f"grpc://127.0.0.1:{single_port}"
    cases = {
        f"{a.one} whole, 1 server, 1 stream": (single, a.one),
        f"{a.sharded} {n} endpoints, 1 server": (single, a.sharded),
        f"{a.sharded} {n} endpoints, {n} servers": (f"grpc://127.0.0.1:{ports[0]}", a.sharded),
    }
    readers = {name: (lambda uri=uri, ds=ds: read_info(uri, flight.FlightDescriptor.for_path(ds)))
               for name, (uri, ds) in cases.items()}
    conn = None
    if a.sql:
        import adbc_driver_flightsql.dbapi as flight_sql

        conn = flight_sql.connect(f"grpc://127.0.0.1:{ports[0]}", autocommit=True)

        def sql(text: str) -> int:
            with conn.cursor() as cur:
                cur.execute(text)
                return cur.fetch_arrow_table().num_rows

        for ds in (a.one, a.sharded):
            readers[f"SQL SELECT * FROM {ds}"] = lambda ds=ds: sql(f'SELECT * FROM "{ds}"')
        for ds in (a.one, a.sharded):
            readers[f"SQL count/min/max of {ds}"] = lambda ds=ds: sql(f'SELECT count(*), min(period), max(period) FROM "{ds}"')
    times: dict[str, list[float]] = {k: [] for k in readers}
    rows = {}
    try:
        for r in range(a.runs + 1):  # the first round warms the page cache and connections
            for name, read in readers.items():
                t0 = time.perf_counter()
                rows[name] = read()
                if r:
                    times[name].append(time.perf_counter() - t0)
    finally:
        if conn is not None:
            conn.close()
        for p in procs:
            p.terminate()
            p.wait(timeout=30)
    base = statistics.median(times[next(iter(cases))])
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"{name:40s} {rows[name]:>10,} rows  median {m*1000:8.1f} ms  "
              f"(min {min(ts)*1000:.1f}, max {max(ts)*1000:.1f})  ratio to 1 server {m/base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
