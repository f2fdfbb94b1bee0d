"""Helpers of the package's tests."""

from __future__ import annotations

import subprocess
from pathlib import Path


def run(exe: Path, *args) -> subprocess.CompletedProcess:
    """Run snapbuild; a non-zero exit fails the test with its stderr."""
    p = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"snapbuild {' '.join(map(str, args))}: {p.returncode}\n{p.stderr}"
    return p
