"""`snapbuild gen`: the synthetic lake the other tests and the demo rely on."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

import snaplib


def test_gen_lake_shape(gen_built):
    lake = gen_built.lake
    files = snaplib.parquet_files(lake)
    assert files and all(f.parent.name.startswith("year=") for f in files)
    schema = pq.read_schema(files[0])
    assert schema.names == ["series_id", "period", "value", "units", "frequency", "name", "category"]
    assert schema.field("value").type == pa.float64()
    assert all(schema.field(c).type == pa.string() for c in schema.names if c != "value")
    ref = snaplib.duck_reference(lake)  # raises on any period it cannot read
    assert ref.attributes == ["units", "frequency", "name", "category"]
    assert ref.stats["series"] == 300
    con = duckdb.connect()
    glob = f"{lake}/**/*.parquet"
    shapes = {r[0] for r in con.sql(
        f"""SELECT CASE WHEN regexp_full_match(period, '[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}') THEN 'day'
                        WHEN regexp_full_match(period, '[0-9]{{4}}-[0-9]{{2}}') THEN 'month'
                        WHEN regexp_full_match(period, '[0-9]{{4}}-Q[1-4]') THEN 'quarter'
                        WHEN regexp_full_match(period, '[0-9]{{4}}') THEN 'year'
                        ELSE period END
            FROM read_parquet('{glob}')""").fetchall()}
    assert shapes == {"day", "month", "quarter", "year"}, shapes
    nulls = con.sql(f"SELECT count(*) FILTER (WHERE value IS NULL) FROM read_parquet('{glob}')").fetchall()[0][0]
    assert nulls > 0, "gen should write some null values"
    # a partition holds only its own year's periods
    bad = con.sql(
        f"""SELECT count(*) FROM read_parquet('{glob}', hive_partitioning = true)
            WHERE CAST(substr(period, 1, 4) AS INTEGER) <> CAST(year AS INTEGER)""").fetchall()[0][0]
    assert bad == 0


def test_gen_is_deterministic(snapbuild, tmp_path):
    lakes = {}
    for name, seed in [("a", 11), ("b", 11), ("c", 12)]:
        lake = tmp_path / name
        snaplib.run_ok(snapbuild, "gen", "--out", lake, "--series", 30, "--seed", seed,
                       "--from-year", 2015, "--to-year", 2017)
        lakes[name] = {p.relative_to(lake).as_posix(): p.read_bytes() for p in snaplib.parquet_files(lake)}
    assert sorted(lakes["a"]) == [f"year={y}/part-0.parquet" for y in (2015, 2016, 2017)]
    assert lakes["a"] == lakes["b"], "same options and seed must give identical files"
    assert lakes["a"] != lakes["c"], "another seed must give other data"
