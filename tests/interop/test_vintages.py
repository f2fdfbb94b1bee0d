"""Publishing more snapshots into one dataset (FORMAT.md §1-2)."""

from __future__ import annotations

import pytest

import snaplib


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

    r2 = snaplib.build(snapbuild, lake2, ds)
    assert (r2["snapshot_id"], r2["parent_id"]) == (2, 1)
    assert (ds / "CURRENT").read_bytes() == b"manifests/000002.json\n"
    s2 = snaplib.open_current(ds)
    m2 = s2.manifest
    assert (m2["snapshot_id"], m2["parent_id"]) == (2, 1)
    assert {f["path"] for f in m2["files"]} == {"snapshots/000002/data.arrow",
                                               "snapshots/000002/index.arrow"}
    assert m2["lineage"]["source"] == str(lake2)
    assert m2["created"] >= s1.manifest["created"]
    _check_files(s2)
    snaplib.assert_matches_reference(s2, snaplib.duck_reference(lake2))

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
