"""Build single gymnasium environments from an EnvConfig (by id with kwargs, or a `module:factory`).

The factory is a picklable object so `async` subprocess envs can rebuild it. Imports gymnasium, never torch.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.transforms import WrapperConfig
from amago_pipe.envs.namespaces import register_namespace
from amago_pipe.envs.plugins import call_for_env
from amago_pipe.errors import AmagoPipeError, ConfigError, DataError
from amago_pipe.registry import import_path
from amago_pipe.spec import flatten_obs, flatten_space, text_keys
from amago_pipe.tokens import TextSpec

log = logging.getLogger("amago_pipe.envs")

ENV_ERROR = "amago_pipe/env_error"
"""`info` key set on the step where an env failed under `on_error: skip` (its episode is discarded)."""
MAX_ENV_ERRORS = 10
"""Failures of one env tolerated under `on_error: skip` before the run stops."""


@dataclass(frozen=True)
class EnvFactory:
    """Callable that returns one fresh `gymnasium.Env`; picklable (holds only strings and plain data)."""

    id: str | None = None
    factory: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    max_episode_steps: int | None = None
    obs_keys: tuple[str, ...] | None = None
    """Keep only these keys of a Dict observation."""
    where: str = "env"
    """Config path used in error messages, e.g. `stages.collect.env`."""
    index: int | None = None
    """Position in a vector env: errors raised by the env's step/reset then name it."""
    skip_errors: bool = False
    """`on_error: skip`: a failing step ends (and discards) the episode instead of stopping the run."""
    text: TextSpec | None = None
    """`text:`: read the env's text observations as token ids of this vocabulary (`amago_pipe.envs.text`)."""
    text_keys: tuple[str, ...] | None = None
    """The text keys to read (None: every text observation)."""
    wrappers: tuple[WrapperConfig, ...] = ()
    """`wrappers:` applied in order to the env as made (before `obs_keys` and `text`; `amago_pipe.envs.transforms`);
    the time limit then counts the wrapped env's steps."""

    @classmethod
    def from_config(cls, cfg: EnvConfig, *, where: str = "env") -> EnvFactory:
        return cls(
            id=cfg.id,
            factory=cfg.factory,
            kwargs=dict(cfg.kwargs or {}),
            max_episode_steps=cfg.max_episode_steps,
            obs_keys=tuple(cfg.obs_keys) if cfg.obs_keys is not None else None,
            where=where,
            skip_errors=cfg.on_error == "skip",
            text=cfg.text.text_spec() if cfg.text is not None else None,
            text_keys=tuple(cfg.text.keys) if cfg.text is not None and cfg.text.keys is not None else None,
            wrappers=tuple(cfg.wrappers or ()),
        )

    def __call__(self) -> gym.Env:
        env = self._text(self._filter(self._wrap(self._make()), gym.wrappers.FilterObservation))
        return env if self.index is None else IndexedEnv(env, self.index, where=self.where, skip=self.skip_errors)

    def _text(self, env: Any) -> Any:
        """`text:`: the env (single or vector) with its text observations as token ids."""
        if self.text is None:
            return env
        from amago_pipe.envs.text import TextObservation, VectorTextObservation

        wrapper = VectorTextObservation if isinstance(env, gym.vector.VectorEnv) else TextObservation
        try:
            return wrapper(env, self.text, self.text_keys, where=self.where)
        except ConfigError:
            env.close()
            raise

    def make_vector(self, n: int) -> gym.vector.VectorEnv:
        """`mode: already_vectorized`: one env object that steps `n` envs itself."""
        extra: dict[str, Any] = {}
        if self.max_episode_steps is not None:
            extra["max_episode_steps"] = self.max_episode_steps
        if self.id is not None:
            register_namespace(self.id)
            try:
                env = gym.make_vec(self.id, num_envs=n, vectorization_mode="vector_entry_point", **self.kwargs, **extra)
            except (gym.error.Error, TypeError, ValueError) as e:
                raise ConfigError(
                    f"{self.where}: '{self.id}' cannot be made as an already vectorized env ({e}); use mode: sync or "
                    "async, or a `factory` that returns a gymnasium VectorEnv",
                    path=f"{self.where}.mode",
                ) from e
        else:
            fn = import_path(self.factory or "", what="env factory", where=f"{self.where}.factory")
            try:
                env = fn(num_envs=n, **self.kwargs, **extra)
            except TypeError as e:
                raise ConfigError(
                    f"{self.where}.factory: calling '{self.factory}' with num_envs and kwargs {sorted(self.kwargs)} "
                    f"failed ({e}); an already_vectorized factory takes `num_envs`",
                    path=f"{self.where}.kwargs",
                ) from e
        if not isinstance(env, gym.vector.VectorEnv) or env.num_envs != n:
            env.close()
            got = type(env).__name__ if not isinstance(env, gym.vector.VectorEnv) else f"{env.num_envs} envs"
            raise ConfigError(
                f"{self.where}: mode already_vectorized needs a gymnasium VectorEnv of {n} envs; got {got}",
                path=f"{self.where}.mode",
            )
        return self._text(self._filter(env, gym.wrappers.vector.FilterObservation))

    def _wrap(self, env: gym.Env) -> gym.Env:  # type: ignore[type-arg]
        """`wrappers:` around the env as made, then the time limit (in the wrapped env's steps)."""
        if not self.wrappers:
            return env
        from amago_pipe.envs.transforms import apply_wrappers, wrappers_where

        env = apply_wrappers(env, self.wrappers, where=wrappers_where(self.where))
        if self.max_episode_steps is not None:
            env = gym.wrappers.TimeLimit(env, max_episode_steps=self.max_episode_steps)
        return env

    @property
    def _inner_limit(self) -> int | None:
        """The time limit given to the env as made: none with wrappers (`_wrap` adds it around them)."""
        return None if self.wrappers else self.max_episode_steps

    def _filter(self, env: Any, wrapper: Any) -> Any:
        """`obs_keys`: the env (single or vector) with only those keys of its Dict observation."""
        if self.obs_keys is None:
            return env
        space = env.single_observation_space if isinstance(env, gym.vector.VectorEnv) else env.observation_space
        have = list(space.spaces) if isinstance(space, gym.spaces.Dict) else []
        missing = [k for k in self.obs_keys if k not in have]
        if missing:
            env.close()
            found = f"its keys are {have}" if have else f"its observation space is {type(space).__name__}, not a Dict"
            raise ConfigError(
                f"{self.where}.obs_keys: {missing} not in the env's observations ({found})",
                path=f"{self.where}.obs_keys",
            )
        return wrapper(env, list(self.obs_keys))

    def _make(self) -> gym.Env:
        if self.id is not None:
            return self._make_registered(self.id)
        if self.factory is None:
            raise ConfigError(f"{self.where}: give `id` or `factory`; found neither", path=f"{self.where}.id")
        fn = import_path(self.factory, what="env factory", where=f"{self.where}.factory")
        at, hint = f"{self.where}.factory", "check `kwargs` against the factory's signature"
        env = call_for_env(fn, (), self.kwargs, name=self.factory, at=at, kwargs_at=f"{self.where}.kwargs", hint=hint)
        if self._inner_limit is not None:
            env = gym.wrappers.TimeLimit(env, max_episode_steps=self._inner_limit)
        return env

    def _make_registered(self, env_id: str) -> gym.Env:
        if env_id.startswith("gymnax/"):
            raise ConfigError(
                f"{self.where}.mode: gymnax env '{env_id}' steps all its copies as one batch; set "
                "`mode: already_vectorized`",
                path=f"{self.where}.mode",
            )
        extra: dict[str, Any] = {}
        if self._inner_limit is not None:
            extra["max_episode_steps"] = self._inner_limit
        register_namespace(env_id)
        if self.wrappers:
            from amago_pipe.envs.transforms import wrappers_where
            from amago_pipe.envs.transforms_atari import make_kwargs

            at = wrappers_where(self.where)
            extra.update(make_kwargs(env_id, self.wrappers, self.kwargs, where=at, kwargs_at=f"{self.where}.kwargs"))
        try:
            return gym.make(env_id, **{**self.kwargs, **extra})
        except gym.error.Error as e:  # unknown id, missing namespace, bad version
            raise ConfigError(
                f"{self.where}.id: cannot make gymnasium env '{env_id}' ({e}); check the id, and import the "
                "package that registers it (or use `factory: package.module:function`)",
                path=f"{self.where}.id",
            ) from e
        except (TypeError, ValueError) as e:
            raise ConfigError(
                f"{self.where}.kwargs: gymnasium env '{env_id}' rejected kwargs {sorted(self.kwargs)} ({e})",
                path=f"{self.where}.kwargs",
            ) from e


def check_observation_space(space: Any, *, where: str, env_name: str) -> None:
    """ConfigError naming `obs_keys` when the store cannot hold a part of this observation space."""
    try:
        flatten_space(space)
    except DataError as e:
        raise ConfigError(
            f"{where}: env '{env_name}': {e}; keep only the supported keys of a Dict observation with "
            "`obs_keys: [...]` (`--obs-keys a,b` on the command line)",
            path=f"{where}.text" if text_keys(space) else f"{where}.obs_keys",
        ) from e


class IndexedEnv(gym.Wrapper):  # type: ignore[type-arg]
    """Names the env's index in its vector env when its `step` or `reset` raises (sync and async modes).

    With `skip`, a step that raises or returns a NaN/inf reward or observation ends the episode instead: the last
    good observation is returned, truncated, with `info[ENV_ERROR]` set, so the recorder discards the episode.
    """

    def __init__(self, env: gym.Env, index: int, *, where: str, skip: bool = False):  # type: ignore[type-arg]
        super().__init__(env)
        self.index, self.where, self.skip = index, where, skip
        self.errors = 0
        self._last_obs: Any = None

    def step(self, action: Any) -> Any:
        try:
            out = self.env.step(action)
        except AmagoPipeError:
            raise
        except Exception as e:
            if not self.skip:
                raise self._failed("step", e) from e
            return self._skipped(f"{type(e).__name__} in step(): {e}")
        if self.skip and not _finite(out[0], out[1]):
            return self._skipped("a non-finite reward or observation")
        self._last_obs = out[0]
        return out

    def reset(self, **kwargs: Any) -> Any:
        while True:
            try:
                out = self.env.reset(**kwargs)
                break
            except AmagoPipeError:
                raise
            except Exception as e:
                if not self.skip:
                    raise self._failed("reset", e) from e
                self._count(f"{type(e).__name__} in reset(): {e}", e)
        self._last_obs = out[0]
        return out

    def _skipped(self, what: str) -> Any:
        self._count(what, None)
        return self._last_obs, 0.0, False, True, {ENV_ERROR: 1.0}

    def _count(self, what: str, e: Exception | None) -> None:
        self.errors += 1
        name = self.env.spec.id if self.env.spec is not None else type(self.env.unwrapped).__name__
        if self.errors > MAX_ENV_ERRORS:
            raise DataError(
                f"{self.where}: env {self.index} ({name}) failed {self.errors} times (last: {what}); the run stopped "
                "(fix the env, or run it alone with n_envs: 1 to debug)"
            ) from e
        log.warning(
            "%s: env %d (%s): %s; its episode is discarded and the env restarts", self.where, self.index, name, what
        )

    def _failed(self, call: str, e: Exception) -> DataError:
        name = self.env.spec.id if self.env.spec is not None else type(self.env.unwrapped).__name__
        return DataError(
            f"{self.where}: env {self.index} ({name}) raised {type(e).__name__} in {call}(): {e}; the run stopped "
            "(fix the env, set `on_error: skip` to discard its episode and go on, or run it alone with n_envs: 1 "
            "to debug)"
        )


def _finite(obs: Any, reward: Any) -> bool:
    """Whether a step's reward and every float array of its (possibly nested) observation are finite."""
    if not np.isfinite(np.asarray(reward, dtype=np.float64)).all():
        return False
    return all(np.isfinite(v).all() for v in flatten_obs(obs).values() if np.asarray(v).dtype.kind == "f")
