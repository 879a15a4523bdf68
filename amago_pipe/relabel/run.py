"""Relabel a stream of episodes: build a relabeler from its config, draw the goal pool, keep the report.

Each source episode gets its own generator seeded by (seed, its index), so the output does not depend on how the
stream is batched or resumed. numpy only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from amago_pipe.config.relabel import RelabelConfig
from amago_pipe.relabel.goals import GoalLayout, outcome
from amago_pipe.relabel.rewards import CheckedReward
from amago_pipe.relabel.strategies import Relabeler, Settings
from amago_pipe.spec import DataSpec
from amago_pipe.store import Episode


def build_relabeler(cfg: RelabelConfig, spec: DataSpec, *, where: str) -> Relabeler:
    """The configured relabeler for data of `spec` (ConfigError/DataError before anything is read)."""
    layout = GoalLayout.of(spec, cfg.achieved_key, cfg.desired_key, where=where)
    raw = cfg.reward.implementation()(cfg.reward, where=f"{where}.reward")
    label = cfg.reward.type if cfg.reward.type != "function" else f"'{getattr(cfg.reward, 'function', '')}'"
    reward = CheckedReward(raw, name=label, achieved_key=cfg.achieved_key, desired_key=cfg.desired_key)
    settings = Settings(cfg.reward.success_reward, cfg.mask_value, cfg.terminate_on_success)
    cls = cfg.strategy.implementation()
    relabeler: Relabeler = cls(cfg.strategy, layout, reward, settings, where=f"{where}.strategy")
    return relabeler


def goal_pool(episodes: Iterable[Episode], layout: GoalLayout, size: int, seed: int) -> np.ndarray:
    """A uniform sample (reservoir) of `size` achieved goals over every step of `episodes`."""
    rng = np.random.default_rng([seed, 0x9E3779B9])
    pool: np.ndarray | None = None
    seen = 0
    for ep in episodes:
        achieved = layout.achieved(ep)[1:]
        if pool is None:
            pool = np.empty((size, *achieved.shape[1:]), achieved.dtype)
        for goal in achieved:  # Algorithm R
            if seen < size:
                pool[seen] = goal
            else:
                j = int(rng.integers(seen + 1))
                if j < size:
                    pool[j] = goal
            seen += 1
    return np.zeros((0, *layout.goal_shape), np.float32) if pool is None else pool[: min(seen, size)]


@dataclass
class RelabelReport:
    """Episodes in and out, success before/after, and reward statistics of a relabeling run."""

    episodes_in: int = 0
    timesteps_in: int = 0
    episodes_relabeled: int = 0
    """Source episodes that got relabeled copies (a fraction `ratio` of them)."""
    episodes_out: int = 0
    timesteps_out: int = 0
    reached_in: int = 0
    """Source episodes that reach their own goal(s), by the recomputed rewards."""
    reached_out: int = 0
    """Relabeled copies that reach their new goal(s)."""
    reward_mismatch_steps: int = 0
    """Source steps whose stored reward differs from the recomputed one (the reward function does not match the
    data when this is large)."""
    _rewards_in: list[float] = field(default_factory=lambda: [0.0, np.inf, -np.inf])
    _rewards_out: list[float] = field(default_factory=lambda: [0.0, np.inf, -np.inf])

    def to_json(self) -> dict[str, Any]:
        def stats(acc: list[float], steps: int) -> dict[str, float | None]:
            if not steps:
                return {"mean": None, "min": None, "max": None}
            return {"mean": round(acc[0] / steps, 6), "min": float(acc[1]), "max": float(acc[2])}

        return {
            "episodes_in": self.episodes_in,
            "timesteps_in": self.timesteps_in,
            "episodes_relabeled": self.episodes_relabeled,
            "episodes_out": self.episodes_out,
            "timesteps_out": self.timesteps_out,
            "success_rate_in": _rate(self.reached_in, self.episodes_in),
            "success_rate_out": _rate(self.reached_out, self.episodes_out),
            "reward_mismatch_steps": self.reward_mismatch_steps,
            "rewards_in": stats(self._rewards_in, self.timesteps_in),
            "rewards_out": stats(self._rewards_out, self.timesteps_out),
        }

    def _source(self, ep: Episode, relabeler: Relabeler, name: str) -> None:
        self.episodes_in += 1
        self.timesteps_in += ep.length
        _accumulate(self._rewards_in, ep.rewards)
        layout = relabeler.layout
        result = outcome(
            layout, layout.achieved(ep), layout.first_goals(ep), relabeler.reward.for_episode(name),
            relabeler.settings.success_reward,
        )  # fmt: skip
        self.reached_in += result.done_at >= 0
        stored = np.asarray(ep.rewards, np.float32)
        upto = result.done_at + 1 if result.done_at >= 0 and relabeler.settings.terminate_on_success else ep.length
        self.reward_mismatch_steps += int(np.sum(~np.isclose(stored[:upto], result.rewards[:upto], atol=1e-5)))

    def _output(self, ep: Episode, reached: bool) -> None:
        self.episodes_out += 1
        self.timesteps_out += ep.length
        self.reached_out += reached
        _accumulate(self._rewards_out, ep.rewards)


def _rate(n: int, d: int) -> float | None:
    return round(n / d, 4) if d else None


def _accumulate(acc: list[float], rewards: np.ndarray) -> None:
    r = np.asarray(rewards, np.float64)
    if len(r):
        acc[0] += float(r.sum())
        acc[1] = min(acc[1], float(r.min()))
        acc[2] = max(acc[2], float(r.max()))


def relabel_stream(
    episodes: Iterable[Episode],
    relabeler: Relabeler,
    *,
    ratio: float,
    seed: int,
    report: RelabelReport,
    pool: np.ndarray | None = None,
    name_of: Callable[[int, Episode], str] = lambda i, ep: f"episode {i}",
) -> Iterator[Episode]:
    """The relabeled copies of `episodes`, in order; `report` is updated as the stream is consumed."""
    for i, ep in enumerate(episodes):
        name = name_of(i, ep)
        report._source(ep, relabeler, name)
        rng = np.random.default_rng([seed, i])
        if rng.random() >= ratio:
            continue
        report.episodes_relabeled += 1
        for out in relabeler.relabel(ep, rng, name=name, pool=pool):
            reached = relabeler.reached(out, name=name) if out is ep else bool(out.meta["relabel"]["reached"])
            report._output(out, reached)
            yield out
