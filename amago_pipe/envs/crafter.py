"""Crafter as an instruction-conditioned env: each episode draws a sequence of achievements to complete in order,
shown to the agent as word ids beside the image, in the goal-sequence layout the relabelers rewrite.

Observation: `image` (64, 64, 3) uint8; `desired_goal`, the instruction: `n_goals` word ids (a `TokenIds` key
of the vocabulary `WORDS`, one word per achievement, e.g. `collectwood`), the goals already reached replaced by
the padding id 0; `achieved_goal`: the id of the achievement the agent did last (0 before any). Reward 1 for
completing the next goal of the sequence (at most one per step). `compute_reward` gives the same rewards on
batches of goal pairs, so `relabel` with `strategy: {type: some}` and `mask_value: 0` rewrites episodes exactly.
Needs the `crafter` extra; imported only when used. gymnasium + numpy, no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from amago_pipe.envs.text import TokenIds
from amago_pipe.errors import ConfigError, MissingDependencyError, did_you_mean, import_optional
from amago_pipe.tokens import FIRST_WORD_ID, PAD_ID, TOKEN_DTYPE, TextSpec

INSTALL_HINT = "pip install 'amago-pipe[crafter]'"
ACHIEVEMENTS = (
    "collect_coal", "collect_diamond", "collect_drink", "collect_iron", "collect_sapling", "collect_stone",
    "collect_wood", "defeat_skeleton", "defeat_zombie", "eat_cow", "eat_plant", "make_iron_pickaxe",
    "make_iron_sword", "make_stone_pickaxe", "make_stone_sword", "make_wood_pickaxe", "make_wood_sword",
    "place_furnace", "place_plant", "place_stone", "place_table", "wake_up",
)  # fmt: skip
"""Crafter's 22 achievements (crafter 1.8, `crafter.constants.achievements`)."""
WORDS = tuple(a.replace("_", "") for a in ACHIEVEMENTS)
"""The instruction vocabulary: one word per achievement (the tokenizer splits words at `_`)."""
NOTHING = PAD_ID
"""`achieved_goal` before any achievement; also the id of a reached (masked) goal in `desired_goal`."""
UNLOCKED_KEY = "amago_pipe/unlocked_{}"
"""`info` key at an episode's end: 1.0 when the achievement was done in the episode (Crafter's success rate)."""
GOAL_KEY = "amago_pipe/goal_{}"
"""`info` key at an episode's end, for each achievement of the instruction: 1.0 when it was completed as a goal."""


def _crafter() -> Any:
    """The crafter module (where old gym is installed, its import banner on stderr is dropped)."""
    crafter = import_optional(
        "crafter", needs="env: Crafter needs", package="crafter", install=INSTALL_HINT, quiet=True
    )
    if tuple(crafter.constants.achievements) != ACHIEVEMENTS:
        raise MissingDependencyError(
            f"env: this crafter ({getattr(crafter, '__version__', '?')}) has other achievements than crafter 1.8's; "
            f"install the supported one with: {INSTALL_HINT}"
        )
    return crafter


def goal_id(achievement: str) -> int:
    """Word id of an achievement in `desired_goal` / `achieved_goal`."""
    return FIRST_WORD_ID + ACHIEVEMENTS.index(achievement)


def instruction_text(ids: Sequence[int]) -> str:
    """The achievements of word ids, reached goals (0) left out: `[8, 22]` -> 'collect_wood, place_table'."""
    return ", ".join(ACHIEVEMENTS[int(i) - FIRST_WORD_ID] for i in ids if int(i) >= FIRST_WORD_ID)


class CrafterInstructions(gym.Env):  # type: ignore[type-arg]
    """Crafter with an instruction of `n_goals` distinct achievements drawn from `goals` at each reset, to be
    done in order. The episode terminates when the last goal is completed or the player dies, and is truncated
    after `max_steps`. `info['success']` is whether every goal was completed; at the episode's end `info` has
    `amago_pipe/goals_reached`, `amago_pipe/unlocked_<achievement>` for all 22 and `amago_pipe/goal_<achievement>`
    for the instructed ones."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        *,
        n_goals: int = 2,
        goals: Sequence[str] | None = None,
        max_steps: int = 1000,
        size: int = 64,
        area: int = 64,
    ):
        self._crafter = _crafter()
        pool = tuple(ACHIEVEMENTS if goals is None else goals)
        bad = [g for g in pool if g not in ACHIEVEMENTS]
        if bad:
            raise ConfigError(
                f"env.kwargs.goals: '{bad[0]}' is not a Crafter achievement (known: {', '.join(ACHIEVEMENTS)})"
                f"{did_you_mean(bad[0], ACHIEVEMENTS)}",
                path="env.kwargs.goals",
            )
        if not 1 <= n_goals <= len(set(pool)):
            raise ConfigError(
                f"env.kwargs.n_goals: must be in 1..{len(set(pool))} (the distinct achievements of `goals`), got {n_goals}",
                path="env.kwargs.n_goals",
            )
        if max_steps < 1:
            raise ConfigError(f"env.kwargs.max_steps: must be at least 1, got {max_steps}", path="env.kwargs.max_steps")
        self.pool, self.n_goals, self.max_steps = sorted(set(pool)), n_goals, max_steps
        self.size, self.area = size, area
        self.text_spec = TextSpec(WORDS, n_goals)
        self.observation_space = gym.spaces.Dict(
            {
                "image": gym.spaces.Box(0, 255, (size, size, 3), np.uint8),
                "desired_goal": TokenIds(self.text_spec),
                "achieved_goal": gym.spaces.Box(0, self.text_spec.vocab_size - 1, (), np.int32),
            }
        )
        self.action_space = gym.spaces.Discrete(len(self._crafter.constants.actions))
        self._env: Any = None
        self._goals = np.zeros(n_goals, TOKEN_DTYPE)
        self._reached = 0
        self._last = NOTHING
        self._t = 0

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """1.0 where the achievement done last is the desired one (batched; a padding or masked goal pays 0)."""
        achieved, desired = np.asarray(achieved_goal), np.asarray(desired_goal)
        return ((achieved == desired) & (desired >= FIRST_WORD_ID)).astype(np.float32)

    def _obs(self, image: Any) -> dict[str, np.ndarray]:
        desired = self._goals.copy()
        desired[: self._reached] = NOTHING
        return {
            "image": np.asarray(image, np.uint8),
            "desired_goal": desired,
            "achieved_goal": np.asarray(self._last, TOKEN_DTYPE),
        }

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        if self._env is None or seed is not None:
            world_seed = int(self.np_random.integers(2**31 - 1))
            self._env = self._crafter.Env(
                area=(self.area, self.area), size=(self.size, self.size), length=None, seed=world_seed
            )
        image = self._env.reset()
        picked = self.np_random.choice(len(self.pool), size=self.n_goals, replace=False)
        self._goals = np.asarray([goal_id(self.pool[i]) for i in picked], TOKEN_DTYPE)
        self._reached, self._last, self._t = 0, NOTHING, 0
        self._counts = dict(self._env._player.achievements)
        return self._obs(image), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        image, _, dead, info = self._env.step(int(action))
        self._t += 1
        counts = info["achievements"]
        done_now = [goal_id(a) for a in ACHIEVEMENTS if counts[a] > self._counts.get(a, 0)]
        self._counts = dict(counts)
        reward = 0.0
        if self._reached < self.n_goals and int(self._goals[self._reached]) in done_now:
            self._last = int(self._goals[self._reached])
            self._reached += 1
            reward = 1.0
        elif done_now:
            self._last = done_now[0]
        success = self._reached == self.n_goals
        terminated = success or bool(dead)
        truncated = not terminated and self._t >= self.max_steps
        out: dict[str, Any] = {"success": success}
        if terminated or truncated:
            out["amago_pipe/goals_reached"] = self._reached
            out.update({UNLOCKED_KEY.format(a): float(counts[a] > 0) for a in ACHIEVEMENTS})
            for j, g in enumerate(self._goals):
                out[GOAL_KEY.format(ACHIEVEMENTS[int(g) - FIRST_WORD_ID])] = float(j < self._reached)
        return self._obs(image), reward, terminated, truncated, out
