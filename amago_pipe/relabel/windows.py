"""Sample-time relabeling: the relabelers of the `relabel` stage applied to sampled windows (online training).

Each window is relabeled as a short episode (its goals come from inside the window, or from the other windows of
the batch for `random`); a window that reaches its new goal early is cut there and the rest masked out. The reward
before the window (`prev_rewards`) is left as sampled. numpy only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from amago_pipe.config.relabel import RelabelConfig
from amago_pipe.relabel.run import build_relabeler
from amago_pipe.relabel.strategies import Relabeler
from amago_pipe.spec import DataSpec
from amago_pipe.store import Episode, WindowBatch


def relabel_windows(batch: WindowBatch, relabeler: Relabeler, *, ratio: float, rng: np.random.Generator) -> WindowBatch:
    """A copy of `batch` in which a fraction `ratio` of the windows carry relabeled goals and rewards."""
    layout = relabeler.layout
    chosen = np.flatnonzero(rng.random(batch.batch_size) < ratio)
    if not len(chosen):
        return batch
    out = replace(
        batch,
        obs={k: v.copy() for k, v in batch.obs.items()},
        goals={k: v.copy() for k, v in batch.goals.items()},
        actions=batch.actions.copy(), rewards=batch.rewards.copy(), terminated=batch.terminated.copy(),
        truncated=batch.truncated.copy(), time=batch.time.copy(), mask=batch.mask.copy(),
    )  # fmt: skip
    pool = None
    if relabeler.needs_pool:
        source = batch.goals if layout.achieved_in[0] == "goals" else batch.obs
        pool = source[layout.achieved_key][batch.obs_mask]
    for b in chosen:
        n = int(batch.mask[b].sum())
        if n == 0:
            continue
        window = Episode(
            obs={k: v[b, : n + 1] for k, v in batch.obs.items()},
            goals={k: v[b, : n + 1] for k, v in batch.goals.items()},
            actions=batch.actions[b, :n], rewards=batch.rewards[b, :n],
            terminated=batch.terminated[b, :n], truncated=batch.truncated[b, :n],
        )  # fmt: skip
        copies = relabeler.relabel(window, rng, name=f"sampled window {b}", pool=pool)
        if copies:
            _write_back(out, int(b), copies[0], n)
    return out


def _write_back(out: WindowBatch, b: int, ep: Episode, n: int) -> None:
    """Put the relabeled window `ep` (length <= n) into row b of `out`, zeroing what it cut."""
    m = ep.length
    for arrays, new in ((out.obs, ep.obs), (out.goals, ep.goals)):
        for k, v in arrays.items():
            v[b, : m + 1] = new[k]
            v[b, m + 1 :] = 0
    for name in ("actions", "rewards", "terminated", "truncated"):
        arr = getattr(out, name)
        arr[b, :m] = getattr(ep, name)
        arr[b, m:] = 0
    out.time[b, m + 1 :] = 0
    out.mask[b, m:] = False


def window_relabeler(
    cfg: RelabelConfig, spec: DataSpec, *, where: str
) -> Callable[[WindowBatch, np.random.Generator], WindowBatch]:
    """`(batch, rng) -> batch` relabeling a train stage's sampled windows (`relabel:`); errors at build time."""
    relabeler = build_relabeler(cfg, spec, where=f"{where}.relabel")

    def apply(batch: WindowBatch, rng: np.random.Generator) -> WindowBatch:
        return relabel_windows(batch, relabeler, ratio=cfg.ratio, rng=rng)

    return apply
