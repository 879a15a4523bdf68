"""N parallel environments from an EnvConfig: gymnasium's SyncVectorEnv, AsyncVectorEnv (subprocesses), or an
env that steps the batch itself (`already_vectorized`).

All run in NEXT_STEP autoreset mode (BatchedEnv refuses others) and come wrapped as a BatchedEnv. gymnasium + numpy only, no torch.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import replace

import gymnasium as gym
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from amago_pipe.config.envs import EnvConfig
from amago_pipe.envs.factory import EnvFactory
from amago_pipe.envs.wrapper import BatchedEnv
from amago_pipe.errors import ConfigError


def make_vector_env(cfg: EnvConfig, *, n_envs: int | None = None, where: str = "env") -> gym.vector.VectorEnv:
    """A gymnasium VectorEnv of `n_envs` (default `cfg.n_envs`) copies in `cfg.mode`, NEXT_STEP autoreset."""
    n = cfg.n_envs if n_envs is None else n_envs
    factory = EnvFactory.from_config(cfg, where=where)
    if cfg.mode == "already_vectorized":
        return factory.make_vector(n)
    fns = [replace(factory, index=i) for i in range(n)]
    try:
        if cfg.mode == "async":
            factory().close()  # fail early, in this process, with a clear message (not a worker traceback)
            # a worker's error is re-raised here naming its env (IndexedEnv); gymnasium's copy of its traceback
            # (a UserWarning) would print a traceback the user did not ask for (--debug shows ours)
            warnings.filterwarnings("ignore", category=UserWarning, module="gymnasium.vector.async_vector_env")
            # forking a process that runs JAX's threads (a gymnax env in this process) can deadlock the child
            context = "forkserver" if "jax" in sys.modules else None
            return AsyncVectorEnv(fns, autoreset_mode=AutoresetMode.NEXT_STEP, context=context)
        return SyncVectorEnv(fns, autoreset_mode=AutoresetMode.NEXT_STEP)
    except (RuntimeError, ValueError, AssertionError) as e:
        raise ConfigError(
            f"{where}: cannot start {n} '{cfg.env_name}' envs in {cfg.mode} mode ({e}); "
            "try mode: sync, or check that the env can be built in a subprocess",
            path=f"{where}.mode",
        ) from e


def make_batched_env(cfg: EnvConfig, *, n_envs: int | None = None, where: str = "env") -> BatchedEnv:
    """`make_vector_env` wrapped as a BatchedEnv (flat dict observations, rl2, time, env name)."""
    return BatchedEnv(make_vector_env(cfg, n_envs=n_envs, where=where), env_name=cfg.env_name, where=where)
