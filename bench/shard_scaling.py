"""Shard scaling: build time and bytes read for N = 1, 2, 4 shards, each way.

    .venv/bin/python bench/shard_scaling.py [--series 20000] [--runs 3] [--out bench/results]
        [--bin bin/snapbuild] [--tag shard-scaling]

One lake, `snapbuild gen --series N --seed 1` (about 150 rows a series), is rewritten from the
same rows three ways, each partitioned by the series' bucket of 16 as pyiceberg's
BucketTransform computes it (Iceberg's bucket transform, murmur3):

  iceberg  a pyiceberg table partitioned by bucket(16, series_id) (SQLite catalog);
  delta    a deltalake table partitioned by a column sid_bucket holding that bucket;
  parquet  a pyarrow hive-style folder, sid_bucket=K/ directories.

and built four ways, for N in 1, 2, 4, every job `--shard I/N` one after another on this machine:

  xxhash64            the delta table with the default shard function: each job reads every file;
  iceberg-bucket      the iceberg table with --shard-function iceberg-bucket: each job reads the
                      files of its buckets (the table's partition spec says which);
  partition (delta)   the delta table with --shard-function iceberg-bucket
                      --shard-by-partition sid_bucket:16;
  partition (parquet) the same on the hive-style folder.

Per job: wall time from spawn to exit, and from the build's --json summary its peak RSS (VmHWM),
the files and bytes read and pruned and the rows kept. Per (way, N) and repetition: the
jobs' summed wall time (the cost on one machine), the slowest job (the elapsed time when the N
jobs run on N machines), the bytes all N jobs read against the table's size, and the rows the
shards hold together (checked equal to the lake's). Each repetition builds into a fresh root;
ways are rotated per repetition. Median (min–max) over the repetitions.

Writes OUT/<date>-<tag>.md and .json (meta.profile is the tag, so bench/report.py leaves them
alone). Lakes are cached under bench/work/lakes/shard-scaling-<series>.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
BUCKETS = 16
NS = (1, 2, 4)


def log(msg):
    print(f"[shard-scaling {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_job(argv, scratch):
    """Runs one build; wall seconds from spawn to exit and its --json summary. Peak memory
    is the summary's peak_rss (the build's own VmHWM): wait4's ru_maxrss keeps the high-water
    mark of the process before its exec, a copy of this script's memory."""
    so, se = scratch / "job.out", scratch / "job.err"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    t0 = time.monotonic()
    pid = os.posix_spawn(str(argv[0]), [str(a) for a in argv], os.environ,
                         file_actions=[(os.POSIX_SPAWN_OPEN, 1, str(so), flags, 0o644),
                                       (os.POSIX_SPAWN_OPEN, 2, str(se), flags, 0o644)])
    _, status, _ = os.wait4(pid, 0)
    wall = time.monotonic() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(map(str, argv))}: exit {code}\n{se.read_text()}")
    return wall, json.loads(so.read_text())


def make_lakes(snapbuild, series, work):
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as pads
    from deltalake import write_deltalake
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.transforms import BucketTransform
    from pyiceberg.types import StringType

    done = work / "done"
    # The Iceberg metadata names its files by absolute path: the table stays where pyiceberg wrote it.
    lakes = {"gen": work / "gen", "iceberg": work / "warehouse" / "db" / "prices", "delta": work / "delta", "parquet": work / "parquet"}
    if done.exists():
        return lakes
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    log(f"snapbuild gen --series {series} --seed 1")
    subprocess.run([str(snapbuild), "gen", "--out", str(lakes["gen"]), "--series", str(series), "--seed", "1"], check=True,
                   stdout=subprocess.DEVNULL)
    rows = pads.dataset(lakes["gen"], format="parquet", partitioning="hive").to_table()
    rows = rows.drop_columns([c for c in rows.column_names if c == "year"])
    # Plain (not dictionary, not large) types, so every writer takes them as they are.
    fields = []
    for f in rows.schema:
        t = f.type
        if pa.types.is_dictionary(t):
            t = t.value_type
        if pa.types.is_large_string(t):
            t = pa.string()
        fields.append(pa.field(f.name, t))
    rows = rows.cast(pa.schema(fields))
    log(f"{rows.num_rows} rows; bucketing {BUCKETS} ways with pyiceberg's BucketTransform")
    bucket = BucketTransform(BUCKETS).transform(StringType())
    ids = pc.unique(rows.column("series_id"))
    per_id = pa.array([bucket(s) for s in ids.to_pylist()], pa.int32())
    with_bucket = rows.append_column("sid_bucket", per_id.take(pc.index_in(rows.column("series_id"), ids)))

    log("iceberg table (pyiceberg, bucket(16, series_id))")
    wh = work / "warehouse"
    wh.mkdir()
    cat = SqlCatalog("lake", uri=f"sqlite:///{work}/catalog.db", warehouse=f"file://{wh}")
    cat.create_namespace("db")
    t = cat.create_table("db.prices", schema=rows.schema)
    with t.update_spec() as u:
        u.add_field("series_id", BucketTransform(BUCKETS), "sid_bucket")
    t.append(rows)
    log("delta table (deltalake, partitioned by sid_bucket)")
    write_deltalake(str(lakes["delta"]), with_bucket, partition_by=["sid_bucket"])
    log("hive-style Parquet folder (pyarrow, sid_bucket=K/)")
    pads.write_dataset(with_bucket, lakes["parquet"], format="parquet", partitioning=["sid_bucket"], partitioning_flavor="hive")
    (work / "rows").write_text(str(rows.num_rows))
    done.write_text("ok\n")
    return lakes


WAYS = [
    ("xxhash64", "delta", []),
    ("iceberg-bucket", "iceberg", ["--shard-function", "iceberg-bucket"]),
    ("partition (delta)", "delta", ["--shard-function", "iceberg-bucket", "--shard-by-partition", f"sid_bucket:{BUCKETS}"]),
    ("partition (parquet)", "parquet", ["--shard-function", "iceberg-bucket", "--shard-by-partition", f"sid_bucket:{BUCKETS}"]),
]


def data_bytes(lake):
    return sum(p.stat().st_size for p in lake.rglob("*.parquet") if "_delta_log" not in p.parts and "metadata" not in p.parts)


def measure(snapbuild, lakes, lake_rows, runs, scratch):
    res = {}
    for rep in range(runs):
        order = WAYS[rep % len(WAYS):] + WAYS[:rep % len(WAYS)]
        for name, kind, extra in order:
            for n in NS:
                root = scratch / f"r{rep}"
                if root.exists():
                    shutil.rmtree(root)
                jobs = []
                for i in range(n):
                    wall, rep_json = run_job([snapbuild, "build", "--input", lakes[kind], "--out", root / "PET", "--json",
                                                   "--progress", "none", "--shard", f"{i}/{n}", *extra], scratch)
                    s = rep_json["shards"][0]
                    jobs.append({"wall": wall, "peak_rss": s["peak_rss"], "seconds": s["seconds"], "read": s["phases"]["read"],
                                 "inputs": s["inputs"], "input_bytes": s["input_bytes"], "inputs_pruned": s["inputs_pruned"],
                                 "input_bytes_pruned": s["input_bytes_pruned"], "rows": s["rows"]})
                shutil.rmtree(root)
                rows = sum(j["rows"] for j in jobs)
                if rows != lake_rows:
                    raise SystemExit(f"{name} N={n}: the shards hold {rows} rows, the lake {lake_rows}")
                res.setdefault(f"{name}|{n}", []).append(jobs)
                log(f"{name} N={n} rep {rep}: sum wall {sum(j['wall'] for j in jobs):.2f}s, "
                    f"max {max(j['wall'] for j in jobs):.2f}s, read {sum(j['input_bytes'] for j in jobs) / 2**20:.1f} MiB")
    return res


def med(xs, fmt="{:.3g}"):
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}–{fmt.format(max(xs))})"


def markdown(R):
    m = R["meta"]
    out = [f"# Shard scaling, {m['date']}", "",
           f"Commit {m['commit']}, {m['machine']}, load average {m['load_before']} → {m['load_after']}. "
           f"Lake: `snapbuild gen --series {m['series']} --seed 1`, {m['rows']:,} rows, rewritten as an Iceberg table "
           f"partitioned by `bucket({BUCKETS}, series_id)` (pyiceberg {m['pyiceberg']}), a Delta table (deltalake "
           f"{m['deltalake']}) and a hive-style Parquet folder, both partitioned by `sid_bucket` = pyiceberg's "
           f"`BucketTransform({BUCKETS})` of the id. Data files: " +
           ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in m["lake_bytes"].items()) + ".", "",
           f"`.venv/bin/python bench/shard_scaling.py --series {m['series']} --runs {m['runs']}`. The N jobs of a "
           "row run one after another on this machine; *sum* is their summed wall time (the cost on one machine), "
           "*slowest* the longest job (the elapsed time with one machine per shard), *read phases* the jobs' summed `phases.read` (reading and decoding the input), *read* the bytes all N jobs read "
           "(the builds' `input_bytes`) and that as a multiple of the table's data files, *peak RSS* the largest job's "
           "own VmHWM (the summary's `peak_rss`). Median (min–max) over "
           f"{m['runs']} repetitions, ways rotated per repetition; every repetition's shards together hold the lake's rows.", "",
           "| way | N | files read per job | sum of job wall times (s) | slowest job (s) | sum of read phases (s) | read by all jobs (MiB) | × the table | peak RSS, largest job (MiB) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for name, kind, _ in WAYS:
        for n in NS:
            reps = R["results"][f"{name}|{n}"]
            total = m["lake_bytes"][kind]
            sums = [sum(j["wall"] for j in r) for r in reps]
            slow = [max(j["wall"] for j in r) for r in reps]
            read = [sum(j["input_bytes"] for j in r) for r in reps]
            phase = [sum(j["read"] for j in r) for r in reps]
            rss = [max(j["peak_rss"] for j in r) / 2**20 for r in reps]
            files = sorted({j["inputs"] for r in reps for j in r})
            out.append(f"| {name} | {n} | {'/'.join(map(str, files))} | {med(sums)} | {med(slow)} | {med(phase)} | "
                       f"{statistics.median(read) / 2**20:.1f} | {statistics.median(read) / total:.2f} | {med(rss, '{:,.0f}')} |")
    out += ["", "The xxhash64 rows are the unpruned baseline: every job reads the whole table, so N jobs read it N "
            "times. The other three read it once between them; their per-job time falls with N as far as the "
            "fixed costs (process start, footer scan, publish) allow."]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--series", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "bench" / "results"))
    ap.add_argument("--bin", default=str(REPO / "bin" / "snapbuild"))
    ap.add_argument("--tag", default="shard-scaling")
    a = ap.parse_args()
    import deltalake
    import pyiceberg

    snapbuild = pathlib.Path(a.bin).resolve()
    work = REPO / "bench" / "work" / "lakes" / f"shard-scaling-{a.series}"
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    lakes = make_lakes(snapbuild, a.series, work)
    lake_rows = int((work / "rows").read_text())
    scratch = REPO / "bench" / "work" / "shard-scaling-out"
    scratch.mkdir(parents=True, exist_ok=True)
    res = measure(snapbuild, lakes, lake_rows, a.runs, scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    R = {"meta": {"profile": a.tag, "date": datetime.date.today().isoformat(), "commit": commit, "series": a.series,
                  "rows": lake_rows, "runs": a.runs, "machine": f"{os.cpu_count()} cores, {platform.machine()}",
                  "load_before": load_before, "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg()),
                  "pyiceberg": pyiceberg.__version__, "deltalake": deltalake.__version__,
                  "lake_bytes": {k: data_bytes(lakes[k]) for k in ("iceberg", "delta", "parquet")}},
         "results": res}
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{R['meta']['date']}-{a.tag}"
    (out / f"{stem}.json").write_text(json.dumps(R, indent=1) + "\n")
    (out / f"{stem}.md").write_text(markdown(R))
    log(f"wrote {out / stem}.md and .json")


if __name__ == "__main__":
    main()
