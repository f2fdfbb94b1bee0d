"""Read a query over a sharded dataset by following every endpoint of its
FlightInfo, in parallel, one connection per location (docs/FLIGHT.md,
"Sharded datasets"). Works for unsharded datasets too (one endpoint, no
location: read from the server that answered).

    python shard_client.py --uri grpc://127.0.0.1:8815 PET                  # the whole dataset
    python shard_client.py --uri grpc://127.0.0.1:8815 PET --prefix NG.
    python shard_client.py --uri grpc://127.0.0.1:8815 PET --series PET.RBRTE.D PET.RWTC.D --start 2020
    python shard_client.py ... --out pet.parquet --token-file tokens

Only pyarrow is needed. Each endpoint is tried at its locations in order
(replicas), so a shard served by two servers survives one of them being down.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.flight as flight


def read_endpoint(ep: flight.FlightEndpoint, origin: str, headers) -> pa.Table:
    """The rows of one endpoint, from the first of its locations that answers."""
    locations = [loc.uri.decode() for loc in ep.locations] or [origin]
    errors = []
    for uri in locations:
        try:
            with flight.connect(uri) as c:
                opts = flight.FlightCallOptions(headers=headers)
                return c.do_get(ep.ticket, options=opts).read_all()
        except flight.FlightError as e:  # try the next replica
            errors.append(f"{uri}: {e}")
    raise RuntimeError("every location failed: " + "; ".join(errors))


def read_all(uri: str, query: dict, headers=(), parallel: int = 8) -> tuple[pa.Table, flight.FlightInfo]:
    """GetFlightInfo on any server, then DoGet every endpoint in parallel."""
    with flight.connect(uri) as c:
        info = c.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(query).encode()),
                                 options=flight.FlightCallOptions(headers=list(headers)))
    eps = list(info.endpoints)
    with ThreadPoolExecutor(max(1, min(parallel, len(eps)))) as ex:
        parts = list(ex.map(lambda ep: read_endpoint(ep, uri, list(headers)), eps))
    # Shards carry their own dataset name and snapshot id in the schema
    # metadata, and string columns as dictionaries: unify before concatenating.
    parts = [p.replace_schema_metadata(None) for p in parts]
    table = pa.concat_tables(parts, promote_options="permissive") if parts else info.schema.empty_table()
    return table, info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dataset")
    ap.add_argument("--uri", default="grpc://127.0.0.1:8815", help="any server of the cluster")
    sel = ap.add_mutually_exclusive_group()
    sel.add_argument("--series", nargs="+")
    sel.add_argument("--prefix")
    sel.add_argument("--category")
    ap.add_argument("--start")
    ap.add_argument("--end")
    ap.add_argument("--parallel", type=int, default=8, help="endpoints read at once")
    ap.add_argument("--token-file")
    ap.add_argument("--out", help="write the rows to this Parquet file")
    args = ap.parse_args()

    q: dict = {"dataset": args.dataset}
    if args.series:
        q["series"] = args.series
    elif args.category is not None:
        q["category"] = args.category
    else:
        q["prefix"] = args.prefix or ""
    for k in ("start", "end"):
        if getattr(args, k):
            q[k] = getattr(args, k)
    headers = []
    if args.token_file:
        token = next(l.split()[0] for l in open(args.token_file) if l.strip() and not l.lstrip().startswith("#"))
        headers.append((b"authorization", b"Bearer " + token.encode()))

    t0 = time.perf_counter()
    table, info = read_all(args.uri, q, headers, args.parallel)
    dt = time.perf_counter() - t0
    for ep in info.endpoints:
        m = json.loads(ep.app_metadata or b"{}")
        locs = ", ".join(loc.uri.decode() for loc in ep.locations) or "(the server that answered)"
        print(f"shard {m.get('shard', '-')}: {m.get('rows', '?')} rows at {locs}", file=sys.stderr)
    print(f"{table.num_rows} rows (FlightInfo said {info.total_records}) in {dt:.3f}s from "
          f"{len(info.endpoints)} endpoint(s)", file=sys.stderr)
    if info.total_records >= 0 and table.num_rows != info.total_records:
        print("row count differs from the FlightInfo's", file=sys.stderr)
        return 1
    if args.out:
        import pyarrow.parquet as pq
        pq.write_table(table, args.out)
    else:
        print(table.slice(0, 10))
    return 0


if __name__ == "__main__":
    sys.exit(main())
