"""What a learner writes after an epoch: its policy files and its resumable checkpoints, and in which order.

Order matters for crash safety: the per-epoch and `best` checkpoints are written before `latest`, so a kill in
between resumes from the previous `latest` and writes them again. Torch + the checkpoint module; no pipeline.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from amago_pipe.agents.agent import Agent
from amago_pipe.config.base import to_dict
from amago_pipe.config.train import TrainStageConfig
from amago_pipe.spec import DataSpec
from amago_pipe.train import checkpoint as ckpt


def agent_meta(
    cfg: TrainStageConfig, spec: DataSpec, *, epoch: int, step: int, tasks: tuple[str, ...] = ()
) -> dict[str, Any]:
    """What is needed to rebuild the agent: spec, model and agent configs, window length (and the tasks of
    `popart_per_task`)."""
    return {
        "format": ckpt.CHECKPOINT_FORMAT,
        "spec": spec.to_json(),
        "model": to_dict(cfg.model),
        "agent": to_dict(cfg.agent),
        "max_seq_len": cfg.max_seq_len,
        "epoch": epoch,
        "step": step,
        **({"tasks": list(tasks)} if tasks else {}),
    }


def save_policy(path: Path, agent: Agent, meta: dict[str, Any]) -> None:
    """The acting weights of `agent` (its policy average, if any) as a policy file."""
    ckpt.save_weights(path, agent.policy_state_dict(), {k: json.dumps(v) for k, v in meta.items()})


def save_epoch(
    *,
    cfg: TrainStageConfig,
    agent: Agent,
    optimizer: torch.optim.Optimizer,
    state: Any,
    meta: dict[str, Any],
    policy_dir: Path,
    ckpt_dir: Path,
    epoch: int,
    stopping: bool,
) -> None:
    """Policy files of `epoch` and `latest`; checkpoints `latest`, the epoch's (every `ckpt_interval`, the last
    and when stopping) and `best` (when this epoch validated best); older files pruned to `keep_last`."""
    save_policy(policy_dir / f"epoch_{epoch:04d}.safetensors", agent, meta)
    save_policy(policy_dir / "latest.safetensors", agent, meta)
    ckpt.prune(policy_dir, "epoch_*.safetensors", cfg.keep_last)
    targets = [ckpt_dir / ckpt.LATEST]
    if epoch % cfg.ckpt_interval == 0 or epoch == cfg.epochs or stopping:
        targets.insert(0, ckpt_dir / f"epoch_{epoch:04d}")
    if state.best.get("epoch") == epoch:  # validated best this epoch: the whole agent, for `init_from`
        targets.insert(0, ckpt_dir / ckpt.BEST)
    for directory in targets:
        ckpt.save_checkpoint(
            directory,
            model=agent.state_dict(),
            optimizer=optimizer.state_dict(),
            scheduler={"rule": "linear_warmup", "warmup_steps": cfg.warmup_steps, "lr": cfg.lr},
            state=state,
            meta=meta,
        )
    ckpt.prune(ckpt_dir, "epoch_*", cfg.keep_last)
