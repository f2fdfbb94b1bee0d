"""A 3-shard dataset served by three `snapbuild serve` processes on loopback,
each holding one shard and knowing the others from a cluster file. A client
that follows GetFlightInfo's endpoints (pyarrow.flight, one connection per
location) must get exactly the rows of the lake, read independently here
with pyarrow.parquet, for whole-dataset, prefix and multi-series queries.

Written from docs/FLIGHT.md ("Sharded datasets") and docs/FORMAT.md
("Shard map"), never from the Go code.
"""

from __future__ import annotations

import datetime as dt
import json
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as fl
import pyarrow.parquet as pq
import pytest
import xxhash

import snaplib
from flightlib import ServerProcess, command, decoded, expect_error, ticket

N = 3
DATASET = "gen"


def parse_period(s: str) -> dt.date:
    """FORMAT.md's period strings, start of period."""
    if len(s) == 4:
        return dt.date(int(s), 1, 1)
    y, rest = s[:4], s[5:]
    if rest[0] in "Qq":
        return dt.date(int(y), 3 * (int(rest[1:]) - 1) + 1, 1)
    if rest[0] in "Ww":
        return dt.date.fromisocalendar(int(y), int(rest[1:]), 1)
    if len(rest) == 2:
        return dt.date(int(y), int(rest), 1)
    return dt.date.fromisoformat(s)


@pytest.fixture(scope="module")
def lake(snapbuild, tmp_path_factory) -> Path:
    lake = tmp_path_factory.mktemp("shards") / "lake"
    snaplib.run_ok(snapbuild, "gen", "--out", lake, "--series", 200, "--seed", 11)
    return lake


@pytest.fixture(scope="module")
def oracle(lake) -> set[tuple]:
    """(series_id, period, value) of every lake row, by pyarrow alone."""
    rows = set()
    for f in snaplib.parquet_files(lake):
        t = pq.read_table(f, columns=["series_id", "period", "value"])
        for sid, p, v in zip(*(t[c].to_pylist() for c in ("series_id", "period", "value"))):
            rows.add((sid, parse_period(p), v))
    return rows


@pytest.fixture(scope="module")
def root(snapbuild, lake, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("shards") / "root"
    out = snaplib.run_ok(snapbuild, "build", "--input", lake, "--out", root / DATASET, "--shards", N, "--json")
    rep = json.loads(out.stdout)
    assert rep["count"] == N and [s["index"] for s in rep["shards"]] == list(range(N))
    return root


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@pytest.fixture(scope="module")
def cluster(snapbuild, root, tmp_path_factory):
    ports = free_ports(N)
    uris = [f"grpc://127.0.0.1:{p}" for p in ports]
    cf = tmp_path_factory.mktemp("cluster") / "cluster.json"
    cf.write_text(json.dumps({"shards": {str(i): [uris[i]] for i in range(N)}}))
    servers = []
    try:
        for i in range(N):
            # a later --addr overrides ServerProcess's port 0
            s = ServerProcess(snapbuild, root, "--shards", i, "--cluster", cf, "--addr", f"127.0.0.1:{ports[i]}", http=False)
            assert s.uri.endswith(f"127.0.0.1:{ports[i]}"), s.ready
            servers.append(s)
        yield servers, uris
    finally:
        for s in servers:
            s.terminate()


def shard_of(sid: str) -> int:
    return xxhash.xxh64_intdigest(sid.encode()) % N


def follow(info: fl.FlightInfo) -> pa.Table:
    """Read every endpoint of info in parallel, each at its first location."""
    def read(ep: fl.FlightEndpoint) -> pa.Table:
        assert ep.locations, "every endpoint of a sharded dataset names its server"
        with fl.connect(ep.locations[0]) as c:
            return decoded(c.do_get(ep.ticket).read_all())
    with ThreadPoolExecutor(len(info.endpoints)) as ex:
        parts = list(ex.map(read, info.endpoints))
    return pa.concat_tables(parts)


def rows_of(t: pa.Table) -> list[tuple]:
    return list(zip(*(t[c].to_pylist() for c in ("series_id", "period", "value"))))


def check(info: fl.FlightInfo, want: set[tuple], touched: set[int]):
    meta = [json.loads(ep.app_metadata) for ep in info.endpoints]
    assert [m["shard"] for m in meta] == sorted(touched)
    for ep, m in zip(info.endpoints, meta):
        assert json.loads(ep.ticket.ticket)["shard"] == m["shard"]
    got = rows_of(follow(info))
    assert len(got) == len(set(got)), "a row came twice"
    assert set(got) == want
    assert info.total_records == len(want)
    assert sum(m["rows"] for m in meta) == len(want)


def test_shard_map_and_split(root, oracle):
    m = json.loads((root / DATASET / "SHARDS.json").read_text())
    assert m["format"] == "servingsnap-shardmap" and m["format_version"] == 1
    assert m["hash"] == "xxhash64" and m["count"] == N
    assert [s["dataset"] for s in m["shards"]] == [f"{DATASET}.shard-{i:04d}" for i in range(N)]
    for i in range(N):
        snap = snaplib.open_current(root / m["shards"][i]["dataset"])
        ids = decoded(snap.index())["series_id"].to_pylist()
        assert ids and all(shard_of(x) == i for x in ids), f"shard {i} holds a series of another shard"
    all_ids = {r[0] for r in oracle}
    counts = [sum(1 for x in all_ids if shard_of(x) == i) for i in range(N)]
    assert min(counts) > 0


@pytest.mark.parametrize("entry", [0, 1, 2])
def test_whole_dataset_from_any_server(cluster, oracle, entry):
    servers, uris = cluster
    with servers[entry].client() as c:
        info = c.get_flight_info(fl.FlightDescriptor.for_path(DATASET))
        assert [ep.locations[0].uri.decode() for ep in info.endpoints] == uris
        check(info, oracle, set(range(N)))
        info = c.get_flight_info(command(dataset=DATASET, prefix=""))
        check(info, oracle, set(range(N)))


def test_prefix(cluster, oracle):
    servers, _ = cluster
    want = {r for r in oracle if r[0].startswith("NG.")}
    assert want
    with servers[1].client() as c:
        check(c.get_flight_info(command(dataset=DATASET, prefix="NG.")), want, set(range(N)))


def test_multi_and_one_series(cluster, oracle):
    servers, _ = cluster
    ids = sorted({r[0] for r in oracle})
    picked = ids[::17]
    touched = {shard_of(x) for x in picked}
    assert len(touched) > 1
    want = {r for r in oracle if r[0] in set(picked)}
    with servers[2].client() as c:
        info = c.get_flight_info(command(dataset=DATASET, series=picked))
        check(info, want, touched)
        for ep in info.endpoints:
            sh = json.loads(ep.ticket.ticket)
            assert all(shard_of(x) == sh["shard"] for x in sh["series"])
        one = ids[5]
        info = c.get_flight_info(command(dataset=DATASET, series=[one]))
        check(info, {r for r in oracle if r[0] == one}, {shard_of(one)})


def test_period_range_across_shards(cluster, oracle):
    servers, _ = cluster
    lo, hi = dt.date(2010, 1, 1), dt.date(2012, 12, 31)
    want = {r for r in oracle if lo <= r[1] <= hi}
    with servers[0].client() as c:
        check(c.get_flight_info(command(dataset=DATASET, prefix="", start="2010", end="2012")), want, set(range(N)))


def test_doget_on_the_wrong_server_names_the_owner(cluster, oracle):
    servers, uris = cluster
    with servers[0].client() as c:
        info = c.get_flight_info(command(dataset=DATASET, prefix=""))
        ep = info.endpoints[1]
        expect_error(lambda: c.do_get(ep.ticket).read_all(), "FAILED_PRECONDITION",
                     f'dataset "{DATASET}" shard 1 is not served here', uris[1])
        # a ticket touching several shards is not run by DoGet
        expect_error(lambda: c.do_get(ticket(dataset=DATASET, prefix="")).read_all(), "FAILED_PRECONDITION",
                     "call GetFlightInfo")
        # a series listed under the wrong shard
        sid = next(r[0] for r in oracle if shard_of(r[0]) == 2)
        expect_error(lambda: c.do_get(ticket(dataset=DATASET, series=[sid], shard=0)).read_all(),
                     "INVALID_ARGUMENT", "lives in shard 2")
        expect_error(lambda: c.do_get(ticket(dataset=DATASET, prefix="", shard=7)).read_all(),
                     "INVALID_ARGUMENT", "has 3 shards")
        # a one-series ticket without "shard" runs where its shard is
        sid0 = next(r[0] for r in oracle if shard_of(r[0]) == 0)
        got = rows_of(decoded(c.do_get(ticket(dataset=DATASET, series=[sid0])).read_all()))
        assert set(got) == {r for r in oracle if r[0] == sid0}


def test_list_flights_shows_the_sharded_dataset(cluster):
    servers, uris = cluster
    with servers[1].client() as c:
        infos = {i.descriptor.path[0].decode(): i for i in c.list_flights()}
    assert DATASET in infos, list(infos)
    assert f"{DATASET}.shard-0001" in infos  # a shard is a dataset of its own too
    assert f"{DATASET}.shard-0000" not in infos  # not served by this server
    assert len(infos[DATASET].endpoints) == N


def test_whole_dataset_tools(snapbuild, root):
    p = snaplib.run(snapbuild, "history", root / DATASET, "--json")
    assert p.returncode == 0, p.stderr
    h = json.loads(p.stdout)
    assert [s["shard"] for s in h["shards"]] == list(range(N))
