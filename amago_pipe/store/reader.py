"""Reading sealed segments: open a segment's arrays, load it whole, read rows, rebuild its Episodes.

Every open checks the segment's metadata and chunk listing and every read its chunks' checksums, so damage
is a DataError naming the segment and the fix, never zeros or a traceback.

numpy + zarr only; must not import torch or click.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from amago_pipe.errors import DataError
from amago_pipe.store.episode import Episode
from amago_pipe.store.files import StoreFiles
from amago_pipe.store.format import marker_key, segment_key
from amago_pipe.store.info import SegmentMarker

BLOCK_BYTES = 64 << 20
"""Rows are read in blocks of about this many uncompressed bytes when iterating episodes."""
EPISODE_META = ("env_name", "source", "meta")
"""Per-episode lists a sealed segment keeps in its group attributes under "episodes"."""


class SegmentVanished(Exception):
    """A sealed segment disappeared (evicted or dropped) while it was being read."""


def damaged(files: StoreFiles, partition: str, segment_id: str, detail: str) -> DataError:
    """The error every read of a damaged sealed segment raises: which segment, what is wrong, the fix."""
    return DataError(
        f"{files.url}: segment {partition}/{segment_id} is damaged: {detail}; run "
        f"`amago-pipe store verify {files.url} --quarantine` to move it aside (its episodes are then left out)"
    )


def segment_problem(files: StoreFiles, marker: SegmentMarker) -> tuple[str | None, Any, dict[str, Any]]:
    """(problem or None, group, arrays by field) of a sealed segment, from metadata and chunk listings only.

    A problem is: the group or an array missing or unreadable, the episode table gone from the group's
    attributes, an array of the wrong shape or dtype, or chunks missing (zarr would read them as zeros).
    """
    import zarr

    partition, sid, rows = marker.info.partition, marker.info.id, marker.info.rows
    try:
        group = zarr.open_group(files.backend.zarr_store(), path=segment_key(partition, sid), mode="r")
    except Exception as e:  # zarr raises its own errors for a missing or malformed node
        return f"segment group missing or unreadable ({type(e).__name__}: {e})", None, {}
    attrs = dict(group.attrs)
    table = attrs.get("episodes")
    if (
        attrs.get("rows") != rows
        or not isinstance(table, dict)
        or any(not isinstance(table.get(k), list) or len(table[k]) != marker.info.episodes for k in EPISODE_META)
    ):
        return "the segment metadata (zarr.json attributes) lost its row count or episode table", group, {}
    arrays: dict[str, Any] = {}
    for name, f in files.fields.items():
        try:
            arr = group[name]
        except Exception as e:
            return f"array '{name}' missing ({type(e).__name__})", group, arrays
        if not isinstance(arr, zarr.Array):
            return f"'{name}' is a group, expected an array", group, arrays
        expected = (rows, *f.shape)
        if tuple(arr.shape) != expected or np.dtype(arr.dtype) != f.dtype:
            return f"array '{name}' is {tuple(arr.shape)} {arr.dtype}, expected {expected} {f.dtype}", group, arrays
        present = _chunks_present(files, f"{segment_key(partition, sid)}/{name}", arr)
        if present != arr.nchunks:
            return f"array '{name}' has {present} of {arr.nchunks} chunks", group, arrays
        arrays[name] = arr
    return None, group, arrays


def _chunks_present(files: StoreFiles, key: str, arr: Any) -> int:
    """How many chunks of `arr` (stored under `key`) exist: one directory listing for the flat chunk keys
    segments are written with (`c.<i>.0...`), zarr's own (slower) count otherwise."""
    grid = tuple(arr.cdata_shape)
    names = [arr.metadata.chunk_key_encoding.encode_chunk_key((i,) + (0,) * (len(grid) - 1)) for i in range(grid[0])]
    if any(g != 1 for g in grid[1:]) or any("/" in n for n in names):
        return int(arr.nchunks_initialized)
    listed = set(files.backend.list_dir(key))
    return sum(n in listed for n in names)


def open_segment(files: StoreFiles, marker: SegmentMarker) -> tuple[Any, dict[str, Any]]:
    """The segment's zarr group and its arrays by field name, checked by `segment_problem` (once per open).

    SegmentVanished when it is gone (evicted meanwhile); DataError naming the segment when it is damaged.
    """
    problem, group, arrays = segment_problem(files, marker)
    if problem is not None:
        check_still_sealed(files, marker.info.partition, marker.info.id)
        raise damaged(files, marker.info.partition, marker.info.id, problem)
    return group, arrays


def check_still_sealed(files: StoreFiles, partition: str, segment_id: str) -> None:
    """Raise SegmentVanished when the marker is gone. Deleters remove the marker before the data, so data
    read before this check succeeds was complete."""
    if not files.backend.exists(marker_key(partition, segment_id)):
        raise SegmentVanished(segment_key(partition, segment_id))


def read_field(files: StoreFiles, marker: SegmentMarker, name: str, array: Any, selection: Any) -> np.ndarray:
    """`array[selection]` (array `name`, or its `.oindex`) as numpy; DataError naming the segment when a chunk
    fails to decode or its checksum does not match, SegmentVanished when the segment was evicted meanwhile."""
    try:
        return np.asarray(array[selection])
    except MemoryError:
        raise
    except Exception as e:
        check_still_sealed(files, marker.info.partition, marker.info.id)
        raise damaged(files, marker.info.partition, marker.info.id, decode_problem(name, e)) from e


def decode_problem(name: str, error: Exception) -> str:
    """What a failed chunk read says about array `name`."""
    if "checksum" in str(error):
        return f"array '{name}' fails to decode (a chunk fails its crc32c checksum: its file changed on disk)"
    return f"array '{name}' fails to decode ({type(error).__name__}: {error})"


def read_rows(
    files: StoreFiles, marker: SegmentMarker, arrays: dict[str, Any], rows: np.ndarray
) -> dict[str, np.ndarray]:
    """Rows at arbitrary (sorted or not, repeated or not) indices of each array; only touched chunks are read."""
    uniq, inverse = np.unique(rows, return_inverse=True)
    return {name: read_field(files, marker, name, arr.oindex, uniq)[inverse] for name, arr in arrays.items()}


def iter_segment_episodes(files: StoreFiles, marker: SegmentMarker) -> Iterator[Episode]:
    """Rebuild a segment's episodes in order, reading about BLOCK_BYTES at a time."""
    partition, sid = marker.info.partition, marker.info.id
    group, arrays = open_segment(files, marker)
    env_names, sources, metas = episode_meta(group)
    offsets, lengths = marker.row_offsets, marker.lengths
    for first, last, lo, hi in episode_blocks(files, marker):
        block = read_block(files, marker, arrays, lo, hi)
        check_still_sealed(files, partition, sid)
        for e in range(first, last):
            a, length = int(offsets[e]) - lo, int(lengths[e])
            yield _episode_from_block(
                files, block, a, length, int(marker.time_starts[e]), env_names[e], sources[e], metas[e]
            )


def read_rewards(files: StoreFiles, marker: SegmentMarker) -> np.ndarray:
    """Every step's reward of a segment's episodes, in order (float32, the rows past each episode's end left out)."""
    _, arrays = open_segment(files, marker)
    rows = read_field(files, marker, "rewards", arrays["rewards"], slice(0, marker.info.rows))
    check_still_sealed(files, marker.info.partition, marker.info.id)
    keep = np.zeros(len(rows) + 1, dtype=np.int64)
    np.add.at(keep, marker.row_offsets.astype(np.int64), 1)
    np.add.at(keep, (marker.row_offsets + marker.lengths).astype(np.int64), -1)
    return rows[np.cumsum(keep[:-1]) > 0]


def read_block(
    files: StoreFiles, marker: SegmentMarker, arrays: dict[str, Any], lo: int, hi: int
) -> dict[str, np.ndarray]:
    """Rows [lo, hi) of every array."""
    return {name: read_field(files, marker, name, arr, slice(lo, hi)) for name, arr in arrays.items()}


def episode_blocks(files: StoreFiles, marker: SegmentMarker, first: int = 0) -> Iterator[tuple[int, int, int, int]]:
    """(first episode, end episode, first row, end row) of consecutive episodes from episode `first` on,
    each block spanning about BLOCK_BYTES."""
    offsets, lengths = marker.row_offsets, marker.lengths
    row_bytes = max(1, sum(f.row_bytes for f in files.fields.values()))
    block_rows = max(1, BLOCK_BYTES // row_bytes)
    while first < marker.info.episodes:
        last = first + 1
        while last < marker.info.episodes and offsets[last] + lengths[last] + 1 - offsets[first] <= block_rows:
            last += 1
        yield first, last, int(offsets[first]), int(offsets[last - 1] + lengths[last - 1] + 1)
        first = last


def episode_meta(group: Any) -> tuple[list[str], list[str], list[dict[str, Any]]]:
    """Per-episode env names, sources and metadata stored in a segment's attributes (checked by `open_segment`)."""
    meta = dict(group.attrs)["episodes"]
    return list(meta["env_name"]), list(meta["source"]), list(meta["meta"])


def _episode_from_block(
    files: StoreFiles,
    block: dict[str, np.ndarray],
    a: int,
    length: int,
    time_start: int,
    env_name: str,
    source: str,
    meta: dict[str, Any],
) -> Episode:
    obs = {name[4:]: block[name][a : a + length + 1] for name in files.fields if name.startswith("obs/")}
    goals = {name[6:]: block[name][a : a + length + 1] for name in files.fields if name.startswith("goals/")}
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
