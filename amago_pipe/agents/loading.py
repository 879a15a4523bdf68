"""Rebuild an agent from a policy file's metadata and weights (the weights `policy_state_dict` holds).

Pure torch + config; no store, YAML or training code, so exported policies load with the network code alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from amago_pipe.agents.agent import Agent
from amago_pipe.config.agent import AgentConfig
from amago_pipe.config.build import Problems, build
from amago_pipe.config.nets import ModelConfig
from amago_pipe.errors import StoreFormatError
from amago_pipe.nets.layers import RunningNorm
from amago_pipe.spec import DataSpec


def agent_from_weights(path: Path, meta: dict[str, Any], *, device: str | torch.device = "cpu") -> Agent:
    """The agent described by policy metadata (`spec`, `model`, `agent`, `max_seq_len`) with the policy weights of
    the safetensors file `path` (model and actor), in evaluation mode."""
    spec = DataSpec.from_json(meta["spec"])
    problems = Problems(upgrade=True)  # files written before a config's keys moved still load
    model_cfg = build(ModelConfig, meta["model"], problems, "model")
    agent_cfg = build(AgentConfig, meta["agent"], problems, "agent")
    if problems.items:
        raise StoreFormatError(f"{path}: its model/agent config does not validate: {'; '.join(problems.lines())}")
    agent: Agent = agent_cfg.implementation()(spec, model_cfg, agent_cfg, max_seq_len=int(meta["max_seq_len"]))
    weights = _with_empty_image_stats(agent, load_file(str(path)))
    expected = agent.policy_state_dict()
    wrong = [k for k, v in expected.items() if k not in weights or tuple(weights[k].shape) != tuple(v.shape)]
    if wrong:
        raise StoreFormatError(
            f"{path}: weights do not fit the network its metadata describes (first: '{wrong[0]}'); re-export it"
        )
    agent.load_state_dict(weights, strict=False)
    return agent.to(device).eval()


def _with_empty_image_stats(agent: Agent, weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`weights` plus empty statistics for the image norms they lack: a `cnn` policy saved before
    `normalize_images` existed then acts as it did (a norm without statistics is the identity)."""
    filled = dict(weights)
    for name, sub in agent.named_modules():
        if isinstance(sub, RunningNorm) and name.split(".")[-2:-1] == ["img_norms"] and f"{name}.count" not in weights:
            filled |= {f"{name}.count": torch.zeros((), dtype=torch.float64)}
            filled |= {f"{name}.mean": torch.zeros_like(sub.mean), f"{name}.var": torch.ones_like(sub.var)}
    return filled
