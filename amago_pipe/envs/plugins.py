"""Calling user code that makes or wraps envs (a `factory:` function, a wrapper plugin), with errors that name the
config key. gymnasium only."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from amago_pipe.errors import ConfigError


def call_for_env(
    fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *, name: str, at: str, kwargs_at: str, hint: str
) -> gym.Env:  # type: ignore[type-arg]
    """`fn(*args, **kwargs)` (an env factory, or a wrapper plugin given the env), which must return a gymnasium.Env;
    ConfigError naming `at` (the path `kwargs_at` when the call's arguments do not fit its signature)."""
    try:
        env = fn(*args, **kwargs)
    except TypeError as e:
        given = f"{'the env and ' if args else ''}kwargs {sorted(kwargs)}"
        raise ConfigError(f"{at}: calling '{name}' with {given} failed ({e}); {hint}", path=kwargs_at) from e
    if not isinstance(env, gym.Env):
        raise ConfigError(f"{at}: '{name}' returned {type(env).__name__}, expected a gymnasium.Env", path=at)
    return env
