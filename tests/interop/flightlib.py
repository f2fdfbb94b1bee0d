"""Helpers of the Flight interop tests: run `snapbuild serve` as a real
process on loopback and talk to it with pyarrow.flight.

Written from docs/FLIGHT.md, never from the Go code.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as fl


class ServerProcess:
    """`snapbuild serve --addr 127.0.0.1:0` plus whatever flags are given.

    The server prints one JSON line with the bound addresses on stdout once
    it listens; readiness is then confirmed through /healthz (when an HTTP
    address is asked for) or by retrying list_flights.
    """

    def __init__(self, exe: Path, root: Path, *flags, http: bool = True, timeout: float = 60,
                 tls_root_certs: bytes | None = None):
        self.tls_root_certs = tls_root_certs  # PEM the clients trust, for a server started with --tls-cert
        args = [str(exe), "serve", "--root", str(root), "--addr", "127.0.0.1:0", *map(str, flags)]
        if http:
            args += ["--http-addr", "127.0.0.1:0"]
        self.args = args
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._stderr: list[str] = []
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read_stdout, args=(lines,), daemon=True).start()
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise AssertionError(f"server did not report its address in {timeout}s\n{self.stderr}")
        if line is None:
            self.proc.wait(timeout=10)
            raise AssertionError(f"server exited {self.proc.returncode} before listening\n{self.stderr}")
        self.ready = json.loads(line)
        assert self.ready["event"] == "listening", self.ready
        self.uri: str = self.ready["flight"]
        self.http: str | None = self.ready.get("http")
        self._wait_ready(timeout)

    def _read_stdout(self, q: queue.Queue) -> None:
        first = True
        for line in self.proc.stdout:  # type: ignore[union-attr]
            if first:
                q.put(line)
                first = False
        if first:
            q.put(None)

    def _drain_stderr(self) -> None:
        for line in self.proc.stderr:  # type: ignore[union-attr]
            self._stderr.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self._stderr[-200:])

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                if self.http:
                    with urllib.request.urlopen(self.http + "/healthz", timeout=2) as r:
                        if r.status == 200:
                            return
                else:
                    # an unauthenticated server answers; an authenticated one refuses
                    # with Unauthenticated, which also proves it is up
                    try:
                        list(self.client().list_flights())
                    except fl.FlightUnauthenticatedError:
                        pass
                    return
            except Exception as e:  # noqa: BLE001 - retry until the deadline
                last = e
            time.sleep(0.05)
        self.kill()
        raise AssertionError(f"server not ready in {timeout}s: {last}\n{self.stderr}")

    def client(self) -> fl.FlightClient:
        if self.tls_root_certs is not None:
            return fl.connect(self.uri, tls_root_certs=self.tls_root_certs)
        return fl.connect(self.uri)

    def get(self, path: str) -> tuple[int, str]:
        assert self.http, "started without an HTTP address"
        try:
            with urllib.request.urlopen(self.http + path, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"server did not exit {timeout}s after SIGTERM\n{self.stderr}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def make_root(root: Path, datasets: dict[str, Path]) -> Path:
    """A serve root whose entries are symlinks to built dataset directories."""
    root.mkdir(parents=True, exist_ok=True)
    for name, d in datasets.items():
        link = root / name
        if not link.exists():
            os.symlink(d, link)
    return root


def ticket(**q) -> fl.Ticket:
    return fl.Ticket(json.dumps(q).encode())


def command(**q) -> fl.FlightDescriptor:
    return fl.FlightDescriptor.for_command(json.dumps(q).encode())


def do_get(client: fl.FlightClient, options: fl.FlightCallOptions | None = None, **q) -> pa.Table:
    return client.do_get(ticket(**q), options=options).read_all()


def decoded(t: pa.Table) -> pa.Table:
    """The table with every dictionary column decoded to its value type."""
    cols = []
    for c in t.columns:
        if pa.types.is_dictionary(c.type):
            c = pa.chunked_array([ch.dictionary_decode() for ch in c.chunks], type=c.type.value_type)
        cols.append(c)
    return pa.Table.from_arrays(cols, names=t.column_names)


def schema_snapshot_id(schema: pa.Schema) -> int:
    return int(schema.metadata[b"servingsnap.snapshot_id"])


def expect_error(fn, code: str, *fragments: str):
    """Run fn; it must fail with gRPC status `code` (e.g. "NOT_FOUND") and a
    message holding every fragment. Returns the exception."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - pyarrow maps codes to several classes
        msg = str(e)
        # streams carry gRPC's debug context ("NOT_FOUND:..."); every pyarrow
        # message says "... returned not found error, with message: ..."
        phrase = "returned " + code.lower().replace("_", " ") + " error"
        assert f"{code}:" in msg or phrase in msg, f"want gRPC {code}, got {type(e).__name__}: {msg}"
        for f in fragments:
            assert f in msg, f"message lacks {f!r}: {msg}"
        return e
    raise AssertionError(f"no error; want gRPC {code}")


def filter_rows(rows: pa.Table, ids=None, prefix=None, start=None, end=None) -> pa.Table:
    """Reference rows (snaplib.Reference.rows) of some series and periods."""
    mask = pa.array([True] * rows.num_rows)
    if ids is not None:
        mask = pc.and_(mask, pc.is_in(rows["series_id"], value_set=pa.array(sorted(set(ids)), pa.string())))
    if prefix is not None:
        mask = pc.and_(mask, pc.starts_with(rows["series_id"], prefix))
    if start is not None:
        mask = pc.and_(mask, pc.greater_equal(rows["period"], pa.scalar(start, pa.date32())))
    if end is not None:
        mask = pc.and_(mask, pc.less_equal(rows["period"], pa.scalar(end, pa.date32())))
    return rows.filter(mask)


def action_json(client: fl.FlightClient, kind: str, body: bytes = b"") -> dict:
    """Run a DoAction whose single result is a JSON object."""
    (r,) = list(client.do_action(fl.Action(kind, body)))
    return json.loads(r.body.to_pybytes())


def dataset_status(client: fl.FlightClient, name: str) -> dict:
    """The status action's entry for one dataset."""
    (d,) = [d for d in action_json(client, "status")["datasets"] if d["name"] == name]
    return d


def wait_until(cond, timeout: float = 15, what: str = "condition"):
    """Poll cond() until it returns a truthy value; return it."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached in {timeout}s")
        time.sleep(0.05)
