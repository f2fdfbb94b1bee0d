"""The DuckDB serving peer of the benchmark harness (bench/harness.py).

A pyarrow.flight server over a DuckDB table built in memory at every start, as a data
engineer would put a SQL engine behind the same tickets: read every Parquet file of the lake
into an in-memory DuckDB database, parse the distinct periods to DATE, keep the per-series
attributes once per series in their own table, and store the rows sorted by
(series_id, period), so DuckDB's zone maps prune the row groups a query does not touch.
Each DoGet ticket (the JSON of docs/FLIGHT.md: "series" | "prefix" | "category",
"start"/"end", "columns", "latest") becomes one SQL query on a cursor of that database, and
its Arrow result is streamed back.

    python bench/duckbaseline.py --lake LAKE --dataset NAME --addr 127.0.0.1:PORT

Once the table is built it binds the address and prints one JSON line
{"event": "listening", "flight": ..., "startup_ms": ...} to stdout; startup_ms counts from
the process's start (interpreter and imports included).
"""
import pathlib
import sys

import duckdb
import pyarrow as pa
import pyarrow.flight as fl

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from peerlib import EPOCH, day, serve  # noqa: E402

ATTRS = ["units", "frequency", "name", "category"]

# EIA-style period strings (YYYY, YYYY-MM, YYYY-Qn, YYYY-MM-DD) to the period's first day.
PERIOD_SQL = """CASE
  WHEN length(p) = 10 THEN CAST(p AS DATE)
  WHEN length(p) = 4 THEN make_date(CAST(p AS INTEGER), 1, 1)
  WHEN substr(p, 6, 1) = 'Q' THEN make_date(CAST(substr(p, 1, 4) AS INTEGER), (CAST(substr(p, 7, 1) AS INTEGER) - 1) * 3 + 1, 1)
  ELSE make_date(CAST(substr(p, 1, 4) AS INTEGER), CAST(substr(p, 6, 2) AS INTEGER), 1)
END"""


def ql(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


class Dataset:
    def __init__(self, lake: str, name: str):
        self.name = name
        self.con = duckdb.connect()  # in memory
        files = sorted(str(p) for p in pathlib.Path(lake).rglob("*.parquet"))
        if not files:
            raise SystemExit(f"duckbaseline: no Parquet files under {lake}")
        src = f"read_parquet([{', '.join(ql(f) for f in files)}], hive_partitioning=false, union_by_name=true)"
        self.con.execute(f"CREATE TEMP VIEW lake AS SELECT * FROM {src}")
        cols = {r[0] for r in self.con.execute("DESCRIBE lake").fetchall()}
        attrs = [a for a in ATTRS if a in cols]
        ptype = dict((r[0], r[1]) for r in self.con.execute("DESCRIBE lake").fetchall())["period"]
        if ptype == "VARCHAR":
            self.con.execute(f"CREATE TEMP TABLE periods AS SELECT p, {PERIOD_SQL} AS d FROM (SELECT DISTINCT period AS p FROM lake)")
            per = "periods.d"
            join = "JOIN periods ON lake.period = periods.p"
        else:
            per, join = "CAST(lake.period AS DATE)", ""
        self.con.execute(f"CREATE TABLE rows AS SELECT lake.series_id, {per} AS period, CAST(lake.value AS DOUBLE) AS value "
                         f"FROM lake {join} ORDER BY lake.series_id, period")
        agg = ", ".join(f"first({a}) AS {a}" for a in attrs)
        self.con.execute(f"CREATE TABLE series AS SELECT series_id{', ' + agg if agg else ''} FROM lake GROUP BY series_id ORDER BY series_id")
        self.con.execute("DROP VIEW lake")
        self.ids = [r[0] for r in self.con.execute("SELECT series_id FROM series ORDER BY series_id").fetchall()]
        self.known = set(self.ids)
        self.has_category = "category" in attrs
        self.rows = self.con.execute("SELECT count(*) FROM rows").fetchone()[0]
        self.schema = pa.schema([("series_id", pa.string()), ("period", pa.date32()), ("value", pa.float64())])

    def sql(self, q) -> str:
        if q.get("dataset") != self.name:
            raise fl.FlightServerError(f"no dataset {q.get('dataset')!r}")
        where = []
        if "prefix" in q:
            where.append(f"starts_with(series_id, {ql(q['prefix'])})")
        elif "category" in q:
            if not self.has_category:
                raise fl.FlightServerError("no category attribute")
            c = q["category"].rstrip("/")
            where.append(f"series_id IN (SELECT series_id FROM series WHERE category = {ql(c)} OR starts_with(category, {ql(c + '/')}))")
        else:
            ids = sorted(set(q["series"]))
            for s in ids:
                if s not in self.known:
                    raise fl.FlightServerError(f"unknown series {s!r}")
            # constants in the IN list let DuckDB prune row groups by their series_id zone maps
            where.append(f"series_id IN ({', '.join(ql(s) for s in ids)})")
        if "start" in q:
            where.append(f"period >= DATE '{EPOCH.fromordinal(EPOCH.toordinal() + day(q['start'], False))}'")
        if "end" in q:
            where.append(f"period <= DATE '{EPOCH.fromordinal(EPOCH.toordinal() + day(q['end'], True))}'")
        cond = " AND ".join(where)
        with_value = "columns" not in q or "value" in q["columns"]
        if q.get("latest"):
            sel = "series_id, max(period) AS period" + (", arg_max(value, period) AS value" if with_value else "")
            return f"SELECT {sel} FROM rows WHERE {cond} AND value IS NOT NULL GROUP BY series_id ORDER BY series_id"
        sel = "series_id, period" + (", value" if with_value else "")
        return f"SELECT {sel} FROM rows WHERE {cond} ORDER BY series_id, period"

    def query(self, q) -> pa.Table:
        sql = self.sql(q)
        cur = self.con.cursor()  # one per call: the Flight server answers on several threads
        try:
            return cur.sql(sql).to_arrow_table()
        finally:
            cur.close()


def main():
    serve(__doc__, Dataset, "127.0.0.1:8818")


if __name__ == "__main__":
    sys.exit(main())
