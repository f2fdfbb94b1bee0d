"""Publishing more snapshots into one dataset (FORMAT.md §1-2)."""

from __future__ import annotations

import datetime as dt
import re

import pytest

import snaplib


def _created(manifest: dict) -> tuple:
    """created as a comparable (seconds, nanoseconds); Go's RFC3339Nano trims
    trailing zeros, so the strings do not compare lexicographically."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z", manifest["created"])
    assert m, manifest["created"]
    return (dt.datetime.fromisoformat(m[1]), int((m[2] or "").ljust(9, "0")))


def _check_files(snap: snaplib.Snapshot):
    for f in snap.manifest["files"]:
        p = snap.dataset_dir / f["path"]
        assert p.is_file(), f["path"]
        assert f["size"] == p.stat().st_size, f["path"]
        assert f["checksum"] == snaplib.xxh64_file(p), f["path"]


def test_second_build_is_snapshot_2(snapbuild, tmp_path):
    lake1, lake2 = tmp_path / "lake1", tmp_path / "lake2"
    snaplib.run_ok(snapbuild, "gen", "--out", lake1, "--series", 20, "--seed", 1)
    snaplib.run_ok(snapbuild, "gen", "--out", lake2, "--series", 25, "--seed", 2)
    ds = tmp_path / "root" / "vint.ages-1"

    r1 = snaplib.build(snapbuild, lake1, ds)
    assert (r1["snapshot_id"], r1["parent_id"]) == (1, 0)
    s1 = snaplib.open_current(ds)
    data1 = s1.data()

    r2 = snaplib.build(snapbuild, lake2, ds, "--max-change", 0)  # another lake: 3.4 times the rows
    assert (r2["snapshot_id"], r2["parent_id"]) == (2, 1)
    assert (ds / "CURRENT").read_bytes() == b"manifests/000002.json\n"
    s2 = snaplib.open_current(ds)
    m2 = s2.manifest
    assert (m2["snapshot_id"], m2["parent_id"]) == (2, 1)
    assert {f["path"] for f in m2["files"]} == {"snapshots/000002/data.arrow",
                                               "snapshots/000002/index.arrow"}
    assert m2["lineage"]["source"] == str(lake2)
    assert _created(m2) >= _created(s1.manifest)
    _check_files(s2)

    # snapshot 1 is history: its manifest and files are untouched
    old = snaplib.open_manifest(ds, ds / "manifests" / "000001.json")
    assert old.manifest == s1.manifest
    _check_files(old)
    assert old.data().equals(data1)

    # a third build of the same input is a new vintage, parent 2
    r3 = snaplib.build(snapbuild, lake2, ds)
    assert (r3["snapshot_id"], r3["parent_id"]) == (3, 2)
    s3 = snaplib.open_current(ds)
    assert s3.data().equals(s2.data()) and s3.index().equals(s2.index())

    # and snapshot 2 holds lake2's rows (last: a format bug must not hide the above)
    snaplib.assert_matches_reference(s2, snaplib.duck_reference(lake2))


def test_build_cleans_crash_leftovers(snapbuild, tmp_path):
    """A writer removes what a crashed writer left in .tmp/ and any
    snapshots/N without a manifest, and never publishes them."""
    lake = tmp_path / "lake"
    snaplib.run_ok(snapbuild, "gen", "--out", lake, "--series", 5, "--seed", 3)
    ds = tmp_path / "root" / "crash"
    snaplib.build(snapbuild, lake, ds)
    stale = ds / ".tmp" / "build-crashed"
    stale.mkdir(parents=True)
    (stale / "data.arrow").write_bytes(b"half a file")
    orphan = ds / "snapshots" / "000007"
    orphan.mkdir()
    (orphan / "data.arrow").write_bytes(b"junk")

    r = snaplib.build(snapbuild, lake, ds)
    assert not stale.exists(), ".tmp/build-* of a crashed writer survived"
    assert not orphan.exists(), "snapshots/N without a manifest survived"
    snap = snaplib.open_current(ds)
    assert snap.manifest["parent_id"] == 1
    assert r["snapshot_id"] == snap.manifest["snapshot_id"] > 1
    _check_files(snap)
    _check_files(snaplib.open_manifest(ds, ds / "manifests" / "000001.json"))


@pytest.mark.parametrize("name", ["bad name", ".hidden", "-dash", "ü", "x" * 129])
def test_bad_dataset_name_is_rejected(snapbuild, tmp_path, name):
    lake = tmp_path / "lake"
    snaplib.run_ok(snapbuild, "gen", "--out", lake, "--series", 2, "--seed", 4)
    p = snaplib.run(snapbuild, "build", "--input", lake, "--out", f"{tmp_path}/root/{name}")
    assert p.returncode != 0, f"dataset name {name!r} was accepted"


def test_parent_is_what_current_named(snapbuild, tmp_path):
    """parent_id is the snapshot CURRENT named (e.g. after a rollback), while
    the new id is one more than the largest existing one."""
    lake = tmp_path / "lake"
    snaplib.run_ok(snapbuild, "gen", "--out", lake, "--series", 3, "--seed", 5)
    ds = tmp_path / "root" / "rollback"
    snaplib.build(snapbuild, lake, ds)
    snaplib.build(snapbuild, lake, ds)
    (ds / "CURRENT").write_bytes(b"manifests/000001.json\n")  # what a rollback does
    r = snaplib.build(snapbuild, lake, ds)
    assert (r["snapshot_id"], r["parent_id"]) == (3, 1)
    assert (ds / "CURRENT").read_bytes() == b"manifests/000003.json\n"
    assert snaplib.open_current(ds).manifest["parent_id"] == 1


def test_concurrent_builds_serialise(snapbuild, tmp_path):
    """Two builds racing on one dataset: the LOCK serialises them, so they get
    ids 1 and 2, the second's parent is the first, and CURRENT names 2."""
    import json
    import subprocess

    lake = tmp_path / "lake"
    snaplib.run_ok(snapbuild, "gen", "--out", lake, "--series", 200, "--seed", 6)
    ds = tmp_path / "root" / "race"
    procs = [
        subprocess.Popen([str(snapbuild), "build", "--input", str(lake), "--out", str(ds), "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        reports.append(json.loads(out))
    pairs = sorted((r["snapshot_id"], r["parent_id"]) for r in reports)
    assert pairs == [(1, 0), (2, 1), (3, 2)]
    assert (ds / "CURRENT").read_bytes() == b"manifests/000003.json\n"
    for n in (1, 2, 3):
        _check_files(snaplib.open_manifest(ds, ds / "manifests" / f"{n:06d}.json"))
