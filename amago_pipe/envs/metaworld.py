"""Meta-World as k-attempt meta-RL tasks: one env class over its ML1 train or test goals, the goal kept fixed
for the k attempts of an episode and drawn anew only at the episode's reset.

Meta-World's registered ids (`Meta-World/MT1`, `ML1-train`, ...) draw a new goal at every `reset()`, so the
generic `kshot` wrapper around them would change the task between attempts; this adapter holds the goal list
itself and calls `set_task` only when KShot asks for a new task. ML1 is one env class with `split: train` for
training and `split: test` (held-out goals) for evaluation; ML10/ML45 are task sets of such envs (their
training classes with train goals, their test classes held out; see `pipelines/metaworld-ml10.yaml`). Needs the
`metaworld` extra (metaworld + mujoco); imported only when used. gymnasium + numpy, no torch.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from amago_pipe.envs.builtin.kshot import KEEP_TASK, KShot
from amago_pipe.errors import ConfigError, did_you_mean, import_optional

INSTALL_HINT = "pip install 'amago-pipe[metaworld]'  (metaworld and mujoco)"
DEFAULT_ATTEMPT_STEPS = 150
"""Steps per attempt by default: a third of Meta-World's 500, so a 3-attempt episode fits a CPU budget."""


@lru_cache(maxsize=64)
def _ml1(env_name: str, seed: int) -> Any:
    """Meta-World's ML1 benchmark of one env class: its train and test goals (seconds to build, so cached)."""
    metaworld = import_optional(
        "metaworld", needs="env: Meta-World tasks need", package="metaworld", install=INSTALL_HINT
    )
    if env_name not in metaworld.ALL_V3_ENVIRONMENTS:
        known = sorted(metaworld.ALL_V3_ENVIRONMENTS)
        raise ConfigError(
            f"env.kwargs.env_name: '{env_name}' is not a Meta-World v3 env ({len(known)} known, e.g. "
            f"{', '.join(known[:4])}){did_you_mean(env_name, known)}",
            path="env.kwargs.env_name",
        )
    return metaworld.ML1(env_name, seed=seed)


class MetaWorldTasks(gym.Env):  # type: ignore[type-arg]
    """One Meta-World env class over the goals of a benchmark split; a goal is drawn at each reset unless the
    reset carries KShot's keep-task option. An attempt ends at `attempt_steps` (truncated) or, with
    `terminate_on_success`, at its first success; `info['success']` is whether the attempt has succeeded yet."""

    supports_keep_task = True

    def __init__(
        self,
        *,
        env_name: str = "reach-v3",
        split: Literal["train", "test"] = "train",
        attempt_steps: int = DEFAULT_ATTEMPT_STEPS,
        terminate_on_success: bool = True,
        benchmark_seed: int = 0,
    ):
        if split not in ("train", "test"):
            raise ConfigError(f"env.kwargs.split: expected 'train' or 'test' goals, got {split!r}")
        bench = _ml1(env_name, benchmark_seed)
        classes = bench.train_classes if split == "train" else bench.test_classes
        if not 1 <= attempt_steps <= 500:
            raise ConfigError(f"env.kwargs.attempt_steps: must be in 1..500 (Meta-World's limit), got {attempt_steps}")
        tasks = bench.train_tasks if split == "train" else bench.test_tasks
        self.tasks = [t for t in tasks if t.env_name == env_name]
        self.env = classes[env_name]()
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, self.env.observation_space.shape, np.float32)
        self.action_space = self.env.action_space
        self.attempt_steps, self.terminate_on_success = attempt_steps, terminate_on_success
        self._rng = np.random.default_rng()
        self._task_index = -1
        self._steps, self._success = 0, False

    @property
    def task(self) -> np.ndarray:
        """The goal position of the current task (what KShot checks stays fixed across attempts)."""
        return np.asarray(self.env._target_pos, dtype=np.float64)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        if self._task_index < 0 or not (options or {}).get(KEEP_TASK):
            self._task_index = int(self._rng.integers(len(self.tasks)))
            self.env.set_task(self.tasks[self._task_index])
        obs, info = self.env.reset()
        self._steps, self._success = 0, False
        return obs.astype(np.float32), {**info, "task_index": self._task_index}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(np.asarray(action, dtype=np.float32))
        self._steps += 1
        self._success = self._success or bool(info.get("success", 0.0))
        terminated = bool(terminated) or (self.terminate_on_success and self._success)
        truncated = (bool(truncated) or self._steps >= self.attempt_steps) and not terminated
        return obs.astype(np.float32), float(reward), terminated, truncated, {**info, "success": float(self._success)}

    def close(self) -> None:
        self.env.close()


def metaworld_kshot(
    *,
    env_name: str = "reach-v3",
    split: Literal["train", "test"] = "train",
    k: int = 3,
    attempt_steps: int = DEFAULT_ATTEMPT_STEPS,
    terminate_on_success: bool = True,
    reset_signal: bool = True,
    benchmark_seed: int = 0,
) -> KShot:
    """Env factory: `k` attempts at one Meta-World goal per episode (reset flag in the observation, return and
    success per attempt in `info`), e.g. `{factory: amago_pipe.envs.metaworld:metaworld_kshot, kwargs:
    {env_name: reach-v3, split: test}}` for ML1's held-out goals."""
    inner = MetaWorldTasks(
        env_name=env_name,
        split=split,
        attempt_steps=attempt_steps,
        terminate_on_success=terminate_on_success,
        benchmark_seed=benchmark_seed,
    )
    return KShot(inner, k, reset_signal=reset_signal)
