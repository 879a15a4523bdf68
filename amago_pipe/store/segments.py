"""Writing and reading one segment: step-aligned rows, whole-chunk flushes, sealing by marker written last.

`SegmentBuilder` writes one segment; `SegmentWriter` (what `TrajectoryStore.writer()` returns) validates
episodes and rolls segments over. numpy + zarr only; must not import torch or click.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import numpy as np

from amago_pipe.errors import DataError, StoreFormatError
from amago_pipe.store.episode import Episode
from amago_pipe.store.files import StoreFiles
from amago_pipe.store.format import (
    FieldSpec,
    chunk_rows,
    compressors,
    marker_key,
    new_segment_id,
    segment_created,
    segment_key,
    writer_info,
)
from amago_pipe.store.info import SegmentInfo, SegmentMarker
from amago_pipe.store.reader import check_still_sealed, episode_blocks, episode_meta, open_segment, read_block


def episode_rows(episode: Episode, fields: dict[str, FieldSpec]) -> dict[str, np.ndarray]:
    """(T+1, ...) arrays per field: observations as given, step arrays padded with one zero row."""
    length = episode.length
    steps = {
        "actions": episode.actions,
        "rewards": episode.rewards,
        "terminated": episode.terminated,
        "truncated": episode.truncated,
    }
    rows: dict[str, np.ndarray] = {}
    for name, f in fields.items():
        if name.startswith("obs/"):
            rows[name] = np.ascontiguousarray(episode.obs[name[4:]], dtype=f.dtype)
        elif name.startswith("goals/"):
            rows[name] = np.ascontiguousarray(episode.goals[name[6:]], dtype=f.dtype)
        else:
            src = np.asarray(steps[name])
            padded = np.zeros((length + 1, *f.shape), dtype=f.dtype)  # (T+1, ...)
            padded[:length] = (src != 0) if f.dtype == np.bool_ and src.dtype != np.bool_ else src
            rows[name] = padded
    return rows


def settle_chunk_writes() -> None:
    """Wait for the chunk writes zarr still runs after a failed write of several chunks.

    zarr gathers a write's chunks without cancelling the others when one fails, so they keep landing after the
    error is raised: a segment deleted at once (a failed append, a full disk) would get chunk files back and leave
    its partition non-empty. Waits for the tasks on zarr's loop at the time of the call."""
    import asyncio

    from zarr.core.sync import sync

    async def settle() -> None:
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if others:
            await asyncio.wait(others)

    sync(settle())


class _FieldBuffer:
    """Rows of one array not yet written; written only in whole chunks until the segment is finished."""

    def __init__(self, array: Any, spec: FieldSpec, chunk: int):
        self.array, self.spec, self.chunk = array, spec, chunk
        self.pieces: list[np.ndarray] = []
        self.pending = 0
        self.written = 0

    def push(self, rows: np.ndarray) -> None:
        self.pieces.append(rows)
        self.pending += len(rows)
        if self.pending >= self.chunk:
            self.write(whole_chunks_only=True)

    def write(self, *, whole_chunks_only: bool) -> None:
        if not self.pending:
            return
        block = self.pieces[0] if len(self.pieces) == 1 else np.concatenate(self.pieces)
        n = (len(block) // self.chunk) * self.chunk if whole_chunks_only else len(block)
        if n:
            self.array.resize((self.written + n, *self.spec.shape))
            try:
                self.array[self.written : self.written + n] = block[:n]
            except BaseException:
                settle_chunk_writes()  # before anyone deletes or rewrites this segment
                raise
            self.written += n
        rest = block[n:]
        self.pieces = [rest] if len(rest) else []
        self.pending = len(rest)


class SegmentBuilder:
    """Writes one segment of a partition. Invisible to readers until `seal()` writes its marker."""

    def __init__(
        self,
        files: StoreFiles,
        partition: str,
        *,
        segment_id: str | None = None,
        expected_rows: int | None = None,
        attrs: dict[str, Any] | None = None,
    ):
        import zarr

        self.files, self.partition = files, partition
        self.id = segment_id or new_segment_id()
        self.attrs = dict(attrs or {})
        self.key = segment_key(partition, self.id)
        self.group = zarr.create_group(
            files.backend.zarr_store(), path=self.key, attributes={"writer": writer_info(), "attrs": self.attrs}
        )
        codec = compressors(files.codec)
        self.buffers: dict[str, _FieldBuffer] = {}
        for name, f in files.fields.items():
            chunk = chunk_rows(f.row_bytes, expected_rows)
            array = self.group.create_array(
                name,
                shape=(0, *f.shape),
                dtype=f.dtype,
                chunks=(chunk, *f.shape),
                compressors=codec,
                fill_value=False if f.dtype == np.bool_ else 0,
                config={"write_empty_chunks": True},
                chunk_key_encoding={"name": "default", "separator": "."},  # c.0.0 files: no directory per chunk
            )
            self.buffers[name] = _FieldBuffer(array, f, chunk)
        self.lengths: list[int] = []
        self.time_starts: list[int] = []
        self.returns: list[float] = []
        self.episode_meta: dict[str, list[Any]] = {"env_name": [], "source": [], "meta": []}

    @property
    def timesteps(self) -> int:
        return int(sum(self.lengths))

    @property
    def rows(self) -> int:
        return self.timesteps + len(self.lengths)

    def add_rows(
        self,
        rows: dict[str, np.ndarray],
        *,
        length: int,
        time_start: int,
        total_return: float,
        env_name: str = "",
        source: str = "",
        meta: dict[str, Any] | None = None,
    ) -> None:
        """Append the step-aligned rows (T+1 per field) of one episode."""
        self.add_block(rows, [length], [time_start], [total_return], [env_name], [source], [meta or {}])

    def add_block(
        self,
        rows: dict[str, np.ndarray],
        lengths: list[int],
        time_starts: list[int],
        returns: list[float],
        env_names: list[str],
        sources: list[str],
        metas: list[dict[str, Any]],
    ) -> None:
        """Append the rows of consecutive whole episodes (sum of lengths + episodes rows per field)."""
        for name, buf in self.buffers.items():
            buf.push(rows[name])
        self.lengths.extend(int(n) for n in lengths)
        self.time_starts.extend(int(t) for t in time_starts)
        self.returns.extend(float(r) for r in returns)
        self.episode_meta["env_name"].extend(env_names)
        self.episode_meta["source"].extend(sources)
        self.episode_meta["meta"].extend(metas)

    def flush(self) -> None:
        """Write every whole chunk buffered so far (memory stays bounded by about one chunk per array)."""
        for buf in self.buffers.values():
            buf.write(whole_chunks_only=True)

    def add_segment(self, src: StoreFiles, marker: SegmentMarker, first_episode: int = 0) -> None:
        """Append the episodes of a sealed segment of `src` from `first_episode` on, in blocks of whole episodes."""
        group, arrays = open_segment(src, marker)
        env_names, sources, metas = episode_meta(group)
        for first, last, lo, hi in episode_blocks(src, marker, first_episode):
            self.add_block(
                read_block(src, marker, arrays, lo, hi),
                marker.lengths[first:last].tolist(),
                marker.time_starts[first:last].tolist(),
                marker.returns[first:last].tolist(),
                env_names[first:last],
                sources[first:last],
                metas[first:last],
            )
        check_still_sealed(src, marker.info.partition, marker.info.id)

    def seal(self) -> SegmentMarker:
        """Write the remaining rows and the episode metadata, then the marker (last). Returns the marker.

        StoreFormatError (nothing committed) when the store was removed meanwhile, e.g. by a failed first
        conversion that saw no other writer yet."""
        if not self.files.backend.exists("zarr.json"):
            raise StoreFormatError(
                f"{self.files.url}: the store was removed while segment {self.id} was being written; nothing was "
                "committed — write again (the store is created anew)"
            )
        for buf in self.buffers.values():
            buf.write(whole_chunks_only=False)
            if buf.written != self.rows:
                raise DataError(
                    f"segment {self.id}: array {buf.spec.name} has {buf.written} rows, expected {self.rows}"
                )
        self.group.attrs.update({"episodes": self.episode_meta, "rows": self.rows})
        info = SegmentInfo(
            id=self.id,
            partition=self.partition,
            episodes=len(self.lengths),
            timesteps=self.timesteps,
            rows=self.rows,
            bytes=self.files.backend.size(self.key),
            created=segment_created(self.id),
            sealed=time.time(),
            attrs=self.attrs,
        )
        marker = SegmentMarker(
            info,
            np.asarray(self.lengths, dtype=np.int64),
            np.asarray(self.time_starts, dtype=np.int64),
            np.asarray(self.returns, dtype=np.float64),
            tuple(self.episode_meta["env_name"]),
        )
        self.files.backend.write_atomic(marker_key(self.partition, self.id), marker.to_json())
        return marker

    def abort(self) -> None:
        """Remove the unsealed segment."""
        self.files.backend.delete(self.key)


class SegmentWriter:
    """Appends episodes to a partition. Use as a context manager; see `TrajectoryStore.writer`."""

    def __init__(
        self,
        files: StoreFiles,
        partition: str,
        *,
        on_seal: Callable[[SegmentMarker], None],
        atomic: bool = False,
        attrs: dict[str, Any] | None = None,
        segment_timesteps: int = 100_000,
    ):
        if segment_timesteps < 1:
            raise DataError(f"writer: segment_timesteps must be >= 1, got {segment_timesteps}")
        self.files, self.partition, self.atomic = files, partition, atomic
        self.on_seal = on_seal
        """Called with each marker this writer seals (the store records it and applies the fifo capacity)."""
        self.attrs = dict(attrs or {})
        self.segment_timesteps = segment_timesteps
        self.sealed: list[SegmentInfo] = []
        """Segments this writer sealed, oldest first."""
        self.episodes_added = 0
        self.timesteps_added = 0
        self._builder: SegmentBuilder | None = None
        self._closed = False
        if atomic:  # the unsealed segment exists from the start: other processes see this writer at work
            self._builder = SegmentBuilder(files, partition, attrs=self.attrs)

    def __enter__(self) -> SegmentWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close()
        elif self.atomic:
            self.abort()
        else:
            try:  # keep the complete episodes added before the error
                self.close()
            except Exception:
                self.abort()

    def add(self, episode: Episode) -> None:
        """Validate `episode` against the store's spec and buffer it; full segments are sealed as they fill."""
        if self._closed:
            raise DataError(f"writer for partition '{self.partition}' is closed; open a new one with store.writer()")
        episode.validate(self.files.spec, name=f"episode {self.episodes_added} written to '{self.partition}'")
        rows = episode_rows(episode, self.files.fields)
        if self._builder is None:
            expected = None if self.atomic else self.segment_timesteps + max(1, self.segment_timesteps // 100)
            self._builder = SegmentBuilder(self.files, self.partition, expected_rows=expected, attrs=self.attrs)
        self._builder.add_rows(
            rows,
            length=episode.length,
            time_start=int(episode.time_start),
            total_return=episode.total_return,
            env_name=episode.env_name,
            source=episode.source,
            meta=episode.meta,
        )
        self.episodes_added += 1
        self.timesteps_added += episode.length
        if not self.atomic and self._builder.timesteps >= self.segment_timesteps:
            self._seal()

    def flush(self) -> None:
        """Non-atomic: seal what was added so far. Atomic: write buffered chunks to disk, still invisible."""
        if self._builder is None:
            return
        if self.atomic:
            self._builder.flush()
        else:
            self._seal()

    def close(self) -> None:
        """Seal everything added (one commit for an atomic writer). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._builder is not None:
            self._seal()

    def abort(self) -> None:
        """Drop every unsealed episode of this writer."""
        self._closed = True
        if self._builder is not None:
            self._builder.abort()
            self._builder = None

    def _seal(self) -> None:
        builder, self._builder = self._builder, None
        if builder is None or not builder.lengths:
            if builder is not None:
                builder.abort()
            return
        try:
            marker = builder.seal()
        except BaseException:
            builder.abort()
            raise
        self.sealed.append(marker.info)
        self.on_seal(marker)
