"""Rollouts of an agent in gymnasium envs: validation during training and the evaluate stage's episodes.

Imports agents and envs; never the pipeline or the CLI.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from amago_pipe.agents.agent import Agent
from amago_pipe.agents.policy import AgentPolicy
from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.stages import seed_from
from amago_pipe.config.train import ValidateConfig
from amago_pipe.envs.rollout import RolloutResult, rollout
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.spec import DataSpec


def run_episodes(
    agent: Agent,
    env_cfg: EnvConfig,
    episodes: int,
    *,
    spec: DataSpec,
    greedy: bool,
    seed: int,
    where: str,
    device: torch.device | str = "cpu",
    check_stop: Callable[[], None] | None = None,
    on_episode: Callable[[Any, Any], None] | None = None,
) -> RolloutResult:
    """`episodes` episodes of `agent` over `env_cfg.n_envs` parallel envs (eval mode, memory kept per env); a task
    set's held-out tasks run beside its training tasks."""
    env = make_batched_env(env_cfg, where=where, held_out=True)
    try:
        spec.check_compatible(env.spec, what=f"{where} env '{env_cfg.env_name}'", against="training data")
        policy = AgentPolicy(agent, greedy=greedy, device=device, seed=seed)
        was_training = agent.training
        agent.eval()
        try:
            return rollout(
                env, policy, episodes, seed=seed, keep_episodes=False, check_stop=check_stop, on_episode=on_episode
            )
        finally:
            agent.train(was_training)
    finally:
        env.close()


def make_validator(
    cfg: ValidateConfig, *, spec: DataSpec, seed: int, where: str, check_stop: Callable[[], None] | None = None
) -> Callable[[Agent, int], dict[str, Any]]:
    """`(agent, epoch) -> summary` for the learner's validation hook; env seeds differ per epoch."""
    env_seed = seed_from(cfg.env.seed, seed)

    def validate(agent: Agent, epoch: int) -> dict[str, Any]:
        device = next(agent.parameters()).device
        result = run_episodes(
            agent,
            cfg.env,
            cfg.episodes,
            spec=spec,
            greedy=cfg.greedy,
            seed=env_seed + 10_007 * epoch,
            where=f"{where}.validate",
            device=device,
            check_stop=check_stop,
        )
        return result.summary()

    return validate
