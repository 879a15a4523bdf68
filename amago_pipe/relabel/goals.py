"""Where an episode keeps its goals, and rewriting an episode under new goals.

Two conventions are understood:

- **single goal** (gymnasium-robotics' GoalEnv): an `achieved_goal` of shape G and a `desired_goal` of the same
  shape, each (T+1, *G) in the observations (Dict spaces flatten to these keys) and/or the episode's goal fields;
- **goal sequence** (AMAGO's instructions): `desired_goal` of shape (k, *G), the k goals to reach in order, with
  the goals already reached replaced by `mask_value` in each row.

A relabeled episode keeps its time indices; its rewards, goal rows and terminal are recomputed. numpy only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from amago_pipe.errors import DataError
from amago_pipe.spec import DataSpec
from amago_pipe.store import Episode

GoalReward = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""`(achieved (N, *G), desired (N, *G)) -> (N,)` float rewards (a checked wrapper, see `rewards.py`)."""


@dataclass(frozen=True)
class GoalLayout:
    """The goal keys of a DataSpec: which arrays hold the achieved and the desired goals, and their shapes."""

    achieved_key: str
    desired_key: str
    achieved_in: tuple[str, ...]
    """Where the achieved goal lives: `obs` and/or `goals` (read from the first)."""
    desired_in: tuple[str, ...]
    """Where the desired goal lives; every copy is rewritten."""
    goal_shape: tuple[int, ...]
    sequence: int
    """k for a goal sequence (desired shape (k, *G)); 0 for a single goal."""

    @classmethod
    def of(cls, spec: DataSpec, achieved_key: str, desired_key: str, *, where: str) -> GoalLayout:
        """The layout of `spec`; DataError naming the missing field and the fix when the data has no goals."""
        places = {"obs": spec.observations, "goals": spec.goals}
        found = {key: tuple(p for p, arrays in places.items() if key in arrays) for key in (achieved_key, desired_key)}
        for key, at in found.items():
            if not at:
                raise DataError(
                    f"{where}: the data has no goal field '{key}' (observation keys: "
                    f"{', '.join(sorted(spec.observations)) or 'none'}; goal fields: "
                    f"{', '.join(sorted(spec.goals)) or 'none'}); relabeling needs goal-conditioned data with "
                    "`achieved_goal`/`desired_goal` (convert a GoalEnv dataset, or collect in a goal env), or set "
                    "`achieved_key`/`desired_key` to the fields that hold them"
                )
        achieved = places[found[achieved_key][0]][achieved_key].shape
        desired = places[found[desired_key][0]][desired_key].shape
        if desired == achieved:
            sequence = 0
        elif len(desired) == len(achieved) + 1 and desired[1:] == achieved:
            sequence = desired[0]
        else:
            raise DataError(
                f"{where}: '{desired_key}' has shape {desired} and '{achieved_key}' {achieved}; expected the same "
                f"shape (one goal) or (k, {', '.join(map(str, achieved))}) (a sequence of k goals)"
            )
        return cls(achieved_key, desired_key, found[achieved_key], found[desired_key], achieved, sequence)

    def describe(self) -> str:
        if self.sequence:
            return f"a sequence of {self.sequence} goals of shape {self.goal_shape} ('{self.desired_key}')"
        return f"one goal of shape {self.goal_shape} ('{self.desired_key}')"

    def achieved(self, ep: Episode) -> np.ndarray:
        """(T+1, *G) achieved goals."""
        return np.asarray(_where(ep, self.achieved_in[0])[self.achieved_key])

    def desired(self, ep: Episode) -> np.ndarray:
        """(T+1, *G) or (T+1, k, *G) desired goals as stored."""
        return np.asarray(_where(ep, self.desired_in[0])[self.desired_key])

    def first_goals(self, ep: Episode) -> np.ndarray:
        """The goal(s) the episode was given: (*G) or (k, *G) (row 0, before any goal is reached)."""
        return self.desired(ep)[0].copy()


def _where(ep: Episode, place: str) -> dict[str, np.ndarray]:
    return ep.obs if place == "obs" else ep.goals


@dataclass(frozen=True)
class Outcome:
    """The rewards and terminal of an episode under some goal(s), from the recomputed per-step rewards."""

    rewards: np.ndarray
    """(T,) recomputed rewards."""
    progress: np.ndarray
    """(T+1,) goals reached before each row (0 or 1 for a single goal)."""
    done_at: int
    """Step at which the (last) goal is reached, -1 when it is not."""


def outcome(
    layout: GoalLayout, achieved: np.ndarray, goals: np.ndarray, reward: GoalReward, success_reward: float
) -> Outcome:
    """Rewards under `goals` ((*G) or (k, *G)) for the achieved goals (T+1, *G); a goal is reached at step t when
    the reward of achieved[t+1] against it is at least `success_reward`."""
    after = achieved[1:]  # the goal a step achieves is the one after it
    length = len(after)
    if not layout.sequence:
        rewards = reward(after, np.broadcast_to(goals, after.shape))
        hits = np.flatnonzero(rewards >= success_reward)
        done_at = int(hits[0]) if len(hits) else -1
        progress = np.zeros(length + 1, np.int64)
        if done_at >= 0:
            progress[done_at + 1 :] = 1
        return Outcome(rewards, progress, done_at)
    k = layout.sequence
    table = reward(np.repeat(after, k, axis=0), np.tile(goals, (length, *([1] * (goals.ndim - 1)))))
    table = table.reshape(length, k)  # table[t, j]: reward of step t against goal j
    rewards = np.zeros(length, table.dtype)
    progress = np.zeros(length + 1, np.int64)
    active, done_at = 0, -1
    for t in range(length):
        if active < k:
            rewards[t] = table[t, active]
            if table[t, active] >= success_reward:
                active += 1
                if active == k:
                    done_at = t
        progress[t + 1] = active
    return Outcome(rewards, progress, done_at)


def goal_rows(layout: GoalLayout, goals: np.ndarray, progress: np.ndarray, mask_value: float) -> np.ndarray:
    """(T+1, *G) or (T+1, k, *G) desired-goal rows: the same goal on every row, or the sequence with reached
    goals masked."""
    rows = np.repeat(goals[None], len(progress), axis=0)
    if layout.sequence:
        reached = np.arange(layout.sequence)[None, :] < progress[:, None]  # (T+1, k)
        rows[reached] = mask_value
    return rows


def rewrite(
    ep: Episode,
    layout: GoalLayout,
    goals: np.ndarray,
    result: Outcome,
    *,
    mask_value: float,
    terminate_on_success: bool,
    relabel_meta: dict[str, object],
) -> Episode:
    """`ep` under new goals: goal rows, rewards and (with `terminate_on_success`) the episode cut at the step that
    reaches the (last) goal, terminated there. An episode that never reaches its goal keeps its length and ends
    truncated (it did not end because of these goals)."""
    length = ep.length
    terminated = np.asarray(ep.terminated, bool).copy()
    truncated = np.asarray(ep.truncated, bool).copy()
    if terminate_on_success:
        terminated[:] = False
        truncated[:] = False
        if result.done_at >= 0:
            length = result.done_at + 1
            terminated[result.done_at] = True
        else:
            truncated[-1] = True
    rows = goal_rows(layout, goals, result.progress, mask_value)
    obs = {k: v[: length + 1] for k, v in ep.obs.items()}
    goal_fields = {k: v[: length + 1] for k, v in ep.goals.items()}
    for place in layout.desired_in:
        target = obs if place == "obs" else goal_fields
        dtype = np.asarray(target[layout.desired_key]).dtype
        target[layout.desired_key] = rows[: length + 1].astype(dtype, copy=False)
    reward_dtype = np.asarray(ep.rewards).dtype if np.asarray(ep.rewards).dtype.kind == "f" else np.float32
    return replace(
        ep,
        obs=obs,
        goals=goal_fields,
        actions=np.asarray(ep.actions)[:length],
        rewards=result.rewards[:length].astype(reward_dtype),
        terminated=terminated[:length],
        truncated=truncated[:length],
        meta={**ep.meta, "relabel": relabel_meta},
    )
