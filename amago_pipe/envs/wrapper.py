"""BatchedEnv: a gymnasium vector env seen as flat dict observations (N, ...), rl2, time index and env name.

Handles gymnasium 1.x NEXT_STEP autoreset: the step after an episode ends ignores that env's action and
returns the first observation of its next episode (`EnvStep.started`). numpy + gymnasium only, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from amago_pipe.actions import ActionCodec
from amago_pipe.envs.factory import check_observation_space
from amago_pipe.envs.tasks import TASK_INFO, TaskSet, TaskSetEnv
from amago_pipe.errors import ConfigError, DataError
from amago_pipe.spec import DataSpec, flatten_obs, from_spaces


@dataclass
class EnvStep:
    """What the envs returned, batched over N envs."""

    obs: dict[str, np.ndarray]
    """Flat observation keys, each (N, ...)."""
    rl2: np.ndarray
    """(N, 1 + A) float32: [previous reward, previous action features]; zeros at an episode's first step."""
    time: np.ndarray
    """(N,) int64 absolute time index of `obs` within its episode (0 at the first observation)."""
    reward: np.ndarray
    """(N,) float32 reward of the step just taken (0 where `started`)."""
    terminated: np.ndarray
    """(N,) bool: the episode ended in a terminal state (bootstrap with zero)."""
    truncated: np.ndarray
    """(N,) bool: the episode was cut (time limit); not a terminal."""
    started: np.ndarray
    """(N,) bool: `obs` is the first observation of a new episode (the action given for it was ignored)."""
    env_actions: np.ndarray | None
    """(N, ...) the env-space actions just taken (None after `reset`)."""
    infos: dict[str, Any]
    """gymnasium's vector info dict (values batched, with `_key` masks)."""

    @property
    def done(self) -> np.ndarray:
        """(N,) bool: the episode ended at this step (terminated or truncated)."""
        return self.terminated | self.truncated


def env_seeds(seed: int, n: int) -> list[int]:
    """Seeds of `n` envs spawned from `seed`: distinct streams, and unrelated between nearby seeds (unlike
    gymnasium's `seed + i`, where actor seeds 1 and 2 share all but one env)."""
    return [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(n)]


class BatchedEnv:
    """Wraps a gymnasium VectorEnv in NEXT_STEP autoreset mode; actions are given in policy space."""

    def __init__(
        self,
        vector_env: gym.vector.VectorEnv,
        *,
        env_name: str,
        where: str = "env",
        tasks: TaskSet | None = None,
        transforms: list[dict[str, Any]] | None = None,
    ):
        """`transforms`: the records of the `wrappers:` the envs were made with (`wrapper_records`), kept in `spec`."""
        mode = vector_env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        if mode != AutoresetMode.NEXT_STEP:
            raise ConfigError(
                f"{where}: vector env uses autoreset mode {mode}; amago-pipe needs AutoresetMode.NEXT_STEP "
                "(gymnasium 1.x's default)",
                path=where,
            )
        self.vector_env = vector_env
        self.where = where
        self.n_envs = int(vector_env.num_envs)
        self.env_name = env_name
        self.tasks = tasks
        """The task set the slots run (None: one env); `task_name(i)` names slot i's current task."""
        self._task = np.zeros(self.n_envs, dtype=np.int64)
        try:
            check_observation_space(vector_env.single_observation_space, where=where, env_name=env_name)
        except ConfigError:
            vector_env.close()
            raise
        spec = from_spaces(vector_env.single_observation_space, vector_env.single_action_space)
        self.spec: DataSpec = replace(spec, transforms=list(transforms or []))
        self.codec = ActionCodec(self.spec.action)
        self.single_observation_space = vector_env.single_observation_space
        self.single_action_space = vector_env.single_action_space
        self._dtypes = {k: np.dtype(v.dtype) for k, v in self.spec.observations.items()}
        self._time = np.zeros(self.n_envs, dtype=np.int64)
        self._pending_reset = np.zeros(self.n_envs, dtype=bool)
        self._closed = False

    @property
    def rl2_dim(self) -> int:
        return self.spec.rl2_dim

    def task_name(self, i: int) -> str:
        """The name of the task env slot `i` runs now (the env's name without a task set)."""
        return self.env_name if self.tasks is None else self.tasks.names[int(self._task[i])]

    @property
    def held_out(self) -> frozenset[str]:
        """Names of the held-out tasks among the slots' tasks (evaluation)."""
        return frozenset() if self.tasks is None else self.tasks.held_out

    def slot_env(self, i: int) -> gym.Env:  # type: ignore[type-arg]
        """The unwrapped gymnasium env that slot `i` runs now (a task set's current task): for players that read
        the env's state, such as `babyai-bot`. Sync mode only (async envs live in other processes)."""
        vec = self.vector_env.unwrapped
        if not isinstance(vec, SyncVectorEnv):
            raise ConfigError(
                f"{self.where}: this policy reads the env's state, which only mode: sync keeps in this process; "
                f"set {self.where}.mode: sync",
                path=f"{self.where}.mode",
            )
        env = vec.envs[i].unwrapped
        return env.current.unwrapped if isinstance(env, TaskSetEnv) else env

    @property
    def awaiting_reset(self) -> np.ndarray:
        """(N,) True where the last step ended an episode: the next step resets that env and ignores its action."""
        return self._pending_reset.copy()

    def reset(self, seed: int | None = None) -> EnvStep:
        """Reset every env; with a seed, each env gets its own stream spawned from it (`env_seeds`)."""
        seeds: Any = None
        if seed is not None:
            per_env = env_seeds(seed, self.n_envs)
            separate = isinstance(self.vector_env.unwrapped, SyncVectorEnv | AsyncVectorEnv)
            seeds = per_env if separate else per_env[0]  # an env that steps its batch itself takes one seed
        obs, infos = self.vector_env.reset(seed=seeds)
        self._track_tasks(infos, np.ones(self.n_envs, dtype=bool))
        n = self.n_envs
        self._time[:] = 0
        self._pending_reset[:] = False
        return EnvStep(
            obs=self._flat(obs),
            rl2=np.zeros((n, self.rl2_dim), dtype=np.float32),
            time=self._time.copy(),
            reward=np.zeros(n, dtype=np.float32),
            terminated=np.zeros(n, dtype=bool),
            truncated=np.zeros(n, dtype=bool),
            started=np.ones(n, dtype=bool),
            env_actions=None,
            infos=infos,
        )

    def step(self, actions: np.ndarray) -> EnvStep:
        """Step every env with policy-space actions (N, ...); envs that just ended start a new episode."""
        env_actions = self.codec.to_env(actions)  # (N, ...)
        obs, reward, terminated, truncated, infos = self.vector_env.step(env_actions)
        started = self._pending_reset.copy()
        if started.any():
            self._track_tasks(infos, started)
        reward = np.asarray(reward, dtype=np.float32)
        flat = self._flat(obs)
        self._check_finite(reward, flat)
        rl2 = np.empty((self.n_envs, self.rl2_dim), dtype=np.float32)  # (N, 1 + A)
        rl2[:, 0] = reward
        rl2[:, 1:] = self.codec.rl2_features(env_actions)
        rl2[started] = 0.0
        self._time += 1
        self._time[started] = 0
        terminated = np.asarray(terminated, dtype=bool) & ~started
        truncated = np.asarray(truncated, dtype=bool) & ~started
        self._pending_reset = terminated | truncated
        return EnvStep(
            obs=flat,
            rl2=rl2,
            time=self._time.copy(),
            reward=np.where(started, 0.0, reward).astype(np.float32),
            terminated=terminated,
            truncated=truncated,
            started=started,
            env_actions=env_actions,
            infos=infos,
        )

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.vector_env.close()

    def __enter__(self) -> BatchedEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _track_tasks(self, infos: dict[str, Any], started: np.ndarray) -> None:
        """Read the task index each newly started env reports (task sets only)."""
        if self.tasks is None or TASK_INFO not in infos:
            return
        mask = np.asarray(infos.get(f"_{TASK_INFO}", np.ones(self.n_envs, dtype=bool)), dtype=bool) & started
        self._task[mask] = np.asarray(infos[TASK_INFO], dtype=np.int64)[mask]

    def _check_finite(self, reward: np.ndarray, obs: dict[str, np.ndarray]) -> None:
        """DataError naming the first env whose reward or an observation is NaN/inf."""
        arrays = {"reward": reward, **{f"observation['{k}']": v for k, v in obs.items() if v.dtype.kind == "f"}}
        for name, arr in arrays.items():
            finite = np.isfinite(arr).reshape(self.n_envs, -1).all(axis=1)  # (N,)
            if not finite.all():
                i = int(np.flatnonzero(~finite)[0])
                raise DataError(
                    f"{self.where}: env {i} ({self.env_name}) returned a non-finite {name} at step {int(self._time[i]) + 1} "
                    "of its episode; the run stopped (fix the env, or clip/replace the value in a wrapper)"
                )

    def _flat(self, obs: Any) -> dict[str, np.ndarray]:
        flat = flatten_obs(obs)
        return {k: np.asarray(v, dtype=self._dtypes[k]) for k, v in flat.items()}
