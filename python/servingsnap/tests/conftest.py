"""Fixtures: the committed snapshots of every format version (testdata/)
and fresh builds by the Go builder (SNAPBUILD, or `go build`), each with
`snapbuild export`'s Parquet copy of its rows as the reference."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pkglib import run  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
FIXTURES = ["v1/FIXTURE", "v2/FIXTURE", "v3/FIXTURE", "v3/VORTEX", "v4/FIXTURE", "v4/TIERED", "v4/VORTEX",
            "v5/FIXTURE", "v5/TIERED", "v5/VORTEX"]


@pytest.fixture(scope="session")
def snapbuild() -> Path:
    env = os.environ.get("SNAPBUILD")
    if env:
        return Path(env)
    subprocess.run(["go", "build", "-o", "bin/", "./cmd/snapbuild"], cwd=REPO, check=True, timeout=600)
    return REPO / "bin" / "snapbuild"


def reference(exe: Path, ds: Path, out: Path, snapshot: int | None = None) -> pa.Table:
    """Every row of the snapshot as the Go exporter writes it."""
    args = ["export", ds, out, "--overwrite"] + (["--snapshot", snapshot] if snapshot else [])
    run(exe, *args)
    return pq.read_table(out)


@pytest.fixture(scope="session")
def fixtures(snapbuild, tmp_path_factory):
    """The committed fixtures, copied (a reader creates lease files), with
    their references."""
    root = tmp_path_factory.mktemp("fixtures")
    out = {}
    for name in FIXTURES:
        ds = root / name.replace("/", "-") / name.split("/")[1]
        shutil.copytree(REPO / "testdata" / name, ds)
        out[name] = (ds, reference(snapbuild, ds, root / (name.replace("/", "-") + ".parquet")))
    return out


@pytest.fixture(scope="session")
def built(snapbuild, tmp_path_factory):
    """Fresh builds of a generated lake: all hot, tiered (--hot-rows 12) and
    all cold (--format vortex), with their references."""
    root = tmp_path_factory.mktemp("built")
    lake = root / "lake"
    run(snapbuild, "gen", "--out", lake, "--series", 300, "--from-year", 2015, "--seed", 3)
    out = {}
    for name, extra in [("HOT", []), ("TIERED", ["--hot-rows", 12]), ("COLD", ["--format", "vortex"])]:
        ds = root / "snaps" / name
        run(snapbuild, "build", "--input", lake, "--out", ds, "--batch-rows", 5000, *extra)
        out[name] = (ds, reference(snapbuild, ds, root / f"{name}.parquet"))
    return out
