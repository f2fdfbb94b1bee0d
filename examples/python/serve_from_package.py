"""A pyarrow.flight server that answers servingsnap's JSON tickets from the
servingsnap Python package: the load path of docs/MIGRATION.md. Start-up
maps the snapshot and reads nothing else; a new vintage (CURRENT moved) is
opened beside the old one and swapped in, so no request waits.

    python serve_from_package.py ROOT [--addr grpc://127.0.0.1:8815] [--poll 5]

Tickets: {"dataset", one of "series" | "prefix" | "category", optional
"start", "end", "latest", "attributes"} (docs/FLIGHT.md); answers are in
(series_id, period) order with series_id dictionary-encoded.
"""
import argparse
import json
import pathlib
import threading
import time

import pyarrow as pa
import pyarrow.flight as fl

import servingsnap


class Datasets:
    """One open snapshot per dataset directory under root, swapped when its
    CURRENT moves (the old one closes when its last answer is gone)."""

    def __init__(self, root: pathlib.Path):
        self.root, self.open, self.lock = root, {}, threading.Lock()
        self.refresh()

    def refresh(self):
        for d in sorted(p for p in self.root.iterdir() if (p / "CURRENT").is_file()):
            cur = self.open.get(d.name)
            if cur is None or (d / "CURRENT").read_text().strip() != f"manifests/{cur.id:06d}.json":
                snap = servingsnap.open(d)
                with self.lock:
                    old, self.open[d.name] = self.open.get(d.name), snap
                if old is not None:
                    old.close()

    def get(self, name: str) -> servingsnap.Snapshot:
        with self.lock:
            snap = self.open.get(name)
        if snap is None:
            raise fl.FlightServerError(f"no dataset {name!r}")
        return snap


def answer(snap: servingsnap.Snapshot, q: dict) -> pa.Table:
    sel = {k: q[k] for k in ("prefix", "category") if k in q}
    ids = q["series"] if "series" in q else snap.ids(**sel).to_pylist()
    ids = sorted(set(ids), key=str.encode)
    attrs = q.get("attributes", False)
    if q.get("latest") and "start" not in q and "end" not in q:
        # From the index alone: no data row is read.
        t = snap.latest(ids=ids, attributes=attrs)
        t = t.filter(t["value"].is_valid())
        return t.set_column(0, "series_id", t["series_id"].dictionary_encode())
    parts = []
    for sid in ids:
        t = snap.series(sid, q.get("start"), q.get("end"), attributes=attrs)
        if q.get("latest"):
            valid = t.filter(t["value"].is_valid())
            t = valid.slice(valid.num_rows - 1) if valid.num_rows else valid
        parts.append(t)
    if not parts:
        return snap.schema(attrs).empty_table()
    # One dictionary for the whole answer, as the Go server sends it.
    return pa.concat_tables(parts).unify_dictionaries().combine_chunks()


class Server(fl.FlightServerBase):
    def __init__(self, location: str, root: pathlib.Path):
        super().__init__(location)
        self.datasets = Datasets(root)

    def do_get(self, context, ticket):
        try:
            q = json.loads(ticket.ticket)
        except ValueError as e:
            raise fl.FlightServerError(f"ticket is not JSON: {e}") from None
        snap = self.datasets.get(q.get("dataset", ""))
        try:
            t = answer(snap, q)
        except servingsnap.SeriesNotFound as e:
            raise fl.FlightServerError(str(e)) from None
        md = {b"servingsnap.snapshot_id": str(snap.id).encode(), b"servingsnap.dataset": snap.dataset.encode()}
        return fl.RecordBatchStream(t.replace_schema_metadata(md))

    def list_flights(self, context, criteria):
        for name in sorted(self.datasets.open):
            snap = self.datasets.get(name)
            yield fl.FlightInfo(pa.schema([]), fl.FlightDescriptor.for_path(name), [], snap.manifest["stats"]["rows"], -1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", type=pathlib.Path)
    ap.add_argument("--addr", default="grpc://127.0.0.1:8815")
    ap.add_argument("--poll", type=float, default=5.0, help="seconds between looks at every CURRENT")
    a = ap.parse_args()
    server = Server(a.addr, a.root)

    def poll():
        while True:
            time.sleep(a.poll)
            server.datasets.refresh()

    threading.Thread(target=poll, daemon=True).start()
    print(json.dumps({"event": "listening", "flight": f"grpc://127.0.0.1:{server.port}"}), flush=True)
    server.serve()


if __name__ == "__main__":
    main()
