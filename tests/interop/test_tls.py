"""Plain Flight, DoPut and Flight SQL through ADBC over TLS (docs/FLIGHT.md, "TLS").

A certificate authority and a server certificate it signs for localhost,
127.0.0.1 and ::1 are made here with the openssl command. `snapbuild serve`
runs with --tls-cert/--tls-key and a token file; clients trust the authority
by its PEM: pyarrow.flight's tls_root_certs and ADBC's
adbc.flight.sql.client_option.tls_root_certs. A client that trusts another
authority, or only the system's, fails the handshake; a plaintext client
gets no answer; over TLS the token is still required and its scopes hold.

Written from docs/FLIGHT.md, never from the Go code.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import shutil
import subprocess
from pathlib import Path

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import pyarrow as pa
import pyarrow.flight as fl
import pyarrow.parquet as pq
import pytest

import snaplib
from flightlib import ServerProcess, do_get

DATASET = "LIVE"
WRITER = "tls-writer-0123456789abcdef"  # scopes=read,write
READER = "tls-reader-0123456789abcdef"  # scopes=read
BASE = [("A", "2020-01", 1.0, "u"), ("A", "2020-02", 2.0, "u"), ("A", "2020-03", 3.0, "u"),
        ("B", "2020-01", 10.0, "v"), ("B", "2020-02", 11.0, "v")]

# Extensions of the authority and of the server certificate (openssl x509 -extfile).
CA_EXT = """basicConstraints=critical,CA:TRUE,pathlen:0
keyUsage=critical,keyCertSign,cRLSign
subjectKeyIdentifier=hash
"""
SERVER_EXT = """basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1
authorityKeyIdentifier=keyid
"""


@dataclasses.dataclass
class Certs:
    ca: bytes  # PEM of the authority: what clients trust
    cert: Path  # the server's certificate (--tls-cert)
    key: Path  # its private key (--tls-key)
    other_ca: bytes  # PEM of an authority that signed nothing the server holds


def openssl(*args, cwd: Path) -> None:
    exe = shutil.which("openssl")
    assert exe, "the TLS interop tests make their certificates with the openssl command: install openssl"
    p = subprocess.run([exe, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"openssl {' '.join(map(str, args))}:\n{p.stderr}"


def authority(d: Path, name: str) -> tuple[Path, Path]:
    """A self-signed authority (P-256, a day): its certificate and key."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "ca.ext").write_text(CA_EXT)
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "ca.key", cwd=d)
    openssl("req", "-new", "-key", "ca.key", "-subj", f"/CN={name}", "-out", "ca.csr", cwd=d)
    openssl("x509", "-req", "-in", "ca.csr", "-signkey", "ca.key", "-days", 1, "-extfile", "ca.ext",
            "-out", "ca.pem", cwd=d)
    return d / "ca.pem", d / "ca.key"


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    d = tmp_path_factory.mktemp("tls")
    ca, ca_key = authority(d / "ca", "servingsnap test authority")
    other, _ = authority(d / "other", "another authority")
    (d / "server.ext").write_text(SERVER_EXT)
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "key.pem", cwd=d)
    openssl("req", "-new", "-key", "key.pem", "-subj", "/CN=localhost", "-out", "server.csr", cwd=d)
    openssl("x509", "-req", "-in", "server.csr", "-CA", ca, "-CAkey", ca_key, "-set_serial", 2, "-days", 1,
            "-extfile", "server.ext", "-out", "cert.pem", cwd=d)
    return Certs(ca.read_bytes(), d / "cert.pem", d / "key.pem", other.read_bytes())


@pytest.fixture
def server(snapbuild, certs, tmp_path):
    """A fresh LIVE dataset (BASE) served over TLS with the two tokens."""
    lake = tmp_path / "lake"
    lake.mkdir()
    ids, periods, values, units = zip(*BASE)
    pq.write_table(pa.table({
        "series_id": pa.array(ids, pa.string()),
        "period": pa.array(periods, pa.string()),
        "value": pa.array(values, pa.float64()),
        "units": pa.array(units, pa.string()),
    }), lake / "part-0.parquet")
    snaplib.build(snapbuild, lake, tmp_path / "root" / DATASET)
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{WRITER} scopes=read,write\n{READER} scopes=read\n")
    s = ServerProcess(snapbuild, tmp_path / "root", "--tls-cert", certs.cert, "--tls-key", certs.key,
                      "--token-file", tokens, tls_root_certs=certs.ca)
    yield s
    assert s.terminate() == 0, s.stderr


def opts(token: str | None) -> fl.FlightCallOptions:
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    return fl.FlightCallOptions(headers=headers, timeout=30)


def rows(t: pa.Table) -> list[tuple[str, dt.date, float | None]]:
    ids = t["series_id"]
    if pa.types.is_dictionary(ids.type):
        ids = ids.cast(pa.string())
    return list(zip(ids.to_pylist(), t["period"].to_pylist(), t["value"].to_pylist()))


def month(p: str) -> dt.date:
    y, m = p.split("-")
    return dt.date(int(y), int(m), 1)


BASE_ROWS = [(s, month(p), v) for s, p, v, _ in BASE]


def put(client: fl.FlightClient, token: str, batch: pa.RecordBatch) -> dict:
    """One do_put of one batch; returns its ack."""
    writer, reader = client.do_put(fl.FlightDescriptor.for_path(DATASET), batch.schema, options=opts(token))
    with writer:
        writer.write_batch(batch)
        buf = reader.read()
        assert buf is not None, "no PutResult for the batch"
        writer.done_writing()
    return json.loads(buf.to_pybytes())


def adbc_connect(server: ServerProcess, **db_kwargs):
    return flight_sql.connect(server.uri, db_kwargs=db_kwargs, autocommit=True)


def test_flight_over_tls(server):
    assert server.uri.startswith("grpc+tls://127.0.0.1:"), server.uri
    c = server.client()
    assert [i.descriptor.path for i in c.list_flights(options=opts(READER))] == [[DATASET.encode()]]
    info = c.get_flight_info(fl.FlightDescriptor.for_path(DATASET), options=opts(READER))
    assert info.total_records == len(BASE)
    assert rows(do_get(c, opts(READER), dataset=DATASET, prefix="")) == BASE_ROWS
    # the endpoint's ticket of a command, fetched over the same TLS connection
    info = c.get_flight_info(fl.FlightDescriptor.for_command(json.dumps({"dataset": DATASET, "series": ["B"]}).encode()),
                             options=opts(READER))
    assert info.total_records == 2
    assert rows(c.do_get(info.endpoints[0].ticket, options=opts(READER)).read_all()) == BASE_ROWS[3:]
    # TLS does not stand for a token
    with pytest.raises(fl.FlightUnauthenticatedError):
        list(c.list_flights(options=opts(None)))
    # a Basic handshake over TLS answers with the bearer header
    key, value = c.authenticate_basic_token("anyone", READER)
    assert key.lower() == b"authorization" and value == f"Bearer {READER}".encode()


def test_put_then_read_over_tls(server):
    c = server.client()
    batch = pa.record_batch({
        "series_id": pa.array(["A", "C"], pa.string()),
        "period": pa.array(["2020-02", "2020-01"], pa.string()),
        "value": pa.array([20.0, 100.0], pa.float64()),
        "units": pa.array(["u", "w"], pa.string()),
    })
    ack = put(c, WRITER, batch)
    assert ack["rows"] == 2 and ack["wal_position"] > 0, ack
    want = sorted([r for r in BASE_ROWS if r[:2] != ("A", month("2020-02"))]
                  + [("A", month("2020-02"), 20.0), ("C", month("2020-01"), 100.0)])
    assert rows(do_get(c, opts(READER), dataset=DATASET, prefix="")) == want
    # a fresh connection reads the same rows
    again = fl.connect(server.uri, tls_root_certs=server.tls_root_certs)
    assert rows(do_get(again, opts(WRITER), dataset=DATASET, prefix="")) == want
    # the read token may not write, over TLS as over plaintext
    with pytest.raises(fl.FlightUnauthorizedError, match="write"):
        put(c, READER, batch)
    assert rows(do_get(c, opts(READER), dataset=DATASET, prefix="")) == want


def test_adbc_flightsql_over_tls(server):
    c = server.client()
    put(c, WRITER, pa.record_batch({
        "series_id": pa.array(["C"], pa.string()),
        "period": pa.array(["2020-01"], pa.string()),
        "value": pa.array([100.0], pa.float64()),
        "units": pa.array(["w"], pa.string()),
    }))
    root_certs = server.tls_root_certs.decode()
    header = {adbc_driver_flightsql.DatabaseOptions.TLS_ROOT_CERTS.value: root_certs,
              adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value: f"Bearer {READER}"}
    # the token as the password of a Basic handshake, as Flight SQL drivers send it
    basic = {adbc_driver_flightsql.DatabaseOptions.TLS_ROOT_CERTS.value: root_certs,
             adbc_driver_manager.DatabaseOptions.USERNAME.value: "anyone",
             adbc_driver_manager.DatabaseOptions.PASSWORD.value: READER}
    for what, kw in [("bearer header", header), ("Basic handshake", basic)]:
        conn = adbc_connect(server, **kw)
        try:
            with conn.cursor() as cur:
                cur.execute(f"SELECT * FROM {DATASET} WHERE series_id = 'C'")  # a statement
                assert rows(cur.fetch_arrow_table()) == [("C", month("2020-01"), 100.0)], what
                cur.execute(f"SELECT value FROM {DATASET} WHERE series_id = ? AND period >= ?", ("A", "2020-02"))  # prepared, parameters bound
                assert rows(cur.fetch_arrow_table()) == BASE_ROWS[1:3], what
                cur.execute(f"SELECT count(*) FROM {DATASET}")
                assert cur.fetchone() == (len(BASE) + 1,), what
            tables = [t["table_name"] for cat in conn.adbc_get_objects(depth="tables").read_all().to_pylist()
                      for s in cat["catalog_db_schemas"] for t in s["db_schema_tables"]]
            assert tables == [DATASET], what
        finally:
            conn.close()


def test_refused(server, certs):
    # a client that trusts only the system's roots, or another authority: the handshake fails
    for what, client in [("system roots", fl.connect(server.uri)),
                         ("another authority", fl.connect(server.uri, tls_root_certs=certs.other_ca))]:
        with pytest.raises(fl.FlightUnavailableError, match="(?i)handshake|certificate") as e:
            list(client.list_flights(options=opts(READER)))
        assert "certificate verify failed" in str(e.value), f"{what}: {e.value}"
    # a plaintext client against the TLS port gets no answer
    plain = fl.connect(server.uri.replace("grpc+tls://", "grpc+tcp://"))
    with pytest.raises(fl.FlightUnavailableError):
        list(plain.list_flights(options=opts(READER)))
    # ADBC without the authority, or with another
    for what, kw in [("no root certificates", {}),
                     ("another authority", {adbc_driver_flightsql.DatabaseOptions.TLS_ROOT_CERTS.value: certs.other_ca.decode()})]:
        kw[adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value] = f"Bearer {READER}"
        conn = adbc_connect(server, **kw)
        try:
            with pytest.raises(adbc_driver_manager.OperationalError, match="certificate signed by unknown authority"):
                with conn.cursor() as cur:
                    cur.execute(f"SELECT * FROM {DATASET}")
        finally:
            conn.close()
    # ADBC over TLS without a token
    conn = adbc_connect(server, **{adbc_driver_flightsql.DatabaseOptions.TLS_ROOT_CERTS.value: certs.ca.decode()})
    try:
        with pytest.raises(adbc_driver_manager.Error, match="(?i)unauthenticated|token"):
            with conn.cursor() as cur:
                cur.execute(f"SELECT * FROM {DATASET}")
    finally:
        conn.close()
    # the server is still answering after the refused handshakes
    assert rows(do_get(server.client(), opts(READER), dataset=DATASET, series=["B"])) == BASE_ROWS[3:]
