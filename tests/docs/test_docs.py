"""Every Python block of README.md and docs/FLIGHT.md runs as printed.

The blocks are extracted from the Markdown (```python fences) and executed
against the demo's snapshots, built here the way examples/demo.sh builds
them (the real EIA lake as ROOT/EIA), so a snippet that stops working fails
`make test`:

- README.md blocks run with the working directory laid out as `make demo`
  leaves the repository: out/demo/snapshots/EIA.
- docs/FLIGHT.md blocks run against `snapbuild serve --root
  out/demo/snapshots`; the one change made to a block is the address
  grpc+tcp://127.0.0.1:8815, replaced by the one the test's server bound
  (port 8815 may be taken on a shared machine). A block preceded by
  `<!-- doctest: auth -->` runs against a second server started with
  `--token-file tokens`, with that file in the working directory.

The README's ```sh block that builds a tiered snapshot (`--hot-since`)
runs too, as a shell script in the same working directory with `bin/`
holding the snapbuild under test.

Any other `<!-- doctest: ... -->` marker is an error, so a block can only
be skipped by saying so here.

SNAPBUILD (environment) names the snapbuild binary; without it the test
builds one with `go build`.
"""

from __future__ import annotations

import ast
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "interop"))

from flightlib import ServerProcess  # noqa: E402

DOC_ADDR = "grpc+tcp://127.0.0.1:8815"
FENCE = re.compile(r"(?:<!-- doctest: (?P<mark>[\w-]+) -->\n)?```python\n(?P<code>.*?)\n```", re.S)
MARKS = {None, "auth"}


def blocks(doc: str) -> list[tuple[str, int, str | None, str]]:
    """(document, line, marker, code) of every ```python block of doc."""
    text = (REPO / doc).read_text()
    out = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start("code")) + 1
        out.append((doc, line, m.group("mark"), m.group("code")))
    return out


ALL = blocks("README.md") + blocks("docs/FLIGHT.md")


def test_every_python_block_is_found():
    text = (REPO / "README.md").read_text() + (REPO / "docs" / "FLIGHT.md").read_text()
    assert len(ALL) == text.count("```python"), "a ```python fence the extractor does not match"
    assert {d for d, *_ in ALL} == {"README.md", "docs/FLIGHT.md"}
    for doc, line, mark, _ in ALL:
        assert mark in MARKS, f"{doc}:{line}: unknown doctest marker {mark!r}"


def test_blocks_need_only_the_demo_packages():
    """`make demo` installs python/requirements-demo.txt (pyarrow) and the
    servingsnap package only: a snippet that imports anything else would
    fail for a reader who ran it."""
    for doc, line, _, code in ALL:
        for node in ast.walk(ast.parse(code)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for n in names:
                root = n.split(".")[0]
                assert root in ("pyarrow", "servingsnap") or root in sys.stdlib_module_names, \
                    f"{doc}:{line} imports {n}, which make demo does not install"


@pytest.fixture(scope="module")
def snapbuild() -> Path:
    env = os.environ.get("SNAPBUILD")
    if env:
        return Path(env)
    subprocess.run(["go", "build", "-o", "bin/", "./cmd/snapbuild"], cwd=REPO, check=True, timeout=600)
    return REPO / "bin" / "snapbuild"


@pytest.fixture(scope="module")
def demo(snapbuild, tmp_path_factory) -> Path:
    """A working directory holding out/demo/snapshots/EIA, as after `make demo`."""
    wd = tmp_path_factory.mktemp("demo")
    lake = wd / "out" / "demo" / "lake-eia"
    for args in (["gen", "--eia", REPO / "data" / "eia-prices", "--out", lake],
                 ["build", "--input", lake, "--out", wd / "out" / "demo" / "snapshots" / "EIA"]):
        subprocess.run([str(snapbuild), *map(str, args)], check=True, capture_output=True, timeout=300)
    (wd / "tokens").write_text(secrets.token_hex(32) + "\n")
    return wd


@pytest.fixture(scope="module")
def servers(snapbuild, demo):
    root = demo / "out" / "demo" / "snapshots"
    plain = ServerProcess(snapbuild, root, http=False)
    auth = ServerProcess(snapbuild, root, "--token-file", demo / "tokens", http=False)
    try:
        yield {None: plain.uri, "auth": auth.uri}
    finally:
        plain.terminate()
        auth.terminate()


def run_block(code: str, cwd: Path, where: str) -> str:
    """Runs code in a fresh interpreter (so nothing this test imported
    helps it) in cwd, and returns what it printed."""
    p = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"{where} failed (exit {p.returncode}):\n{p.stderr}"
    return p.stdout


def params(doc: str):
    return [pytest.param(*b, id=f"{b[0]}:{b[1]}") for b in ALL if b[0] == doc]


@pytest.mark.parametrize("doc,line,mark,code", params("README.md"))
def test_readme(doc, line, mark, code, demo):
    out = run_block(code, demo, f"{doc}:{line}")
    assert out.strip(), f"{doc}:{line} printed nothing"


@pytest.mark.parametrize("doc,line,mark,code", params("docs/FLIGHT.md"))
def test_flight(doc, line, mark, code, demo, servers):
    assert DOC_ADDR in code, f"{doc}:{line}: the block does not connect to {DOC_ADDR}"
    out = run_block(code.replace(DOC_ADDR, servers[mark]), demo, f"{doc}:{line}")
    assert out.strip(), f"{doc}:{line} printed nothing"


SH_FENCE = re.compile(r"```sh\n(?P<code>.*?)\n```", re.S)


def test_readme_tiers_block(snapbuild, demo):
    """The README's tiers snippet builds a tiered EIA snapshot and shows its
    rows are the all-hot snapshot's (it prints "same rows")."""
    (code,) = [m.group("code") for m in SH_FENCE.finditer((REPO / "README.md").read_text()) if "--hot-since" in m.group("code")]
    bindir = demo / "bin"
    bindir.mkdir(exist_ok=True)
    if not (bindir / "snapbuild").exists():
        os.symlink(Path(snapbuild).resolve(), bindir / "snapbuild")
    p = subprocess.run(["sh", "-e", "-c", code], cwd=demo, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"README tiers block failed (exit {p.returncode}):\n{p.stderr}"
    assert p.stdout.strip().endswith("same rows"), p.stdout
    assert "cold.vortex" in p.stdout, p.stdout
