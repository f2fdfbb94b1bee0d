"""Query a `snapbuild serve` Arrow Flight server with nothing but pyarrow.

    snapbuild serve --root ROOT --addr 127.0.0.1:8815 &

    python flight_client.py list
    python flight_client.py info PET
    python flight_client.py get PET PET.RBRTE.D PET.RWTC.D
    python flight_client.py get PET PET.RBRTE.D --start 2020 --end 2020-06
    python flight_client.py latest PET --prefix PET.
    python flight_client.py latest PET --category "Crude oil" --attributes
    python flight_client.py status
    python flight_client.py --token-file tokens get PET PET.RBRTE.D     # auth on
    python flight_client.py --token-file tokens --basic list            # via a Basic handshake

A ticket is a JSON object (docs/FLIGHT.md):
    {"dataset": "PET", "series": ["PET.RBRTE.D"], "start": "2020", "end": "2020-06",
     "columns": ["value"], "attributes": true, "latest": true}
with exactly one of "series", "prefix" (use "" for every series) or "category".
"""

from __future__ import annotations

import argparse
import json
import sys

import pyarrow as pa
import pyarrow.flight as flight


def connect(args) -> tuple[flight.FlightClient, flight.FlightCallOptions]:
    client = flight.connect(args.uri)
    headers = []
    if args.token_file:
        # the first token of the file; a line may go on with scopes= and datasets=
        token = next(line.split()[0] for line in open(args.token_file)
                     if line.strip() and not line.lstrip().startswith("#"))
        if args.basic:
            # Basic handshake: any user name, the password is the token; the
            # server answers with the bearer header to send from then on.
            headers.append(client.authenticate_basic_token("flight_client", token))
        else:
            headers.append((b"authorization", f"Bearer {token}".encode()))
    return client, flight.FlightCallOptions(headers=headers)


def do_get(client, opts, **query) -> pa.Table:
    """Run a query. The stream's schema metadata names the snapshot that answered."""
    reader = client.do_get(flight.Ticket(json.dumps(query).encode()), options=opts)
    table = reader.read_all()
    return table


def show(table: pa.Table, limit: int) -> None:
    md = table.schema.metadata or {}
    snap = md.get(b"servingsnap.snapshot_id", b"?").decode()
    print(f"{table.num_rows} rows from snapshot {snap}; columns {table.column_names}")
    rows = table.slice(0, limit).to_pylist()  # dictionary columns decode to plain values
    for r in rows:
        print("  " + "  ".join(f"{v}" for v in r.values()))
    if table.num_rows > limit:
        print(f"  … {table.num_rows - limit} more")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--uri", default="grpc+tcp://127.0.0.1:8815", help="grpc+tcp://HOST:PORT or grpc+tls://HOST:PORT")
    ap.add_argument("--token-file", help="send the first token of this file")
    ap.add_argument("--basic", action="store_true", help="get the bearer through a Basic handshake")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--limit", type=int, default=20, help="rows to print")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="ListFlights: one entry per dataset")
    p = sub.add_parser("info", help="GetFlightInfo of a dataset, or of a query with --series/--prefix")
    p.add_argument("dataset")
    p.add_argument("--series", nargs="*")
    p.add_argument("--prefix")
    p = sub.add_parser("get", parents=[common], help="rows of some series, optionally a period range")
    p.add_argument("dataset")
    p.add_argument("series", nargs="+")
    p.add_argument("--start")
    p.add_argument("--end", help="inclusive: 2020 means through 2020-12-31")
    p.add_argument("--columns", nargs="*")
    p.add_argument("--attributes", action="store_true")
    p = sub.add_parser("latest", parents=[common], help="the latest non-null value of each series")
    p.add_argument("dataset")
    p.add_argument("--prefix", default="")
    p.add_argument("--category")
    p.add_argument("--attributes", action="store_true")
    sub.add_parser("status", help='DoAction "status"')
    args = ap.parse_args()

    client, opts = connect(args)
    try:
        if args.cmd == "list":
            for info in client.list_flights(options=opts):
                name = info.descriptor.path[0].decode()
                print(f"{name}: {info.total_records} rows; ticket {info.endpoints[0].ticket.ticket.decode()}")
                print("  " + str(info.schema).replace("\n", "\n  "))
        elif args.cmd == "info":
            if args.series or args.prefix is not None:
                q = {"dataset": args.dataset}
                if args.series:
                    q["series"] = args.series
                else:
                    q["prefix"] = args.prefix
                desc = flight.FlightDescriptor.for_command(json.dumps(q).encode())
            else:
                desc = flight.FlightDescriptor.for_path(args.dataset)
            info = client.get_flight_info(desc, options=opts)
            print(f"{info.total_records} rows (exact)")
            print(info.schema)
            # the endpoint's ticket runs the query
            t = client.do_get(info.endpoints[0].ticket, options=opts).read_all()
            assert t.num_rows == info.total_records
        elif args.cmd == "get":
            q = {"dataset": args.dataset, "series": args.series}
            for k in ("start", "end", "columns"):
                if getattr(args, k) is not None:
                    q[k] = getattr(args, k)
            if args.attributes:
                q["attributes"] = True
            show(do_get(client, opts, **q), args.limit)
        elif args.cmd == "latest":
            q = {"dataset": args.dataset, "latest": True, "attributes": args.attributes}
            if args.category:
                q["category"] = args.category
            else:
                q["prefix"] = args.prefix
            show(do_get(client, opts, **q), args.limit)
        elif args.cmd == "status":
            (result,) = client.do_action(flight.Action("status", b""), options=opts)
            print(json.dumps(json.loads(result.body.to_pybytes()), indent=2))
    except flight.FlightError as e:  # NotFound arrives as KeyError, InvalidArgument as ArrowInvalid
        print(f"flight error: {e}", file=sys.stderr)
        return 1
    except (KeyError, pa.ArrowException) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
