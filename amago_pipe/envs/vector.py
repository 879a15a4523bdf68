"""N parallel environments from an EnvConfig: gymnasium's SyncVectorEnv, AsyncVectorEnv (subprocesses), or an
env that steps the batch itself (`already_vectorized`).

All run in NEXT_STEP autoreset mode (BatchedEnv refuses others) and come wrapped as a BatchedEnv. gymnasium + numpy only, no torch.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass, replace
from typing import Any

import gymnasium as gym
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.transforms import wrapper_records
from amago_pipe.envs.factory import EnvFactory, IndexedEnv
from amago_pipe.envs.tasks import TaskSet, TaskSetEnv
from amago_pipe.envs.wrapper import BatchedEnv
from amago_pipe.errors import ConfigError


def make_vector_env(
    cfg: EnvConfig, *, n_envs: int | None = None, where: str = "env", tasks: TaskSet | None = None
) -> gym.vector.VectorEnv:
    """A gymnasium VectorEnv of `n_envs` (default `cfg.n_envs`) copies in `cfg.mode`, NEXT_STEP autoreset; with
    `tasks`, each slot runs a TaskSetEnv (a fixed task per slot, or one drawn at each reset)."""
    n = cfg.n_envs if n_envs is None else n_envs
    factory = EnvFactory.from_config(cfg, where=where)
    if cfg.mode == "already_vectorized":
        return factory.make_vector(n)
    fns: list[Any] = [replace(factory, index=i) for i in range(n)]
    if tasks is not None:
        fixed = tasks.slot_tasks(n, where=where) if cfg.tasks_per == "slot" else [None] * n
        fns = [TaskSlot(tasks, fixed[i], replace(factory, index=i)) for i in range(n)]
    try:
        if cfg.mode == "async":
            fns[0]().close()  # fail early, in this process, with a clear message (not a worker traceback)
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


def make_batched_env(
    cfg: EnvConfig, *, n_envs: int | None = None, where: str = "env", held_out: bool = False
) -> BatchedEnv:
    """`make_vector_env` wrapped as a BatchedEnv (flat dict observations, rl2, time, env or task names);
    `held_out`: a task set's held-out tasks run beside its training tasks (evaluation)."""
    tasks = TaskSet.from_config(cfg, where=where, held_out=held_out) if cfg.tasks is not None else None
    vector_env = make_vector_env(cfg, n_envs=n_envs, where=where, tasks=tasks)
    transforms = wrapper_records(cfg.wrappers)
    return BatchedEnv(vector_env, env_name=cfg.env_name, where=where, tasks=tasks, transforms=transforms)


@dataclass(frozen=True)
class TaskSlot:
    """Picklable builder of one slot of a task set: a TaskSetEnv wrapped like any env (errors name the slot)."""

    tasks: TaskSet
    fixed: int | None
    factory: EnvFactory
    """The slot's EnvFactory: only its error handling (`index`, `where`, `skip_errors`) is used."""

    def __call__(self) -> gym.Env:  # type: ignore[type-arg]
        env = TaskSetEnv(self.tasks, fixed=self.fixed)
        f = self.factory
        return IndexedEnv(env, f.index or 0, where=f.where, skip=f.skip_errors)
