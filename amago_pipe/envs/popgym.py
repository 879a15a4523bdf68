"""POPGym memory tasks (optional `popgym` package) as gymnasium 1.x envs with flat one-hot float observations.

Use as `env: {factory: amago_pipe.envs.popgym:make_popgym, kwargs: {name: RepeatPreviousEasy}}` (or, once
`register_popgym_envs()` ran, as id `popgym/RepeatPreviousEasy-v0`). popgym is imported only when a task is
built or listed; gymnasium + numpy, never torch.
"""

from __future__ import annotations

import copy
import math
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from amago_pipe.errors import ConfigError, DataError, did_you_mean, import_optional

INSTALL_HINT = 'pip install -e ".[envs]" (or: pip install popgym)'
NAMESPACE = "popgym"
"""gymnasium namespace of the ids made by `register_popgym_envs` (popgym's own ids are `popgym-<Task>-v0`)."""
NAVIGATION_HINT = 'pip install "popgym[navigation]" (the Labyrinth tasks need mazelib)'


def popgym_tasks() -> dict[str, type[gym.Env]]:
    """Every POPGym task class by name (`RepeatPreviousEasy`, ..., and the configurable bases like `RepeatPrevious`)."""
    popgym_envs = import_optional(
        "popgym.envs", needs="env.factory: POPGym tasks need", package="popgym", install=INSTALL_HINT
    )
    classes = {**popgym_envs.ALL_BASE, **popgym_envs.ALL}
    return {cls.__name__: cls for cls in classes}


def register_popgym_envs() -> None:
    """Register a gymnasium id `popgym/<Task>-v0` for every POPGym task, built by `make_popgym`; idempotent.

    `gymnasium.make("popgym/RepeatPreviousEasy-v0", obs_size=6)` then passes its kwargs to `make_popgym`.
    """
    for name in popgym_tasks():
        env_id = f"{NAMESPACE}/{name}-v0"
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=f"{__name__}:make_popgym", kwargs={"name": name})


def make_popgym(name: str, *, obs_size: int | None = None, n_actions: int | None = None, **env_kwargs: Any) -> gym.Env:
    """One POPGym task with a flat float32 Box observation (one-hot codes for discrete parts).

    `obs_size` pads the observation with zeros and `n_actions` widens a discrete action space, so several
    tasks can share one store (one DataSpec); an id beyond the task's own choices is taken modulo their
    number. MultiDiscrete actions (Battleship, MineSweeper) become one Discrete of their product.
    `env_kwargs` go to the task class (only the bases, e.g. `RepeatPrevious(num_decks=1, k=4)`, take any).
    Rewards are POPGym's own (an episode's return lies in [-1, 1]); no `success` info is added.
    """
    tasks = popgym_tasks()
    if name not in tasks:
        raise ConfigError(_unknown_task_message(name, sorted(tasks)), path="env.kwargs.name")
    try:
        env: gym.Env = tasks[name](**env_kwargs)
    except TypeError as e:
        raise ConfigError(
            f"env.kwargs: POPGym task '{name}' rejected kwargs {sorted(env_kwargs)} ({e}); the Easy/Medium/Hard "
            f"variants take none, the bases (e.g. '{_base_name(name)}') take the task's own parameters",
            path="env.kwargs",
        ) from e
    env = OneHotObservation(env, size=obs_size, task=name)
    if not isinstance(env.action_space, spaces.Box):
        env = DiscreteActionAdapter(env, n=n_actions, task=name)
    elif n_actions is not None:
        raise ConfigError(
            f"env.kwargs.n_actions: POPGym task '{name}' has continuous actions {env.action_space}; "
            "n_actions applies to discrete tasks only, remove it",
            path="env.kwargs.n_actions",
        )
    return env


def _unknown_task_message(name: str, known: list[str]) -> str:
    hint = f"; the Labyrinth tasks need mazelib: {NAVIGATION_HINT}" if name.startswith("Labyrinth") else ""
    return f"env.kwargs.name: unknown POPGym task '{name}' (known: {', '.join(known)}){did_you_mean(name, known)}{hint}"


def _base_name(name: str) -> str:
    for level in ("Easy", "Medium", "Hard"):
        if name.endswith(level):
            return name[: -len(level)]
    return name


class OneHotObservation(gym.Wrapper):
    """Encodes any Discrete/MultiDiscrete/MultiBinary/Box/Tuple/Dict observation as one float32 vector.

    Discrete parts become one-hot codes, Box parts are flattened as they are, Tuple/Dict parts are
    concatenated in order; the vector is zero-padded to `size` when given. Infos are deep-copied: some
    POPGym tasks (CountRecall, MultiarmedBandit) return the same info objects from reset and step, which
    gymnasium 1.x's `check_env` rejects.
    """

    def __init__(self, env: gym.Env, *, size: int | None = None, task: str = "env"):
        super().__init__(env)
        self._source = env.observation_space
        low, high = _bounds(self._source, task)
        width = low.shape[0]
        if size is not None:
            if size < width:
                raise ConfigError(
                    f"env.kwargs.obs_size: POPGym task '{task}' needs {width} observation features, got obs_size={size}; "
                    f"give at least {width}",
                    path="env.kwargs.obs_size",
                )
            low = np.concatenate([low, np.zeros(size - width, dtype=np.float32)])
            high = np.concatenate([high, np.ones(size - width, dtype=np.float32)])  # low < high: no checker warning
        self._width, self._size = width, low.shape[0]
        self.observation_space = spaces.Box(low, high, dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        return self.observation(obs), copy.deepcopy(info)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self.observation(obs), float(reward), bool(terminated), bool(truncated), copy.deepcopy(info)

    def observation(self, observation: Any) -> np.ndarray:
        out = np.zeros(self._size, dtype=np.float32)  # (D,)
        out[: self._width] = _encode(self._source, observation)
        return out


class DiscreteActionAdapter(gym.ActionWrapper):
    """Discrete(n) or MultiDiscrete actions seen as Discrete(`n` or their product); extra ids wrap around."""

    def __init__(self, env: gym.Env, *, n: int | None = None, task: str = "env"):
        super().__init__(env)
        source = env.action_space
        if isinstance(source, spaces.Discrete):
            self._start, own = int(source.start), int(source.n)
        elif isinstance(source, spaces.MultiDiscrete):
            self._start, own = 0, math.prod(int(v) for v in np.asarray(source.nvec).ravel())
        else:
            raise DataError(f"POPGym task '{task}': unsupported action space {source}")
        if n is not None and n < own:
            raise ConfigError(
                f"env.kwargs.n_actions: POPGym task '{task}' has {own} actions, got n_actions={n}; give at least {own}",
                path="env.kwargs.n_actions",
            )
        self._source, self._own = source, own
        self.action_space = spaces.Discrete(own if n is None else n)

    def action(self, action: Any) -> Any:
        idx = int(action) % self._own
        if isinstance(self._source, spaces.MultiDiscrete):
            return np.array(np.unravel_index(idx, tuple(int(v) for v in self._source.nvec)), dtype=np.int64)
        return self._start + idx


def _bounds(space: spaces.Space, task: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature (low, high) float32 bounds of the encoded observation."""
    if isinstance(space, spaces.Discrete):
        return np.zeros(int(space.n), np.float32), np.ones(int(space.n), np.float32)
    if isinstance(space, spaces.MultiDiscrete):
        width = int(np.sum(space.nvec))
        return np.zeros(width, np.float32), np.ones(width, np.float32)
    if isinstance(space, spaces.MultiBinary):
        width = math.prod(np.atleast_1d(space.n).tolist())
        return np.zeros(width, np.float32), np.ones(width, np.float32)
    if isinstance(space, spaces.Box):
        low = np.broadcast_to(space.low, space.shape).astype(np.float32).ravel()
        high = np.broadcast_to(space.high, space.shape).astype(np.float32).ravel()
        return low, high
    if isinstance(space, spaces.Tuple | spaces.Dict):
        subs = space.spaces.values() if isinstance(space, spaces.Dict) else space.spaces
        parts = [_bounds(sub, task) for sub in subs]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    raise DataError(f"POPGym task '{task}': unsupported observation space {space}")


def _encode(space: spaces.Space, obs: Any) -> np.ndarray:
    """One observation as a flat float32 vector laid out as `_bounds` describes."""
    if isinstance(space, spaces.Discrete):
        one_hot = np.zeros(int(space.n), np.float32)
        one_hot[int(obs) - int(space.start)] = 1.0
        return one_hot
    if isinstance(space, spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec).ravel()
        offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]])
        one_hot = np.zeros(int(nvec.sum()), np.float32)
        one_hot[offsets + (np.asarray(obs).ravel() - np.asarray(space.start).ravel())] = 1.0
        return one_hot
    if isinstance(space, spaces.MultiBinary | spaces.Box):
        return np.asarray(obs, dtype=np.float32).ravel()
    if isinstance(space, spaces.Dict):
        return np.concatenate([_encode(sub, obs[key]) for key, sub in space.spaces.items()])
    if isinstance(space, spaces.Tuple):
        return np.concatenate([_encode(sub, part) for sub, part in zip(space.spaces, obs)])
    raise DataError(f"unsupported POPGym observation space {space}")
