"""Fixtures of the interop suite.

SNAPBUILD (environment) names the snapbuild binary under test; without it the
suite builds one with `go build -o bin/ ./cmd/snapbuild` in the repository.

The expensive lakes and snapshots are session-scoped and built once; tests
must not modify them.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lakes  # noqa: E402
import snaplib  # noqa: E402
from snaplib import REPO  # noqa: E402

# The data file is built with a small batch target so that the generated and
# nasty snapshots have many batches (FORMAT.md §3 batching rules get exercised).
SMALL_BATCH_ROWS = 1000


@pytest.fixture(scope="session")
def snapbuild() -> Path:
    env = os.environ.get("SNAPBUILD")
    if env:
        exe = Path(env)
        assert exe.is_file() and os.access(exe, os.X_OK), f"SNAPBUILD={env} is not an executable file"
        return exe
    p = subprocess.run(
        ["go", "build", "-o", "bin/", "./cmd/snapbuild"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    if p.returncode != 0:
        pytest.fail(f"go build ./cmd/snapbuild failed:\n{p.stderr}", pytrace=False)
    return REPO / "bin" / "snapbuild"


@dataclasses.dataclass
class Built:
    """A lake and the snapshot built from it."""
    name: str
    lake: Path
    dataset_dir: Path
    report: dict  # the --json output of the build
    batch_rows: int
    facts: dict = dataclasses.field(default_factory=dict)

    @property
    def snap(self) -> snaplib.Snapshot:
        return snaplib.open_current(self.dataset_dir)


@pytest.fixture(scope="session")
def gen_built(snapbuild, tmp_path_factory) -> Built:
    d = tmp_path_factory.mktemp("gen")
    lake = d / "lake"
    snaplib.run_ok(snapbuild, "gen", "--out", lake, "--series", 300, "--seed", 7)
    ds = d / "root" / "gen300"
    report = snaplib.build(snapbuild, lake, ds, "--batch-rows", SMALL_BATCH_ROWS)
    return Built("gen", lake, ds, report, SMALL_BATCH_ROWS)


@pytest.fixture(scope="session")
def eia_built(snapbuild, tmp_path_factory) -> Built:
    d = tmp_path_factory.mktemp("eia")
    lake = d / "lake"
    snaplib.run_ok(snapbuild, "gen", "--eia", REPO / "data" / "eia-prices", "--out", lake)
    ds = d / "root" / "eia"
    report = snaplib.build(snapbuild, lake, ds)
    return Built("eia", lake, ds, report, snaplib.DEFAULT_BATCH_ROWS)


@pytest.fixture(scope="session")
def nasty_built(snapbuild, tmp_path_factory) -> Built:
    d = tmp_path_factory.mktemp("nasty")
    lake = d / "lake"
    facts = lakes.write_nasty_lake(lake)
    ds = d / "root" / "nasty"
    # One file per period form: integer files among text and date ones.
    report = snaplib.build(snapbuild, lake, ds, "--batch-rows", SMALL_BATCH_ROWS, "--mixed-period-types")
    return Built("nasty", lake, ds, report, SMALL_BATCH_ROWS, facts)


BUILT_FIXTURES = ["gen_built", "eia_built", "nasty_built"]


@pytest.fixture(params=BUILT_FIXTURES, ids=lambda s: s.removesuffix("_built"))
def built(request) -> Built:
    """Each of the three session snapshots in turn."""
    return request.getfixturevalue(request.param)
