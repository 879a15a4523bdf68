"""Process setup of a learner: threads and determinism, accelerate (device, ranks, precision), agent building.

Imports torch, accelerate and the agents; never the pipeline or the CLI.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch

from amago_pipe.agents.agent import Agent
from amago_pipe.config.nets import ModelConfig
from amago_pipe.config.train import AgentConfig, TrainStageConfig
from amago_pipe.errors import ConfigError
from amago_pipe.spec import DataSpec


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


def setup_runtime(cfg: TrainStageConfig) -> Runtime:
    """Threads, deterministic kernels, and an `accelerate.Accelerator` for `cfg.device` / precision."""
    from accelerate import Accelerator

    if cfg.deterministic:
        torch.use_deterministic_algorithms(True, warn_only=False)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.set_num_threads(cfg.num_threads or 1)
    elif cfg.num_threads:
        torch.set_num_threads(cfg.num_threads)
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device: 'cuda' was asked for but no CUDA GPU is visible; use device: auto or cpu")
    cpu = cfg.device == "cpu" or not torch.cuda.is_available()
    if cfg.mixed_precision == "bf16" and cpu:
        raise ConfigError("train.mixed_precision: bf16 needs a CUDA GPU here; use mixed_precision: 'no' on CPU")
    accelerator = Accelerator(cpu=cpu, mixed_precision=cfg.mixed_precision)
    return Runtime(accelerator, accelerator.device, accelerator.process_index, accelerator.num_processes)


def build_agent(
    agent_cfg: AgentConfig, model_cfg: ModelConfig, spec: DataSpec, *, max_seq_len: int, compile: bool = False
) -> Agent:
    """The agent class named by `agent_cfg` (or a plugin), built from the spec and the model config."""
    impl = agent_cfg.implementation()
    agent = impl(spec, model_cfg, agent_cfg, max_seq_len=max_seq_len)
    if not isinstance(agent, Agent):
        raise ConfigError(
            f"train.agent.type: '{agent_cfg.type}' built a {type(agent).__name__}; agent plugins must subclass "
            "amago_pipe.agents.agent.Agent",
            path="agent.type",
        )
    if compile:
        agent.forward = torch.compile(agent.forward)  # type: ignore[method-assign]
    return agent
