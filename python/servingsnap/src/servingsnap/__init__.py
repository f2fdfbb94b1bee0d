"""Read servingsnap serving snapshots (docs/FORMAT.md) from Python.

    snap = servingsnap.open("ROOT/DATASET")       # follows CURRENT; snapshot=N for a vintage
    snap.series("PET.RBRTE.D", start, end)        # zero-copy slice, series_id put back
    snap.latest(...), snap.bounds(id), snap.ids(prefix=..., category=...)
    snap.table() / snap.to_polars()               # every row, ids and attributes

Opening costs the same at 10 series as at 3 million: the manifest is read
and checksummed, both Arrow files are memory-mapped and their footers read;
no row and no per-series structure is read or built. A lookup is a binary
search on the mapped ids.
"""

from __future__ import annotations

from ._errors import ColdTierUnavailable, CorruptSnapshot, SeriesNotFound, ServingSnapError
from ._snapshot import Snapshot, open

__all__ = [
    "open",
    "Snapshot",
    "ServingSnapError",
    "CorruptSnapshot",
    "SeriesNotFound",
    "ColdTierUnavailable",
]

__version__ = "0.1.0"
