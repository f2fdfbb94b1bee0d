"""Staged publishing with a real server: a snapshot written by
`build --no-publish` is not served, not even on a forced reload, until
`snapbuild publish` flips CURRENT after `snapverify --snapshot N` passes."""
from __future__ import annotations

import json

import snaplib
from flightlib import ServerProcess, action_json, dataset_status


def snapverify(snapbuild):
    exe = snapbuild.parent / "snapverify"
    assert exe.is_file(), f"{exe} missing: `make build` builds it beside snapbuild"
    return exe


def test_unpublished_snapshot_is_not_served(snapbuild, gen_built, tmp_path):
    root = tmp_path / "root"
    ds = root / "P"
    snaplib.build(snapbuild, gen_built.lake, ds)  # 1, published
    s = ServerProcess(snapbuild, root, "--reload-interval", "0")
    try:
        c = s.client()
        staged = snaplib.build(snapbuild, gen_built.lake, ds, "--no-publish")
        assert (staged["snapshot_id"], staged["parent_id"], staged["published"]) == (2, 1, False)
        assert (ds / "CURRENT").read_text() == "manifests/000001.json\n"
        # a forced reload finds CURRENT unchanged: the staged vintage is invisible
        assert action_json(c, "reload", b"P")["datasets"][0]["result"] == "unchanged"
        st = dataset_status(c, "P")
        assert (st["snapshot_id"], st["current_id"]) == (1, 1)

        v = snaplib.run(snapverify(snapbuild), ds, "--snapshot", 2, "--deep")
        assert v.returncode == 0, v.stdout + v.stderr
        out = json.loads(snaplib.run_ok(snapbuild, "publish", ds, "--id", 2, "--json").stdout)
        assert (out["from"], out["to"]) == (1, 2)
        r = action_json(c, "reload", b"P")["datasets"][0]
        assert (r["result"], r["snapshot_id"], r["previous_id"]) == ("reloaded", 2, 1)
        assert dataset_status(c, "P")["snapshot_id"] == 2
    finally:
        assert s.terminate() == 0, s.stderr


def test_publish_refuses_a_damaged_staged_snapshot(snapbuild, gen_built, tmp_path):
    ds = tmp_path / "root" / "P"
    snaplib.build(snapbuild, gen_built.lake, ds)
    snaplib.build(snapbuild, gen_built.lake, ds, "--no-publish")
    idx = ds / "snapshots" / "000002" / "index.arrow"
    idx.chmod(0o644)
    b = bytearray(idx.read_bytes())
    b[len(b) // 2] ^= 0xFF
    idx.write_bytes(bytes(b))
    v = snaplib.run(snapverify(snapbuild), ds, "--snapshot", 2)
    assert v.returncode == 1, v.stdout + v.stderr
    p = snaplib.run(snapbuild, "publish", ds, "--id", 2)
    assert p.returncode == 1 and "does not verify" in p.stderr and "[checksum]" in p.stderr, p.stderr
    assert (ds / "CURRENT").read_text() == "manifests/000001.json\n"
