"""Tiered snapshots (`snapbuild build --hot-since`, `--hot-rows`, `--format
vortex`) read by other engines and served: pyarrow reads the version-3
index.arrow as FORMAT.md §4 says; a served tiered snapshot answers
pyarrow.flight queries (full history, recent-only, old-only, latest, every
series) exactly as the all-hot snapshot of the same lake does; DuckDB
(offline, no extension) reads the tiered build's portable.parquet into the
all-hot build's rows.

vortex-data reading cold.vortex itself is tests/vortex/test_cold.py.
Written from docs/FORMAT.md, docs/CLI.md and docs/FLIGHT.md.
"""

from __future__ import annotations

import datetime as dt

import duckdb
import pyarrow as pa
import pyarrow.flight as fl
import pytest

import lakelib
import snaplib
from flightlib import ServerProcess, decoded, do_get

BATCH_ROWS = 1000
SPLIT = "2020-01-01"
# dataset name -> build flags; "hot" is the all-hot reference.
BUILDS = {
    "hot": [],
    "since": ["--hot-since", SPLIT],
    "rows": ["--hot-rows", "12"],
    "both": ["--hot-since", "2023-06-01", "--hot-rows", "4"],
    "vortex": ["--format", "vortex"],
}
TIERED = [n for n in BUILDS if n != "hot"]


@pytest.fixture(scope="module")
def tiers(snapbuild, tmp_path_factory):
    """One lake built with each policy, every build with --portable, as
    datasets of one serve root."""
    d = tmp_path_factory.mktemp("tiers")
    lake = d / "lake"
    snaplib.run_ok(snapbuild, "gen", "--out", lake, "--series", 300, "--seed", 5)
    root = d / "root"
    reports = {}
    for name, flags in BUILDS.items():
        reports[name] = snaplib.build(snapbuild, lake, root / name, "--batch-rows", BATCH_ROWS,
                                      "--portable", "--portable-row-group-rows", 5000, *flags)
    return root, reports


def test_build_reports_the_tiers(tiers):
    root, reports = tiers
    for name in BUILDS:
        snap = snaplib.open_current(root / name)
        m = snap.manifest
        roles = [f["role"] for f in m["files"]]
        # FORMAT.md "Versions": every build writes 4; tiered exactly when it lists a cold file
        assert m["format_version"] == 5, name
        if name == "hot":
            assert "cold" not in roles, m["files"]
            continue
        cold = snap.file_entry("cold")
        data = snap.file_entry("data")
        assert (cold["tier"], cold["format"]) == ("cold", "vortex"), cold
        assert cold["path"] == f"snapshots/{m['snapshot_id']:06d}/cold.vortex"
        assert cold["checksum"] == snaplib.xxh64_file(root / name / cold["path"])
        assert data["rows"] + cold["rows"] == m["stats"]["rows"] == reports["hot"]["rows"], name
        assert (data["rows"] == 0) == (name == "vortex"), (name, data)
        rep = {f["role"]: f for f in reports[name]["files"]}
        assert rep["cold"]["rows"] == cold["rows"] and rep["cold"]["tier"] == "cold", rep
        assert rep["data"]["rows"] == data["rows"] and rep["data"]["tier"] == "hot", rep
        b = m["build"]
        policy = {k: b[k] for k in ("hot_since", "hot_rows", "format") if k in b}
        assert policy == POLICY[name], (name, b)


# What the manifest's build section records for each policy (FORMAT.md §2).
POLICY = {
    "since": {"hot_since": SPLIT},
    "rows": {"hot_rows": 12},
    "both": {"hot_since": "2023-06-01", "hot_rows": 4},
    "vortex": {"format": "vortex"},
}


def test_pyarrow_reads_the_tiered_index(tiers):
    """A tiered index.arrow (version 5 with servingsnap.tiered = true, as
    version 3 was): the untiered columns, then cold_start, cold_rows,
    cold_first_period, cold_last_period, then the lookup table, then the
    attributes; the series,
    their bounds and latest values are the all-hot index's, and cold_rows +
    row_count is the series' row count."""
    root, _ = tiers
    ref = snaplib.open_current(root / "hot").index()
    names = [f for f, _, _ in snaplib.INDEX_FIXED] + ["latest_value"]
    cold_cols = [("cold_start", pa.int64()), ("cold_rows", pa.int64()),
                 ("cold_first_period", pa.date32()), ("cold_last_period", pa.date32())]
    for name in TIERED:
        snap = snaplib.open_current(root / name)
        r = snap.index_reader()
        assert r.schema.metadata[b"servingsnap.format_version"] == b"5", name
        assert r.schema.metadata[b"servingsnap.tiered"] == b"true", name
        assert r.num_record_batches == 1
        x = snaplib.decode_codes(r.read_all())
        assert x.column_names[:9] == names and x.column_names[9:13] == [c for c, _ in cold_cols], x.column_names
        for c, t in cold_cols:
            assert x.schema.field(c).type == t and not x.schema.field(c).nullable, (name, c)
        assert x.column_names[13:15] == ["lookup_start", "lookup_code"], x.column_names
        snaplib.assert_lookup_table(x)
        assert x.column_names[15:] == ref.column_names[11:] == snap.manifest["schema"]["attributes"]
        for c in ["series_id", "first_period", "last_period", "latest_period", "latest_value", *ref.column_names[11:]]:
            assert x[c].equals(ref[c]), (name, c)
        rows = x.select(["row_offset", "row_count", "cold_start", "cold_rows", "cold_first_period",
                         "cold_last_period", "first_period"]).to_pylist()
        pos, hot_pos = 0, 0
        for i, (e, n) in enumerate(zip(rows, ref["row_count"].to_pylist())):
            assert e["cold_rows"] + e["row_count"] == n, (name, i, e)
            assert e["cold_start"] == pos, (name, i, e)
            if name == "vortex":
                assert e["row_count"] == 0 and e["row_offset"] == 0, e
            else:
                assert e["row_count"] >= 1 and e["row_offset"] == hot_pos, (name, i, e)
            if e["cold_rows"]:
                assert e["cold_first_period"] == e["first_period"] <= e["cold_last_period"], e
            pos += e["cold_rows"]
            hot_pos += e["row_count"]
        assert pos == snap.file_entry("cold")["rows"]
        assert hot_pos == snap.file_entry("data")["rows"]


@pytest.fixture(scope="module")
def server(snapbuild, tiers):
    root, _ = tiers
    s = ServerProcess(snapbuild, root, http=False)
    yield s
    s.terminate()


def sample_ids(root) -> list[str]:
    ids = snaplib.open_current(root / "hot").index()["series_id"].to_pylist()
    return sorted(set(ids[:: max(1, len(ids) // 17)] + [ids[0], ids[-1]]))


QUERIES = {
    "full history": {},
    "recent only": {"start": SPLIT},
    "old only": {"end": "2009"},
    "straddling": {"start": "2018-07", "end": "2021-03"},
    "latest": {"latest": True},
    "latest before the split": {"latest": True, "end": "2015"},
    "attributes": {"attributes": True, "start": "2022"},
}


@pytest.mark.parametrize("name", TIERED)
@pytest.mark.parametrize("query", sorted(QUERIES))
def test_flight_answers_equal_all_hot(server, tiers, name, query):
    root, _ = tiers
    client = server.client()
    q = dict(QUERIES[query], series=sample_ids(root))
    want = decoded(do_get(client, dataset="hot", **q))
    got = decoded(do_get(client, dataset=name, **q))
    assert want.num_rows > 0, query
    assert got.column_names == want.column_names
    assert got.equals(want), f"{name} {query}: {got.num_rows} rows, all-hot {want.num_rows}"


@pytest.mark.parametrize("name", TIERED)
def test_flight_whole_dataset_equals_all_hot(server, tiers, name):
    client = server.client()
    want = decoded(do_get(client, dataset="hot", prefix=""))
    got = decoded(do_get(client, dataset=name, prefix=""))
    assert got.num_rows == want.num_rows > 0
    assert got.equals(want), name
    info = client.get_flight_info(fl.FlightDescriptor.for_path(name))
    assert info.total_records == want.num_rows


def offline_duckdb():
    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    return con


def test_duckdb_reads_the_portable_copy_of_a_tiered_build(tiers):
    root, _ = tiers

    def rows(name):
        snap = snaplib.open_current(root / name)
        path = root / name / snap.file_entry("portable")["path"]
        t = offline_duckdb().sql(f"SELECT * FROM read_parquet({snaplib.ql(str(path))})").to_arrow_table()
        return t, lakelib.rows_of_table(t)

    want_t, want = rows("hot")
    assert len(want) == snaplib.open_current(root / "hot").manifest["stats"]["rows"]
    for name in TIERED:
        t, got = rows(name)
        assert t.column_names == want_t.column_names, name
        assert got == want, name
    # One series, recent periods only, through DuckDB's filter pushdown.
    sid = sample_ids(root)[3]
    for name in ["hot", "since"]:
        snap = snaplib.open_current(root / name)
        path = root / name / snap.file_entry("portable")["path"]
        n = offline_duckdb().execute(
            f"SELECT count(*) FROM read_parquet({snaplib.ql(str(path))}) WHERE series_id = ? AND period >= ?",
            [sid, dt.date(2020, 1, 1)]).fetchone()[0]
        if name == "hot":
            want_n = n
        assert n == want_n and n > 0, (name, n)
