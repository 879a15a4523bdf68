"""`WindowSampler`: batches of windows from sealed segments, resident ones gathered from RAM, cold ones read.

Segments are re-listed at most every `refresh_seconds` (at once after a seal, drop or eviction made
through the same `StoreFiles`). A segment that vanishes mid-read makes the sampler re-list and draw the
batch again. Placement modes live in `windows.py`. numpy + zarr only; must not import torch or click.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

import numpy as np

from amago_pipe.errors import ConfigError, DataError, StoreFormatError, did_you_mean
from amago_pipe.store.cache import SegmentCache
from amago_pipe.store.files import StoreFiles
from amago_pipe.store.info import SegmentMarker, WindowBatch
from amago_pipe.store.reader import (
    SegmentVanished,
    check_still_sealed,
    episode_meta,
    load_segment,
    open_segment,
    read_rows,
)
from amago_pipe.store.windows import BALANCES, MODES, PartitionIndex

RETRIES = 8
OPEN_SEGMENTS = 64


class WindowSampler:
    """Samples `WindowBatch`es from one store. Not thread-safe; use one per process or thread."""

    def __init__(self, files: StoreFiles, *, cache_bytes: int, refresh_seconds: float):
        self.files = files
        self.refresh_seconds = refresh_seconds
        """Sealed segments are re-listed at most this often."""
        self.cache = SegmentCache(files.fields, cache_bytes)
        self.indexes: dict[str, PartitionIndex] = {}
        self._listed_at: dict[str, float] = {}
        self._cache_version = -1
        self._open: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._arange: dict[int, np.ndarray] = {}
        self._obs_fields = [(n[4:], n) for n in files.fields if n.startswith("obs/")]
        self._goal_fields = [(n[6:], n) for n in files.fields if n.startswith("goals/")]
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
            if balance == "task":
                for idx in indexes:
                    if idx.task_of is None:
                        idx.set_tasks([self._env_names(m) for m in idx.markers])
            part, ep = self._draw_partitions(indexes, partitions, batch_size, seq_len, mode, rng)
            plan = self._plan(indexes, part, ep, seq_len, mode, rng, balance)
            try:
                return self._gather(indexes, plan, seq_len, names)
            except SegmentVanished:
                self.invalidate()
        raise StoreFormatError(f"{self.files.url}: segments kept vanishing while sampling ({RETRIES} tries)")

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
            self.cache.admit(wanted, self._load)
            for sid in [k for k in self._open if k not in live]:
                del self._open[sid]
        if self._cache_version != self.cache.version:
            for idx in self.indexes.values():
                idx.remap(np.asarray([self.cache.row_of(k) for k in idx.keys], dtype=np.int64))
            self._cache_version = self.cache.version

    def _env_names(self, marker: SegmentMarker) -> tuple[str, ...]:
        """A segment's per-episode env names: from its marker, or (older markers) from the segment's attributes."""
        if marker.env_names is not None:
            return marker.env_names
        return tuple(episode_meta(open_segment(self.files, marker)[0])[0])

    def _load(self, key: str) -> dict[str, np.ndarray] | None:
        name, sid = key.split("/", 1)
        marker = self.indexes[name].markers[self.indexes[name].ids.index(sid)]
        try:
            return load_segment(self.files, marker)
        except SegmentVanished:
            return None

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
                "time0": idx.time_starts[ep],
            }
        b = len(part)
        plan = {k: np.zeros(b, dtype=np.int64) for k in ("episode", "start", "length", "arena", "time0")}
        plan["partition"] = part
        for i, idx in enumerate(indexes):
            sel = rows_of[i]
            if not len(sel):
                continue
            ep, start = idx.draw(len(sel), seq_len, mode, rng, balance)
            plan["episode"][sel], plan["start"][sel] = ep, start
            plan["length"][sel] = idx.lengths[ep]
            plan["arena"][sel] = idx.arena_rows[ep]
            plan["time0"][sel] = idx.time_starts[ep]
        return plan

    # ------------------------------------------------------------ gathering

    def _gather(
        self, indexes: list[PartitionIndex], plan: dict[str, np.ndarray], seq_len: int, names: list[str]
    ) -> WindowBatch:
        arrays = self.cache.arrays
        ar = self._arange.get(seq_len)
        if ar is None:
            ar = self._arange[seq_len] = np.arange(seq_len + 1)  # (L+1,)
        start, arena = plan["start"], plan["arena"]
        hot = arena >= 0  # (B,)
        all_hot = bool(hot.all())
        valid = (start[:, None] + ar) <= plan["length"][:, None]  # (B, L+1) real observations
        base = arena + start if all_hot else np.where(hot, arena + start, 0)  # (B,) arena row of obs 0
        rows = base[:, None] + ar  # (B, L+1) arena rows; padding -> row 0, which is all zeros
        rows *= valid if all_hot else valid & hot[:, None]
        step_rows = rows[:, :seq_len]  # (B, L)
        prev_rows = (base - 1) * ((start > 0) & hot)  # (B,)
        time_index = (plan["time0"] + start)[:, None] + ar  # (B, L+1)
        time_index *= valid
        batch = WindowBatch(
            obs={key: np.take(arrays[name], rows, axis=0) for key, name in self._obs_fields},
            actions=np.take(arrays["actions"], step_rows, axis=0),
            rewards=np.take(arrays["rewards"], step_rows, axis=0),
            terminated=np.take(arrays["terminated"], step_rows, axis=0),
            truncated=np.take(arrays["truncated"], step_rows, axis=0),
            time=time_index,
            mask=valid[:, 1:],
            goals={key: np.take(arrays[name], rows, axis=0) for key, name in self._goal_fields},
            prev_actions=np.take(arrays["actions"], prev_rows, axis=0),
            prev_rewards=np.take(arrays["rewards"], prev_rows, axis=0),
            partition=plan["partition"],
            partition_names=tuple(names),
        )
        if not all_hot:
            self._fill_cold(batch, indexes, plan, np.flatnonzero(~hot), seq_len)
        return batch

    def _fill_cold(
        self,
        batch: WindowBatch,
        indexes: list[PartitionIndex],
        plan: dict[str, np.ndarray],
        cold: np.ndarray,
        seq_len: int,
    ) -> None:
        """Read the windows of non-resident segments from zarr: one orthogonal read per segment and field."""
        by_segment: dict[tuple[int, int], list[int]] = {}
        for b in cold.tolist():
            idx = indexes[plan["partition"][b]]
            by_segment.setdefault((int(plan["partition"][b]), int(idx.seg_of_ep[plan["episode"][b]])), []).append(b)
        for (p, s), windows in by_segment.items():
            idx = indexes[p]
            sid, marker = idx.ids[s], idx.markers[s]
            pieces, spans = [], []
            for b in windows:
                first = int(idx.row_in_seg[plan["episode"][b]] + plan["start"][b])
                n_obs = min(seq_len, int(plan["length"][b] - plan["start"][b])) + 1
                has_prev = int(plan["start"][b] > 0)
                pieces.append(np.arange(first - has_prev, first + n_obs))
                spans.append((b, has_prev, n_obs))
            data = read_rows(self.files, marker, self._arrays(marker), np.concatenate(pieces))
            check_still_sealed(self.files, idx.name, sid)
            cursor = 0
            for b, has_prev, n_obs in spans:
                if has_prev:
                    batch.prev_actions[b] = data["actions"][cursor]
                    batch.prev_rewards[b] = data["rewards"][cursor]
                o = cursor + has_prev
                n_steps = min(n_obs, seq_len)
                for name, value in data.items():
                    if name.startswith("obs/"):
                        batch.obs[name[4:]][b, :n_obs] = value[o : o + n_obs]
                    elif name.startswith("goals/"):
                        batch.goals[name[6:]][b, :n_obs] = value[o : o + n_obs]
                    else:
                        getattr(batch, name)[b, :n_steps] = value[o : o + n_steps]
                cursor = o + n_obs

    def _arrays(self, marker: SegmentMarker) -> dict[str, Any]:
        """The arrays of a cold segment, opened (and checked) once while it stays among the OPEN_SEGMENTS."""
        key = f"{marker.info.partition}/{marker.info.id}"
        if key in self._open:
            self._open.move_to_end(key)
            return self._open[key]
        _, arrays = open_segment(self.files, marker)
        self._open[key] = arrays
        if len(self._open) > OPEN_SEGMENTS:
            self._open.popitem(last=False)
        return arrays


def _check_args(batch_size: int, seq_len: int, mode: str, balance: str = "none") -> None:
    if not isinstance(batch_size, int | np.integer) or batch_size < 1:
        raise ConfigError(f"sample: batch_size must be a positive integer, got {batch_size!r}")
    if not isinstance(seq_len, int | np.integer) or seq_len < 1:
        raise ConfigError(f"sample: seq_len must be a positive integer, got {seq_len!r}")
    if mode not in MODES:
        raise ConfigError(f"sample: unknown mode {mode!r} (known: {', '.join(MODES)}){did_you_mean(mode, MODES)}")
    if balance not in BALANCES:
        raise ConfigError(f"sample: unknown balance {balance!r} (known: {', '.join(BALANCES)})")
