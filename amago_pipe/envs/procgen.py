"""Procgen games as k-attempt tasks: one gymnasium env per game whose level is drawn at an episode's reset and
kept, start state and all, for the k attempts (AMAGO's two-attempt Procgen).

procgen-mirror speaks gym3 (`observe`/`act`, auto-reset) and imports old `gym` to register its ids; this adapter
drives `procgen.ProcgenGym3Env` directly, one env of one level at a time, and snapshots the level's start state
(`get_state`) so a kept-task reset (`KEEP_TASK`) replays exactly the same start. Needs the `procgen` extra;
imported only when used. gymnasium + numpy, no torch.
"""

from __future__ import annotations

from typing import Any, Literal

import gymnasium as gym
import numpy as np

from amago_pipe.envs.builtin.kshot import KEEP_TASK, KShot
from amago_pipe.errors import ConfigError, did_you_mean, import_optional

INSTALL_HINT = "pip install 'amago-pipe[procgen]'  (procgen-mirror, gym3 and gym)"
FRAME_KEY = "rgb"
"""Observation key of the (64, 64, 3) uint8 frame (procgen's own name)."""
MAX_LEVEL = 2**31 - 1
"""Procgen level seeds are int32."""
DistributionMode = Literal["easy", "hard", "extreme", "memory", "exploration"]


def _procgen() -> Any:
    """The procgen module (its import of old gym prints a deprecation banner to stderr, which is dropped)."""
    return import_optional(
        "procgen", needs="env: Procgen games need", package="procgen", install=INSTALL_HINT, quiet=True
    )


class ProcgenLevels(gym.Env):  # type: ignore[type-arg]
    """One Procgen game over the levels `start_level .. start_level + num_levels - 1` (`num_levels: 0`: any level),
    a level drawn at each reset unless the reset carries KShot's keep-task option, which restores the level's start.

    Observation `{'rgb': (64, 64, 3) uint8}`, actions `Discrete(15)`, procgen's rewards. An attempt terminates
    when procgen ends the level (completed, failed or procgen's own step limit) and is truncated at
    `attempt_steps`; `info['success']` is 1.0 on the step that completes the level, else 0.0.
    """

    metadata: dict[str, Any] = {"render_modes": []}
    supports_keep_task = True

    def __init__(
        self,
        *,
        game: str = "coinrun",
        distribution_mode: DistributionMode = "easy",
        start_level: int = 0,
        num_levels: int = 200,
        attempt_steps: int | None = None,
        use_backgrounds: bool = True,
    ):
        procgen = _procgen()
        names = sorted(procgen.env.ENV_NAMES)
        if game not in names:
            raise ConfigError(
                f"env.kwargs.game: '{game}' is not a Procgen game (known: {', '.join(names)}){did_you_mean(game, names)}",
                path="env.kwargs.game",
            )
        if start_level < 0 or num_levels < 0 or start_level + num_levels > MAX_LEVEL:
            raise ConfigError(
                f"env.kwargs: levels start_level={start_level}, num_levels={num_levels} must be >= 0 and end below "
                f"2**31 (num_levels 0: any level)",
                path="env.kwargs.num_levels",
            )
        if attempt_steps is not None and attempt_steps < 1:
            raise ConfigError(f"env.kwargs.attempt_steps: must be at least 1, got {attempt_steps}")
        self._make = procgen.ProcgenGym3Env
        self.game, self.distribution_mode = game, distribution_mode
        self.start_level, self.num_levels = start_level, num_levels
        self.attempt_steps, self.use_backgrounds = attempt_steps, use_backgrounds
        self.observation_space = gym.spaces.Dict({FRAME_KEY: gym.spaces.Box(0, 255, (64, 64, 3), np.uint8)})
        self.action_space = gym.spaces.Discrete(15)
        self._rng = np.random.default_rng()
        self._env: Any = None
        self._start: list[bytes] = []
        self._level = -1
        self._steps = 0

    @property
    def task(self) -> int:
        """The level seed of the current task (what KShot checks stays fixed across attempts)."""
        return self._level

    def _new_level(self) -> None:
        span = self.num_levels or MAX_LEVEL - self.start_level
        self._level = self.start_level + int(self._rng.integers(span))
        if self._env is not None:
            self._env.close()
        self._env = self._make(
            num=1,
            env_name=self.game,
            start_level=self._level,
            num_levels=1,
            distribution_mode=self.distribution_mode,
            use_backgrounds=self.use_backgrounds,
            rand_seed=int(self._rng.integers(MAX_LEVEL)),
        )
        self._start = self._env.get_state()

    def _frame(self) -> dict[str, np.ndarray]:
        _, ob, _ = self._env.observe()
        return {FRAME_KEY: np.asarray(ob[FRAME_KEY][0], np.uint8)}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        if self._env is None or not (options or {}).get(KEEP_TASK):
            self._new_level()
        else:
            self._env.set_state(self._start)
        self._steps = 0
        return self._frame(), {"level_seed": self._level}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self._env.act(np.asarray([int(action)], np.int32))
        reward, ob, first = self._env.observe()
        self._steps += 1
        terminated = bool(first[0])  # procgen has moved on to the next episode: the level ended
        completed = terminated and bool(self._env.get_info()[0].get("prev_level_complete", 0))
        truncated = not terminated and self.attempt_steps is not None and self._steps >= self.attempt_steps
        info = {"success": float(completed), "level_seed": self._level}
        return {FRAME_KEY: np.asarray(ob[FRAME_KEY][0], np.uint8)}, float(reward[0]), terminated, truncated, info

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None


def procgen_kshot(
    *,
    game: str = "coinrun",
    k: int = 2,
    distribution_mode: DistributionMode = "easy",
    start_level: int = 0,
    num_levels: int = 200,
    attempt_steps: int | None = None,
    use_backgrounds: bool = True,
    reset_signal: bool = True,
) -> KShot:
    """Env factory: `k` attempts at one level of `game` per episode (the `reset` flag added to the observation;
    return and success per attempt in `info`), e.g. `{factory: amago_pipe.envs.procgen:procgen_kshot, kwargs:
    {game: maze, start_level: 100000, num_levels: 0}}` for levels outside the 200 training ones."""
    inner = ProcgenLevels(
        game=game,
        distribution_mode=distribution_mode,
        start_level=start_level,
        num_levels=num_levels,
        attempt_steps=attempt_steps,
        use_backgrounds=use_backgrounds,
    )
    return KShot(inner, k, reset_signal=reset_signal)
