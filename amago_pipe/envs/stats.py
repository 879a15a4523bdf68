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


def summarize(
    stats: list[EpisodeStats], *, by_env: bool = True, held_out: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Return mean/median/std/min/max, bottom-quintile mean, mean length, success rate, info means.

    With several env names, `per_env` holds the same summary for each name, and `task_mean` the mean over tasks
    of their mean return (and success) — each task counts once, however many episodes it ran. With `held_out`
    task names, `training` and `held_out` hold the summary of each group.
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
        out["task_mean"] = task_mean(out["per_env"])
    if by_env and held_out & set(names):
        for group, keep in (("training", False), ("held_out", True)):
            part = [s for s in stats if (s.env_name in held_out) == keep]
            out[group] = summarize(part, by_env=False)
            sub = {k: v for k, v in out.get("per_env", {}).items() if (k in held_out) == keep}
            if len(sub) > 1:
                out[group]["task_mean"] = task_mean(sub)
            out[group]["tasks"] = sorted({s.env_name for s in part})
    return out


def task_mean(per_env: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Mean over tasks of each task's mean return (and success rate, where every task reports one)."""
    out = {"return_mean": float(np.mean([v["return_mean"] for v in per_env.values()]))}
    rates = [v["success_rate"] for v in per_env.values() if "success_rate" in v]
    if len(rates) == len(per_env):
        out["success_rate"] = float(np.mean(rates))
    return out


METRIC_KEYS = ("return_mean", "success_rate", "episodes", "length_mean", "return_bottom_quintile")
"""Statistics of a summary (and of each task's) that go into metrics rows."""


def flat_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """The numbers of a `summarize` result as flat metric names: `return_mean`, ..., `info/<key>` (per-attempt
    returns of k-shot envs), `task/<name>/return_mean`, `task_mean/return_mean`, `held_out/return_mean` (the
    per-task and per-group blocks when present)."""
    out = {k: float(v) for k, v in summary.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    out.update({f"info/{k.removeprefix('amago_pipe/')}": float(v) for k, v in summary.get("info", {}).items()})
    for name, sub in summary.get("per_env", {}).items():
        out.update({f"task/{name}/{k}": float(sub[k]) for k in METRIC_KEYS if k in sub})
        if "length_mean" in sub:
            out[f"task/{name}/env_steps"] = float(sub["length_mean"] * sub["episodes"])
    out.update({f"task_mean/{k}": float(v) for k, v in summary.get("task_mean", {}).items()})
    for group in ("training", "held_out"):
        block = summary.get(group, {})
        out.update({f"{group}/{k}": float(block[k]) for k in METRIC_KEYS if k in block})
        out.update({f"{group}/task_mean/{k}": float(v) for k, v in block.get("task_mean", {}).items()})
    return out
