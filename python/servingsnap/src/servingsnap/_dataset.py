"""The dataset directory (docs/FORMAT.md §1-2): CURRENT, leases, manifests."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
from pathlib import Path

import xxhash

from ._errors import CorruptSnapshot, ServingSnapError

CURRENT_RE = re.compile(rb"manifests/([0-9]{6,})\.json\n")
CHECKSUM_KEY = b'"checksum": "'
MANIFEST_VERSIONS = {1, 2, 3, 4, 5}


def format_id(i: int) -> str:
    return f"{i:06d}"


def current_id(ds: Path) -> int:
    """The vintage CURRENT names."""
    try:
        b = (ds / "CURRENT").read_bytes()
    except FileNotFoundError:
        raise ServingSnapError(f"{ds}: no CURRENT (nothing was published there)") from None
    m = CURRENT_RE.fullmatch(b)
    if not m or format_id(int(m.group(1))) != m.group(1).decode():
        raise CorruptSnapshot(f"{ds / 'CURRENT'}: want one line manifests/NNNNNN.json, got {b[:80]!r}")
    return int(m.group(1))


class Lease:
    """A shared flock on leases/NNNNNN, held while the snapshot is open, so
    `snapbuild gc` (which takes it exclusively) skips the vintage. The
    kernel drops it when the process dies."""

    def __init__(self, ds: Path, snapshot_id: int):
        self.fd = None
        path = ds / "leases" / format_id(snapshot_id)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            # A dataset published before leases existed: create it if we
            # may; a read-only reader proceeds without one (as Go's does).
            try:
                path.parent.mkdir(exist_ok=True)
                fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
            except OSError:
                return
        except PermissionError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise ServingSnapError(f"snapshot {snapshot_id} of {ds.name} is being garbage-collected") from None
            raise
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor drops the flock
            self.fd = None


def check_manifest_checksum(path: Path, b: bytes) -> None:
    """The manifest's own checksum: xxh64 of its bytes with the value of the
    last "checksum" field written as "" (FORMAT.md §2)."""
    i = b.rfind(CHECKSUM_KEY)
    if i < 0:
        raise CorruptSnapshot(f"{path}: no checksum field")
    start = i + len(CHECKSUM_KEY)
    end = b.find(b'"', start)
    if end < 0:
        raise CorruptSnapshot(f"{path}: unterminated checksum")
    want = b[start:end].decode("ascii", "replace")
    got = "xxh64:" + xxhash.xxh64(b[:start] + b[end:]).hexdigest()
    if got != want:
        raise CorruptSnapshot(f"{path}: checksum {want}, the file's bytes hash to {got}")


def load_manifest(ds: Path, snapshot_id: int) -> dict:
    path = ds / "manifests" / (format_id(snapshot_id) + ".json")
    try:
        b = path.read_bytes()
    except FileNotFoundError:
        present = sorted(int(p.stem) for p in (ds / "manifests").glob("*.json") if p.stem.isdigit())
        raise ServingSnapError(f"snapshot {snapshot_id} of {ds.name} does not exist (vintages: {present})") from None
    check_manifest_checksum(path, b)
    try:
        m = json.loads(b)
    except ValueError as e:
        raise CorruptSnapshot(f"{path}: {e}") from None
    if m.get("format") != "servingsnap.manifest":
        raise CorruptSnapshot(f"{path}: format {m.get('format')!r}, want 'servingsnap.manifest'")
    if m.get("format_version") not in MANIFEST_VERSIONS:
        raise ServingSnapError(f"{path}: format_version {m.get('format_version')} is not supported (this reader knows {sorted(MANIFEST_VERSIONS)})")
    if m.get("snapshot_id") != snapshot_id or m.get("dataset") != ds.name:
        raise CorruptSnapshot(f"{path}: holds snapshot {m.get('snapshot_id')} of {m.get('dataset')!r}, want {snapshot_id} of {ds.name!r}")
    return m
