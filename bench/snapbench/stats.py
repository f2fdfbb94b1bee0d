"""Medians, spreads and percentiles as the report prints them.

Standard library at import time: bench/report.py (run by `make test` with the
system python3) imports this module; only pct() needs numpy, which the bench
venv has.
"""
import statistics


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(xs, fmt="{:.2f}"):
    """min–max of repeated measurements (just the value for one run)."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return "–"
    if len(xs) == 1:
        return fmt.format(xs[0])
    return f"{fmt.format(min(xs))}–{fmt.format(max(xs))}"


def pct(lat, q):
    import numpy as np

    return float(np.percentile(lat, q)) if len(lat) else None


def ratio(a, b):
    if a is None or b in (None, 0):
        return None
    return a / b
