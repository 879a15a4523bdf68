"""`WindowSampler`: batches of windows from sealed segments. Segments that fit `cache_bytes` are decompressed into
the RAM arena; with a disk tier the others go to the spill arena (mapped files: page cache, not the process's
memory) and, for their big fields (images), to tier files read window by window; without one they are read
from zarr. Batches are assembled in gather.py.

Segments are re-listed at most every `refresh_seconds` (at once after a seal, drop or eviction made
through the same `StoreFiles`). A segment that vanishes mid-read makes the sampler re-list and draw the
batch again. Placement modes live in `windows.py`. numpy + zarr only; must not import torch or click.
"""

from __future__ import annotations

import os
import time
import warnings

import numpy as np

from amago_pipe.errors import ConfigError, DataError, StoreFormatError, did_you_mean
from amago_pipe.store.cache import SegmentCache, SpillCache
from amago_pipe.store.cold import ColdReader
from amago_pipe.store.files import StoreFiles
from amago_pipe.store.gather import BatchGatherer
from amago_pipe.store.info import SegmentMarker, WindowBatch
from amago_pipe.store.reader import (
    SegmentVanished,
    check_still_sealed,
    episode_meta,
    open_segment,
    read_block,
)
from amago_pipe.store.tier import DiskTier, TierWarning, big_fields, row_blocks
from amago_pipe.store.windows import BALANCES, MODES, PartitionIndex

RETRIES = 8
LOAD_BLOCK_BYTES = 4 << 20
"""Segments are decompressed into the arenas this many bytes at a time (zarr's buffers stay small)."""


class CacheBudgetWarning(UserWarning):
    """The RAM budget (`cache_bytes`) is smaller than a segment, which therefore is never held in RAM."""


class WindowSampler:
    """Samples `WindowBatch`es from one store. Not thread-safe; use one per process or thread."""

    def __init__(self, files: StoreFiles, *, cache_bytes: int, refresh_seconds: float, tier: DiskTier | None = None):
        self.files = files
        self.tier = tier
        """Where cold segments are read from (None: from zarr)."""
        self.cache_bytes = cache_bytes
        self._warned_budget = False
        self.refresh_seconds = refresh_seconds
        """Sealed segments are re-listed at most this often."""
        self.cache = SegmentCache(files.fields, cache_bytes)
        self.indexes: dict[str, PartitionIndex] = {}
        self._listed_at: dict[str, float] = {}
        self._cache_version = -1
        self.spill: SpillCache | None = None
        """The small fields of the segments not in RAM (created on first need, in the tier's folder)."""
        self._spill_pid = 0
        self._spill_version = -1
        self.big = big_fields(files.fields)
        self.gatherer = BatchGatherer(files.fields, self.big, ColdReader(files, tier))
        self._known: list[str] = []
        self._known_at = -np.inf
        self._files_version = files.version

    def invalidate(self) -> None:
        """Make the next `sample` re-list partitions and segments."""
        self._listed_at.clear()
        self._known_at = -np.inf

    def _partitions(self, *, fresh: bool = False) -> list[str]:
        now = time.monotonic()
        if fresh or now - self._known_at >= self.refresh_seconds:
            self._known, self._known_at = self.files.partitions(), now
        return self._known

    def sample(
        self,
        batch_size: int,
        seq_len: int,
        *,
        partitions: dict[str, float] | None,
        rng: np.random.Generator,
        mode: str = "timesteps",
        balance: str = "none",
        tasks: bool = False,
    ) -> WindowBatch:
        """`batch_size` windows of `seq_len` steps; see `TrajectoryStore.sample`."""
        _check_args(batch_size, seq_len, mode, balance)
        if self._files_version != self.files.version:  # sealed, dropped or replaced through this store
            self._files_version = self.files.version
            self.invalidate()
        names = self._resolve(partitions)
        for _ in range(RETRIES):
            self._refresh(names)
            indexes = [self.indexes[n] for n in names]
            if balance == "task" or tasks:
                for idx in indexes:
                    if idx.task_of is None:
                        idx.set_tasks([self._env_names(m) for m in idx.markers])
            part, ep = self._draw_partitions(indexes, partitions, batch_size, seq_len, mode, rng)
            plan = self._plan(indexes, part, ep, seq_len, mode, rng, balance)
            try:
                batch = self._gather(indexes, plan, seq_len, names)
            except SegmentVanished:
                self.invalidate()
                continue
            if tasks:
                batch.env_names = tuple(
                    indexes[p].env_name(e) for p, e in zip(plan["partition"].tolist(), plan["episode"].tolist())
                )
            return batch
        raise StoreFormatError(f"{self.files.url}: segments kept vanishing while sampling ({RETRIES} tries)")

    def task_names(self, partition: str) -> list[str]:
        """The distinct env names (tasks) of a partition's episodes, sorted."""
        return sorted({n for m in self.files.markers(partition) for n in self._env_names(m)})

    def warm(self, partitions: list[str] | None = None) -> dict[str, int]:
        """Fill the RAM and spill arenas and build (or check) the tier files of the segments not in RAM now, rather
        than when sampling first needs them. Returns segment counts: `ram`, `spill` (not in RAM), `tier` (of
        those, with a tier file for their big fields) and `zarr` (read from zarr)."""
        names = self._resolve(None if partitions is None else dict.fromkeys(partitions, 1.0))
        self._refresh(names)
        counts = {"ram": 0, "spill": 0, "tier": 0, "zarr": 0}
        for name in names:
            for key, marker in zip(self.indexes[name].keys, self.indexes[name].markers):
                if self.cache.row_of(key) >= 0:
                    counts["ram"] += 1
                elif self.spill is None or self.spill.row_of(key) < 0:
                    counts["zarr"] += 1
                else:
                    counts["spill"] += 1
                    counts["tier"] += bool(self.big) and self.tier is not None and self.tier.handle(marker) is not None
        return counts

    # ------------------------------------------------------------ listing and residency

    def _resolve(self, partitions: dict[str, float] | None) -> list[str]:
        known = self._partitions()
        if partitions is None:
            if not known:
                raise DataError(f"{self.files.url}: nothing to sample, the store has no partitions yet")
            return known
        if not partitions:
            raise ConfigError("sample: `partitions` is empty; give weights like {'protected': 0.5, 'fifo': 0.5}")
        if any(name not in known for name in partitions):
            known = self._partitions(fresh=True)
        for name, weight in partitions.items():
            if name not in known:
                raise DataError(
                    f"sample: no partition '{name}' in {self.files.url} (partitions: {', '.join(known) or 'none'})"
                    f"{did_you_mean(name, known)}"
                )
            if not np.isfinite(weight) or weight < 0:
                raise ConfigError(f"sample: weight of partition '{name}' is {weight}; expected a finite number >= 0")
        return sorted(partitions)

    def _refresh(self, names: list[str]) -> None:
        if self.spill is not None and self._spill_pid != os.getpid():  # forked: the spill arena is the parent's
            self._cache_version = -1
        now = time.monotonic()
        for name in names:
            if now - self._listed_at.get(name, -np.inf) < self.refresh_seconds and name in self.indexes:
                continue
            markers = self.files.markers(name)
            if name not in self.indexes or self.indexes[name].ids != tuple(m.info.id for m in markers):
                self.indexes[name] = PartitionIndex(name, markers)
                self._cache_version = -1
            self._listed_at[name] = now
        if self._cache_version == -1:
            live = {k for idx in self.indexes.values() for k in idx.keys}
            self.cache.forget(live)
            wanted = [(k, m.info.rows) for n in names for k, m in zip(self.indexes[n].keys, self.indexes[n].markers)]
            self._check_budget(wanted)
            self.cache.admit_into(wanted, self._load)
            self.gatherer.cold.forget(live)
            if self.tier is not None:
                for name in names:
                    self.tier.sweep(name, set(self.indexes[name].ids))
                self._admit_spill(wanted)
        spill_version = -1 if self.spill is None else self.spill.version
        if self._cache_version != self.cache.version or self._spill_version != spill_version:
            for idx in self.indexes.values():
                ram = np.asarray([self.cache.row_of(k) for k in idx.keys], dtype=np.int64)
                spill = None if self.spill is None else np.asarray([self.spill.row_of(k) for k in idx.keys], np.int64)
                idx.remap(ram, spill if spill is not None else np.full(len(idx.keys), -1, np.int64))
            self._cache_version, self._spill_version = self.cache.version, spill_version

    def _admit_spill(self, wanted: list[tuple[str, int]]) -> None:
        """While some segment does not fit the RAM arena, put the small fields of every segment into the spill arena
        (a fresh one after a fork: the parent's files are shared); RAM then serves the big fields, so a segment the
        spill could not load (it vanished) leaves RAM too. On a disk error the spill is given up: segments not in RAM
        are read from zarr."""
        if self.tier is None:
            return
        if all(self.cache.row_of(k) >= 0 for k, _ in wanted):
            if self.spill is not None:
                self.spill.close()
                self.spill = None
            return
        try:
            if self.spill is None or self._spill_pid != os.getpid():
                small = {n: f for n, f in self.files.fields.items() if n not in self.big}
                self.spill, self._spill_pid = SpillCache(small, self.tier.root.parent / "spill"), os.getpid()
            self.spill.forget({k for k, _ in wanted})
            self.spill.admit_into(wanted, self._load)
            vanished = {k for k, _ in wanted if self.spill.row_of(k) < 0}
            if vanished:  # evicted after RAM held it: out of RAM too, or its windows would read empty spill rows
                self.cache.forget({k for k, _ in wanted} - vanished)
        except OSError as e:
            warnings.warn(
                f"{self.files.url}: no spill arena in {self.tier.root.parent / 'spill'} ({type(e).__name__}: {e}); "
                "the segments that do not fit cache_bytes are read from zarr (~1 ms a read); free disk space or pass "
                "cache_dir= to TrajectoryStore.open",
                TierWarning,
                stacklevel=6,
            )
            self.spill, self.tier = None, None
            self.gatherer.cold.tier = None

    def _check_budget(self, wanted: list[tuple[str, int]]) -> None:
        """Warn (once) when a segment is larger than the whole RAM budget; cache_bytes=0 means "no RAM cache"."""
        if self._warned_budget or self.cache_bytes <= 0 or not wanted:
            return
        key, rows = max(wanted, key=lambda kv: kv[1])
        need = (rows + 1) * self.cache.row_bytes
        if need <= self.cache_bytes:
            return
        self._warned_budget = True
        where = f"the disk tier at {self.tier.root}" if self.tier is not None else "zarr (~1 ms a read)"
        warnings.warn(
            f"{self.files.url}: cache_bytes={self.cache_bytes:,} is smaller than segment {key} ({need:,} bytes "
            f"decompressed), which is never held in RAM: its windows are read from {where}; give "
            f"TrajectoryStore.open(..., cache_bytes={need:,}) or more, or write smaller segments "
            "(store.writer(..., segment_timesteps=...))",
            CacheBudgetWarning,
            stacklevel=5,
        )

    def _env_names(self, marker: SegmentMarker) -> tuple[str, ...]:
        """A segment's per-episode env names: from its marker, or (older markers) from the segment's attributes."""
        if marker.env_names is not None:
            return marker.env_names
        return tuple(episode_meta(open_segment(self.files, marker)[0])[0])

    def _load(self, key: str, dest: dict[str, np.ndarray]) -> bool:
        """Decompress a segment's fields `dest` into their arena rows, a block at a time; False when it vanished."""
        name, sid = key.split("/", 1)
        marker = self.indexes[name].markers[self.indexes[name].ids.index(sid)]
        try:
            _, opened = open_segment(self.files, marker)
            arrays = {n: opened[n] for n in dest}
            for lo, hi in row_blocks(arrays, marker.info.rows, LOAD_BLOCK_BYTES):
                for field, value in read_block(self.files, marker, arrays, lo, hi).items():
                    dest[field][lo:hi] = value
            check_still_sealed(self.files, name, sid)
        except SegmentVanished:
            return False
        return True

    # ------------------------------------------------------------ drawing

    def _draw_partitions(
        self,
        indexes: list[PartitionIndex],
        partitions: dict[str, float] | None,
        batch_size: int,
        seq_len: int,
        mode: str,
        rng: np.random.Generator,
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Partition of each window (B,) and the window rows of each partition."""
        if partitions is None:
            weights = np.asarray([idx.weight(mode, seq_len) for idx in indexes], dtype=np.float64)
        else:  # mixture weights over the partitions that hold data
            weights = np.asarray([partitions[idx.name] if idx.episodes else 0.0 for idx in indexes], dtype=np.float64)
        if weights.sum() <= 0:
            names = ", ".join(idx.name for idx in indexes)
            raise DataError(
                f"sample: nothing to sample from {self.files.url}: partitions {names} hold no episodes "
                "(or all have weight 0)"
            )
        if len(indexes) == 1:
            part = np.zeros(batch_size, dtype=np.int64)
        else:
            cum = np.cumsum(weights) / weights.sum()
            part = np.minimum(np.searchsorted(cum, rng.random(batch_size), side="right"), len(indexes) - 1)
        return part, [np.flatnonzero(part == i) for i in range(len(indexes))]

    def _plan(
        self,
        indexes: list[PartitionIndex],
        part: np.ndarray,
        rows_of: list[np.ndarray],
        seq_len: int,
        mode: str,
        rng: np.random.Generator,
        balance: str,
    ) -> dict[str, np.ndarray]:
        """Per window: partition, episode, start within the episode, length, arena row, time start."""
        if len(indexes) == 1:  # the common case, without scatter
            idx = indexes[0]
            ep, start = idx.draw(len(part), seq_len, mode, rng, balance)
            return {
                "partition": part,
                "episode": ep,
                "start": start,
                "length": idx.lengths[ep],
                "arena": idx.arena_rows[ep],
                "spill": idx.spill_rows[ep],
                "time0": idx.time_starts[ep],
            }
        b = len(part)
        plan = {k: np.zeros(b, dtype=np.int64) for k in ("episode", "start", "length", "arena", "spill", "time0")}
        plan["partition"] = part
        for i, idx in enumerate(indexes):
            sel = rows_of[i]
            if not len(sel):
                continue
            ep, start = idx.draw(len(sel), seq_len, mode, rng, balance)
            plan["episode"][sel], plan["start"][sel] = ep, start
            plan["length"][sel] = idx.lengths[ep]
            plan["arena"][sel] = idx.arena_rows[ep]
            plan["spill"][sel] = idx.spill_rows[ep]
            plan["time0"][sel] = idx.time_starts[ep]
        return plan

    # ------------------------------------------------------------ gathering

    def _gather(
        self, indexes: list[PartitionIndex], plan: dict[str, np.ndarray], seq_len: int, names: list[str]
    ) -> WindowBatch:
        spill = self.spill.arrays if self.spill is not None and self._spill_pid == os.getpid() else None
        return self.gatherer.gather(self.cache.arrays, spill, indexes, plan, seq_len, names)


def _check_args(batch_size: int, seq_len: int, mode: str, balance: str = "none") -> None:
    if not isinstance(batch_size, int | np.integer) or batch_size < 1:
        raise ConfigError(f"sample: batch_size must be a positive integer, got {batch_size!r}")
    if not isinstance(seq_len, int | np.integer) or seq_len < 1:
        raise ConfigError(f"sample: seq_len must be a positive integer, got {seq_len!r}")
    if mode not in MODES:
        raise ConfigError(f"sample: unknown mode {mode!r} (known: {', '.join(MODES)}){did_you_mean(mode, MODES)}")
    if balance not in BALANCES:
        raise ConfigError(f"sample: unknown balance {balance!r} (known: {', '.join(BALANCES)})")
