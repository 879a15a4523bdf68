"""FIFO eviction at episode granularity: drop the oldest whole segments, trim the one at the boundary.

Segments are immutable, so trimming rewrites the boundary segment's newest episodes into a new segment that
sorts in its place, then swaps it in. The store checks the partition's kind first (protected ones are never
evicted). numpy + zarr only; must not import torch or click.
"""

from __future__ import annotations

import numpy as np

from amago_pipe.errors import DataError
from amago_pipe.store.files import StoreFiles
from amago_pipe.store.format import is_segment_id, marker_key, new_segment_id, segment_key
from amago_pipe.store.info import SegmentMarker
from amago_pipe.store.reader import SegmentVanished
from amago_pipe.store.segments import SegmentBuilder

MAX_PASSES = 4
"""Eviction re-lists and goes again while the partition is over capacity: a concurrent evictor's drops can make
one pass's view stale (two writers sealing at once left a FIFO one segment over its capacity)."""


def evict(files: StoreFiles, partition: str, max_timesteps: int) -> int:
    """Remove the oldest episodes until at most `max_timesteps` remain; returns the timesteps removed.

    Whole episodes only: an episode is kept entirely or removed entirely (one longer than `max_timesteps`
    goes). Older segments are dropped whole; the segment holding the boundary is rewritten with its newest
    episodes (it keeps its place in the FIFO order). A writer killed mid-trim loses that segment's kept
    episodes at worst, never more than that segment. Each pass works on a fresh listing (up to MAX_PASSES).
    """
    if max_timesteps < 0:
        raise DataError(f"evict: max_timesteps must be >= 0, got {max_timesteps}")
    removed = 0
    for _ in range(MAX_PASSES):
        markers = files.markers(partition)
        excess = sum(m.info.timesteps for m in markers) - max_timesteps
        if excess <= 0:
            break
        removed += _evict_pass(files, partition, markers, excess)
    return removed


def _evict_pass(files: StoreFiles, partition: str, markers: list[SegmentMarker], excess: int) -> int:
    """One pass over `markers` (oldest first): drop whole segments, trim the boundary one; timesteps removed."""
    victims: list[str] = []
    boundary: tuple[SegmentMarker, int] | None = None
    for m in markers:
        if excess <= 0:
            break
        drop = int(np.searchsorted(np.cumsum(m.lengths), excess)) + 1  # fewest oldest episodes covering it
        if drop >= m.info.episodes:
            victims.append(m.info.id)
            excess -= m.info.timesteps
        else:
            boundary = m, drop
            break
    removed = sum(m.info.timesteps for m in markers if m.info.id in victims)
    if victims:
        files.drop(partition, victims)
    if boundary is not None:
        removed += _trim(files, *boundary)
    return removed


def _trim(files: StoreFiles, marker: SegmentMarker, drop_episodes: int) -> int:
    """Replace a sealed segment by one holding its episodes from `drop_episodes` on; returns timesteps removed
    (0 when another process removed the segment first)."""
    info = marker.info
    created_ns = int(info.id[:19]) if is_segment_id(info.id) else None
    builder = SegmentBuilder(
        files, info.partition, segment_id=new_segment_id(created_ns), expected_rows=info.rows, attrs=info.attrs
    )
    try:
        builder.add_segment(files, marker, drop_episodes)
        # Deleting the marker is the claim: of processes trimming or dropping this segment at once, one wins.
        if not files.backend.delete(marker_key(info.partition, info.id)):
            builder.abort()
            return 0
        trimmed = builder.seal()
    except SegmentVanished:
        builder.abort()
        return 0
    except BaseException:
        builder.abort()
        raise
    files.backend.delete(segment_key(info.partition, info.id))
    files.replaced(info.id, trimmed)
    return info.timesteps - trimmed.info.timesteps
