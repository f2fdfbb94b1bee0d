"""Shared setup for the Vortex interop tests: builds the Go helper once."""

import os
import shutil
import subprocess

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture(scope="session")
def vxconv(tmp_path_factory):
    """Path to pkg/vortexio/internal/vxconv, built with the Go toolchain."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    out = str(tmp_path_factory.mktemp("bin") / "vxconv")
    subprocess.run([go, "build", "-o", out, "./pkg/vortexio/internal/vxconv"], cwd=REPO, check=True)
    return out
