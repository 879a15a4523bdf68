"""An untrained policy file for an env, as a train stage writes it (tests and export benchmarks)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from amago_pipe.config.agent import AgentConfig
from amago_pipe.config.base import to_dict
from amago_pipe.config.build import build_strict
from amago_pipe.config.nets import ModelConfig
from amago_pipe.train.checkpoint import CHECKPOINT_FORMAT, save_weights
from amago_pipe.train.runtime import build_agent


def untrained_policy_file(
    path: Path,
    env_id: str,
    *,
    model: dict[str, Any],
    agent: dict[str, Any] | None = None,
    max_seq_len: int,
    seed: int = 0,
) -> Path:
    """Write the policy file of a freshly initialised agent for `env_id`'s spaces (model/agent as config data)."""
    import gymnasium as gym

    from amago_pipe.spec import from_spaces

    env = gym.make(env_id)
    spec = from_spaces(env.observation_space, env.action_space)
    env.close()
    model_cfg = build_strict(ModelConfig, model)
    agent_cfg = build_strict(AgentConfig, agent or {"type": "agent"})
    torch.manual_seed(seed)
    built = build_agent(agent_cfg, model_cfg, spec, max_seq_len=max_seq_len)
    meta = {"format": CHECKPOINT_FORMAT, "spec": spec.to_json(), "model": to_dict(model_cfg),
            "agent": to_dict(agent_cfg), "max_seq_len": max_seq_len, "epoch": 0}  # fmt: skip
    save_weights(path, built.policy_state_dict(), {k: json.dumps(v) for k, v in meta.items()})
    return path
