"""The side-by-side check of docs/MIGRATION.md, run on its example server:
examples/python/serve_from_package.py (pyarrow.flight over the servingsnap
Python package) and `snapbuild serve` on the same root answer the same
tickets with the same rows, before and after a new vintage is published."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import queue

import pyarrow as pa
import pyarrow.flight as fl
import pytest

import flightlib
import snaplib
from snaplib import REPO

EXAMPLE = REPO / "examples" / "python" / "serve_from_package.py"


class Example:
    def __init__(self, root):
        self.proc = subprocess.Popen([sys.executable, str(EXAMPLE), str(root), "--addr", "grpc://127.0.0.1:0", "--poll", "0.2"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: lines.put(self.proc.stdout.readline()), daemon=True).start()
        try:
            line = lines.get(timeout=60)
        except queue.Empty:
            self.proc.kill()
            raise AssertionError("the example server did not start")
        assert line, self.proc.stderr.read()
        self.uri = json.loads(line)["flight"]

    def close(self):
        self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def servers(snapbuild, tmp_path_factory):
    d = tmp_path_factory.mktemp("migration")
    lake = d / "lake"
    snaplib.run_ok(snapbuild, "gen", "--out", lake, "--series", 200, "--seed", 11, "--from-year", 2018)
    root = d / "root"
    snaplib.build(snapbuild, lake, root / "PET", "--hot-rows", 20)
    go = flightlib.ServerProcess(snapbuild, root, "--reload-interval", "200ms")
    py = Example(root)
    yield snapbuild, lake, root, go, py
    py.close()
    go.terminate()


def tickets(ids, cat):
    return [
        {"series": ids[:3]},
        {"series": [ids[5]], "start": "2020", "end": "2021-06"},
        {"series": ids[10:14], "attributes": True},
        {"prefix": ids[20][:6]},
        {"prefix": ids[30][:8], "start": "2023-01"},
        {"category": cat},
        {"series": ids[:50], "latest": True},
        {"series": ids[40:45], "latest": True, "end": "2019"},
        {"prefix": "no such prefix"},
    ]


def same_answers(go, py, ids, cat):
    for q in tickets(ids, cat):
        q = {"dataset": "PET", **q}
        a = flightlib.decoded(flightlib.do_get(fl.connect(go.uri), **q))
        b = flightlib.decoded(flightlib.do_get(fl.connect(py.uri), **q))
        assert a.column_names == b.column_names, (q, a.schema, b.schema)
        assert a.to_pylist() == b.to_pylist(), q


def test_side_by_side(servers):
    snapbuild, lake, root, go, py = servers
    idx = snaplib.open_current(root / "PET").index()
    ids = idx["series_id"].to_pylist()
    cat = idx["category"][0].as_py().split("/")[0]
    same_answers(go, py, ids, cat)
    # A new vintage (all hot this time): both servers move to it.
    snaplib.build(snapbuild, lake, root / "PET")

    def on(uri):
        t = flightlib.do_get(fl.connect(uri), dataset="PET", series=[ids[0]])
        return flightlib.schema_snapshot_id(t.schema) == 2

    flightlib.wait_until(lambda: on(go.uri) and on(py.uri), what="both servers on snapshot 2")
    ids = snaplib.open_current(root / "PET").index()["series_id"].to_pylist()
    same_answers(go, py, ids, cat)
