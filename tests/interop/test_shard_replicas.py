"""A 3-shard dataset with two servers per shard, on loopback: for shard i a
writer (`--shards i`) and a `--read-only` replica on the same root, both in
the cluster file. Flight SQL through ADBC reads the sharded dataset from
every shard's endpoint and must equal the unsharded build of the same lake;
a server killed mid-test leaves every answer correct through the shard's
other location, for a pyarrow.flight client that follows an endpoint's
locations in order (the pattern docs/FLIGHT.md "Replicas" gives).

Written from docs/FLIGHT.md ("Sharded datasets", "Replicas", "Flight SQL")
and docs/OPERATIONS.md ("Replicas and start-before-stop restarts"), never
from the Go code.
"""

from __future__ import annotations

import datetime as dt
import json
import socket
from pathlib import Path

import adbc_driver_flightsql.dbapi as flight_sql
import pyarrow as pa
import pyarrow.flight as fl
import pytest
import xxhash

import snaplib
from flightlib import ServerProcess, action_json, command, decoded, wait_until

N = 3
DATASET = "gen"
WHOLE = "whole"  # the same lake, unsharded
CHECK = "0.2s"  # --cluster-check-interval


def shard_of(sid: str) -> int:
    return xxhash.xxh64_intdigest(sid.encode()) % N


@pytest.fixture(scope="module")
def root(snapbuild, tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("replicas")
    lake = base / "lake"
    snaplib.run_ok(snapbuild, "gen", "--out", lake, "--series", 150, "--seed", 23)
    root = base / "root"
    snaplib.run_ok(snapbuild, "build", "--input", lake, "--out", root / DATASET, "--shards", N)
    snaplib.run_ok(snapbuild, "build", "--input", lake, "--out", root / WHOLE)
    return root


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Cluster:
    def __init__(self, writers, replicas, uris):
        self.writers, self.replicas = writers, replicas
        self.uris = uris  # uris[i] = [writer of shard i, replica of shard i], the cluster file's order

    def all(self):
        return self.writers + self.replicas


@pytest.fixture(scope="module")
def cluster(snapbuild, root, tmp_path_factory):
    ports = free_ports(2 * N)
    uris = [[f"grpc://127.0.0.1:{ports[i]}", f"grpc://127.0.0.1:{ports[N + i]}"] for i in range(N)]
    cf = tmp_path_factory.mktemp("cluster") / "cluster.json"
    cf.write_text(json.dumps({"shards": {str(i): uris[i] for i in range(N)}}))
    writers, replicas = [], []
    try:
        for i in range(N):
            # a later --addr overrides ServerProcess's port 0
            writers.append(ServerProcess(snapbuild, root, "--shards", i, "--cluster", cf, "--cluster-check-interval", CHECK,
                                         "--addr", f"127.0.0.1:{ports[i]}", http=False))
        for i in range(N):
            replicas.append(ServerProcess(snapbuild, root, "--shards", i, "--cluster", cf, "--cluster-check-interval", CHECK,
                                          "--read-only", "--addr", f"127.0.0.1:{ports[N + i]}", http=False))
        yield Cluster(writers, replicas, uris)
    finally:
        for s in writers + replicas:
            s.kill()


def read_endpoint(ep: fl.FlightEndpoint) -> pa.Table:
    """docs/FLIGHT.md "Replicas": read an endpoint at its first location,
    moving to the next one when a server is down or does not hold the
    shard; any other error is the answer."""
    assert ep.locations, "every endpoint of a sharded dataset names its servers"
    last = None
    for loc in ep.locations:
        try:
            with fl.connect(loc) as c:
                return c.do_get(ep.ticket).read_all()
        except (fl.FlightUnavailableError, fl.FlightTimedOutError) as e:
            last = e
        except fl.FlightServerError as e:
            if "FAILED_PRECONDITION" not in str(e) and "not served here" not in str(e):
                raise
            last = e
    raise last


def follow(info: fl.FlightInfo) -> pa.Table:
    return pa.concat_tables([decoded(read_endpoint(ep)) for ep in info.endpoints])


def rows(t: pa.Table) -> list[tuple]:
    cols = [c for c in ("series_id", "period", "value") if c in t.column_names]
    return sorted(zip(*(t[c].to_pylist() for c in cols)))


def sql(conn, text: str, params=None) -> pa.Table:
    with conn.cursor() as cur:
        cur.execute(text, params)
        return decoded(cur.fetch_arrow_table())


@pytest.fixture(scope="module")
def whole_rows(cluster) -> list[tuple]:
    with cluster.writers[0].client() as c:
        return rows(decoded(c.do_get(fl.Ticket(json.dumps({"dataset": WHOLE, "prefix": ""}).encode())).read_all()))


@pytest.fixture(scope="module")
def ids(whole_rows) -> list[str]:
    return sorted({r[0] for r in whole_rows})


def test_every_location_listed_in_the_files_order(cluster):
    for s in cluster.all():
        with s.client() as c:
            info = wait_until(lambda: (lambda i: i if all(len(ep.locations) == 2 for ep in i.endpoints) else None)(
                c.get_flight_info(fl.FlightDescriptor.for_path(DATASET))), what="both locations of every shard listed")
            assert [[loc.uri.decode() for loc in ep.locations] for ep in info.endpoints] == cluster.uris
            st = wait_until(lambda: (lambda st: st if st["locations"] and all(
                loc["state"] == "up" for loc in st["locations"]) else None)(action_json(c, "status")),
                what="every location checked up")
            assert {(loc["shard"], loc["location"]) for loc in st["locations"]} == {
                (i, u) for i in range(N) for u in cluster.uris[i]}


def test_adbc_reads_every_shards_endpoint(cluster, whole_rows, ids):
    conn = flight_sql.connect(cluster.replicas[1].uri, autocommit=True)
    try:
        # one partition (endpoint) per shard, each holding only its shard's series
        with conn.cursor() as cur:
            parts, _ = cur.adbc_execute_partitions(f"SELECT * FROM {DATASET}")
            assert len(parts) == N
            seen = set()
            for p in parts:
                cur.adbc_read_partition(p)
                t = decoded(cur.fetch_arrow_table())
                shards = {shard_of(x) for x in t["series_id"].to_pylist()}
                assert len(shards) == 1, f"an endpoint streamed series of shards {shards}"
                seen |= shards
            assert seen == set(range(N))
        assert rows(sql(conn, f"SELECT * FROM {DATASET}")) == whole_rows
        picked = ids[::11]
        assert len({shard_of(x) for x in picked}) == N
        got = sql(conn, f"SELECT value FROM {DATASET} WHERE series_id IN ({', '.join('?' * len(picked))}) AND period >= '2012'", picked)
        want = [r for r in whole_rows if r[0] in set(picked) and r[1] >= dt.date(2012, 1, 1)]
        assert rows(got) == want
        prefix = ids[len(ids) // 2].split(".")[0] + "."
        assert rows(sql(conn, f"SELECT * FROM {DATASET} WHERE series_id LIKE '{prefix}%'")) == [r for r in whole_rows if r[0].startswith(prefix)]
        agg = "SELECT count(*), count(DISTINCT series_id), min(period), max(period) FROM {} WHERE period BETWEEN '2005' AND '2015'"
        assert sql(conn, agg.format(DATASET)).to_pylist() == sql(conn, agg.format(WHOLE)).to_pylist()
    finally:
        conn.close()


def test_replica_killed_mid_test(cluster, whole_rows, ids):
    """Kill shard 1's writer between reads: every answer stays the unsharded
    build's, first through the client following the locations (the server
    answering GetFlightInfo may not have noticed yet), then because the
    endpoint lists the replica only."""
    entry = cluster.writers[0]
    picked = ids[::7]
    queries = [
        (fl.FlightDescriptor.for_path(DATASET), whole_rows),
        (command(dataset=DATASET, series=picked), [r for r in whole_rows if r[0] in set(picked)]),
        (command(dataset=DATASET, prefix="", start="2010", end="2012"),
         [r for r in whole_rows if dt.date(2010, 1, 1) <= r[1] <= dt.date(2012, 12, 31)]),
    ]
    with flight_sql.connect(entry.uri, autocommit=True) as conn, entry.client() as c:
        def check_all():
            for desc, want in queries:
                info = c.get_flight_info(desc)
                assert rows(follow(info)) == want
                assert info.total_records in (len(want), -1)
            assert rows(sql(conn, f"SELECT * FROM {DATASET}")) == whole_rows  # ADBC follows the locations too
            assert sql(conn, f"SELECT count(*) FROM {DATASET}").to_pylist() == [{"count(*)": len(whole_rows)}]
        for _ in range(2):
            check_all()
        cluster.writers[1].kill()
        check_all()  # at once: shard 1's endpoint may still name the writer first
        dropped = wait_until(lambda: (lambda i: i if [loc.uri.decode() for loc in i.endpoints[1].locations] == [cluster.uris[1][1]] else None)(
            c.get_flight_info(fl.FlightDescriptor.for_path(DATASET))), what="the killed server left out")
        assert [[loc.uri.decode() for loc in ep.locations] for ep in dropped.endpoints] == [cluster.uris[0], [cluster.uris[1][1]], cluster.uris[2]]
        assert dropped.total_records == len(whole_rows)  # shard 1 counted at the replica
        for _ in range(3):
            check_all()
        st = action_json(c, "status")
        (down,) = [loc for loc in st["locations"] if loc["state"] == "down"]
        assert (down["shard"], down["location"]) == (1, cluster.uris[1][0]) and down["error"]


def test_replica_follows_the_shards_live_writes(cluster, whole_rows):
    """A write to shard 0's dataset at its writer is served by its
    --read-only replica too (docs/OPERATIONS.md "Replicas"), so either
    location of the endpoint gives the same answer."""
    sid, period, _ = next(r for r in whole_rows if shard_of(r[0]) == 0)
    shard_ds = f"{DATASET}.shard-0000"
    batch = pa.record_batch({"series_id": pa.array([sid]), "period": pa.array([period], pa.date32()),
                             "value": pa.array([-12345.5])})
    with cluster.writers[0].client() as w:
        writer, reader = w.do_put(fl.FlightDescriptor.for_path(shard_ds), batch.schema)
        with writer:
            writer.write_batch(batch)
            assert json.loads(reader.read().to_pybytes())["rows"] == 1
            writer.done_writing()
    want = sorted((sid, p, -12345.5 if p == period else v) for s, p, v in whole_rows if s == sid)
    q = command(dataset=DATASET, series=[sid])
    with cluster.replicas[0].client() as c:
        def served_by_replica():
            info = c.get_flight_info(q)
            (ep,) = info.endpoints
            assert [loc.uri.decode() for loc in ep.locations] == cluster.uris[0]
            with fl.connect(cluster.uris[0][1]) as r:
                return rows(decoded(r.do_get(ep.ticket).read_all())) == want
        wait_until(served_by_replica, what="the replica serving the write")
        info = c.get_flight_info(q)
        with fl.connect(cluster.uris[0][0]) as w:
            assert rows(decoded(w.do_get(info.endpoints[0].ticket).read_all())) == want
    # a replica refuses writes
    with cluster.replicas[0].client() as c:
        with pytest.raises(fl.FlightError, match="read-only"):
            writer, reader = c.do_put(fl.FlightDescriptor.for_path(shard_ds), batch.schema)
            with writer:
                writer.write_batch(batch)
                reader.read()
