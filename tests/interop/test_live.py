"""Live writes from pyarrow (docs/FLIGHT.md, DoPut and the compact action).

- Merge-on-read against an oracle written here: do_put batches (revisions,
  duplicates inside a batch, new series with attributes, other input
  types), do_get returns the base rows with the newest write winning for
  each (series_id, period). After DoAction compact, `snapverify --deep`
  passes on the new snapshot, the server's answer is unchanged and the
  snapshot's own files (read here with pyarrow) hold the same rows.
- Crash test: a real `snapbuild serve` under do_put load from 4 writers is
  killed with SIGKILL at random moments and restarted: no acknowledged row
  is lost and no batch is applied in part. Replay times are read from the
  server's log.

Written from docs/FLIGHT.md and FORMAT.md, never from the Go code.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import statistics
import subprocess
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as fl
import pyarrow.parquet as pq

import snaplib
from flightlib import ServerProcess, action_json, do_get

DATASET = "LIVE"


def write_lake(lake: Path, rows: list[tuple[str, str, float, str]]) -> None:
    """One Parquet file of (series_id, period, value, units) rows."""
    lake.mkdir(parents=True, exist_ok=True)
    ids, periods, values, units = zip(*rows)
    t = pa.table({
        "series_id": pa.array(ids, pa.string()),
        "period": pa.array(periods, pa.string()),
        "value": pa.array(values, pa.float64()),
        "units": pa.array(units, pa.string()),
    })
    pq.write_table(t, lake / "part-0.parquet")


def month(p: str) -> dt.date:
    y, m = p.split("-")
    return dt.date(int(y), int(m), 1)


def put(client: fl.FlightClient, *batches: pa.RecordBatch) -> list[dict]:
    """One do_put stream of batches (one schema); returns the acks."""
    writer, reader = client.do_put(fl.FlightDescriptor.for_path(DATASET), batches[0].schema)
    acks = []
    with writer:
        for b in batches:
            writer.write_batch(b)
            buf = reader.read()
            assert buf is not None, "no PutResult for a batch"
            acks.append(json.loads(buf.to_pybytes()))
        writer.done_writing()
    return acks


def rows_of(t: pa.Table) -> list[tuple[str, dt.date, float | None]]:
    return list(zip(t["series_id"].to_pylist(), t["period"].to_pylist(), t["value"].to_pylist()))


def served_rows(client: fl.FlightClient) -> list[tuple[str, dt.date, float | None]]:
    t = do_get(client, dataset=DATASET, prefix="", columns=["value"])
    if pa.types.is_dictionary(t.schema.field("series_id").type):
        t = t.set_column(0, "series_id", t["series_id"].cast(pa.string()))
    return rows_of(t)


def oracle_rows(oracle: dict) -> list[tuple[str, dt.date, float | None]]:
    """The oracle's rows in answer order: series_id bytewise, then period."""
    return [(s, p, v) for (s, p), v in sorted(oracle.items(), key=lambda kv: (kv[0][0].encode(), kv[0][1]))]


def snapshot_rows(dataset_dir: Path) -> list[tuple[str, dt.date, float | None]]:
    """The current snapshot's rows, read from its files (FORMAT.md)."""
    snap = snaplib.open_current(dataset_dir)
    ids = snap.index()["series_id"].to_pylist()
    data = snap.data()
    return [(ids[c], p, v) for c, p, v in zip(data["series_code"].to_pylist(), data["period"].to_pylist(),
                                               data["value"].to_pylist())]


def snapverify(snapbuild: Path) -> Path:
    exe = snapbuild.parent / "snapverify"
    assert exe.is_file(), f"{exe} missing: `make build` builds it beside snapbuild"
    return exe


def test_put_get_oracle_compact_verify(snapbuild, tmp_path):
    base = [
        ("A", "2020-01", 1.0, "u"), ("A", "2020-02", 2.0, "u"), ("A", "2020-03", 3.0, "u"),
        ("B", "2020-01", 10.0, "v"), ("B", "2020-02", 11.0, "v"),
    ]
    write_lake(tmp_path / "lake", base)
    ds = tmp_path / "root" / DATASET
    snaplib.build(snapbuild, tmp_path / "lake", ds)
    oracle = {(s, month(p)): v for s, p, v, _ in base}

    def apply(batch: pa.RecordBatch) -> None:
        # later rows win, inside a batch too
        ids = batch.column("series_id")
        if pa.types.is_dictionary(ids.type):
            ids = ids.cast(pa.string())
        periods = batch.column("period")
        for s, p, v in zip(ids.to_pylist(), periods.to_pylist(), batch.column("value").to_pylist()):
            oracle[(s, p if isinstance(p, dt.date) else month(p))] = v

    srv = ServerProcess(snapbuild, tmp_path / "root")
    try:
        c = srv.client()
        batches = [
            # a revision, a new period, the same key twice (the later wins)
            pa.record_batch({"series_id": ["A", "A", "A"], "period": ["2020-02", "2020-04", "2020-02"],
                             "value": [20.0, 4.0, 21.0]}),
            pa.record_batch({"series_id": ["B", "A"], "period": ["2020-01", "2020-04"], "value": [100.0, 44.0]}),
        ]
        acks = put(c, *batches)
        assert [a["rows"] for a in acks] == [3, 2]
        assert acks[0]["wal_position"] < acks[1]["wal_position"]
        for b in batches:
            apply(b)
        # a new series with its attributes; a null value shadows too
        b = pa.record_batch({"series_id": ["C", "C", "A"], "period": ["2019-12", "2020-01", "2020-03"],
                             "value": pa.array([7.0, 8.0, None], pa.float64()), "units": ["w", "w", "u"]})
        acks += put(c, b)
        apply(b)
        # other input types: dictionary ids, date32 periods, float32 values
        b = pa.record_batch({
            "series_id": pa.array(["C", "B", "C"]).dictionary_encode(),
            "period": pa.array([dt.date(2020, 1, 1), dt.date(2020, 3, 1), dt.date(2020, 2, 1)], pa.date32()),
            "value": pa.array([80.0, 12.0, 9.0], pa.float32()),
        })
        acks += put(c, b)
        apply(b)

        want = oracle_rows(oracle)
        assert served_rows(c) == want
        info = c.get_flight_info(fl.FlightDescriptor.for_path(DATASET))
        assert info.total_records == len(want)

        res = action_json(c, "compact", DATASET.encode())
        (r,) = res["datasets"]
        assert r["result"] == "compacted" and r["snapshot_id"] == 2 and r["parent_id"] == 1, r
        assert r["wal_position"] == acks[-1]["wal_position"], (r, acks)
        p = subprocess.run([str(snapverify(snapbuild)), "--deep", str(ds)], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, f"snapverify --deep:\n{p.stdout}\n{p.stderr}"
        m = snaplib.open_current(ds).manifest
        assert m["snapshot_id"] == 2 and m["wal_position"] == acks[-1]["wal_position"]
        assert m["stats"]["rows"] == len(want)
        assert snapshot_rows(ds) == want
        assert served_rows(c) == want
        assert c.get_flight_info(fl.FlightDescriptor.for_path(DATASET)).total_records == len(want)

        # a write after the compaction, then a restart: the same rows
        b = pa.record_batch({"series_id": ["B"], "period": ["2020-02"], "value": [111.0]})
        put(c, b)
        apply(b)
        assert srv.terminate() == 0
        srv = ServerProcess(snapbuild, tmp_path / "root")
        assert served_rows(srv.client()) == oracle_rows(oracle)
    finally:
        srv.kill()


# ---------------------------------------------------------------------------
# crash test

WRITERS = 4
BATCH_ROWS = 8
TRIALS = 50
EPOCH = dt.date(1900, 1, 1)


class Writer(threading.Thread):
    """Sends batches over one do_put stream as fast as acks come back.

    Batch k of writer w has id w*10^6 + k; its rows are series W<w> at days
    k*BATCH_ROWS .. +BATCH_ROWS-1 after EPOCH, every value the batch id, so
    each row is attributable and no batch shadows another."""

    def __init__(self, w: int, uri: str, next_k: int):
        super().__init__(daemon=True)
        self.w, self.uri, self.k = w, uri, next_k
        self.sent: list[int] = []
        self.acked: list[int] = []
        self.error: Exception | None = None

    def batch(self, k: int) -> pa.RecordBatch:
        bid = self.w * 1_000_000 + k
        days = [EPOCH + dt.timedelta(days=k * BATCH_ROWS + i) for i in range(BATCH_ROWS)]
        return pa.record_batch({
            "series_id": pa.array([f"W{self.w}"] * BATCH_ROWS, pa.string()),
            "period": pa.array(days, pa.date32()),
            "value": pa.array([float(bid)] * BATCH_ROWS, pa.float64()),
            "units": pa.array([f"u{self.w}"] * BATCH_ROWS, pa.string()),
        })

    def run(self) -> None:
        client = writer = None
        try:
            client = fl.connect(self.uri)
            b = self.batch(self.k)
            writer, reader = client.do_put(fl.FlightDescriptor.for_path(DATASET), b.schema)
            while True:
                b = self.batch(self.k)
                self.sent.append(self.k)
                self.k += 1
                writer.write_batch(b)
                buf = reader.read()
                if buf is None:
                    raise RuntimeError("stream ended without a PutResult")
                md = json.loads(buf.to_pybytes())
                assert md["rows"] == BATCH_ROWS, md
                self.acked.append(self.sent[-1])
        except Exception as e:  # noqa: BLE001 - the server was killed: expected
            self.error = e
        finally:
            # close here, not in a destructor that prints the stream's error
            for closer in (writer, client):
                try:
                    if closer is not None:
                        closer.close()
                except Exception:  # noqa: BLE001
                    pass


class Compactor(threading.Thread):
    def __init__(self, uri: str, stop: threading.Event):
        super().__init__(daemon=True)
        self.uri, self.stop, self.done = uri, stop, 0

    def run(self) -> None:
        try:
            c = fl.connect(self.uri)
            while not self.stop.is_set():
                list(c.do_action(fl.Action("compact", DATASET.encode())))
                self.done += 1
                time.sleep(0.02)
        except Exception:  # noqa: BLE001 - killed mid-compaction: expected
            pass


def replay_logged(srv: ServerProcess) -> tuple[float, int]:
    """The replay time and records the server logged at start-up (0, 0:
    nothing replayed)."""
    for line in list(srv._stderr):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if rec.get("msg") == "wal replayed":
            return float(rec["ms"]), int(rec["records"])
    return 0.0, 0


def check_batches(client: fl.FlightClient, sent: dict[int, set[int]], acked: dict[int, set[int]],
                  served: set[int]) -> int:
    """Every batch whole or absent, every acknowledged one present, and every
    one served after an earlier restart still served (served is updated);
    returns the rows of acknowledged batches found."""
    t = do_get(client, dataset=DATASET, prefix="W", columns=["value"])
    ids = t["series_id"].cast(pa.string()).to_pylist() if pa.types.is_dictionary(t["series_id"].type) \
        else t["series_id"].to_pylist()
    rows: dict[int, list[dt.date]] = {}
    for s, p, v in zip(ids, t["period"].to_pylist(), t["value"].to_pylist()):
        bid = int(v)
        w, k = divmod(bid, 1_000_000)
        assert s == f"W{w}", f"row of batch {bid} in series {s}"
        rows.setdefault(bid, []).append(p)
    for bid, ps in rows.items():
        w, k = divmod(bid, 1_000_000)
        assert k in sent[w], f"batch {bid} was never sent"
        want = [EPOCH + dt.timedelta(days=k * BATCH_ROWS + i) for i in range(BATCH_ROWS)]
        assert sorted(ps) == want, f"batch {bid} partially applied: {len(ps)} of {BATCH_ROWS} rows"
    lost = [w * 1_000_000 + k for w in acked for k in acked[w] if w * 1_000_000 + k not in rows]
    assert not lost, f"{len(lost)} acknowledged batches lost, e.g. {lost[:5]}"
    gone = served - rows.keys()
    assert not gone, f"{len(gone)} batches served after an earlier restart are gone, e.g. {sorted(gone)[:5]}"
    served.update(rows.keys())
    return sum(len(a) for a in acked.values()) * BATCH_ROWS


def test_kill9_under_put_load(snapbuild, tmp_path):
    write_lake(tmp_path / "lake", [("A", "2020-01", 1.0, "u"), ("B", "2020-01", 2.0, "v")])
    ds = tmp_path / "root" / DATASET
    snaplib.build(snapbuild, tmp_path / "lake", ds)
    rng = random.Random(11)
    sent = {w: set() for w in range(WRITERS)}
    acked = {w: set() for w in range(WRITERS)}
    next_k = [0] * WRITERS
    served: set[int] = set()
    replays, records, kills_mid_compaction, compactions = [], [], 0, 0
    t0 = time.monotonic()
    flags = ("--log-format", "json", "--reload-interval", "0")
    srv = ServerProcess(snapbuild, tmp_path / "root", *flags, http=False)
    try:
        for trial in range(TRIALS):
            writers = [Writer(w, srv.uri, next_k[w]) for w in range(WRITERS)]
            stop = threading.Event()
            comp = Compactor(srv.uri, stop) if trial % 3 == 2 else None
            for x in writers + ([comp] if comp else []):
                x.start()
            time.sleep(rng.uniform(0.02, 0.25))
            srv.kill()  # SIGKILL
            stop.set()
            for x in writers + ([comp] if comp else []):
                x.join(timeout=30)
                assert not x.is_alive(), "a client hangs after the server was killed"
            if comp:
                compactions += comp.done
                kills_mid_compaction += 1
            for x in writers:
                sent[x.w].update(x.sent)
                acked[x.w].update(x.acked)
                next_k[x.w] = x.k
            srv = ServerProcess(snapbuild, tmp_path / "root", *flags, http=False)
            ms, n = replay_logged(srv)
            replays.append(ms)
            records.append(n)
            check_batches(srv.client(), sent, acked, served)
        acked_rows = check_batches(srv.client(), sent, acked, served)
        # the dataset after all that: compact, and the snapshot is sound
        res = action_json(srv.client(), "compact", DATASET.encode())
        assert res["datasets"][0]["result"] in ("compacted", "nothing"), res
        p = subprocess.run([str(snapverify(snapbuild)), "--deep", str(ds)], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, f"snapverify --deep:\n{p.stdout}\n{p.stderr}"
        assert check_batches(srv.client(), sent, acked, served) == acked_rows
    finally:
        srv.kill()
    elapsed = time.monotonic() - t0
    sent_batches = sum(len(s) for s in sent.values())
    acked_batches = sum(len(a) for a in acked.values())
    assert acked_batches > TRIALS, f"only {acked_batches} batches acknowledged in {TRIALS} trials"
    nonzero = [r for r in replays if r > 0]
    unacked_kept = len(served) - acked_batches
    print(f"\nkill -9 crash test: {TRIALS} trials in {elapsed:.1f} s ({kills_mid_compaction} with compactions "
          f"running, {compactions} compactions); {sent_batches} batches sent, {acked_batches} acknowledged "
          f"({acked_rows} rows), 0 lost, 0 partial, {unacked_kept} unacknowledged kept whole; replay ms median {statistics.median(replays):.2f} "
          f"max {max(replays):.2f} ({len(nonzero)} start-ups replayed records; records per replay median "
          f"{statistics.median(records):.0f} max {max(records)})")
