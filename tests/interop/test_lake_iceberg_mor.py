"""Iceberg tables with merge-on-read deletes, written by iceberg-go (the
fixture command internal/testiceberg/icebergmor): position delete files and
equality delete files in a format-version 2 table, deletion vectors in a
format-version 3 table. pyiceberg 0.12 writes only copy-on-write deletes, so
these are the tables where a reader must apply delete files itself.

Every snapshot snapbuild builds holds what pyiceberg reads at it; pyiceberg
does not read equality deletes, so a snapshot carrying them is checked
against the rows the fixture command computed from what it wrote and
deleted (plain filtering, no reader involved).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from pyiceberg.table import StaticTable

import lakelib
import snaplib

REPO = snaplib.REPO
COLUMNS = ["series_id", "period", "value", "region"]


@pytest.fixture(scope="module")
def mor_tables(tmp_path_factory):
    wh = tmp_path_factory.mktemp("mor")
    go = os.environ.get("GO", "go")
    p = subprocess.run([go, "run", "./internal/testiceberg/icebergmor", str(wh)], cwd=REPO,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return {t["name"]: t for t in json.loads(p.stdout)}


def _pyiceberg_rows(t: StaticTable, snapshot_id: int):
    return lakelib.rows_of_table(t.scan(snapshot_id=snapshot_id).to_arrow(), COLUMNS)


@pytest.mark.parametrize("name", ["mor_v2", "mor_v3"])
def test_every_snapshot_matches(snapbuild, mor_tables, tmp_path, name):
    fx = mor_tables[name]
    t = StaticTable.from_metadata(fx["metadata_location"])
    snaps = list(t.snapshots())
    assert len(snaps) >= 4
    current = t.current_snapshot().snapshot_id
    summary = t.current_snapshot().summary
    assert int(summary.get("total-delete-files") or 0) > 0, summary
    checked_equality = False
    for i, s in enumerate(snaps):
        out = tmp_path / f"s{i}" / "P"
        rep = snaplib.build(snapbuild, fx["location"], out, "--snapshot-id", s.snapshot_id)
        assert rep["lineage"]["lake_snapshot_id"] == str(s.snapshot_id)
        got = lakelib.snapshot_rows(out, COLUMNS)
        if int(s.summary.get("total-equality-deletes") or 0) > 0:
            assert s.snapshot_id == current
            assert got == fx["want"], f"snapshot {i} ({s.snapshot_id}) with equality deletes"
            checked_equality = True
            continue
        want = _pyiceberg_rows(t, s.snapshot_id)
        assert got == want, f"snapshot {i} ({s.snapshot_id}, {s.summary.operation})"
        if s.snapshot_id == current:
            assert got == fx["want"]
        if s.snapshot_id == fx["before_snapshot_id"]:
            assert got == fx["before"]
    assert checked_equality == ("equality" in fx["deletes"])
    # Deletes really removed rows: the current snapshot holds fewer than were written.
    assert len(fx["want"]) < len(fx["before"])
