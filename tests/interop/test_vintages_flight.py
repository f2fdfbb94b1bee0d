"""Vintages over Flight (docs/FLIGHT.md "Vintages"), through clients nobody
here wrote: pyarrow.flight reads each retained vintage with a ticket's
"vintage" exactly as the servingsnap Python package reads that vintage's
files; ADBC Flight SQL reads it with FOR VERSION AS OF; ListFlights with
{"vintages": true} lists every vintage with a ticket that reads it."""

from __future__ import annotations

import json

import adbc_driver_flightsql.dbapi as flight_sql
import pyarrow as pa
import pyarrow.flight as fl
import pytest

import flightlib
import snaplib


@pytest.fixture(scope="module")
def server(snapbuild, tmp_path_factory):
    d = tmp_path_factory.mktemp("vintflight")
    root = d / "root"
    for i, n in enumerate([30, 40, 50]):
        lake = d / f"lake{i}"
        snaplib.run_ok(snapbuild, "gen", "--out", lake, "--series", n, "--seed", 4 + i, "--from-year", 2020)
        snaplib.build(snapbuild, lake, root / "VIN", "--max-change", 0)
    s = flightlib.ServerProcess(snapbuild, root, "--vintages", 2)
    yield s, root / "VIN"
    s.terminate()


def package_rows(ds, vintage) -> pa.Table:
    import servingsnap
    with servingsnap.open(ds, snapshot=vintage) as snap:
        return flightlib.decoded(snap.table(attributes=False))


def test_ticket_reads_each_vintage(server):
    s, ds = server
    c = s.client()
    for v in (1, 2, 3):
        t = flightlib.do_get(c, dataset="VIN", prefix="", vintage=v)
        assert flightlib.schema_snapshot_id(t.schema) == v
        assert flightlib.decoded(t).to_pylist() == package_rows(ds, v).to_pylist(), v
    flightlib.expect_error(lambda: flightlib.do_get(c, dataset="VIN", prefix="", vintage=9), "NOT_FOUND", "9")


def test_sql_for_version_as_of(server):
    s, ds = server
    with flight_sql.connect(s.uri, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT series_id, period, value FROM VIN FOR VERSION AS OF 1")
        got = cur.fetch_arrow_table()
    want = package_rows(ds, 1).select(["series_id", "period", "value"])
    assert flightlib.decoded(got).to_pylist() == want.to_pylist()


def test_list_flights_lists_vintages(server):
    s, _ = server
    c = s.client()
    infos = list(c.list_flights(json.dumps({"vintages": True}).encode()))
    meta = [json.loads(i.app_metadata) for i in infos]
    assert [m["snapshot_id"] for m in meta] == [1, 2, 3]
    assert [m["current"] for m in meta] == [False, False, True]
    for info, m in zip(infos, meta):
        t = c.do_get(info.endpoints[0].ticket).read_all()
        assert t.num_rows == info.total_records and flightlib.schema_snapshot_id(t.schema) == m["snapshot_id"]
