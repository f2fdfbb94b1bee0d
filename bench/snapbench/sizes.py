"""Sizes: the index sidecar against the same index written as JSON (the old design)."""
import datetime
import json
import math
import pathlib
import statistics
import time

import pyarrow as pa


def _jsonable(v):
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def write_json_index(index_path, out_path):
    """Write every row of index.arrow as {series_id: {column: value, ...}, ...} (dates as
    YYYY-MM-DD, dictionaries decoded): the same information as a JSON sidecar. Returns bytes."""
    idx = pa.ipc.open_file(pa.memory_map(str(index_path))).read_all()
    cols = {name: idx.column(name).to_pylist() for name in idx.column_names}
    ids = cols.pop("series_id")
    obj = {sid: {k: _jsonable(v[i]) for k, v in cols.items()} for i, sid in enumerate(ids)}
    with open(out_path, "w") as f:
        json.dump(obj, f)
    return pathlib.Path(out_path).stat().st_size


def load_times(index_path, json_path, runs=3):
    """Median seconds to load each form in Python: open index.arrow (mapped) and read it,
    against json.load of the JSON sidecar (which also builds the id -> entry map)."""
    def t_arrow():
        t0 = time.perf_counter()
        pa.ipc.open_file(pa.memory_map(str(index_path))).read_all()
        return time.perf_counter() - t0

    def t_json():
        t0 = time.perf_counter()
        with open(json_path) as f:
            json.load(f)
        return time.perf_counter() - t0

    return (statistics.median(t_arrow() for _ in range(runs)),
            statistics.median(t_json() for _ in range(runs)))
