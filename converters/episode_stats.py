"""Streaming statistics of converted episodes: running mean/std/min/max and per-array value ranges.

Summaries are computed per episode without touching the report (so in the read-ahead thread). numpy only.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from amago_pipe.store import Episode


@dataclass
class RunningStats:
    """Count, mean, std, min and max of a stream of numbers (float64 sums)."""

    count: int = 0
    total: float = 0.0
    total_sq: float = 0.0
    low: float = math.inf
    high: float = -math.inf

    def add(self, values: np.ndarray) -> None:
        """Add finite values (non-finite ones are ignored here; the report counts them separately)."""
        flat = np.asarray(values, dtype=np.float64).ravel()
        flat = flat[np.isfinite(flat)]
        if flat.size == 0:
            return
        self.count += int(flat.size)
        self.total += float(flat.sum())
        self.total_sq += float(np.square(flat).sum())
        self.low = min(self.low, float(flat.min()))
        self.high = max(self.high, float(flat.max()))

    def add_finite(self, values: np.ndarray) -> None:
        """Like `add` for values known to be finite (skips the NaN/inf mask)."""
        flat = np.asarray(values).ravel()
        if flat.size == 0:
            return
        self.count += int(flat.size)
        if flat.dtype.kind in "iu" and flat.dtype.itemsize == 1:
            total, total_sq = _byte_sums(flat)
        else:
            total, total_sq = float(flat.sum(dtype=np.float64)), float(np.square(flat, dtype=np.float64).sum())
        self.total += total
        self.total_sq += total_sq
        self.low = min(self.low, float(flat.min()))
        self.high = max(self.high, float(flat.max()))

    def merge(self, other: RunningStats) -> None:
        self.count += other.count
        self.total += other.total
        self.total_sq += other.total_sq
        self.low = min(self.low, other.low)
        self.high = max(self.high, other.high)

    def to_json(self) -> dict[str, float | int | None]:
        if self.count == 0:
            return {"count": 0, "mean": None, "std": None, "min": None, "max": None}
        mean = self.total / self.count
        var = max(self.total_sq / self.count - mean * mean, 0.0)
        return {"count": self.count, "mean": mean, "std": math.sqrt(var), "min": self.low, "max": self.high}


BYTE_SUM_BLOCK = 1 << 16
"""Elements per block of `_byte_sums` (its float32 buffer stays in cache)."""
BYTE_SUM_ROW = 256
"""Elements summed in float32 at a time: 256 squares of bytes stay below 2**24, so each row sum is exact."""
_ONES = np.ones(BYTE_SUM_ROW, np.float32)


def _byte_sums(flat: np.ndarray) -> tuple[float, float]:
    """Exact sum and sum of squares of 1-byte integers (pixels), ~1.8x faster than integer accumulation: each
    block is widened to float32 in a reused buffer and summed by rows of 256 with a BLAS matrix-vector product
    (every partial sum is an integer below 2**24, so exact), the row sums added in float64."""
    n = flat.size - flat.size % BYTE_SUM_ROW
    buf = np.empty(min(max(n, 1), BYTE_SUM_BLOCK), np.float32)
    total = total_sq = 0.0
    for b0 in range(0, n, BYTE_SUM_BLOCK):
        block = buf[: min(BYTE_SUM_BLOCK, n - b0)]
        np.copyto(block, flat[b0 : b0 + len(block)])
        rows = block.reshape(-1, BYTE_SUM_ROW)
        total += float((rows @ _ONES).sum(dtype=np.float64))
        np.multiply(block, block, out=block)
        total_sq += float((rows @ _ONES).sum(dtype=np.float64))
    rest = flat[n:].astype(np.float64)
    return total + float(rest.sum()), total_sq + float(rest @ rest)


@dataclass
class ArrayRange:
    """Value range of one observation key or of the actions (min/max over all elements, per-dim for small dims)."""

    stats: RunningStats = field(default_factory=RunningStats)
    dim_low: np.ndarray | None = None
    dim_high: np.ndarray | None = None
    nonfinite: int = 0

    def add(self, values: np.ndarray, per_dim_limit: int = 32) -> None:
        arr = np.asarray(values)
        if arr.dtype == np.bool_:
            arr = arr.astype(np.int8)
        if arr.size == 0:
            return
        bad = int(arr.size - np.count_nonzero(np.isfinite(arr))) if arr.dtype.kind == "f" else 0
        per_dim = arr.ndim == 2 and 0 < arr.shape[1] <= per_dim_limit
        if bad:
            self.nonfinite += bad
            arr = np.where(np.isfinite(arr), arr, np.nan)
            self.stats.add(arr)
            with np.errstate(invalid="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns
                lo, hi = (np.nanmin(arr, axis=0), np.nanmax(arr, axis=0)) if per_dim else (None, None)
        else:
            self.stats.add_finite(arr)
            lo, hi = (arr.min(axis=0), arr.max(axis=0)) if per_dim else (None, None)
        if lo is not None and hi is not None:
            lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
            self.dim_low = lo if self.dim_low is None else np.fmin(self.dim_low, lo)
            self.dim_high = hi if self.dim_high is None else np.fmax(self.dim_high, hi)

    def merge(self, other: ArrayRange) -> None:
        self.stats.merge(other.stats)
        self.nonfinite += other.nonfinite
        if other.dim_low is not None and other.dim_high is not None:
            self.dim_low = other.dim_low if self.dim_low is None else np.fmin(self.dim_low, other.dim_low)
            self.dim_high = other.dim_high if self.dim_high is None else np.fmax(self.dim_high, other.dim_high)

    @classmethod
    def of(cls, values: np.ndarray) -> ArrayRange:
        out = cls()
        out.add(values)
        return out

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: v for k, v in self.stats.to_json().items() if k != "count"}
        out["nonfinite"] = self.nonfinite
        if self.dim_low is not None and self.dim_high is not None:
            out["per_dim_min"] = [None if math.isnan(v) else v for v in self.dim_low.tolist()]
            out["per_dim_max"] = [None if math.isnan(v) else v for v in self.dim_high.tolist()]
        return out


@dataclass
class EpisodeSummary:
    """The numbers one episode contributes to the report (computed without touching the report)."""

    length: int
    ending: str
    inner_end_steps: int
    both_flags_steps: int
    total_return: float
    rewards: ArrayRange
    actions: ArrayRange
    observations: dict[str, ArrayRange]

    @property
    def nonfinite(self) -> int:
        """NaN/inf values in rewards, actions and observations."""
        return self.rewards.nonfinite + self.actions.nonfinite + sum(r.nonfinite for r in self.observations.values())


def summarize(episode: Episode) -> EpisodeSummary:
    """Statistics of one episode: ending, flags, return and value ranges."""
    term, trunc = np.asarray(episode.terminated, bool), np.asarray(episode.truncated, bool)
    length = len(term)
    ending = "unfinished"
    if length and term[-1]:
        ending = "terminated"
    elif length and trunc[-1]:
        ending = "truncated"
    actions = np.asarray(episode.actions)
    return EpisodeSummary(
        length=length,
        ending=ending,
        inner_end_steps=int(np.count_nonzero(term[:-1] | trunc[:-1])) if length else 0,
        both_flags_steps=int(np.count_nonzero(term & trunc)),
        total_return=float(np.sum(episode.rewards, dtype=np.float64)),
        rewards=ArrayRange.of(episode.rewards),
        actions=ArrayRange.of(actions.reshape(length, -1) if actions.ndim > 1 else actions),
        observations={k: ArrayRange.of(v.reshape(v.shape[0], -1) if v.ndim > 1 else v) for k, v in episode.obs.items()},
    )
