"""Process setup of a learner: threads and determinism, accelerate (device, ranks, precision), the C allocator,
agent building, and the data-dependent pieces of the agent (`reward_multiplier: auto`: the data's reward size, the
rule being `amago_pipe.config.auto.reward_multiplier`; the task vocabulary of `popart_per_task`).

Imports torch, accelerate, the agents and the store; never the pipeline or the CLI.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from amago_pipe.agents.agent import Agent
from amago_pipe.config import auto
from amago_pipe.config.agent import AgentConfig
from amago_pipe.config.nets import ModelConfig
from amago_pipe.config.train import TrainStageConfig
from amago_pipe.errors import ConfigError, DataError
from amago_pipe.spec import DataSpec
from amago_pipe.store import TrajectoryStore

log = logging.getLogger("amago_pipe.train")


@dataclass
class Runtime:
    """The accelerate state one learner runs in."""

    accelerator: Any
    device: torch.device
    rank: int
    world_size: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def pick_device(choice: str, where: str) -> torch.device:
    """`auto` (CUDA when torch sees a GPU, else the CPU), `cpu` or `cuda` (a ConfigError naming `where` without one)."""
    if choice == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"{where}: 'cuda' was asked for but no CUDA GPU is visible; use device: auto or cpu")
    return torch.device("cuda" if choice != "cpu" and torch.cuda.is_available() else "cpu")


def cpu_has_bf16_matmul() -> bool:
    """This CPU multiplies bfloat16 natively (AMX tiles or AVX512-BF16), so bf16 autocast pays on it."""
    probes = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in probes)


def setup_runtime(cfg: TrainStageConfig) -> Runtime:
    """Threads, deterministic kernels, and an `accelerate.Accelerator` for `cfg.device` / precision."""
    from accelerate import Accelerator

    if cfg.deterministic:
        torch.use_deterministic_algorithms(True, warn_only=False)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.set_num_threads(cfg.num_threads or 1)
    elif cfg.num_threads:
        torch.set_num_threads(cfg.num_threads)
    cpu = pick_device(cfg.device, "train.device").type == "cpu"
    if cfg.mixed_precision == "bf16" and cpu and not cpu_has_bf16_matmul():
        raise ConfigError(
            "train.mixed_precision: bf16 on this CPU would be emulated (no AMX or AVX512-BF16 instructions) and "
            "slower than float32; use mixed_precision: 'no' here, or a CUDA GPU or a CPU with AMX"
        )
    accelerator = Accelerator(cpu=cpu, mixed_precision=cfg.mixed_precision)
    return Runtime(accelerator, accelerator.device, accelerator.process_index, accelerator.num_processes)


def build_agent(
    agent_cfg: AgentConfig,
    model_cfg: ModelConfig,
    spec: DataSpec,
    *,
    max_seq_len: int,
    compile: bool = False,
    tasks: tuple[str, ...] = (),
) -> Agent:
    """The agent class named by `agent_cfg` (or a plugin), built from the spec and the model config, with value
    statistics per task of `tasks` (`popart_per_task`); the process keeps freed memory for reuse from then on
    (`keep_freed_memory`)."""
    keep_freed_memory()
    impl = agent_cfg.implementation()
    agent = impl(spec, model_cfg, agent_cfg, max_seq_len=max_seq_len, **({"tasks": tasks} if tasks else {}))
    if not isinstance(agent, Agent):
        raise ConfigError(
            f"train.agent.type: '{agent_cfg.type}' built a {type(agent).__name__}; agent plugins must subclass "
            "amago_pipe.agents.agent.Agent",
            path="agent.type",
        )
    if compile:
        agent.forward = torch.compile(agent.forward)  # type: ignore[method-assign]
    return agent


KEEP_FREED_BYTES = 1 << 30
"""Blocks up to this size come from (and return to) glibc's heap instead of fresh mmap'd pages."""
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


def keep_freed_memory() -> bool:
    """Let glibc reuse freed blocks up to `KEEP_FREED_BYTES` instead of unmapping them (True when set).

    CPU tensors are plain malloc blocks: by default each one above glibc's mmap threshold (at most 32 MiB) is
    mapped afresh and unmapped when freed, so every large activation of every update costs a page fault per 4 KiB
    (at d128 with 4 value samples: ~340,000 per update, 40 % of its CPU time). Updates allocate the same sizes
    each time, so kept blocks are reused and the peak memory stays what it was. Other C libraries: a no-op.
    """
    if platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(None)
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, KEEP_FREED_BYTES) and libc.mallopt(_M_TRIM_THRESHOLD, KEEP_FREED_BYTES))


def task_vocabulary(cfg: TrainStageConfig, store: TrajectoryStore) -> tuple[str, ...]:
    """`popart_per_task`: the tasks a train stage keeps value statistics of, sorted: the env names of the episodes in
    the partitions it samples (any epoch) and those of its online task set; () without `popart_per_task`."""
    if not cfg.agent.popart_per_task:
        return ()
    known = set(store.partitions())
    sampled = set(cfg.partitions).union(*(p.weights for p in cfg.partition_schedule)) & known
    names = {n for p in sampled for n in store.task_names(p)}
    if cfg.online is not None:
        names.update(cfg.online.env.task_names)
    if names:
        log.info("popart_per_task: value statistics for %s", ", ".join(sorted(names)))
    return tuple(sorted(names))


def check_same_tasks(recorded: tuple[str, ...], now: tuple[str, ...], *, where: str) -> None:
    """DataError when a checkpoint keeps value statistics of other tasks than the run would now (`popart_per_task`)."""
    if recorded != now:
        raise DataError(
            f"{where} keeps value statistics of the tasks {list(recorded)}, but the data and online task set now have "
            f"{list(now)} (agent.popart_per_task); train the same tasks, or start a fresh run (--force)"
        )


def auto_reward_multiplier(rewards: np.ndarray) -> float:
    """`reward_multiplier: auto` for `rewards`: the rule of `amago_pipe.config.auto.reward_multiplier` applied to
    their large reward (the `AUTO_REWARD_QUANTILE` percentile of |reward| over the nonzero ones; None if none)."""
    size = np.abs(rewards[np.isfinite(rewards) & (rewards != 0)].astype(np.float64))
    large = float(np.percentile(size, auto.AUTO_REWARD_QUANTILE)) if size.size else None
    return auto.reward_multiplier(large)


def resolve_reward_multiplier(agent: Agent, store: TrajectoryStore, partitions: dict[str, float]) -> float | None:
    """Fix an `auto` reward multiplier from the rewards of the weighted `partitions`, once; returns the value set
    now, or None (already fixed, or no data yet). Under torch.distributed every rank takes rank 0's value."""
    if float(agent.reward_multiplier) > 0:
        return None
    known = set(store.partitions())
    rewards = [store.rewards(p) for p, w in partitions.items() if w > 0 and p in known]
    if not any(r.size for r in rewards):
        return None
    value = from_main(auto_reward_multiplier(np.concatenate(rewards)), agent.reward_multiplier.device)
    agent.reward_multiplier.fill_(value)
    return float(agent.reward_multiplier)


def from_main(value: float, device: torch.device) -> float:
    """Rank 0's `value` on every rank under torch.distributed (`value` itself otherwise)."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return value
    shared = torch.tensor(value, dtype=torch.float32, device=device)
    torch.distributed.broadcast(shared, src=0)
    return float(shared)
