"""Reading sealed segments: open a segment's arrays, load it whole, read rows, rebuild its Episodes.

numpy + zarr only; must not import torch or click.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from amago_pipe.errors import StoreFormatError
from amago_pipe.store.episode import Episode
from amago_pipe.store.format import marker_key, segment_key
from amago_pipe.store.info import SegmentMarker

if TYPE_CHECKING:
    from amago_pipe.store.zarr_store import TrajectoryStore

BLOCK_BYTES = 64 << 20
"""Rows are read in blocks of about this many uncompressed bytes when iterating episodes."""


class SegmentVanished(Exception):
    """A sealed segment disappeared (evicted or dropped) while it was being read."""


def open_segment(store: TrajectoryStore, partition: str, segment_id: str) -> tuple[Any, dict[str, Any]]:
    """The segment's zarr group and its arrays by field name; SegmentVanished when it is gone."""
    import zarr

    key = segment_key(partition, segment_id)
    try:
        group = zarr.open_group(store.backend.zarr_store(), path=key, mode="r")
        arrays = {name: group[name] for name in store.fields}
    except (FileNotFoundError, KeyError) as e:
        if not store.backend.exists(marker_key(partition, segment_id)):
            raise SegmentVanished(key) from e
        raise StoreFormatError(
            f"{store.url}/{key}: sealed segment is missing arrays ({e}); run `amago-pipe store verify`"
        ) from e
    except Exception as e:  # zarr raises its own errors for a missing node
        if not store.backend.exists(marker_key(partition, segment_id)):
            raise SegmentVanished(key) from e
        raise
    return group, arrays


def check_still_sealed(store: TrajectoryStore, partition: str, segment_id: str) -> None:
    """Raise SegmentVanished when the marker is gone. Deleters remove the marker before the data, so data
    read before this check succeeds was complete."""
    if not store.backend.exists(marker_key(partition, segment_id)):
        raise SegmentVanished(segment_key(partition, segment_id))


def load_segment(store: TrajectoryStore, marker: SegmentMarker) -> dict[str, np.ndarray]:
    """Every array of a segment, decompressed: (rows, ...) per field."""
    partition, sid = marker.info.partition, marker.info.id
    _, arrays = open_segment(store, partition, sid)
    data = {name: np.asarray(arr[:]) for name, arr in arrays.items()}
    for name, value in data.items():
        if len(value) != marker.info.rows:
            raise StoreFormatError(
                f"{store.url}/{segment_key(partition, sid)}/{name}: {len(value)} rows, marker says {marker.info.rows}; "
                "run `amago-pipe store verify`"
            )
    check_still_sealed(store, partition, sid)
    return data


def read_rows(arrays: dict[str, Any], rows: np.ndarray) -> dict[str, np.ndarray]:
    """Rows at arbitrary (sorted or not, repeated or not) indices of each array; only touched chunks are read."""
    uniq, inverse = np.unique(rows, return_inverse=True)
    out = {}
    for name, arr in arrays.items():
        block = np.asarray(arr.oindex[uniq])
        out[name] = block[inverse]
    return out


def iter_segment_episodes(store: TrajectoryStore, marker: SegmentMarker) -> Iterator[Episode]:
    """Rebuild a segment's episodes in order, reading about BLOCK_BYTES at a time."""
    partition, sid = marker.info.partition, marker.info.id
    group, arrays = open_segment(store, partition, sid)
    env_names, sources, metas = episode_meta(group, marker.info.episodes)
    offsets, lengths = marker.row_offsets, marker.lengths
    for first, last, lo, hi in episode_blocks(store, marker):
        block = {name: np.asarray(arr[lo:hi]) for name, arr in arrays.items()}
        check_still_sealed(store, partition, sid)
        for e in range(first, last):
            a, length = int(offsets[e]) - lo, int(lengths[e])
            yield _episode_from_block(
                store, block, a, length, int(marker.time_starts[e]), env_names[e], sources[e], metas[e]
            )


def episode_blocks(store: TrajectoryStore, marker: SegmentMarker) -> Iterator[tuple[int, int, int, int]]:
    """(first episode, end episode, first row, end row) of consecutive episodes spanning about BLOCK_BYTES."""
    offsets, lengths = marker.row_offsets, marker.lengths
    row_bytes = max(1, sum(f.row_bytes for f in store.fields.values()))
    block_rows = max(1, BLOCK_BYTES // row_bytes)
    first = 0
    while first < marker.info.episodes:
        last = first + 1
        while last < marker.info.episodes and offsets[last] + lengths[last] + 1 - offsets[first] <= block_rows:
            last += 1
        yield first, last, int(offsets[first]), int(offsets[last - 1] + lengths[last - 1] + 1)
        first = last


def episode_meta(group: Any, episodes: int) -> tuple[list[str], list[str], list[dict[str, Any]]]:
    """Per-episode env names, sources and metadata stored in a segment's attributes."""
    meta = dict(group.attrs).get("episodes") or {}
    return (
        list(meta.get("env_name") or [""] * episodes),
        list(meta.get("source") or [""] * episodes),
        list(meta.get("meta") or [{}] * episodes),
    )


def _episode_from_block(
    store: TrajectoryStore,
    block: dict[str, np.ndarray],
    a: int,
    length: int,
    time_start: int,
    env_name: str,
    source: str,
    meta: dict[str, Any],
) -> Episode:
    obs = {name[4:]: block[name][a : a + length + 1] for name in store.fields if name.startswith("obs/")}
    goals = {name[6:]: block[name][a : a + length + 1] for name in store.fields if name.startswith("goals/")}
    return Episode(
        obs=obs,
        actions=block["actions"][a : a + length],
        rewards=block["rewards"][a : a + length],
        terminated=block["terminated"][a : a + length],
        truncated=block["truncated"][a : a + length],
        goals=goals,
        env_name=env_name,
        source=source,
        time_start=time_start,
        meta=meta,
    )
