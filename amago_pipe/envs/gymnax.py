"""gymnax (JAX) environments as one gymnasium VectorEnv that steps the whole batch in a single jitted call.

Use with `mode: already_vectorized`: `env: {id: gymnax/CartPole-v1, n_envs: 32, mode: already_vectorized}` (the
ids are registered on first use) or `factory: amago_pipe.envs.gymnax:make_gymnax` with `kwargs: {name: ...}`.
gymnax and jax are imported only when such an env is built (optional `gymnax` extra); numpy out, never torch.

gymnax resets an env inside the step that ends it; this adapter steps without that reset and resets on the
next call instead (gymnasium's NEXT_STEP autoreset), so the final observation of every episode is kept.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from amago_pipe.config.build import describe
from amago_pipe.errors import ConfigError, did_you_mean, import_optional

INSTALL_HINT = 'pip install -e ".[gymnax]" (or: pip install gymnax six)'
NAMESPACE = "gymnax"
"""gymnasium namespace of the ids made by `register_gymnax_envs`: `gymnax/<gymnax name>`."""


def _gymnax() -> Any:
    return import_optional("gymnax", needs="env: gymnax tasks need", package="gymnax", install=INSTALL_HINT)


def register_gymnax_envs() -> None:
    """Register `gymnax/<name>` (vector entry point only) for every gymnax env; idempotent."""
    for name in _gymnax().registered_envs:
        env_id = f"{NAMESPACE}/{name}"
        if env_id not in gym.registry:
            gym.register(env_id, vector_entry_point=f"{__name__}:make_gymnax", kwargs={"name": name})


def make_gymnax(name: str, num_envs: int, *, max_episode_steps: int | None = None, **params: Any) -> GymnaxVectorEnv:
    """`num_envs` copies of gymnax env `name`; `params` override fields of its `EnvParams` (e.g. `memory_length`)."""
    return GymnaxVectorEnv(name, num_envs, max_episode_steps=max_episode_steps, **params)


class GymnaxVectorEnv(gym.vector.VectorEnv):  # type: ignore[type-arg]
    """A batch of one gymnax env, stepped by one jitted, vmapped function; NEXT_STEP autoreset.

    An episode is truncated (not terminated) when gymnax's `is_truncated` holds (its step limit,
    `max_steps_in_episode`) and the env did not terminate on that step.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, name: str, num_envs: int, *, max_episode_steps: int | None = None, **params: Any):
        gymnax = _gymnax()
        import jax

        if name not in gymnax.registered_envs:
            raise ConfigError(
                f"env.kwargs.name: '{name}' is not a gymnax env (they are: {', '.join(gymnax.registered_envs)})"
                f"{did_you_mean(name, gymnax.registered_envs)}",
                path="env.kwargs.name",
            )
        env, env_params = gymnax.make(name)
        if max_episode_steps is not None:
            params["max_steps_in_episode"] = max_episode_steps
        check_params(name, env_params, params)
        self.env, self.params = env, env_params.replace(**params)
        self.num_envs = num_envs
        self.single_observation_space = _to_gym_space(env.observation_space(self.params))
        self.single_action_space = _to_gym_space(env.action_space(self.params))
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._obs_dtype = self.single_observation_space.dtype
        self._reset_all = jax.jit(self._reset_batch)
        self._step_all = jax.jit(self._step_batch)
        self._key: Any = None
        self._state: Any = None
        self._needs_reset = np.zeros(num_envs, dtype=bool)

    def _reset_batch(self, key: Any) -> Any:
        import jax

        key, sub = jax.random.split(key)
        obs, state = jax.vmap(self.env.reset_env, in_axes=(0, None))(jax.random.split(sub, self.num_envs), self.params)
        return key, obs, state

    def _step_batch(self, key: Any, state: Any, actions: Any, needs_reset: Any) -> Any:
        import jax

        key, sub = jax.random.split(key)
        out = jax.vmap(self._step_one)(jax.random.split(sub, self.num_envs), state, actions, needs_reset)
        return (key, *out)

    def _step_one(self, key: Any, state: Any, action: Any, needs_reset: Any) -> Any:
        """One env: a plain step, or (after its episode ended) a reset with reward 0 and no end flags."""
        import jax
        import jax.numpy as jnp

        key_step, key_reset = jax.random.split(key)
        obs, stepped, reward, terminated, _ = self.env.step_env(key_step, state, action, self.params)
        truncated = jnp.logical_and(self.env.is_truncated(stepped, self.params), jnp.logical_not(terminated))
        obs_reset, state_reset = self.env.reset_env(key_reset, self.params)
        state = jax.tree.map(lambda r, s: jnp.where(needs_reset, r, s), state_reset, stepped)
        obs = jnp.where(needs_reset, obs_reset, obs)
        reward = jnp.where(needs_reset, 0.0, reward)
        terminated = jnp.logical_and(terminated, jnp.logical_not(needs_reset))
        truncated = jnp.logical_and(truncated, jnp.logical_not(needs_reset))
        return obs, state, reward, terminated, truncated

    def reset(self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None) -> Any:
        import jax

        if isinstance(seed, list):
            seed = seed[0]
        if seed is None:
            seed = int(np.random.default_rng().integers(2**31))
        self._key, obs, self._state = self._reset_all(jax.random.PRNGKey(seed))
        self._needs_reset[:] = False
        return np.array(obs, dtype=self._obs_dtype), {}

    def step(self, actions: Any) -> Any:
        if self._state is None:
            raise RuntimeError("GymnaxVectorEnv.step() before reset()")
        self._key, obs, self._state, reward, terminated, truncated = self._step_all(
            self._key, self._state, np.asarray(actions), self._needs_reset
        )
        terminated, truncated = np.array(terminated, dtype=bool), np.array(truncated, dtype=bool)
        self._needs_reset = terminated | truncated
        return np.array(obs, dtype=self._obs_dtype), np.array(reward, np.float64), terminated, truncated, {}


def check_params(name: str, defaults: Any, params: dict[str, Any]) -> None:
    """ConfigError naming the first of `params` that gymnax env `name`'s `EnvParams` (`defaults`) lacks, or whose
    value is not of its default's kind (a boolean, a whole number, a finite number) or is a negative whole number
    where the default is not (lengths, counts, intervals)."""
    known = sorted(type(defaults).__dataclass_fields__)
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ConfigError(
            f"env.kwargs: gymnax env '{name}' has no parameter(s) {unknown}; its parameters are {known}"
            f"{did_you_mean(unknown[0], known)}",
            path="env.kwargs",
        )
    for key, value in params.items():
        default = getattr(defaults, key)
        problem = _param_problem(default, value)
        if problem:
            raise ConfigError(
                f"env.kwargs.{key}: gymnax env '{name}' takes {problem} for {key}, got {describe(value)}; "
                f"e.g. {key}: {default!r} (its default)",
                path=f"env.kwargs.{key}",
            )


def _param_problem(default: Any, value: Any) -> str:
    """What `value` should be, as the kind of gymnax parameter `default` is; '' when it fits (arrays: not checked)."""
    if isinstance(default, bool):
        return "" if isinstance(value, bool) else "a boolean (true/false)"
    if isinstance(default, int):
        if not isinstance(value, int) or isinstance(value, bool):
            return "a whole number"
        return "a whole number >= 0" if default >= 0 and value < 0 else ""
    if isinstance(default, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool) and np.isfinite(value)
        return "" if ok else "a finite number"
    return ""


def _to_gym_space(space: Any) -> spaces.Space:  # type: ignore[type-arg]
    """A gymnax Discrete/Box as the gymnasium space (Boxes as float32, also boolean MinAtar frames)."""
    kind = type(space).__name__
    if kind == "Discrete":
        return spaces.Discrete(int(space.n))
    if kind == "Box":
        shape = tuple(int(d) for d in np.atleast_1d(np.asarray(space.shape, dtype=np.int64)))
        low = np.broadcast_to(np.asarray(space.low, dtype=np.float32), shape)
        high = np.broadcast_to(np.asarray(space.high, dtype=np.float32), shape)
        return spaces.Box(low=low, high=high, shape=shape, dtype=np.float32)
    raise ConfigError(
        f"env: gymnax space {space!r} is not supported (only Discrete and Box); pick another gymnax env", path="env"
    )
