"""The Zarr trajectory store: partitions of immutable sealed segments; append, evict, sample windows.

`from amago_pipe.store import Episode, TrajectoryStore`. numpy + zarr only; must not import torch or click.
"""

from __future__ import annotations

from amago_pipe.store.episode import Episode
from amago_pipe.store.format import FORMAT_VERSION
from amago_pipe.store.info import PartitionInfo, SegmentInfo, SegmentMarker, WindowBatch
from amago_pipe.store.segments import SegmentWriter
from amago_pipe.store.windows import MODES
from amago_pipe.store.zarr_store import TrajectoryStore

__all__ = [
    "FORMAT_VERSION",
    "MODES",
    "Episode",
    "PartitionInfo",
    "SegmentInfo",
    "SegmentMarker",
    "SegmentWriter",
    "TrajectoryStore",
    "WindowBatch",
]
