"""`KShot`: turn any gymnasium env into a k-attempt meta-RL env (same task for k attempts, then a new one).

Also the config factory `kshot(env_id=..., k=...)`. gymnasium + numpy only.
"""

from __future__ import annotations

from typing import Any, Literal

import gymnasium as gym
import numpy as np

from amago_pipe.errors import ConfigError, DataError

KEEP_TASK = "amago_pipe/keep_task"
"""Reset option KShot gives between attempts to an env whose `unwrapped.supports_keep_task` is True:
such an env keeps its task (layout, goal) when `options[KEEP_TASK]` is true and draws a new one otherwise."""
ATTEMPTS_KEY = "amago_pipe/attempts"
"""`info` key: number of attempts finished so far in the outer episode."""
RESET_KEY = "reset"
"""Observation key of the reset flag when observations are (or become) a Dict."""

SignalMode = Literal["none", "append", "key", "wrap"]
TASK_ATTRS = ("get_task", "task", "_task", "goal", "_goal", "_target_pos", "_last_rand_vec")
"""Attributes (or methods) of the unwrapped env read as its task, when it has one; KShot stops the run when
the value changes between the attempts of one episode (the env drew a new task where it must keep it)."""


def attempt_key(i: int, what: str = "return") -> str:
    """`info` key of attempt i (1-based): `amago_pipe/attempt_{i}_return` or `..._success`."""
    return f"amago_pipe/attempt_{i}_{what}"


def _signal_space(space: gym.Space, reset_signal: bool) -> tuple[gym.Space, SignalMode]:
    """The outer observation space and how the reset flag is added to observations."""
    flag = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
    if not reset_signal:
        return space, "none"
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1 and np.issubdtype(space.dtype, np.floating):
        low = np.append(space.low, 0.0).astype(space.dtype)
        high = np.append(space.high, 1.0).astype(space.dtype)
        return gym.spaces.Box(low, high, dtype=space.dtype), "append"  # type: ignore[arg-type]
    if isinstance(space, gym.spaces.Dict):
        if RESET_KEY in space.spaces:
            raise ValueError(f"KShot: the observation Dict already has a '{RESET_KEY}' key; use reset_signal=False")
        return gym.spaces.Dict({**space.spaces, RESET_KEY: flag}), "key"
    return gym.spaces.Dict({"observation": space, RESET_KEY: flag}), "wrap"


class KShot(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """k attempts at one task inside one episode: when an attempt ends (terminated or truncated) the inner env
    is reset and the next attempt starts; after `k` attempts the outer episode ends.

    Tasks: the outer `reset(seed, options)` resets the inner env with that seed and options (a new task);
    between attempts the inner env is reset with no seed, so envs that draw their task only when seeded or
    built keep it; an env whose `unwrapped.supports_keep_task` is True also gets `options={KEEP_TASK: True}`
    and must keep its task then. The step that ends an attempt returns the next attempt's first observation
    (the attempt's last observation is dropped) with that attempt's last reward. The outer episode is
    terminated after the k-th attempt, or truncated when that attempt was truncated.

    Reset flag (`reset_signal=True`): 1.0 on the first observation of each attempt, else 0.0. It is appended
    as a last dim to a 1-D float Box, added as key `reset` to a Dict, and otherwise observations become
    `{'observation': obs, 'reset': (1,)}`. Info: at the end of attempt i, `amago_pipe/attempt_{i}_return`,
    `amago_pipe/attempt_{i}_success` (when the inner env reports `success`/`is_success`) and
    `amago_pipe/attempts` = i; the inner info is passed through (so `success` is the last attempt's).
    """

    def __init__(self, env: gym.Env, k: int, *, reset_signal: bool = True):
        gym.utils.RecordConstructorArgs.__init__(self, k=k, reset_signal=reset_signal)
        super().__init__(env)
        if k < 1:
            raise ValueError(f"KShot: k must be at least 1, got {k}")
        self.k = k
        self.reset_signal = reset_signal
        space, self._mode = _signal_space(env.observation_space, reset_signal)
        self.observation_space = space
        self._attempt = 1
        """1-based index of the attempt in progress."""
        self._attempt_return = 0.0

    def _wrap(self, obs: Any, first: bool) -> Any:
        flag = np.array([float(first)], dtype=np.float32)
        if self._mode == "append":
            return np.concatenate([np.asarray(obs), flag.astype(np.asarray(obs).dtype)])
        if self._mode == "key":
            return {**obs, RESET_KEY: flag}
        if self._mode == "wrap":
            return {"observation": obs, RESET_KEY: flag}
        return obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._attempt = 1
        self._attempt_return = 0.0
        return self._wrap(obs, True), {**info, ATTEMPTS_KEY: 0}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, inner_reward, terminated, truncated, info = self.env.step(action)
        reward = float(inner_reward)
        self._attempt_return += reward
        if not (terminated or truncated):
            return self._wrap(obs, False), reward, False, False, info
        i = self._attempt
        info = {**info, attempt_key(i): self._attempt_return, ATTEMPTS_KEY: i}
        success = next((info[k] for k in ("success", "is_success") if k in info), None)
        if success is not None:
            info[attempt_key(i, "success")] = float(bool(success))
        if i >= self.k:
            return self._wrap(obs, False), reward, bool(terminated), bool(truncated and not terminated), info
        keep = bool(getattr(self.env.unwrapped, "supports_keep_task", False))
        before = task_fingerprint(self.env.unwrapped)
        obs, reset_info = self.env.reset(options={KEEP_TASK: True} if keep else None)
        after = task_fingerprint(self.env.unwrapped)
        if before != after:
            raise DataError(
                f"kshot: {_env_label(self.env)} drew a new task between attempts {i} and {i + 1} (its "
                f"`{before[0] if before else after[0] if after else '?'}` changed), so its attempts would not "
                "share a task; give the env a way to keep its task (`supports_keep_task` and the "
                f"'{KEEP_TASK}' reset option) or use its own adapter"
            )
        self._attempt = i + 1
        self._attempt_return = 0.0
        return self._wrap(obs, True), reward, False, False, {**reset_info, **info}


def task_fingerprint(env: Any) -> tuple[str, bytes] | None:
    """(attribute, bytes of its value) of the first `TASK_ATTRS` the env has, or None when it exposes no task."""
    for name in TASK_ATTRS:
        value = getattr(env, name, None)
        if value is None:
            continue
        if callable(value):
            try:
                value = value()
            except Exception:  # a getter that needs arguments or state: not a task we can read
                continue
        try:
            return name, np.asarray(value, dtype=np.float64).tobytes()
        except (TypeError, ValueError):
            return name, repr(value).encode()
    return None


def _env_label(env: gym.Env) -> str:  # type: ignore[type-arg]
    return f"env '{env.spec.id}'" if env.spec is not None else f"env {type(env.unwrapped).__name__}"


def kshot(
    *,
    env_id: str,
    k: int,
    kwargs: dict[str, Any] | None = None,
    reset_signal: bool = True,
    max_episode_steps: int | None = None,
) -> KShot:
    """Env factory: `gymnasium.make(env_id, **kwargs)` wrapped in `KShot(env, k)`.

    Use as `env: {factory: amago_pipe.envs.builtin:kshot, kwargs: {env_id: CartPole-v1, k: 3}}`;
    `max_episode_steps` is the time limit of each attempt (default: the env's registered limit).
    """
    from amago_pipe.envs.namespaces import register_namespace

    register_namespace(env_id)  # so `env_id` may be a built-in `amago_pipe/...` (or POPGym, ...) id
    extra: dict[str, Any] = {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}
    try:
        inner = gym.make(env_id, **(kwargs or {}), **extra)
    except gym.error.Error as e:
        raise ConfigError(
            f"kshot: cannot make gymnasium env '{env_id}' ({e}); check `env_id` in the factory's kwargs",
            path="env.kwargs.env_id",
        ) from e
    except (TypeError, ValueError) as e:
        raise ConfigError(
            f"kshot: gymnasium env '{env_id}' rejected kwargs {sorted(kwargs or {})} ({e})", path="env.kwargs.kwargs"
        ) from e
    try:
        return KShot(inner, k, reset_signal=reset_signal)
    except ValueError as e:
        raise ConfigError(f"kshot: {e}", path="env.kwargs") from e
