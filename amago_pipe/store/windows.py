"""Where windows go: the episode index of a partition and the placement modes, all vectorised numpy.

Modes (episodes of T steps, windows of L steps; a window never crosses an episode boundary):

- "timesteps" (default): a raw start s is drawn uniformly over the positions [-(L-1), T-1] of every episode
  (episodes weighted by their T+L-1 raw starts), then clamped into [0, max(T-L, 0)]. Windows are full
  whenever T >= L, and every timestep, first and last included, is covered between 1x and 2x as often as
  an interior one (the clamping piles extra mass on the windows touching either end; nothing is
  under-sampled). An episode shorter than L gives one padded window.
- "episodes": an episode uniformly, then s as above within it.
- "starts": window starts uniform over [0, max(T-L, 0)] (AMAGO's slice sampler; episodes weighted by their
  number of starts): full windows, but the first and last L-1 steps of an episode are covered less.

Balance "task": each task (episode `env_name`) of a partition gets an equal share of its windows, placed by the
mode within the task; "none" (default) lets tasks share in proportion to their data.

numpy only; must not import torch or click.
"""

from __future__ import annotations

import numpy as np

from amago_pipe.store.info import SegmentMarker

MODES = ("timesteps", "episodes", "starts")
BALANCES = ("none", "task")


class PartitionIndex:
    """Every episode of one partition (segments in id order): lengths, rows, time starts, arena rows."""

    def __init__(self, name: str, markers: list[SegmentMarker]):
        self.name = name
        self.markers = markers
        self.ids = tuple(m.info.id for m in markers)
        self.keys = [f"{name}/{sid}" for sid in self.ids]
        per_seg = [m.info.episodes for m in markers]
        self.lengths = np.concatenate([m.lengths for m in markers]) if markers else np.zeros(0, np.int64)  # (E,)
        self.seg_of_ep = np.repeat(np.arange(len(markers)), per_seg).astype(np.int64)  # (E,)
        self.row_in_seg = np.concatenate([m.row_offsets for m in markers]) if markers else np.zeros(0, np.int64)  # (E,)
        self.time_starts = (
            np.concatenate([m.time_starts for m in markers]) if markers else np.zeros(0, np.int64)
        )  # (E,)
        self.timesteps = int(self.lengths.sum())
        self.episodes = len(self.lengths)
        self.arena_rows = np.full(self.episodes, -1, dtype=np.int64)  # (E,) first arena row, -1 when cold
        self.spill_rows = np.full(self.episodes, -1, dtype=np.int64)  # (E,) first row in the spill arena, or -1
        self._starts: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}
        self.task_of: np.ndarray | None = None
        """(E,) task code of each episode (index into `task_names`); set by `set_tasks` for balanced draws."""
        self.task_names: list[str] = []
        self._balanced: dict[tuple[int, str], np.ndarray] = {}

    def set_tasks(self, names: list[tuple[str, ...]]) -> None:
        """Each marker's per-episode env names (in marker order): enables `balance="task"`."""
        flat = [n for seg in names for n in seg]
        self.task_names = sorted(set(flat))
        codes = {n: i for i, n in enumerate(self.task_names)}
        self.task_of = np.asarray([codes[n] for n in flat], dtype=np.int64)  # (E,)
        self._balanced.clear()

    def env_name(self, episode: int) -> str:
        """The env name (task) of episode `episode`; needs `set_tasks`."""
        if self.task_of is None:
            raise RuntimeError("PartitionIndex.env_name() before set_tasks()")
        return self.task_names[int(self.task_of[episode])]

    def remap(self, segment_rows: np.ndarray, spill_rows: np.ndarray | None = None) -> None:
        """Set episode arena rows from `segment_rows` (S,), the first arena row of each segment or -1 (and the
        rows in the spill arena from `spill_rows`)."""
        seg_rows = segment_rows[self.seg_of_ep]  # (E,)
        self.arena_rows = np.where(seg_rows >= 0, seg_rows + self.row_in_seg, -1)
        if spill_rows is not None:
            seg_rows = spill_rows[self.seg_of_ep]  # (E,)
            self.spill_rows = np.where(seg_rows >= 0, seg_rows + self.row_in_seg, -1)

    def weight(self, mode: str, seq_len: int) -> int:
        """This partition's share when no mixture weights are given: its number of draws in `mode`."""
        if mode == "episodes":
            return self.episodes
        return int(self._start_counts(seq_len, mode)[1][-1]) if self.episodes else 0

    def draw(
        self, n: int, seq_len: int, mode: str, rng: np.random.Generator, balance: str = "none"
    ) -> tuple[np.ndarray, np.ndarray]:
        """(episode index (n,), window start within the episode (n,)) for `n` windows."""
        if balance == "task":
            return self._draw_balanced(n, seq_len, mode, rng)
        if mode == "episodes":
            ep = rng.integers(0, self.episodes, n)
            raw = (rng.random(n) * (self.lengths[ep] + seq_len - 1)).astype(np.int64) - (seq_len - 1)
        else:
            counts, cum = self._start_counts(seq_len, mode)
            g = rng.integers(0, int(cum[-1]), n)
            ep = np.searchsorted(cum, g, side="right")
            raw = g - (cum[ep] - counts[ep])
            if mode == "starts":
                return ep, raw
            raw -= seq_len - 1
        return ep, np.minimum(np.maximum(raw, 0), np.maximum(self.lengths[ep] - seq_len, 0))

    def _draw_balanced(
        self, n: int, seq_len: int, mode: str, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """`draw` with every task given the same share: episodes weighted by their draws / their task's draws."""
        if self.task_of is None:
            raise RuntimeError("PartitionIndex.draw(balance='task') before set_tasks()")
        counts = np.ones(self.episodes, np.int64) if mode == "episodes" else self._start_counts(seq_len, mode)[0]
        key = (seq_len, mode)
        if key not in self._balanced:
            per_task = np.bincount(self.task_of, weights=counts, minlength=len(self.task_names))  # (K,)
            self._balanced[key] = np.cumsum(counts / per_task[self.task_of])  # (E,), ends at K
        cum = self._balanced[key]
        ep = np.minimum(np.searchsorted(cum, rng.random(n) * cum[-1], side="right"), self.episodes - 1)
        if mode == "episodes":
            raw = (rng.random(n) * (self.lengths[ep] + seq_len - 1)).astype(np.int64) - (seq_len - 1)
        else:
            raw = (rng.random(n) * counts[ep]).astype(np.int64)
            if mode == "starts":
                return ep, raw
            raw -= seq_len - 1
        return ep, np.minimum(np.maximum(raw, 0), np.maximum(self.lengths[ep] - seq_len, 0))

    def _start_counts(self, seq_len: int, mode: str) -> tuple[np.ndarray, np.ndarray]:
        """Draws per episode (E,) and their cumulative sum: T+L-1 raw starts, or max(T-L+1, 1) in "starts"."""
        key = (seq_len, mode)
        if key not in self._starts:
            if len(self._starts) > 16:
                self._starts.clear()
            if mode == "starts":
                counts = np.maximum(self.lengths - seq_len + 1, 1)  # (E,)
            else:
                counts = self.lengths + (seq_len - 1)  # (E,)
            self._starts[key] = (counts, np.cumsum(counts))
        return self._starts[key]
