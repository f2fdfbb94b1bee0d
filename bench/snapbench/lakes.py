"""Lakes and serving roots: generate (or reuse) lakes under the work directory, build snapshots."""
import pathlib
import shutil
import subprocess
import time

import pyarrow as pa
import pyarrow.compute as pc

from . import procs


def parquet_files(lake):
    return sorted(str(p) for p in pathlib.Path(lake).rglob("*.parquet"))


def parquet_bytes(lake):
    return sum(pathlib.Path(p).stat().st_size for p in parquet_files(lake))


def cached_lake(snapbuild, work, series, seed=1, log=print):
    """WORK/lakes/s{series}-seed{seed}, generated with `snapbuild gen` unless already complete.

    The lake is written under a temporary name and renamed, then marked complete, so an
    interrupted generation is never reused."""
    lake = pathlib.Path(work) / "lakes" / f"s{series}-seed{seed}"
    if (lake / ".complete").exists():
        return lake
    tmp = lake.with_name(lake.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(lake, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    log(f"  generating lake {lake} ({series:,} series, seed {seed})…")
    t0 = time.perf_counter()
    subprocess.run([str(snapbuild), "gen", "--out", str(tmp), "--series", str(series), "--seed", str(seed)],
                   check=True, stdout=subprocess.DEVNULL)
    tmp.rename(lake)
    (lake / ".complete").write_text(f"snapbuild gen --series {series} --seed {seed}\n")
    log(f"  generated in {time.perf_counter() - t0:.1f}s")
    return lake


def build_root(snapbuild, lake, root, dataset):
    """Build a fresh serving root ROOT/DATASET from lake; returns (seconds, peak RSS, summary)."""
    import json
    root = pathlib.Path(root)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    secs, rss, out = procs.run_measured([str(snapbuild), "build", "--input", str(lake), "--out", str(root / dataset), "--json"])
    return secs, rss, json.loads(out)


def snapshot_files(dataset_dir):
    """The files a server opens: CURRENT, the manifest it names and the snapshot's files."""
    import json
    d = pathlib.Path(dataset_dir)
    cur = (d / "CURRENT").read_text().strip()
    man = json.loads((d / cur).read_text())
    files = {f["role"]: d / f["path"] for f in man["files"]}
    return {"current": d / "CURRENT", "manifest": d / cur, **files}, man


def index_summary(index_path):
    """Series ids (sorted) and the calendar years the data covers, from index.arrow."""
    idx = pa.ipc.open_file(pa.memory_map(str(index_path))).read_all()
    ids = idx.column("series_id").to_pylist()
    first = pc.min(idx.column("first_period")).as_py()
    last = pc.max(idx.column("last_period")).as_py()
    return ids, (first.year, last.year), idx
