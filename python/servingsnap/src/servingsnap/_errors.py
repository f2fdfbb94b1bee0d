"""The package's exceptions."""

from __future__ import annotations


class ServingSnapError(Exception):
    """Any error of this package."""


class CorruptSnapshot(ServingSnapError):
    """A file does not say what the manifest (or the format) says it must."""


class SeriesNotFound(ServingSnapError, KeyError):
    """The series id is not in the snapshot."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ColdTierUnavailable(ServingSnapError):
    """The answer needs rows of the cold tier (cold.vortex) and the
    vortex-data package is not installed. Never answered with the hot rows
    alone: that would be a silently wrong answer."""
