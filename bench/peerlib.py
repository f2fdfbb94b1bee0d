"""What the Python serving peers (pybaseline.py, duckbaseline.py) share: ticket period bounds,
the start-up clock and the "listening" line. Standard library only, so importing it costs
nothing a peer would not pay anyway."""
import datetime
import json
import os

EPOCH = datetime.date(1970, 1, 1)


def day(s: str, end: bool) -> int:
    """A ticket period bound (YYYY, YYYY-MM, YYYYMM, YYYY-Qn, YYYY-MM-DD, YYYYMMDD) as date32 days:
    the period's first day, or its last for an end bound."""
    n = len(s)
    y = int(s[:4])
    if n == 4:
        a, b = datetime.date(y, 1, 1), datetime.date(y + 1, 1, 1)
    elif "Q" in s.upper():
        q = int(s[-1])
        a = datetime.date(y, 3 * q - 2, 1)
        b = datetime.date(y + (q == 4), 1 if q == 4 else 3 * q + 1, 1)
    elif n in (6, 7):
        m = int(s[-2:])
        a = datetime.date(y, m, 1)
        b = datetime.date(y + (m == 12), 1 if m == 12 else m + 1, 1)
    else:
        a = datetime.date.fromisoformat(s if n == 10 else f"{s[:4]}-{s[4:6]}-{s[6:8]}")
        b = a + datetime.timedelta(days=1)
    d = (b - datetime.timedelta(days=1)) if end else a
    return (d - EPOCH).days


def since_process_start_ms() -> float:
    """Milliseconds since the kernel started this process (/proc/self/stat field 22), so the
    interpreter's own start and every import count, as they do for the Go servers."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
        return round((up - int(fields[19]) / os.sysconf("SC_CLK_TCK")) * 1000, 1)
    except (OSError, ValueError, IndexError):
        return 0.0


def announce(addr: str, rows: int, series: int) -> None:
    print(json.dumps({"event": "listening", "flight": f"grpc+tcp://{addr}",
                      "startup_ms": since_process_start_ms(), "rows": rows, "series": series}), flush=True)


def serve(doc: str, make_dataset, default_addr: str) -> None:
    """The peers' command line and Flight server: --lake, --dataset, --addr; the dataset
    is built (make_dataset(lake, name): its rows, ids, schema and query(ticket) -> table),
    announced, then served: ListFlights and DoGet of the same JSON tickets as servingsnap."""
    import argparse

    import pyarrow.flight as fl

    class Server(fl.FlightServerBase):
        def __init__(self, location, ds):
            super().__init__(location)
            self.ds = ds

        def list_flights(self, context, criteria):
            ds = self.ds
            yield fl.FlightInfo(ds.schema, fl.FlightDescriptor.for_path(ds.name), [], ds.rows, -1)

        def do_get(self, context, ticket):
            try:
                q = json.loads(ticket.ticket)
            except ValueError as e:
                raise fl.FlightServerError(f"ticket: {e}") from None
            return fl.RecordBatchStream(self.ds.query(q))

    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--lake", required=True)
    ap.add_argument("--dataset", default="bench")
    ap.add_argument("--addr", default=default_addr)
    a = ap.parse_args()
    ds = make_dataset(a.lake, a.dataset)
    server = Server(f"grpc+tcp://{a.addr}", ds)
    announce(a.addr, ds.rows, len(ds.ids))
    server.serve()
