"""Write the reference Vortex fixtures for pkg/vortexio with vortex-data (the oracle).

Usage (from the repo root, in a venv with python/requirements-test.txt installed):

    .venv/bin/python tests/vortex/make_fixtures.py [OUTDIR]

OUTDIR defaults to pkg/vortexio/testdata. For every fixture NAME the script writes

    NAME.vortex   written by vortex-data (default options unless the name says compact)
    NAME.arrow    the source table as an Arrow IPC file: the expected values

The data is deterministic (seeded), so re-running the script reproduces the same
tables; the .vortex bytes may still change with a different vortex-data version,
which is why the files are checked in rather than regenerated in CI.

Each "enc_*" table is shaped so that the reference compressor is likely to pick a
particular encoding (named in the file name); the Go tests check that our reader
decodes whatever was actually chosen, and the Go test
TestFixtureEncodingsCovered reports which encodings the fixtures contain.
"""

import datetime
import math
import os
import random
import struct
import sys

import pyarrow as pa
import pyarrow.ipc as ipc
import vortex as vx

N = 4096  # rows per encoding fixture: small files, but > one 1024-value FastLanes block


def lake_table(seed=7, nseries=48, per=150):
    """A lake-like table: sorted series codes, per-series sorted dates, nullable
    decimal-like values and a low-cardinality string column."""
    rnd = random.Random(seed)
    codes, periods, values, units = [], [], [], []
    start = datetime.date(2019, 1, 1)
    unit_names = ["MWh", "GWh", "thousand barrels", "million cubic feet", "\u20ac/MWh"]
    for s in range(nseries):
        code = 1000 + 7 * s
        first = start + datetime.timedelta(days=rnd.randrange(0, 30))
        level = rnd.uniform(10, 500)
        unit = unit_names[s % len(unit_names)]
        for i in range(per):
            codes.append(code)
            periods.append(first + datetime.timedelta(days=i))
            if rnd.random() < 0.03:
                values.append(None)
            else:
                level = abs(level + rnd.uniform(-3, 3))
                values.append(round(level, 1))
            units.append(unit)
    return pa.table(
        {
            "series_code": pa.array(codes, pa.uint32()),
            "period": pa.array(periods, pa.date32()),
            "value": pa.array(values, pa.float64()),
            "unit": pa.array(units, pa.string()),
        }
    )


def series_table(seed=11, nseries=400):
    """Shaped like a snapshot's hot data file: sorted series codes, each series
    a run of dates of one frequency (so period jumps back at every boundary),
    a multiplicative random walk with 0-3 decimals and ~0.5% nulls, and a
    nullable running total. Our writer encodes it with fastlanes.delta (dates;
    the running total wrapped in vortex.masked), frequency-ordered
    dictionaries and patched bit-packing."""
    rnd = random.Random(seed)
    codes, periods, values, totals = [], [], [], []
    for s in range(nseries):
        start = datetime.date(2000 + rnd.randrange(20), 1 + rnd.randrange(12), 1)
        freq = rnd.randrange(5)
        level = 10 ** (rnd.random() * 7)
        decimals = rnd.randrange(4)
        total = rnd.randrange(10**12)
        for i in range(10 + rnd.randrange(300)):
            if freq == 0:
                d = start + datetime.timedelta(days=i)
            elif freq == 1:
                d = start + datetime.timedelta(days=7 * i)
            else:
                months = i * (1, 3, 12)[freq - 2]
                d = datetime.date(start.year + (start.month - 1 + months) // 12, (start.month - 1 + months) % 12 + 1, 1)
            codes.append(s)
            periods.append(d)
            level *= math.exp(rnd.gauss(0, 0.05))
            values.append(None if rnd.random() < 0.005 else round(level, decimals))
            total += rnd.randrange(1000)
            totals.append(None if rnd.random() < 0.005 else total)
    return pa.table(
        {
            "series_code": pa.array(codes, pa.uint32()),
            "period": pa.array(periods, pa.date32()),
            "value": pa.array(values, pa.float64()),
            "total": pa.array(totals, pa.int64()),
        }
    )


def encoding_tables():
    """One small table per target encoding (the column name says what it targets)."""
    r = random.Random(42)
    t = {}
    t["enc_primitive"] = {"u64": pa.array([r.getrandbits(64) for _ in range(2048)], pa.uint64())}
    t["enc_bool"] = {"b": pa.array([r.random() < 0.5 for _ in range(N)], pa.bool_())}
    t["enc_bool_nulls"] = {
        "b": pa.array([None if r.random() < 0.2 else r.random() < 0.5 for _ in range(N)], pa.bool_())
    }
    t["enc_varbinview"] = {
        "bin": pa.array([r.randbytes(r.randrange(0, 24)) for _ in range(1200)], pa.binary())
    }
    t["enc_struct"] = {
        "st": pa.array(
            [None if i % 11 == 0 else {"a": r.randrange(1 << 30), "b": r.random() < 0.5} for i in range(N)],
            pa.struct([("a", pa.int64()), ("b", pa.bool_())]),
        )
    }
    t["enc_ext_date"] = {
        "d": pa.array([datetime.date(1900, 1, 1) + datetime.timedelta(days=r.randrange(0, 80000)) for _ in range(N)], pa.date32())
    }
    t["enc_constant"] = {"c": pa.array([12345] * N, pa.int64()), "s": pa.array(["same"] * N, pa.string())}
    t["enc_masked"] = {"m": pa.array([None if i % 3 == 0 else 7 for i in range(N)], pa.int32())}
    t["enc_null"] = {"n": pa.nulls(N, pa.null()), "i": pa.nulls(N, pa.int32())}
    t["enc_dict"] = {
        "f": pa.array([r.choice([1.5, 2.25, -8.0, 1e10]) for _ in range(N)], pa.float64()),
        "s": pa.array([r.choice(["alpha", "beta", None, "gamma"]) for _ in range(N)], pa.string()),
    }
    t["enc_bitpacked"] = {"u": pa.array([r.randrange(0, 1000) for _ in range(N)], pa.uint32())}
    t["enc_bitpacked_patches"] = {
        "u": pa.array([r.randrange(0, 100) if r.random() > 0.01 else r.getrandbits(40) for _ in range(N)], pa.uint64())
    }
    t["enc_for"] = {"i": pa.array([10_000_000 + r.randrange(0, 5000) for _ in range(N)], pa.int64())}
    t["enc_runend"] = {"i": pa.array([i // 37 * 1_000_003 for i in range(N)], pa.int64())}
    t["enc_sequence"] = {"i": pa.array([5 + 3 * i for i in range(N)], pa.int64()), "u": pa.array(range(N), pa.uint16())}
    t["enc_sparse"] = {"i": pa.array([r.getrandbits(31) if r.random() < 0.02 else 0 for _ in range(N)], pa.int32())}
    t["enc_sparse_null"] = {"i": pa.array([r.getrandbits(31) if r.random() < 0.02 else None for _ in range(N)], pa.int64())}
    t["enc_zigzag"] = {"i": pa.array([r.randrange(-2000, 2000) for _ in range(N)], pa.int32())}
    t["enc_rle"] = {"i": pa.array([(i // 5) % 13 * 1000 + r.randrange(0, 3) * 0 for i in range(N)], pa.int16())}
    t["enc_alp"] = {"f": pa.array([round(r.uniform(-1000, 1000), 2) for _ in range(N)], pa.float64())}
    t["enc_alp_patches"] = {
        "f": pa.array(
            [round(r.uniform(0, 100), 1) if r.random() > 0.02 else r.random() * math.pi for _ in range(N)],
            pa.float64(),
        ),
        "f32": pa.array([round(r.uniform(0, 100), 1) for _ in range(N)], pa.float32()),
    }
    t["enc_alprd"] = {"f": pa.array([r.random() * 1e6 for _ in range(2048)], pa.float64())}
    t["enc_fsst"] = {
        "s": pa.array(
            [f"https://www.example.org/energy/series/{r.randrange(10**9)}/data.json?key=v{r.randrange(100)}" for _ in range(1200)],
            pa.string(),
        )
    }
    t["nasty"] = nasty_table()
    return {k: (v if isinstance(v, pa.Table) else pa.table(v)) for k, v in t.items()}


def pco_tables():
    """Tables for vortex.pco (Pcodec), which only the compact writer uses: one
    column per pco mode / delta encoding the compressor picks for that shape
    (checked with vortex-data 0.90: IntMult, FloatMult, FloatQuant, Classic;
    consecutive deltas of order 1 and 2, lookback deltas), with nulls, 16-bit
    types and float specials. 9000 rows make two pco pages (of up to 8192)."""
    r = random.Random(1234)
    n = 9000
    seg = [r.randrange(1 << 30) for _ in range(64)]
    lookback = []
    while len(lookback) < n:
        j = r.randrange(len(seg) - 8)
        lookback += [v + r.randrange(4) for v in seg[j : j + 8]]
    acc = acc2 = 0
    delta2 = []
    for _ in range(n):
        acc += r.randrange(-3, 4)
        acc2 += acc
        delta2.append(acc2)
    specials = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -1e308, 3.5, 1.0 / 3]
    t = {
        "int_mult": pa.array([r.randrange(-50000, 50000) * 1000 + r.randrange(3) for _ in range(n)], pa.int64()),
        "int_mult32": pa.array([r.randrange(-5000, 5000) * 77 for _ in range(n)], pa.int32()),
        "float_mult": pa.array([r.randrange(-300, 300) * math.pi for _ in range(n)], pa.float64()),
        "float_quant": pa.array(
            [struct.unpack("<d", struct.pack("<Q", struct.unpack("<Q", struct.pack("<d", r.gauss(0, 1000)))[0] & ~((1 << 46) - 1)))[0] for _ in range(n)],
            pa.float64(),
        ),
        "float_quant32": pa.array(
            [struct.unpack("<f", struct.pack("<I", struct.unpack("<I", struct.pack("<f", r.gauss(0, 1000)))[0] & 0xFFFF0000))[0] for _ in range(n)],
            pa.float32(),
        ),
        "lookback": pa.array(lookback[:n], pa.uint32()),
        "delta2": pa.array(delta2, pa.int64()),
        "nullable": pa.array([None if i % 7 == 0 else r.randrange(-(1 << 10), 1 << 10) for i in range(n)], pa.int64()),
        "nullable_f": pa.array([None if r.random() < 0.2 else r.randrange(100) * 0.25 for _ in range(n)], pa.float64()),
        "f32": pa.array([r.randrange(1000) / 7 for _ in range(n)], pa.float32()),
        "i16": pa.array([r.randrange(-300, 300) for _ in range(n)], pa.int16()),
        "u16": pa.array([r.randrange(600) for _ in range(n)], pa.uint16()),
        "specials": pa.array([r.choice(specials) for _ in range(n)], pa.float64()),
    }
    return {"pco_compact": pa.table(t)}


def nasty_table():
    r = random.Random(9)
    n = 1000
    return pa.table(
        {
            "all_null_f64": pa.nulls(n, pa.float64()),
            "specials": pa.array(
                [[math.nan, math.inf, -math.inf, -0.0, 0.0, 5e-324, 1.7976931348623157e308, None][i % 8] for i in range(n)],
                pa.float64(),
            ),
            "i64_extreme": pa.array([[-(2**63), 2**63 - 1, 0, -1, None][i % 5] for i in range(n)], pa.int64()),
            "u64_extreme": pa.array([[0, 2**64 - 1, 1, 2**63][i % 4] for i in range(n)], pa.uint64()),
            "i8": pa.array([[-128, 127, 0, None][i % 4] for i in range(n)], pa.int8()),
            "unicode": pa.array(
                [["", "h\u00e9llo", "\u65e5\u672c\u8a9e", "\U0001f600 emoji", None, "x" * 300][i % 6] + ("" if i % 6 == 4 else str(i)) if i % 6 != 4 else None for i in range(n)],
                pa.string(),
            ),
            "date_old": pa.array([datetime.date(1850, 1, 1) + datetime.timedelta(days=37 * i) for i in range(n)], pa.date32()),
            "ts": pa.array([1_600_000_000_000_000 + r.randrange(10**12) for _ in range(n)], pa.timestamp("us")),
        }
    )


def _key(v):
    """A comparison key that tells NaN == NaN and -0.0 != 0.0, like a bitwise compare."""
    if isinstance(v, float):
        return ("f", "nan" if math.isnan(v) else v, math.copysign(1.0, v))
    return v


def same_values(want, got):
    """Equal values and nulls, whatever the Arrow type spelling (string vs string_view)."""
    if len(want) != len(got):
        return False
    if got.type != want.type and not pa.types.is_null(want.type):
        got = got.cast(want.type)
    return [_key(v) for v in want.to_pylist()] == [_key(v) for v in got.to_pylist()]


def write(outdir, name, table, compact=False):
    path = os.path.join(outdir, name + ".vortex")
    if compact:
        vx.io.VortexWriteOptions.compact().write(table, path)
    else:
        vx.io.write(table, path)
    opts = ipc.IpcWriteOptions(compression="zstd")  # keeps the checked-in expected files small
    with ipc.new_file(os.path.join(outdir, name + ".arrow"), table.schema, options=opts) as w:
        w.write_table(table)
    # The oracle must round-trip its own file, or the fixture is useless.
    back = vx.open(path).to_arrow().read_all()
    for i, col in enumerate(table.columns):
        if not same_values(col, back.column(i)):
            raise SystemExit(f"{name}: column {table.schema.names[i]} does not round-trip in vortex-data")
    print(f"{name}: {table.num_rows} rows, {os.path.getsize(path)} bytes")


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join("pkg", "vortexio", "testdata")
    os.makedirs(outdir, exist_ok=True)
    lake = lake_table()
    write(outdir, "lake_default", lake)
    write(outdir, "lake_compact", lake, compact=True)
    for name, table in encoding_tables().items():
        write(outdir, name, table)
    write(outdir, "nasty_compact", nasty_table(), compact=True)
    for name, table in pco_tables().items():
        write(outdir, name, table, compact=True)
    write(outdir, "empty", pa.table({"i": pa.array([], pa.int64()), "s": pa.array([], pa.string())}))
    write(outdir, "one_row", pa.table({"i": pa.array([-5], pa.int64()), "s": pa.array(["x"], pa.string()), "d": pa.array([datetime.date(1969, 12, 31)], pa.date32())}))


if __name__ == "__main__":
    main()
