"""Acting through a traced step (agents/traced_step.py) chooses exactly what eager acting chooses, follows weight
changes made in place, and gives way to eager acting where a build disagrees."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from amago_pipe.agents import traced_step
from amago_pipe.agents.agent import Agent
from amago_pipe.agents.policy import AgentPolicy
from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.nets import (
    ActorHeadConfig,
    CriticHeadConfig,
    FFTrajConfig,
    FFTstepConfig,
    GruConfig,
    MambaConfig,
    ModelConfig,
    TransformerConfig,
)
from amago_pipe.config.train import AgentConfig
from amago_pipe.envs.stepper import Stepper
from amago_pipe.envs.vector import make_batched_env

ENCODERS = {
    "transformer": TransformerConfig(d_model=16, n_heads=2, n_layers=2, dropout_emb=0.0, dropout_ff=0.0),
    "gru": GruConfig(d_model=16),
    "mamba": MambaConfig(d_model=16, n_layers=1),
    "ff": FFTrajConfig(d_model=16),
}
CONTEXT = 12
"""The agent's max_seq_len: the rollouts below run past it, so the KV cache ring wraps."""


def _agent(spec, encoder: str) -> Agent:  # type: ignore[no-untyped-def]
    model = ModelConfig(tstep_encoder=FFTstepConfig(d_hidden=16, d_output=16), traj_encoder=ENCODERS[encoder])
    cfg = AgentConfig(
        actor=ActorHeadConfig(d_hidden=16), critic=CriticHeadConfig(d_hidden=16, num_critics=2), reward_multiplier=1.0
    )
    torch.manual_seed(0)
    return Agent(spec, model, cfg, max_seq_len=CONTEXT).eval()


def _actions(env_cfg: EnvConfig, encoder: str, traced: bool, steps: int, change=None) -> tuple[np.ndarray, AgentPolicy]:  # type: ignore[no-untyped-def]
    """Actions of `steps` vector steps with a sampling policy (`change(agent)` after half of them)."""
    with make_batched_env(env_cfg) as env:
        agent = _agent(env.spec, encoder)
        policy = AgentPolicy(agent, greedy=False, seed=3, traced=traced)
        stepper = Stepper(env, policy, seed=0)
        taken: list[np.ndarray] = []
        act = policy.act

        def recording(*args):  # type: ignore[no-untyped-def]
            taken.append(act(*args))
            return taken[-1]

        policy.act = recording  # type: ignore[method-assign]
        stepper.run(steps // 2, on_episode=lambda ep: None)
        if change is not None:
            change(agent)
        stepper.run(steps - steps // 2, on_episode=lambda ep: None)
    return np.stack(taken), policy


@pytest.mark.parametrize("encoder", list(ENCODERS))
def test_traced_acting_takes_the_eager_actions_across_resets_and_a_wrapped_cache(encoder: str) -> None:
    env_cfg = EnvConfig(id="CartPole-v1", n_envs=4, max_episode_steps=30)  # episodes end at different steps
    steps = traced_step.WARMUP_STEPS + 3 * CONTEXT
    eager, _ = _actions(env_cfg, encoder, traced=False, steps=steps)
    traced, policy = _actions(env_cfg, encoder, traced=True, steps=steps)
    assert policy.traced is not None and policy.traced._graph is not None and not policy.traced.disabled
    np.testing.assert_array_equal(traced, eager)


def test_the_traced_step_follows_weights_changed_in_place() -> None:
    def perturb(agent: Agent) -> None:  # as an optimizer step or a policy average does
        with torch.no_grad():
            for p in [*agent.model.parameters(), *agent.actor.parameters()]:
                p.add_(0.3 * torch.randn_like(p))

    env_cfg = EnvConfig(id="CartPole-v1", n_envs=4)
    steps = 2 * (traced_step.WARMUP_STEPS + 8)
    eager, _ = _actions(env_cfg, "transformer", traced=False, steps=steps, change=perturb)
    traced, policy = _actions(env_cfg, "transformer", traced=True, steps=steps, change=perturb)
    assert policy.traced is not None and policy.traced._graph is not None
    np.testing.assert_array_equal(traced, eager)


def test_a_build_that_disagrees_leaves_acting_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(traced_step, "TOLERANCE", -1.0)  # every build "differs" from the eager step
    env_cfg = EnvConfig(id="CartPole-v1", n_envs=2)
    steps = traced_step.WARMUP_STEPS + 10
    eager, _ = _actions(env_cfg, "transformer", traced=False, steps=steps)
    traced, policy = _actions(env_cfg, "transformer", traced=True, steps=steps)
    assert policy.traced is not None and policy.traced.disabled and policy.traced._graph is None
    np.testing.assert_array_equal(traced, eager)


def test_another_observation_dtype_builds_the_graph_again() -> None:
    with make_batched_env(EnvConfig(id="CartPole-v1", n_envs=2)) as env:
        agent = _agent(env.spec, "transformer")
    policy = AgentPolicy(agent, seed=0)
    rl2, time = np.zeros((2, 3), np.float32), np.zeros(2, np.int64)
    obs = {"observation": np.full((2, 4), 0.1, np.float32)}
    for _ in range(traced_step.WARMUP_STEPS + 1):
        policy.act(obs, rl2, time)
    assert policy.traced is not None and policy.traced._graph is not None
    policy.act({"observation": obs["observation"].astype(np.float64)}, rl2, time)
    assert policy.traced._graph is None and not policy.traced.disabled  # a float64 graph waits for its warm-up
