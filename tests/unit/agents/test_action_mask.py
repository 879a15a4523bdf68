"""Action masks: a task set with action sets of different sizes marks each task's own ids in the observation, and
the random, exploring and agent policies (acting, the update's expectations and the exported step) keep to them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from amago_pipe.actions import ActionCodec
from amago_pipe.agents.agent import Agent
from amago_pipe.agents.policy import AgentPolicy
from amago_pipe.config.build import build_strict
from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.nets import ActorHeadConfig, CriticHeadConfig, FFTstepConfig, ModelConfig, TransformerConfig
from amago_pipe.config.policies import PolicyConfig
from amago_pipe.config.train import AgentConfig
from amago_pipe.data.loader import BatchLoader
from amago_pipe.envs.exploration import random_actions
from amago_pipe.envs.policies import PolicyContext, make_policy
from amago_pipe.envs.rollout import rollout
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.export.program import StepProgram
from amago_pipe.spec import ActionSpec
from amago_pipe.store import TrajectoryStore

TASKS = {"tasks": [{"id": "CartPole-v1"}, {"id": "Acrobot-v1"}], "n_envs": 4, "max_episode_steps": 25}
"""2 and 3 actions: CartPole's slots must never see id 2."""
OWN = {"CartPole-v1": 2, "Acrobot-v1": 3}


def _agent(spec) -> Agent:  # type: ignore[no-untyped-def]
    model = ModelConfig(
        tstep_encoder=FFTstepConfig(d_hidden=16, d_output=16),
        traj_encoder=TransformerConfig(d_model=16, n_heads=2, n_layers=1, dropout_emb=0.0, dropout_ff=0.0),
    )
    cfg = AgentConfig(
        actor=ActorHeadConfig(d_hidden=16), critic=CriticHeadConfig(d_hidden=16, num_critics=2), reward_multiplier=1.0
    )
    return Agent(spec, model, cfg, max_seq_len=8)


def _within_own_actions(episodes) -> bool:  # type: ignore[no-untyped-def]
    return all(int(np.max(ep.actions)) < OWN[ep.env_name] for ep in episodes)


def test_random_ids_are_drawn_uniformly_among_the_valid_ones() -> None:
    codec = ActionCodec(ActionSpec("discrete", (), n=4))
    valid = np.tile(np.array([[0, 1, 0, 1], [1, 1, 1, 0]], np.float32), (2000, 1))
    ids = random_actions(codec, len(valid), np.random.default_rng(0), valid)
    assert set(ids[0::2]) == {1, 3} and set(ids[1::2]) == {0, 1, 2}
    assert abs(np.mean(ids[0::2] == 1) - 0.5) < 0.05 and abs(np.mean(ids[1::2] == 2) - 1 / 3) < 0.05


def test_random_and_fully_exploring_collection_keep_to_each_tasks_actions() -> None:
    cfg = build_strict(EnvConfig, TASKS)
    with make_batched_env(cfg) as env:
        for policy in ({"type": "random"}, {"type": "random", "exploration": {"type": "egreedy", "epsilon": 1.0}}):
            built = make_policy(build_strict(PolicyConfig, policy), PolicyContext(env.spec, n_envs=4))
            episodes = rollout(env, built, 16, seed=0).episodes
            assert {ep.env_name for ep in episodes} == set(OWN) and _within_own_actions(episodes)
            acrobot = np.concatenate([ep.actions for ep in episodes if ep.env_name == "Acrobot-v1"])
            assert set(acrobot.tolist()) == {0, 1, 2}  # the mask takes nothing from the larger task


def test_the_agent_acts_updates_and_exports_within_the_mask(tmp_path: Path) -> None:
    torch.manual_seed(0)
    cfg = build_strict(EnvConfig, TASKS)
    with make_batched_env(cfg) as env:
        agent = _agent(env.spec)
        assert agent.mask_key == "action_mask"
        episodes = rollout(env, AgentPolicy(agent, greedy=False, seed=1), 16, seed=0).episodes
    assert _within_own_actions(episodes)
    store = TrajectoryStore.create(tmp_path / "s.zarr", env.spec)
    with store.writer("protected") as writer:
        for ep in episodes:
            writer.add(ep)
    batch = next(BatchLoader(store, batch_size=8, seq_len=8, partitions={"protected": 1.0}, seed=0, threaded=False))
    losses, _ = agent(batch)
    loss = sum(losses.values())
    assert torch.isfinite(loss)
    loss.backward()
    states, _ = agent.model.encode(batch.obs, batch.rl2, batch.time)
    probs = agent.actor(states[:, :-1], agent.valid_actions(batch.obs)[:, :-1]).probs  # type: ignore[index]
    cartpole = (batch.obs["action_mask"][:, :-1, 2] == 0) & batch.mask  # valid CartPole steps
    assert cartpole.any() and float(probs[cartpole][..., 2].max().detach()) == pytest.approx(0.0, abs=1e-6)
    program = StepProgram(agent)
    n = 6
    obs = {"action_mask": torch.tensor([[1.0, 1.0, 0.0]] * n), "observation": torch.randn(n, 6) * 3}
    state = agent.model.init_state(n, "cpu")
    inputs = [obs[k] for k in program.obs_keys]
    inputs += [torch.zeros(n, dtype=torch.int64), torch.zeros(n), torch.zeros(n, dtype=torch.int64)]
    action, *_ = program(*inputs, *(state[name] for name in program.state_names))
    assert int(action.max()) < 2
