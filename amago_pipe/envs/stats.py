"""Per-episode rollout statistics and their summary (return, length, success, prefixed info keys).

Plain Python + numpy; imports nothing from torch or gymnasium.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


@dataclass
class EpisodeStats:
    """Statistics of one finished episode."""

    env_name: str
    env_index: int
    """Which of the N parallel envs ran it."""
    episode_return: float
    length: int
    terminated: bool
    truncated: bool
    success: bool | None = None
    """Last `success`/`is_success` value the env reported in the episode; None when it reports none."""
    info: dict[str, float] = field(default_factory=dict)
    """Last value of each `amago_pipe/`-prefixed info key reported in the episode."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def summarize(stats: list[EpisodeStats], *, by_env: bool = True) -> dict[str, Any]:
    """Return mean/median/std/min/max, bottom-quintile mean, mean length, success rate, info means.

    With several env names, `per_env` holds the same summary for each name.
    """
    out: dict[str, Any] = {"episodes": len(stats)}
    if not stats:
        return out
    returns = np.array([s.episode_return for s in stats], dtype=np.float64)
    ranked = np.sort(returns)
    out.update(
        return_mean=float(returns.mean()),
        return_median=float(np.median(returns)),
        return_std=float(returns.std()),
        return_min=float(ranked[0]),
        return_max=float(ranked[-1]),
        return_bottom_quintile=float(ranked[: max(1, len(ranked) // 5)].mean()),
        length_mean=float(np.mean([s.length for s in stats])),
        terminated_rate=float(np.mean([s.terminated for s in stats])),
    )
    flags = [s.success for s in stats if s.success is not None]
    if flags:
        out["success_rate"] = float(np.mean(flags))
    keys = sorted({k for s in stats for k in s.info})
    if keys:
        out["info"] = {k: float(np.mean([s.info[k] for s in stats if k in s.info])) for k in keys}
    names = sorted({s.env_name for s in stats})
    if by_env and len(names) > 1:
        out["per_env"] = {name: summarize([s for s in stats if s.env_name == name], by_env=False) for name in names}
    return out
