"""EnvConfig: which gymnasium environment to run and how many copies, shared by collect and evaluate.

Config only: no torch, no click, no gymnasium (the env is built by `amago_pipe.envs`).
"""

from __future__ import annotations

from typing import Any, Literal

from amago_pipe.config.base import config
from amago_pipe.config.build import FieldError


@config
class EnvConfig:
    """A gymnasium 1.x environment, by registered id (with kwargs) or by a `module:factory` function."""

    id: str | None = None
    """Registered gymnasium id such as `CartPole-v1` (give either `id` or `factory`)."""
    factory: str | None = None
    """`package.module:function` returning a gymnasium.Env when called with `kwargs` (instead of `id`)."""
    kwargs: dict[str, Any] | None = None
    """Keyword arguments passed to `gymnasium.make(id, ...)` or to the factory."""
    name: str | None = None
    """Name recorded with every episode and used to group results (default: the id or factory)."""
    n_envs: int = 8
    """Number of environments stepped in parallel."""
    mode: Literal["sync", "async", "already_vectorized"] = "sync"
    """`sync`: all envs in this process (best for cheap envs); `async`: one subprocess per env;
    `already_vectorized`: the env steps all `n_envs` as one batch itself — `id` through gymnasium's
    `make_vec(..., vectorization_mode="vector_entry_point")` (e.g. CartPole-v1's numpy batch env), or a `factory`
    called as `factory(num_envs=n_envs, **kwargs)` that returns a gymnasium VectorEnv (NEXT_STEP autoreset)."""
    max_episode_steps: int | None = None
    """Time limit per episode (truncation); null keeps the env's registered limit."""
    obs_keys: list[str] | None = None
    """Keep only these keys of a Dict observation, e.g. `[image, direction]` to drop MiniGrid's `mission` text
    (a space the store cannot hold); null keeps them all."""
    seed: int | None = None
    """Seed of the first reset (env i gets seed + i); null derives it from the stage seed."""
    on_error: Literal["stop", "skip"] = "stop"
    """An env that raises in step/reset or returns a NaN/inf reward or observation: `stop` the run naming it, or
    `skip`: its episode ends there and is discarded (pieces already saved stay), the env restarts and the run
    goes on (up to 10 errors per env)."""

    def __post_init__(self) -> None:
        if (self.id is None) == (self.factory is None):
            found = "both" if self.id is not None else "neither"
            raise FieldError(
                "id", f"give exactly one of `id` (e.g. CartPole-v1) or `factory` (module:function); found {found}"
            )
        if self.factory is not None and ":" not in self.factory:
            raise FieldError("factory", f"'{self.factory}' is not an import path; expected 'package.module:function'")
        if self.n_envs < 1:
            raise FieldError("n_envs", f"must be at least 1, got {self.n_envs}")
        if self.mode == "already_vectorized" and self.on_error == "skip":
            raise FieldError(
                "on_error", "`skip` restarts one failing env; an already_vectorized env steps as one batch: use `stop`"
            )
        if self.obs_keys is not None and not self.obs_keys:
            raise FieldError("obs_keys", "give at least one observation key to keep (or null to keep all)")
        if self.max_episode_steps is not None and self.max_episode_steps < 1:
            raise FieldError("max_episode_steps", f"must be at least 1 (or null), got {self.max_episode_steps}")

    @property
    def env_name(self) -> str:
        """The name recorded with episodes: `name`, else the id, else the factory path."""
        return self.name or self.id or self.factory or "env"
