"""Faults under a real `snapbuild serve` (docs/FLIGHT.md "Faults" and "Flow control").

- A data file truncated under the running server (SIGBUS on a read of its
  mapping): the query that hits it fails, the process survives, the other
  dataset answers, the damaged one reports `failing` in status and
  /metrics and serves its previous vintage.
- Stalled pyarrow clients: do_get of a whole dataset, read one batch,
  stop. With a short --stream-timeout the server ends them and the snapshot
  has no reader left.
- A ticket with a lone surrogate escape is InvalidArgument.

Written from docs/FLIGHT.md, never from the Go code.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as fl
import pyarrow.parquet as pq
import pytest

import snaplib
from flightlib import ServerProcess, dataset_status, do_get, expect_error, wait_until


def write_lake(lake: Path, series: int, rows: int, marker: float) -> None:
    lake.mkdir(parents=True, exist_ok=True)
    ids, periods, values = [], [], []
    for s in range(series):
        for i in range(rows):
            ids.append(f"S{s:05d}")
            periods.append(f"{2000 + i // 12:04d}-{1 + i % 12:02d}")
            values.append(marker)
    pq.write_table(pa.table({"series_id": ids, "period": periods, "value": pa.array(values, pa.float64())}),
                   lake / "part-0.parquet")


@pytest.fixture
def two_datasets(snapbuild, tmp_path):
    """ROOT/A with two vintages (markers 1 and 2, CURRENT 2), ROOT/B with one."""
    root = tmp_path / "root"
    for m in (1, 2):
        write_lake(tmp_path / f"lakeA{m}", 400, 240, float(m))
        snaplib.build(snapbuild, tmp_path / f"lakeA{m}", root / "A", "--batch-rows", "5000")
    write_lake(tmp_path / "lakeB", 10, 12, 7.0)
    snaplib.build(snapbuild, tmp_path / "lakeB", root / "B")
    return root


def test_truncated_data_file(snapbuild, two_datasets):
    root = two_datasets
    srv = ServerProcess(snapbuild, root, "--reload-interval", "0")
    try:
        c = srv.client()
        assert do_get(c, dataset="A", prefix="").num_rows == 400 * 240
        snap = snaplib.open_current(root / "A")
        data = next(f for f in snap.manifest["files"] if f["role"] == "data")
        path = root / "A" / data["path"]
        assert (os.stat(path).st_mode & 0o777) == 0o444, "published files are read-only"
        os.chmod(path, 0o644)
        os.truncate(path, data["size"] // 3)
        with pytest.raises(fl.FlightError):
            do_get(c, dataset="A", prefix="")
        assert srv.proc.poll() is None, "the server died\n" + srv.stderr
        assert do_get(c, dataset="B", prefix="").num_rows == 10 * 12
        st = wait_until(lambda: (d := dataset_status(c, "A")).get("fallback_id") and d, what="fallback")
        assert st["failing"] and st["damaged_id"] == 2 and st["snapshot_id"] == 1, st
        assert st["failing_reason"], st
        t = do_get(c, dataset="A", prefix="")
        assert set(t.column("value").to_pylist()) == {1.0}
        code, metrics = srv.get("/metrics")
        assert 'servingsnap_dataset_failing{dataset="A"} 1' in metrics
        assert 'servingsnap_dataset_failing{dataset="B"} 0' in metrics
    finally:
        assert srv.terminate() == 0


def test_stalled_clients_are_ended(snapbuild, tmp_path):
    """An answer much larger than a client's gRPC receive window (720 000 rows)."""
    root = tmp_path / "root"
    write_lake(tmp_path / "lakeBIG", 3000, 240, 1.0)
    snaplib.build(snapbuild, tmp_path / "lakeBIG", root / "BIG")
    write_lake(tmp_path / "lakeB", 10, 12, 7.0)
    snaplib.build(snapbuild, tmp_path / "lakeB", root / "B")
    srv = ServerProcess(snapbuild, root, "--stream-timeout", "1s")
    try:
        readers, refused = [], 0
        for _ in range(8):
            c = fl.connect(srv.uri)
            try:
                r = c.do_get(fl.Ticket(json.dumps({"dataset": "BIG", "prefix": ""}).encode()))
                r.read_chunk()  # one batch, then nothing more
            except (pa.ArrowInvalid, fl.FlightError) as e:
                # One client host holds at most a quarter of the large answers'
                # in-flight budget (about four such streams): the later ones
                # wait for its own streams, then are refused after the timeout.
                assert "server busy" in str(e) and "client's share" in str(e), e
                refused += 1
                c.close()
                continue
            readers.append((c, r))
        assert readers and len(readers) + refused == 8, (len(readers), refused)
        wait_until(lambda: dataset_status(srv.client(), "BIG")["readers"] == 0, timeout=60,
                   what="stalled streams ended")
        code, metrics = srv.get("/metrics")
        stalled = [l for l in metrics.splitlines() if l.startswith("servingsnap_streams_stalled_total")]
        assert stalled and float(stalled[0].split()[-1]) >= 1, stalled
        assert do_get(srv.client(), dataset="B", prefix="").num_rows == 10 * 12
        for c, r in readers:
            # A stream the server finished sending (gRPC's receive window can
            # grow to hold a whole answer) stays open on its connection until
            # the client cancels or reads it to the end; an uncancelled one
            # holds the server's graceful shutdown for its whole grace.
            r.cancel()
            c.close()
    finally:
        assert srv.terminate() == 0


def test_lone_surrogate_ticket(snapbuild, two_datasets):
    srv = ServerProcess(snapbuild, two_datasets)
    try:
        c = srv.client()
        raw = b'{"dataset":"B","series":["S\\ud800"]}'
        expect_error(lambda: c.do_get(fl.Ticket(raw)).read_all(), "INVALID_ARGUMENT", "lone surrogate")
    finally:
        assert srv.terminate() == 0
