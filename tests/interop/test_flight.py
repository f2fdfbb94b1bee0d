"""`snapbuild serve` as a real process on loopback, queried with pyarrow.flight
(and polars on top), against DuckDB's answer on the same Parquet inputs.

The main server streams with a small batch budget (--batch-bytes) so that
responses get split, coalesced and their series_id dictionary sent in deltas;
a second server runs with token auth and tight limits.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import json
import threading
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as fl
import pytest

import lakes
import snaplib
from flightlib import (
    ServerProcess,
    command,
    decoded,
    do_get,
    expect_error,
    filter_rows,
    make_root,
    schema_snapshot_id,
    ticket,
)

TOKEN = "test-token-5f2a9c0d7e41b3a8"
# The main server's record batch budget: small, so that every whole-dataset
# answer is split into many batches and nasty's series_id dictionary (two
# 10 000-character ids) goes out in deltas.
BATCH_BYTES = 8192
DATASETS = {"gen300": "gen_built", "nasty": "nasty_built", "eia": "eia_built"}


# --------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def served(request, tmp_path_factory) -> dict:
    """name → Built, for every dataset the servers serve."""
    return {name: request.getfixturevalue(fx) for name, fx in DATASETS.items()}


@pytest.fixture(scope="module")
def root(served, tmp_path_factory):
    return make_root(tmp_path_factory.mktemp("flight") / "root",
                     {name: b.dataset_dir for name, b in served.items()})


@pytest.fixture(scope="module")
def server(snapbuild, root):
    s = ServerProcess(snapbuild, root, "--batch-bytes", BATCH_BYTES, "--log-level", "debug")
    yield s
    code = s.terminate()
    assert code == 0, f"server exited {code}\n{s.stderr}"


@pytest.fixture(scope="module")
def client(server):
    return server.client()


@pytest.fixture(scope="module")
def auth_server(snapbuild, root, tmp_path_factory):
    tf = tmp_path_factory.mktemp("tokens") / "tokens"
    tf.write_text(f"# test\n{TOKEN}\n")
    s = ServerProcess(snapbuild, root, "--token-file", tf, "--max-series", 10, "--max-rows", 5000,
                      "--max-ticket-bytes", 2048, http=False)
    yield s
    assert s.terminate() == 0, s.stderr


@pytest.fixture(scope="module")
def auth_opts():
    return fl.FlightCallOptions(headers=[(b"authorization", f"Bearer {TOKEN}".encode())])


@functools.lru_cache(maxsize=None)
def _reference(lake: str) -> snaplib.Reference:
    return snaplib.duck_reference(Path(lake))


def reference(built) -> snaplib.Reference:
    return _reference(str(built.lake))


def check_rows(got: pa.Table, want: pa.Table, what: str, columns=None) -> None:
    """Rows equal, in order: series_id, period, value and the given columns
    (default: every column of want)."""
    got = decoded(got)
    cols = columns if columns is not None else want.column_names
    assert got.num_rows == want.num_rows, f"{what}: {got.num_rows} rows, want {want.num_rows}"
    for c in cols:
        snaplib.assert_column_equal(f"{what}: {c}", got[c], want[c])


def ids_of(built, n=5) -> list[str]:
    ids = reference(built).index["series_id"].to_pylist()
    pick = {ids[0], ids[-1], ids[len(ids) // 2], ids[len(ids) // 3]}
    return sorted(pick)[:n]


def first_day(period: str) -> dt.date:
    """The first day of a YYYY / YYYY-MM / YYYY-MM-DD period."""
    return dt.date.fromisoformat((period + "-01-01")[:10] if len(period) == 4 else (period + "-01")[:10])


def last_day(period: str) -> dt.date:
    """The last day of a YYYY / YYYY-MM / YYYY-MM-DD period (FLIGHT.md: end is inclusive)."""
    if len(period) == 4:
        return dt.date(int(period), 12, 31)
    if len(period) == 7:
        y, m = int(period[:4]), int(period[5:])
        return dt.date(y, m, calendar.monthrange(y, m)[1])
    return dt.date.fromisoformat(period)


# --------------------------------------------------------------------------
# listing and describing


def test_list_flights(client, served):
    infos = {i.descriptor.path[0].decode(): i for i in client.list_flights()}
    assert set(infos) == set(served)
    for name, info in infos.items():
        snap = served[name].snap
        assert info.descriptor.descriptor_type == fl.DescriptorType.PATH
        assert info.total_records == snap.manifest["stats"]["rows"]
        sc = info.schema
        assert sc.field("series_id").type == pa.dictionary(pa.int32(), pa.string())
        assert sc.field("period").type == pa.date32()
        assert sc.names[:3] == ["series_id", "period", "value"]
        data_cols = [c["name"] for c in snap.manifest["schema"]["data"]]
        assert sc.names[2:] == data_cols[2:]  # value and the varying columns; no series_code
        assert schema_snapshot_id(sc) == snap.manifest["snapshot_id"]
        (ep,) = info.endpoints
        assert json.loads(ep.ticket.ticket) == {"dataset": name, "prefix": ""}
    # criteria: a dataset name prefix
    assert [i.descriptor.path[0] for i in client.list_flights(b"nas")] == [b"nasty"]


def test_get_flight_info_path_and_command(client, served):
    b = served["gen300"]
    info = client.get_flight_info(fl.FlightDescriptor.for_path("gen300"))
    assert info.total_records == b.snap.manifest["stats"]["rows"]
    ids = ids_of(b, 3)
    q = {"dataset": "gen300", "series": ids, "start": "2010", "end": "2015-06"}
    info = client.get_flight_info(command(**q))
    want = filter_rows(reference(b).rows, ids=ids, start=dt.date(2010, 1, 1), end=dt.date(2015, 6, 30))
    assert info.total_records == want.num_rows  # exact, from the index
    (ep,) = info.endpoints
    assert json.loads(ep.ticket.ticket) == q  # the ticket is the query
    t = client.do_get(ep.ticket).read_all()
    assert t.num_rows == info.total_records
    assert t.schema == info.schema
    assert client.get_schema(command(**q)).schema == info.schema


# --------------------------------------------------------------------------
# DoGet against DuckDB


@pytest.mark.parametrize("name", list(DATASETS))
def test_get_series_matches_duckdb(client, served, name):
    b = served[name]
    ref = reference(b)
    ids = ids_of(b)
    if name == "nasty":
        ids += [lakes.LONG_ID, "GAS.Ü€漢字.M", "OIL.🛢️🔥.D", "e\u0301", "\u00e9", "BIG.D", "A"]
    t = do_get(client, dataset=name, series=list(reversed(ids)) + ids[:1])  # order and duplicates irrelevant
    check_rows(t, filter_rows(ref.rows, ids=ids), f"{name} series")
    assert schema_snapshot_id(t.schema) == b.snap.manifest["snapshot_id"]


@pytest.mark.parametrize("name", list(DATASETS))
def test_whole_dataset_matches_duckdb(client, served, name):
    """Every row, in DuckDB's ORDER BY series_id (bytes), period order."""
    b = served[name]
    ref = reference(b)
    t = do_get(client, dataset=name, prefix="")
    check_rows(t, ref.rows, f"{name} all")
    # one dictionary for the whole stream, sent in deltas when large: every
    # chunk's dictionary is a prefix of the full id list, and grows
    ids = ref.index["series_id"].combine_chunks()
    lens = [len(ch.dictionary) for ch in t["series_id"].chunks]
    for ch in t["series_id"].chunks:
        assert ch.dictionary.equals(ids.slice(0, len(ch.dictionary)))
    assert lens == sorted(lens) and lens[-1] == len(ids)
    if name == "nasty":  # two 10 000-character ids exceed the budget
        assert lens[0] < lens[-1], "expected delta dictionaries"


def test_range_filter(client, served):
    b = served["gen300"]
    ref = reference(b)
    ids = ids_of(b)
    for start, end in [("2005", "2005"), ("2010-03", "2012-02"), ("2019-07-01", "2019-09-30"), ("1990", "2001-01")]:
        t = do_get(client, dataset="gen300", series=ids, start=start, end=end)
        want = filter_rows(ref.rows, ids=ids, start=first_day(start), end=last_day(end))
        check_rows(t, want, f"range {start}..{end}")
    # open-ended bounds
    t = do_get(client, dataset="gen300", series=ids, start="2020")
    check_rows(t, filter_rows(ref.rows, ids=ids, start=dt.date(2020, 1, 1)), "start only")
    t = do_get(client, dataset="gen300", series=ids, end="2003")
    check_rows(t, filter_rows(ref.rows, ids=ids, end=dt.date(2003, 12, 31)), "end only")
    # quarter and week forms: end is the last day of the period named
    t = do_get(client, dataset="gen300", series=ids, start="2019Q2", end="2019-Q3")
    check_rows(t, filter_rows(ref.rows, ids=ids, start=dt.date(2019, 4, 1), end=dt.date(2019, 9, 30)), "quarters")
    t = do_get(client, dataset="gen300", series=ids, start="2020-W53", end="2020-W53")
    check_rows(t, filter_rows(ref.rows, ids=ids, start=dt.date(2020, 12, 28), end=dt.date(2021, 1, 3)), "week")


def latest_reference(ref: snaplib.Reference, end: dt.date | None = None) -> pa.Table:
    """The last row with a non-null value of each series (up to end)."""
    rows = ref.rows.filter(pc.is_valid(ref.rows["value"]))
    if end is not None:
        rows = rows.filter(pc.less_equal(rows["period"], pa.scalar(end, pa.date32())))
    ids = rows["series_id"].to_pylist()
    keep = [i for i in range(len(ids)) if i + 1 == len(ids) or ids[i + 1] != ids[i]]
    return rows.take(pa.array(keep, pa.int64()))


@pytest.mark.parametrize("name", list(DATASETS))
def test_latest(client, served, name):
    b = served[name]
    ref = reference(b)
    t = do_get(client, dataset=name, prefix="", latest=True)
    want = latest_reference(ref)
    check_rows(t, want, f"{name} latest")
    # the index's latest_period / latest_value agree
    idx = ref.index.filter(pc.is_valid(ref.index["latest_period"]))
    snaplib.assert_column_equal("latest period vs index", decoded(t)["period"], idx["latest_period"])
    snaplib.assert_column_equal("latest value vs index", decoded(t)["value"], idx["latest_value"])
    # small answers are coalesced, not one message per series
    assert t["series_id"].num_chunks <= max(1, t.nbytes // (32 << 10) + 1)


def test_latest_in_range(client, served):
    b = served["nasty"]
    ref = reference(b)
    # NULLS.ALL has no latest; B's latest before 2016-01-08 may be behind nulls
    t = do_get(client, dataset="nasty", prefix="", latest=True, end="2019-01-02")
    check_rows(t, latest_reference(ref, dt.date(2019, 1, 2)), "latest up to 2019-01-02")
    t = do_get(client, dataset="nasty", series=["NULLS.ALL"], latest=True)
    assert t.num_rows == 0


def test_prefix_and_category(client, served):
    b = served["gen300"]
    ref = reference(b)
    ids = ref.index["series_id"].to_pylist()
    prefix = ids[len(ids) // 2].split(".")[0] + "."
    t = do_get(client, dataset="gen300", prefix=prefix)
    check_rows(t, filter_rows(ref.rows, prefix=prefix), f"prefix {prefix}")
    t = do_get(client, dataset="gen300", prefix=prefix, start="2015", end="2016")
    check_rows(t, filter_rows(ref.rows, prefix=prefix, start=dt.date(2015, 1, 1), end=dt.date(2016, 12, 31)), "prefix range")
    assert do_get(client, dataset="gen300", prefix="no such prefix").num_rows == 0

    cats = ref.index["category"].to_pylist()
    cat = cats[len(cats) // 2]
    in_cat = [i for i, c in zip(ids, cats) if c == cat]
    t = do_get(client, dataset="gen300", category=cat)
    check_rows(t, filter_rows(ref.rows, ids=in_cat), f"category {cat}")
    info = client.get_flight_info(command(dataset="gen300", category=cat))
    assert info.total_records == t.num_rows


def test_attributes_and_columns(client, served):
    b = served["nasty"]
    ref = reference(b)
    ids = ["A", "NOUNITS", "NULLS.ALL", lakes.LONG_ID, "GAS.Ü€漢字.M"]
    t = do_get(client, dataset="nasty", series=ids, attributes=True)
    want = filter_rows(ref.rows, ids=ids)
    attrs = ref.attributes
    assert t.column_names == ref.rows.column_names + [a for a in b.snap.manifest["schema"]["attributes"]]
    # attribute columns: per-series constants, joined from the index
    per_series = {r["series_id"]: r for r in ref.index.to_pylist()}
    for a in attrs:
        exp = pa.array([per_series[s][a] for s in want["series_id"].to_pylist()], ref.input_types[a])
        snaplib.assert_column_equal(f"attribute {a}", decoded(t)[a], exp)
    check_rows(t, want, "attributes", columns=ref.rows.column_names)
    # polars reads the stream (dictionary columns of several value types)
    df = pl.from_arrow(t)
    assert df.height == t.num_rows and df["series_id"].cast(pl.Utf8).to_list() == want["series_id"].to_pylist()

    # column selection: keys always, then the named columns in order
    t = do_get(client, dataset="nasty", series=["A"], columns=["note", "units", "value"])
    assert t.column_names == ["series_id", "period", "note", "units", "value"]
    t = do_get(client, dataset="nasty", series=["A"], columns=[])
    assert t.column_names == ["series_id", "period"]


def test_series_id_dictionary(client, served):
    ids = ids_of(served["gen300"], 3)
    t = client.do_get(ticket(dataset="gen300", series=ids)).read_all()
    assert t.schema.field("series_id").type == pa.dictionary(pa.int32(), pa.string())
    (chunk,) = t["series_id"].chunks
    assert chunk.dictionary.to_pylist() == ids  # exactly the matching series, in order


def test_large_response_is_split(client, served):
    """BIG.D (100k rows) arrives in batches of about --batch-bytes."""
    r = client.do_get(ticket(dataset="nasty", series=["BIG.D"], columns=["value"]))
    sizes = [chunk.data.nbytes for chunk in r]
    assert sum(sizes) >= lakes.BIG_ROWS * 16 and len(sizes) >= lakes.BIG_ROWS * 16 // BATCH_BYTES
    assert max(sizes) <= 1.5 * BATCH_BYTES


# --------------------------------------------------------------------------
# errors


def test_not_found(client):
    expect_error(lambda: do_get(client, dataset="NOPE", prefix=""), "NOT_FOUND", 'dataset "NOPE" not found')
    expect_error(lambda: do_get(client, dataset="gen300", series=["NOPE.X"]), "NOT_FOUND",
                 'series "NOPE.X" not found in dataset "gen300"')
    expect_error(lambda: do_get(client, dataset="gen300", category="No such category"), "NOT_FOUND",
                 'category "No such category" not found')
    expect_error(lambda: client.get_flight_info(fl.FlightDescriptor.for_path("NOPE")), "NOT_FOUND", "NOPE")
    expect_error(lambda: client.get_flight_info(command(dataset="nasty", series=["A", "Q1", "Q2"])), "NOT_FOUND",
                 "2 of 3 series not found")


@pytest.mark.parametrize("raw,fragment", [
    (b'{"dataset":"gen300","series":["A"]', "not JSON"),
    (b"not json", "not JSON"),
    (b'["gen300"]', "must be a JSON object"),
    (b'{"dataset":"gen300","seires":["A"]}', 'unknown field "seires"'),
    (b'{"dataset":"gen300","series":["A"],"series":["B"]}', "given twice"),
    (b'{"dataset":"gen300","series":"A"}', "must be an array of strings"),
    (b'{"dataset":"gen300","prefix":"","start":"2019-13"}', "month 13 out of range"),
    (b'{"dataset":"gen300","prefix":"","start":"2021","end":"2020"}', "is after end"),
    (b'{"dataset":"gen300"}', "say which series"),
    (b'{"dataset":"gen300","prefix":"","category":"x"}', "only one of"),
    (b'{"dataset":"../gen300","prefix":""}', "not allowed"),
    (b'{"dataset":"gen300/../../etc","prefix":""}', "not allowed"),
    (b'{"dataset":"gen300","prefix":"","columns":["valeu"]}', 'unknown column "valeu"'),
    (b'{"dataset":"gen300","prefix":"","latest":"yes"}', '"latest" must be true or false'),
])
def test_invalid_argument(client, raw, fragment):
    expect_error(lambda: client.do_get(fl.Ticket(raw)).read_all(), "INVALID_ARGUMENT", fragment)
    expect_error(lambda: client.get_flight_info(fl.FlightDescriptor.for_command(raw)), "INVALID_ARGUMENT", fragment)


def test_resource_exhausted(auth_server, auth_opts, served):
    c = auth_server.client()
    get = functools.partial(do_get, c, auth_opts)
    big = '{"dataset":"gen300","prefix":"' + "x" * 3000 + '"}'
    expect_error(lambda: c.do_get(fl.Ticket(big.encode()), options=auth_opts).read_all(),
                 "RESOURCE_EXHAUSTED", "limit 2048")
    expect_error(lambda: get(dataset="gen300", series=[f"S{i}" for i in range(11)]),
                 "RESOURCE_EXHAUSTED", "11 series requested, limit 10")
    # the limits bound explicit lists; a whole-dataset answer streams past them
    assert get(dataset="gen300", prefix="").num_rows == served["gen300"].snap.manifest["stats"]["rows"]
    expect_error(lambda: get(dataset="nasty", series=["BIG.D"]), "RESOURCE_EXHAUSTED",
                 f"matches {lakes.BIG_ROWS} rows", "limit 5000")
    # narrowing the range makes it fit
    assert get(dataset="nasty", series=["BIG.D"], start="1750", end="1750").num_rows == 365


def test_list_flights_ticket_streams_150k_series(snapbuild, tmp_path):
    """The ticket ListFlights advertises returns every row of a dataset with
    more series than the default --max-series (100,000), and a "limit"
    field cuts the answer to its first rows."""
    n = 150_000
    lake = tmp_path / "lake"
    lake.mkdir()
    ids = pa.array([f"W.{i:07d}" for i in range(n) for _ in range(2)])
    periods = pa.array([dt.date(2020, 1, 1), dt.date(2020, 2, 1)] * n, pa.date32())
    values = pa.array([float(i) for i in range(2 * n)])
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"series_id": ids, "period": periods, "value": values}), lake / "part-0.parquet")
    root = tmp_path / "root"
    snaplib.build(snapbuild, lake, root / "WIDE")
    s = ServerProcess(snapbuild, root)
    try:
        c = s.client()
        [info] = list(c.list_flights())
        assert info.total_records == 2 * n and len(info.endpoints) == 1
        t = decoded(c.do_get(info.endpoints[0].ticket).read_all())
        assert t.num_rows == 2 * n
        assert pc.count_distinct(t["series_id"]).as_py() == n
        assert t["value"].to_pylist() == values.to_pylist()  # sorted input stays in order
        assert do_get(c, dataset="WIDE", prefix="", limit=5).num_rows == 5
    finally:
        assert s.terminate() == 0, s.stderr


def test_unknown_action(client):
    expect_error(lambda: list(client.do_action(fl.Action("no-such-action", b""))), "UNIMPLEMENTED", 'unknown action "no-such-action"')


# --------------------------------------------------------------------------
# auth on and off


def test_auth_off(client):
    assert len(list(client.list_flights())) == len(DATASETS)


def test_auth_on(auth_server, auth_opts):
    c = auth_server.client()
    with pytest.raises(fl.FlightUnauthenticatedError):
        list(c.list_flights())
    with pytest.raises(fl.FlightUnauthenticatedError):
        c.do_get(ticket(dataset="nasty", series=["A"])).read_all()
    wrong = fl.FlightCallOptions(headers=[(b"authorization", b"Bearer not-the-token")])
    with pytest.raises(fl.FlightUnauthenticatedError):
        c.get_flight_info(fl.FlightDescriptor.for_path("nasty"), options=wrong)
    # a plain bearer header
    assert len(list(c.list_flights(options=auth_opts))) == len(DATASETS)
    assert do_get(c, auth_opts, dataset="nasty", series=["A"]).num_rows == 55
    # Basic handshake (password = token) returns the bearer header to send
    with pytest.raises(fl.FlightUnauthenticatedError):
        c.authenticate_basic_token("user", "wrong-password")
    key, value = c.authenticate_basic_token("anyone", TOKEN)
    assert key.lower() == b"authorization" and value == f"Bearer {TOKEN}".encode()
    opts = fl.FlightCallOptions(headers=[(key, value)])
    assert do_get(c, opts, dataset="nasty", series=["ONE"]).num_rows == 1
    status = json.loads(list(c.do_action(fl.Action("status", b""), options=opts))[0].body.to_pybytes())
    assert {d["name"] for d in status["datasets"]} == set(DATASETS)


# --------------------------------------------------------------------------
# operations


def test_status_action(client, served):
    (r,) = list(client.do_action(fl.Action("status", b"")))
    st = json.loads(r.body.to_pybytes())
    assert st["uptime_seconds"] > 0
    by = {d["name"]: d for d in st["datasets"]}
    assert set(by) == set(served)
    for name, b in served.items():
        m = b.snap.manifest
        assert by[name]["snapshot_id"] == m["snapshot_id"]
        assert by[name]["rows"] == m["stats"]["rows"] and by[name]["series"] == m["stats"]["series"]
        assert by[name]["mapped_bytes"] == b.snap.file_entry("data")["size"]
    assert st["mapped_bytes"] == sum(d["mapped_bytes"] for d in st["datasets"])
    # the plain actions, then the Flight SQL ones served on the same port
    assert [a.type for a in client.list_actions()] == ["status", "compact", "discard", "reload", "CreatePreparedStatement", "ClosePreparedStatement"]


def test_metrics_and_health(server, client, served):
    code, body = server.get("/healthz")
    assert code == 200 and json.loads(body)["status"] == "ok"
    do_get(client, dataset="nasty", series=["ONE"])
    code, text = server.get("/metrics")
    assert code == 200
    for name, b in served.items():
        assert f'servingsnap_snapshot_id{{dataset="{name}"}} {b.snap.manifest["snapshot_id"]}' in text
        assert f'servingsnap_mapped_bytes{{dataset="{name}"}}' in text
    for frag in ['servingsnap_requests_total{code="OK",method="DoGet"}',
                 'servingsnap_requests_total{code="NotFound",method="DoGet"}',
                 'servingsnap_request_duration_seconds_bucket{method="DoGet"',
                 'servingsnap_rows_sent_total{dataset="nasty"}',
                 'servingsnap_bytes_sent_total{dataset="nasty"}']:
        assert frag in text, frag


def test_sigterm_lets_streams_finish(snapbuild, root, served):
    """SIGTERM while a stream is being read: the stream completes, the
    server exits 0, and new calls are refused."""
    s = ServerProcess(snapbuild, root, "--batch-bytes", 4096)
    try:
        c = s.client()
        want = served["nasty"].snap.manifest["stats"]["rows"]
        reader = c.do_get(ticket(dataset="nasty", prefix=""))
        first = reader.read_chunk()
        rows = first.data.num_rows
        code = {}
        t = threading.Thread(target=lambda: code.setdefault("exit", s.terminate()))
        t.start()
        for chunk in reader:
            rows += chunk.data.num_rows
        t.join(timeout=60)
        assert rows == want
        assert code.get("exit") == 0, s.stderr
        with pytest.raises(fl.FlightUnavailableError):
            list(fl.connect(s.uri).list_flights(options=fl.FlightCallOptions(timeout=2)))
    finally:
        s.kill()


# --------------------------------------------------------------------------
# reload (FLIGHT.md "Reload")


def _metric(server, name: str, dataset: str, label: str = "") -> float:
    code, text = server.get("/metrics")
    assert code == 200
    for line in text.splitlines():
        if line.startswith(name + "{") and f'dataset="{dataset}"' in line and label in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name}{{dataset={dataset}}} not in /metrics")


def test_reload_follows_current(snapbuild, gen_built, tmp_path):
    """The poller serves a new build and a rollback by itself; answers say
    which snapshot served them."""
    from flightlib import dataset_status, wait_until

    root = tmp_path / "root"
    ds = root / "R"
    snaplib.build(snapbuild, gen_built.lake, ds)  # 1
    s = ServerProcess(snapbuild, root, "--reload-interval", "50ms")
    try:
        c = s.client()
        sid = ids_of(gen_built, 1)[0]
        assert schema_snapshot_id(do_get(c, dataset="R", series=[sid]).schema) == 1
        snaplib.build(snapbuild, gen_built.lake, ds)  # 2, CURRENT flips
        wait_until(lambda: dataset_status(c, "R")["snapshot_id"] == 2, what="serving 2")
        t = do_get(c, dataset="R", series=[sid])
        assert schema_snapshot_id(t.schema) == 2
        st = dataset_status(c, "R")
        assert st["reloads"] == 1 and st["reload_failures"] == 0 and st["last_reload"] and st["last_error"] == ""
        assert st["current_id"] == 2
        snaplib.run_ok(snapbuild, "rollback", "--to", "1", "--reason", "test", ds)
        wait_until(lambda: dataset_status(c, "R")["snapshot_id"] == 1, what="serving 1 after rollback")
        assert _metric(s, "servingsnap_reloads_total", "R", 'result="ok"') == 2
        assert _metric(s, "servingsnap_reloads_total", "R", 'result="error"') == 0
        assert _metric(s, "servingsnap_snapshot_id", "R") == 1
    finally:
        assert s.terminate() == 0, s.stderr


def test_reload_action_gc_and_failure(snapbuild, gen_built, tmp_path):
    """With polling off, DoAction reload forces the check; gc leaves alone
    the snapshot the server still serves; a damaged snapshot is not served."""
    from flightlib import action_json, dataset_status

    root = tmp_path / "root"
    ds = root / "R"
    snaplib.build(snapbuild, gen_built.lake, ds)  # 1
    snaplib.build(snapbuild, gen_built.lake, ds)  # 2
    s = ServerProcess(snapbuild, root, "--reload-interval", "0")
    try:
        c = s.client()
        assert action_json(c, "status")["reload_interval_seconds"] == 0
        assert "reload" in {a.type for a in c.list_actions()}
        snaplib.run_ok(snapbuild, "rollback", "--to", "1", "--reason", "test", ds)
        assert dataset_status(c, "R")["snapshot_id"] == 2  # no polling
        gc = json.loads(snaplib.run_ok(snapbuild, "gc", "--keep", "0", "--json", ds).stdout)
        assert 2 in (gc["in_use"] or []) and 2 not in (gc["removed"] or []), gc  # empty lists print as null
        assert (ds / "snapshots" / "000002").is_dir()

        out = action_json(c, "reload", b"R")
        assert out["datasets"] == [{"dataset": "R", "result": "reloaded", "snapshot_id": 1, "previous_id": 2,
                                    "current_id": 1, "open_ms": out["datasets"][0]["open_ms"]}]
        assert action_json(c, "reload")["datasets"][0]["result"] == "unchanged"  # empty body: all
        gc = json.loads(snaplib.run_ok(snapbuild, "gc", "--keep", "0", "--json", ds).stdout)
        assert 2 in (gc["removed"] or []) and not gc["in_use"], gc

        # the ticket's "snapshot" field
        sid = ids_of(gen_built, 1)[0]
        assert do_get(c, dataset="R", series=[sid], snapshot=1).num_rows > 0
        with pytest.raises(pa.ArrowException) as e:
            do_get(c, dataset="R", series=[sid], snapshot=2)
        assert "precondition failed" in str(e.value) or "FAILED_PRECONDITION" in str(e.value), e.value
        assert "serving snapshot 1, the request asks for snapshot 2" in str(e.value)

        # a damaged new snapshot: not served, loud everywhere
        snaplib.build(snapbuild, gen_built.lake, ds)  # 2 again: gc removed the newest id
        bad = int((ds / "CURRENT").read_text().strip()[len("manifests/"):-len(".json")])
        data = ds / "snapshots" / f"{bad:06d}" / "data.arrow"
        data.chmod(0o644)
        b = bytearray(data.read_bytes())
        b[len(b) // 2] ^= 0xFF
        data.write_bytes(bytes(b))
        with pytest.raises(pa.ArrowException) as e:  # pyarrow: ArrowInvalid, "precondition failed"
            action_json(c, "reload", b"R")
        assert "precondition failed" in str(e.value) and "checksum" in str(e.value) and "still serving 1" in str(e.value)
        st = dataset_status(c, "R")
        assert st["snapshot_id"] == 1 and st["current_id"] == bad and st["reload_failures"] == 1
        assert "checksum" in st["last_error"] and st["last_error_at"]
        assert do_get(c, dataset="R", series=[sid]).num_rows > 0
        assert _metric(s, "servingsnap_reload_failures_total", "R") == 1
        assert _metric(s, "servingsnap_reload_failing", "R") == 1
        assert "reload failed" in s.stderr
        expect_error(lambda: action_json(c, "reload", b"NOPE"), "NOT_FOUND", "NOPE")
    finally:
        assert s.terminate() == 0, s.stderr


def test_category_matches_below_slash(client, served):
    """category matches itself and everything below it at a '/'."""
    ref = reference(served["eia"]).index
    if "category" not in ref.column_names:
        pytest.skip("no category attribute")
    cats = sorted({c for c in ref["category"].to_pylist() if c and "/" in c})
    if not cats:
        pytest.skip("no hierarchical category")
    top = cats[0].split("/")[0]
    want = sum(1 for c in ref["category"].to_pylist() if c and (c == top or c.startswith(top + "/")))
    t = do_get(client, dataset="eia", category=top, latest=True, columns=["value"])
    assert pc.count_distinct(decoded(t)["series_id"]).as_py() <= want
    assert t.num_rows > 0
    expect_error(lambda: do_get(client, dataset="eia", category=top[:-1], latest=True), "NOT_FOUND")
