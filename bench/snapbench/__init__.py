"""Modules of the benchmark harness (bench/harness.py): processes, clients, build peers, sizes, report."""
