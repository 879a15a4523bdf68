"""`reward_multiplier: auto`: the rule, the store's reward column it reads, and how the agent holds the value."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from unit.data.learning_data import make_episode, make_spec

from amago_pipe.agents.agent import Agent
from amago_pipe.config.nets import CriticHeadConfig, FFTrajConfig, FFTstepConfig, ModelConfig
from amago_pipe.config.train import AgentConfig
from amago_pipe.data.loader import BatchLoader
from amago_pipe.errors import ConfigError
from amago_pipe.store import TrajectoryStore
from amago_pipe.train.runtime import auto_reward_multiplier, resolve_reward_multiplier

TINY = ModelConfig(tstep_encoder=FFTstepConfig(d_hidden=8, d_output=8), traj_encoder=FFTrajConfig(d_model=8))


def _store(path: Path, scale: float, episodes: int = 6) -> TrajectoryStore:
    spec = make_spec("discrete")
    store = TrajectoryStore.create(path, spec)
    rng = np.random.default_rng(0)
    with store.writer("protected") as writer:
        for i in range(episodes):
            ep = make_episode(spec, int(rng.integers(3, 12)), rng)
            writer.add(dataclasses.replace(ep, rewards=(ep.rewards * scale * (1 + i)).astype(np.float32)))
    return store


@pytest.mark.parametrize(
    ("rewards", "expected"),
    [
        (np.ones(50), 10.0),  # rewards of size 1 keep the old default
        (np.r_[np.full(40, 1 / 51), np.full(60, -1 / 51)], 510.0),  # POPGym: +-1/episode length
        (np.r_[np.zeros(1000), np.full(5, 0.5)], 20.0),  # sparse: only the nonzero rewards count
        (np.zeros(20), 10.0),  # nothing to scale by
        (np.r_[np.full(1000, 2.0), [1e6]], 5.0),  # one outlier does not set the scale
    ],
)
def test_auto_multiplier_scales_the_large_rewards_to_ten(rewards: np.ndarray, expected: float) -> None:
    assert auto_reward_multiplier(rewards.astype(np.float32)) == pytest.approx(expected, rel=1e-3)


def test_store_rewards_are_every_episode_step_in_order(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.zarr", 0.02)
    expected = np.concatenate([e.rewards for e in store.iter_episodes("protected")])
    got = store.rewards("protected")
    assert got.dtype == np.float32 and np.array_equal(got, expected)


def test_agent_refuses_to_train_until_auto_is_fixed_from_the_data(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.zarr", 0.02)
    agent = Agent(store.spec, TINY, AgentConfig(critic=CriticHeadConfig(d_hidden=8)), max_seq_len=6)
    batch = BatchLoader(store, batch_size=2, seq_len=6, partitions={"protected": 1.0}, seed=0, threaded=False).sample(0)
    with pytest.raises(ConfigError, match="reward_multiplier: 'auto' has not been fixed"):
        agent(batch)
    assert resolve_reward_multiplier(agent, store, {"missing": 1.0, "protected": 0.0}) is None  # no data weighted
    largest = max(float(np.abs(e.rewards).max()) for e in store.iter_episodes("protected"))
    fixed = resolve_reward_multiplier(agent, store, {"protected": 1.0})
    assert (
        fixed is not None and 10.0 / largest <= fixed < 10.0 / (largest / 6) and float(agent.reward_multiplier) == fixed
    )
    assert resolve_reward_multiplier(agent, store, {"protected": 1.0}) is None  # fixed once, never moved again
    losses, _ = agent(batch)
    loss = sum(losses.values())
    assert loss.isfinite()
    assert "reward_multiplier" in agent.state_dict() and "reward_multiplier" not in agent.policy_state_dict()


def test_a_number_is_used_as_given(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.zarr", 0.02)
    agent = Agent(store.spec, TINY, AgentConfig(reward_multiplier=3.0), max_seq_len=6)
    assert float(agent.reward_multiplier) == 3.0
    assert resolve_reward_multiplier(agent, store, {"protected": 1.0}) is None and float(agent.reward_multiplier) == 3.0
