"""Load trained policies from a train stage's folder: `policy/{latest,best,epoch_N}.safetensors` -> AgentPolicy.

Each policy file is self-contained (its metadata holds the DataSpec and the model/agent configs), so
evaluate, collect and benchmarks rebuild the agent without the pipeline file. Never imports the pipeline.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open

from amago_pipe.agents.agent import Agent
from amago_pipe.agents.loading import agent_from_weights
from amago_pipe.agents.policy import AgentPolicy
from amago_pipe.config.policies import CheckpointPolicyConfig
from amago_pipe.errors import ConfigError, DataError, StoreFormatError
from amago_pipe.spec import DataSpec
from amago_pipe.train.checkpoint import CHECKPOINT_FORMAT

Which = str | int
"""`latest`, `best`, or an epoch number."""


def policy_path(train_dir: Path, which: Which, *, where: str = "checkpoint") -> Path:
    """The policy file of `which` in a train stage's output folder; DataError listing what exists."""
    folder = Path(train_dir) / "policy"
    name = f"epoch_{int(which):04d}.safetensors" if isinstance(which, int) else f"{which}.safetensors"
    path = folder / name
    if path.is_file():
        return path
    have = sorted(p.stem for p in folder.glob("*.safetensors")) if folder.is_dir() else []
    hint = " (`best` needs `validate:` in the train stage)" if which == "best" else ""
    raise DataError(
        f"{where}: no '{which}' policy in {folder}{hint}; available: {', '.join(have) or 'none (train has not finished an epoch)'}"
    )


def read_meta(path: Path) -> dict[str, Any]:
    """The JSON metadata of a policy file (spec, model, agent, max_seq_len, epoch)."""
    try:
        with safe_open(str(path), framework="pt") as f:
            raw = f.metadata() or {}
    except (OSError, ValueError, RuntimeError, SafetensorError) as e:
        raise StoreFormatError(f"{path}: not a readable policy file ({e})") from e
    try:
        meta = {k: json.loads(v) for k, v in raw.items()}
    except json.JSONDecodeError as e:
        raise StoreFormatError(f"{path}: policy metadata is not JSON ({e})") from e
    if int(meta.get("format", 0)) > CHECKPOINT_FORMAT or "spec" not in meta:
        raise StoreFormatError(
            f"{path}: not an amago-pipe policy file of a supported format (format {meta.get('format')})"
        )
    return meta


def load_agent(path: Path, *, device: str | torch.device = "cpu") -> tuple[Agent, dict[str, Any]]:
    """Rebuild the agent described by a policy file and load its policy weights (eval mode)."""
    meta = read_meta(path)
    return agent_from_weights(path, meta, device=device), meta


def load_policy(path: Path, *, greedy: bool = True, device: str | torch.device = "cpu", seed: int = 0) -> AgentPolicy:
    """An AgentPolicy (RolloutPolicy) acting with the weights in `path`."""
    agent, _ = load_agent(path, device=device)
    return AgentPolicy(agent, greedy=greedy, device=device, seed=seed)


def check_env_spec(policy_spec: DataSpec, env_spec: DataSpec, *, where: str) -> None:
    """DataError when an environment does not match the data a policy was trained on."""
    policy_spec.check_compatible(env_spec, what=f"{where} env", against="trained policy")


def checkpoint_policy(config: CheckpointPolicyConfig, ctx: Any) -> AgentPolicy:
    """Policy factory for `policy: {type: checkpoint, stage: TRAIN, which: latest|best|N}` or `{..., path: FILE}`.

    `ctx` is an `amago_pipe.envs.policies.PolicyContext`; the stage must be among the collecting stage's `needs`.
    """
    where = getattr(ctx, "where", "policy")
    if config.path is not None:
        path = Path(config.path)
        if not path.is_file():
            raise DataError(f"{where}.path: policy file '{config.path}' does not exist")
    else:
        upstream = dict(getattr(ctx, "upstream", {}) or {})
        if config.stage not in upstream:
            raise ConfigError(
                f"{where}.stage: stage '{config.stage}' is not among this stage's needs "
                f"({', '.join(upstream) or 'none'}); add it to `needs:` so its policy exists before collecting",
                path=f"{where}.stage",
            )
        path = policy_path(upstream[config.stage], config.which, where=where)
    agent, _ = load_agent(path)
    check_env_spec(agent.spec, ctx.spec, where=where)
    return AgentPolicy(agent, greedy=config.greedy, seed=int(getattr(ctx, "seed", 0)))
