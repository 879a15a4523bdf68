"""Assembling a `WindowBatch` from the planned windows: one gather per field from the RAM arena while it holds every
window; otherwise the small fields from the spill arena (which then holds every segment), the big fields
(images) copied window by window from RAM, and what RAM does not hold read by the `ColdReader`.

numpy only; must not import torch or click.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from amago_pipe.store.cold import ColdReader
from amago_pipe.store.format import FieldSpec
from amago_pipe.store.info import WindowBatch
from amago_pipe.store.windows import PartitionIndex


@dataclass
class Rows:
    """Arena rows of a batch's windows: (B, L+1) observation rows and (B,) rows of the step before (row 0 where
    the window is not in that arena, or past its end)."""

    obs: np.ndarray
    prev: np.ndarray
    base: np.ndarray
    """(B,) arena row of each window's first observation (meaningful only where `held`)."""
    held: np.ndarray
    """(B,) bool: the arena holds the window."""


def arena_rows(first: np.ndarray, start: np.ndarray, valid: np.ndarray, ar: np.ndarray) -> Rows:
    """Rows of windows whose episodes start at arena row `first` (B,) (-1: not held), `start` steps in."""
    held = first >= 0  # (B,)
    if held.all():
        base = first + start  # (B,)
        return Rows((base[:, None] + ar) * valid, (base - 1) * (start > 0), base, held)
    base = np.where(held, first + start, 0)  # (B,)
    return Rows((base[:, None] + ar) * (valid & held[:, None]), (base - 1) * ((start > 0) & held), base, held)


@dataclass
class BatchGatherer:
    """Builds batches for one sampler from its arenas (the RAM `arrays`, the spill arena's `spill`)."""

    fields: dict[str, FieldSpec]
    big: tuple[str, ...]
    """Fields the spill arena does not hold (tier files do)."""
    cold: ColdReader
    _arange: dict[int, np.ndarray] = field(default_factory=dict)

    def gather(
        self,
        arrays: dict[str, np.ndarray],
        spill: dict[str, np.ndarray] | None,
        indexes: list[PartitionIndex],
        plan: dict[str, np.ndarray],
        seq_len: int,
        names: list[str],
    ) -> WindowBatch:
        ar = self._arange.get(seq_len)
        if ar is None:
            ar = self._arange[seq_len] = np.arange(seq_len + 1)  # (L+1,)
        start = plan["start"]
        valid = (start[:, None] + ar) <= plan["length"][:, None]  # (B, L+1) real observations
        held = plan["arena"] >= 0  # (B,) windows in the RAM arena
        all_hot = bool(held.all())
        spilling = spill is not None and not all_hot  # then the small fields of every window are in the spill arena
        if spilling and not self.big:  # RAM rows are not needed
            ram = Rows(ar, ar, ar, held)
        else:
            ram = arena_rows(plan["arena"], start, valid, ar)
        small = arena_rows(plan["spill"], start, valid, ar) if spilling else ram
        source = spill if spill is not None and spilling else arrays
        out: dict[str, np.ndarray] = {}
        for name in self.fields:
            if name in self.big:
                out[name] = (
                    np.take(arrays[name], ram.obs, axis=0) if all_hot else self._by_window(arrays[name], ram, valid)
                )
            else:
                rows = small.obs if name.startswith(("obs/", "goals/")) else small.obs[:, :seq_len]
                out[name] = np.take(source[name], rows, axis=0)
        prev = {name: np.take(source[name], small.prev, axis=0) for name in ("actions", "rewards")}
        time_index = (plan["time0"] + start)[:, None] + ar  # (B, L+1)
        time_index *= valid
        batch = WindowBatch(
            obs={n[4:]: v for n, v in out.items() if n.startswith("obs/")},
            actions=out["actions"],
            rewards=out["rewards"],
            terminated=out["terminated"],
            truncated=out["truncated"],
            time=time_index,
            mask=valid[:, 1:],
            goals={n[6:]: v for n, v in out.items() if n.startswith("goals/")},
            prev_actions=prev["actions"],
            prev_rewards=prev["rewards"],
            partition=plan["partition"],
            partition_names=tuple(names),
        )
        if not all_hot:
            cold = np.flatnonzero(~ram.held)
            spilled = small.held[cold] if spilling else np.zeros(len(cold), bool)
            self.cold.fill(batch, indexes, plan, cold, seq_len, spilled=spilled, big=self.big)
        return batch

    @staticmethod
    def _by_window(arena: np.ndarray, ram: Rows, valid: np.ndarray) -> np.ndarray:
        """A big field of a batch not all in RAM: zeros, then each RAM window's rows (one contiguous copy each;
        a gather of zero rows for the others would cost as much as the windows themselves)."""
        out = np.zeros((*valid.shape, *arena.shape[1:]), arena.dtype)  # (B, L+1, ...)
        counts = valid.sum(axis=1)  # (B,)
        for b in np.flatnonzero(ram.held).tolist():
            lo, n = int(ram.base[b]), int(counts[b])
            out[b, :n] = arena[lo : lo + n]
        return out
