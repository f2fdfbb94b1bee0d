"""The servers the benchmark scripts start, defined once: servingsnap on a root and the Go rebuild
peer on a lake, each as a client.Server with the files it reads at start (evicted for cold runs,
read for warm ones), and the Go benchmark tools built into WORK/bin."""
import pathlib
import subprocess

from . import client, lakes

REPO = pathlib.Path(__file__).resolve().parent.parent.parent


def go_tool(go, work, name):
    """Build ./bench/NAME with the go command into WORK/bin/NAME and return its path."""
    out = pathlib.Path(work) / "bin" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([go, "build", "-o", str(out), f"./bench/{name}"], cwd=REPO, check=True)
    return out


def ours(snapbuild, root, dataset, label="servingsnap (snapserve)", key="ours"):
    """servingsnap serving ROOT; it reads dataset's current snapshot files."""
    files, _ = lakes.snapshot_files(pathlib.Path(root) / dataset)
    return client.Server(key, label,
                         lambda port: client.servingsnap_cmd(snapbuild) + ["--root", str(root), "--addr", f"127.0.0.1:{port}"],
                         [str(p) for p in files.values()])


def go_peer(gobaseline, lake, dataset, label="Go rebuild (sortwrite.Rebuild)"):
    """The Go rebuild peer (bench/gobaseline) over the lake's Parquet files."""
    return client.Server("go", label,
                         lambda port: [str(gobaseline), "--lake", str(lake), "--dataset", dataset, "--addr", f"127.0.0.1:{port}"],
                         lakes.parquet_files(lake))
