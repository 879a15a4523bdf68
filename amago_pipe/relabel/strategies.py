"""Hindsight relabelers: Episode -> relabeled copies under goals the episode achieved.

A sequence policy conditions on one goal (or goal sequence) for a whole episode, so a relabeled copy has one
new goal throughout, as in AMAGO; the strategies differ in where that goal comes from:

- single goals (HER's family): `final` (the last achieved goal), `future` (k copies, goals achieved at random
  steps after the first action), `episode` (k copies, any step including the start), `random` (k copies, goals
  achieved in other episodes of the source data);
- goal sequences (AMAGO's instructions): `none` (unchanged), `some` (a random number m of leading goals replaced
  by goals achieved later in the episode, in time order), `all` (m = k).

numpy only. Implementations are built from their configs (`amago_pipe.config.relabel`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from amago_pipe.errors import ConfigError
from amago_pipe.relabel.goals import GoalLayout, outcome, rewrite
from amago_pipe.relabel.rewards import CheckedReward
from amago_pipe.store import Episode


@dataclass(frozen=True)
class Settings:
    """What every relabeler shares: how success is read off the rewards, and how the episode ends."""

    success_reward: float
    mask_value: float
    terminate_on_success: bool


class Relabeler:
    """Base of relabelers: `new_goals` picks the goals of each copy; `relabel` rewrites the episode under them."""

    for_sequences: ClassVar[bool | None] = False
    """True: goal sequences only; False: single goals only; None: either."""
    needs_pool: ClassVar[bool] = False
    """True when the goals come from other episodes (`pool`: achieved goals of the source data)."""

    def __init__(self, config: Any, layout: GoalLayout, reward: CheckedReward, settings: Settings, *, where: str):
        if self.for_sequences is not None and bool(layout.sequence) != self.for_sequences:
            fits = "none, some or all" if layout.sequence else "final, future, episode or random"
            raise ConfigError(
                f"{where}.type: strategy '{config.type}' is for "
                f"{'goal sequences' if self.for_sequences else 'single goals'}, but the data has "
                f"{layout.describe()}; use {fits}",
                path=f"{where}.type",
            )
        self.config, self.layout, self.reward, self.settings = config, layout, reward, settings

    def new_goals(
        self, ep: Episode, achieved: np.ndarray, rng: np.random.Generator, pool: np.ndarray | None
    ) -> list[np.ndarray]:
        """The goal(s) of each relabeled copy: (*G) or (k, *G) arrays."""
        raise NotImplementedError

    def relabel(
        self, ep: Episode, rng: np.random.Generator, *, name: str, pool: np.ndarray | None = None
    ) -> list[Episode]:
        """Relabeled copies of `ep` (the input is not modified)."""
        achieved = self.layout.achieved(ep)
        reward = self.reward.for_episode(name)
        out = []
        for goals in self.new_goals(ep, achieved, rng, pool):
            result = outcome(self.layout, achieved, goals, reward, self.settings.success_reward)
            meta = {"strategy": self.config.type, "reached": result.done_at >= 0}
            out.append(
                rewrite(
                    ep,
                    self.layout,
                    goals,
                    result,
                    mask_value=self.settings.mask_value,
                    terminate_on_success=self.settings.terminate_on_success,
                    relabel_meta=meta,
                )
            )
        return out

    def reached(self, ep: Episode, *, name: str) -> bool:
        """Whether `ep` reaches the goal(s) it was given, by the recomputed rewards."""
        goals = self.layout.first_goals(ep)
        reward = self.reward.for_episode(name)
        return outcome(self.layout, self.layout.achieved(ep), goals, reward, self.settings.success_reward).done_at >= 0


def _steps(rng: np.random.Generator, first: int, last: int, k: int) -> np.ndarray:
    """k distinct steps in [first, last] (with repeats only when there are fewer than k)."""
    choices = np.arange(first, last + 1)
    return rng.choice(choices, size=k, replace=len(choices) < k)


class Final(Relabeler):
    """One copy whose goal is the goal achieved at the last step."""

    def new_goals(
        self, ep: Episode, achieved: np.ndarray, rng: np.random.Generator, pool: np.ndarray | None
    ) -> list[np.ndarray]:
        return [achieved[-1].copy()]


class Future(Relabeler):
    """k copies whose goals are achieved at random steps after the first action."""

    first_step: ClassVar[int] = 1

    def new_goals(
        self, ep: Episode, achieved: np.ndarray, rng: np.random.Generator, pool: np.ndarray | None
    ) -> list[np.ndarray]:
        return [achieved[j].copy() for j in _steps(rng, self.first_step, ep.length, self.config.k)]


class EpisodeGoals(Future):
    """k copies whose goals are achieved at random steps of the episode, its start included."""

    first_step: ClassVar[int] = 0


class RandomGoals(Relabeler):
    """k copies whose goals were achieved in other episodes of the source data."""

    needs_pool: ClassVar[bool] = True

    def new_goals(
        self, ep: Episode, achieved: np.ndarray, rng: np.random.Generator, pool: np.ndarray | None
    ) -> list[np.ndarray]:
        if pool is None or not len(pool):
            return []
        return [pool[i].copy() for i in rng.integers(len(pool), size=self.config.k)]


class NoRelabel(Relabeler):
    """Episodes left as they are (the control of the other strategies)."""

    for_sequences: ClassVar[bool | None] = None

    def relabel(
        self, ep: Episode, rng: np.random.Generator, *, name: str, pool: np.ndarray | None = None
    ) -> list[Episode]:
        return [ep]


class SomeGoals(Relabeler):
    """The first m goals of the sequence (m uniform in 1..k) replaced by goals achieved later, in time order."""

    for_sequences: ClassVar[bool | None] = True

    def replaced(self, rng: np.random.Generator) -> int:
        return int(rng.integers(1, self.layout.sequence + 1))

    def new_goals(
        self, ep: Episode, achieved: np.ndarray, rng: np.random.Generator, pool: np.ndarray | None
    ) -> list[np.ndarray]:
        m = self.replaced(rng)
        goals = self.layout.first_goals(ep)
        goals[:m] = achieved[np.sort(_steps(rng, 1, ep.length, m))]
        return [goals]


class AllGoals(SomeGoals):
    """The whole sequence replaced by k goals achieved later in the episode, in time order."""

    def replaced(self, rng: np.random.Generator) -> int:
        return self.layout.sequence
