"""Flight SQL on the plain Flight port, as ADBC and polars use it.

`snapbuild serve` runs as a real process; every statement of the grammar
(docs/FLIGHT.md "Flight SQL") is run through adbc_driver_flightsql.dbapi and
its rows must equal the plain Flight answer to the equivalent JSON ticket on
the same server. adbc_get_objects lists the datasets and their columns, and
polars.read_database reads through the ADBC connection.
"""

from __future__ import annotations

import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import polars as pl
import pyarrow as pa
import pytest

from flightlib import ServerProcess, decoded, do_get, make_root

DATASETS = {"gen300": "gen_built", "eia": "eia_built"}


@pytest.fixture(scope="module")
def root(request, tmp_path_factory):
    served = {name: request.getfixturevalue(fx) for name, fx in DATASETS.items()}
    return make_root(tmp_path_factory.mktemp("flightsql") / "root", {n: b.dataset_dir for n, b in served.items()})


@pytest.fixture(scope="module")
def server(snapbuild, root):
    # a small batch budget: answers are split into many batches
    s = ServerProcess(snapbuild, root, "--batch-bytes", 8192)
    yield s
    assert s.terminate() == 0, s.stderr


@pytest.fixture(scope="module")
def client(server):
    return server.client()


@pytest.fixture(scope="module")
def conn(server):
    c = flight_sql.connect(server.uri, autocommit=True)  # grpc+tcp://, as docs/FLIGHT.md writes it; read-only: no transactions
    yield c
    c.close()


def index(client, name: str) -> pa.Table:
    """One row per series with its attributes (the latest answer)."""
    return decoded(do_get(client, dataset=name, prefix="", latest=True, attributes=True))


def sql_rows(conn, sql: str, params=None) -> pa.Table:
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return decoded(cur.fetch_arrow_table())


def check_same(got: pa.Table, want: pa.Table, what: str) -> None:
    assert got.num_rows > 0, f"{what}: no rows"
    assert got.column_names == want.column_names, f"{what}: columns {got.column_names}, want {want.column_names}"
    assert got.num_rows == want.num_rows, f"{what}: {got.num_rows} rows, want {want.num_rows}"
    assert got.equals(want), f"{what}: rows differ from the plain Flight answer"


@pytest.mark.parametrize("name", list(DATASETS))
def test_statements_equal_tickets(conn, client, name):
    idx = index(client, name)
    ids = idx["series_id"].to_pylist()
    one, two = ids[len(ids) // 2], ids[-1]
    prefix = one[: max(1, len(one) // 2)]
    # period bounds inside the data: a day, and a month (which runs through its last day)
    days = do_get(client, dataset=name, series=[one])["period"].to_pylist()
    lo, hi = days[len(days) // 4], days[3 * len(days) // 4]
    lo_s, hi_month = lo.isoformat(), hi.isoformat()[:7]
    cases = [
        (f"SELECT * FROM {name} WHERE series_id = '{one}'", None,
         dict(series=[one], attributes=True)),
        (f"SELECT value FROM {name} WHERE series_id = ?", (one,),
         dict(series=[one], columns=["value"])),
        (f"SELECT value FROM {name} WHERE series_id IN (?, '{two}') AND period >= ?", (one, lo),
         dict(series=[one, two], start=lo_s, columns=["value"])),
        (f"SELECT series_id, period, value FROM {name} WHERE series_id LIKE '{prefix}%' "
         f"AND period BETWEEN '{lo_s}' AND '{hi_month}' ORDER BY series_id, period LIMIT 500", None,
         dict(prefix=prefix, start=lo_s, end=hi_month, columns=["value"], limit=500)),
        (f"SELECT * FROM latest({name}) WHERE period <= '{hi_month}'", None,
         dict(prefix="", latest=True, end=hi_month, attributes=True)),
        (f"SELECT * FROM {name}", None, dict(prefix="", attributes=True)),
    ]
    if "category" in idx.column_names and idx["category"].null_count < idx.num_rows:
        cat = next(c for c in idx["category"].to_pylist() if c is not None)
        cases.append((f"SELECT value FROM {name} WHERE category = ?", (cat,), dict(category=cat, columns=["value"])))
    for sql, params, q in cases:
        want = decoded(do_get(client, dataset=name, **q))
        check_same(sql_rows(conn, sql, params), want, sql)


def test_prepared_statement_rebinds(conn, client):
    ids = index(client, "gen300")["series_id"].to_pylist()[:3]
    with conn.cursor() as cur:
        for sid in ids:  # one prepared statement, executed with new parameters
            cur.execute("SELECT value FROM gen300 WHERE series_id = ?", (sid,))
            got = decoded(cur.fetch_arrow_table())
            check_same(got, decoded(do_get(client, dataset="gen300", series=[sid], columns=["value"])), sid)


def test_get_objects_lists_datasets_and_columns(conn, client):
    objs = conn.adbc_get_objects(depth="all").read_all().to_pylist()
    tables = {}
    for cat in objs:
        for sch in cat["catalog_db_schemas"] or []:
            for t in sch["db_schema_tables"] or []:
                tables[t["table_name"]] = [c["column_name"] for c in t["table_columns"] or []]
    assert set(tables) == set(DATASETS), tables
    for name, cols in tables.items():
        want = do_get(client, dataset=name, series=[index(client, name)["series_id"][0].as_py()], attributes=True)
        assert cols == want.column_names, f"{name}: {cols}"
    assert conn.adbc_get_table_schema("gen300").names == tables["gen300"]


def test_polars_read_database(conn, client):
    sid = index(client, "eia")["series_id"][0].as_py()
    df = pl.read_database(f"SELECT value FROM eia WHERE series_id = '{sid}' AND period >= '2000'", connection=conn)
    want = decoded(do_get(client, dataset="eia", series=[sid], start="2000", columns=["value"]))
    assert df.height == want.num_rows > 0
    assert df["series_id"].cast(pl.String).to_list() == want["series_id"].to_pylist()
    assert df["period"].to_list() == want["period"].to_pylist()
    assert df["value"].to_list() == want["value"].to_pylist()


def test_aggregates_names_and_qualifiers(conn, client):
    # bare names in any case; one row of int64 counts and date32 periods, as the rows give them
    one = index(client, "gen300")["series_id"][0].as_py()
    periods = do_get(client, dataset="gen300", series=[one])["period"].to_pylist()
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) AS n, count(DISTINCT series_id), min(period), MAX(period) "
                    f"FROM SERVINGSNAP.Main.GEN300 WHERE Series_Id = '{one}'")
        t = cur.fetch_arrow_table()
    assert t.num_rows == 1, t
    assert [f.type for f in t.schema] == [pa.int64(), pa.int64(), pa.date32(), pa.date32()], t.schema
    assert t.column_names[0] == "n", t.schema
    assert [c[0].as_py() for c in t.columns] == [len(periods), 1, min(periods), max(periods)]
    # a catalog or schema other than the ones GetCatalogs/GetDbSchemas report is not found
    for sql, name in [("SELECT * FROM other.main.gen300", "other"), ("SELECT * FROM servingsnap.public.gen300", "public")]:
        with pytest.raises(adbc_driver_manager.Error) as e, conn.cursor() as cur:
            cur.execute(sql)
        assert "not found" in str(e.value) and name in str(e.value), str(e.value)


@pytest.mark.parametrize("sql, fragment", [
    ("SELECT sum(value) FROM gen300", "supported: SELECT"),
    ("SELECT * FROM gen300 WHERE value > 3", "expected a condition on series_id, category or period"),
    ("SELECT * FROM gen300 a JOIN eia b", "supported: SELECT"),
    ("SELECT * FROM gen300 WHERE series_id LIKE '%x'", "only a prefix pattern"),
    ("SELECT * FROM gen300 ORDER BY value", "only ORDER BY series_id, period"),
    ("SELECT nope FROM gen300", 'unknown column "nope"'),
])
def test_unsupported_sql_is_a_clear_error(conn, sql, fragment):
    with pytest.raises(adbc_driver_manager.ProgrammingError) as e, conn.cursor() as cur:
        cur.execute(sql)
    assert fragment in str(e.value), str(e.value)
    if "%" not in sql:  # the driver formats the message as a format string: an echoed % is garbled
        assert "%!" not in str(e.value), str(e.value)
    assert "INVALID_ARGUMENT" in str(e.value) or "InvalidArgument" in str(e.value), str(e.value)


def test_plain_flight_unchanged_beside_sql(client):
    # the JSON-ticket surface answers on the same port as before
    t = do_get(client, dataset="gen300", prefix="", limit=3)
    assert t.num_rows == 3
