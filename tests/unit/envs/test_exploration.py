"""Exploration components: rates and schedules, per-env multipliers, bilevel within a rollout, exact state."""

from __future__ import annotations

import numpy as np
import pytest

from amago_pipe.config.base import config
from amago_pipe.config.build import build_strict
from amago_pipe.config.policies import ExplorationConfig, Schedule, policy_config
from amago_pipe.envs.exploration import Exploration, ExploringPolicy, make_exploration, scheduled
from amago_pipe.envs.policies import PolicyContext, make_policy
from amago_pipe.errors import ConfigError
from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec

DISCRETE = DataSpec({"observation": ArraySpec((2,), "float32")}, ActionSpec("discrete", (), n=4))
CONTINUOUS = DataSpec(
    {"observation": ArraySpec((2,), "float32")}, ActionSpec("continuous", (1,), low=(-2.0,), high=(2.0,))
)


def exploration(data: dict, spec: DataSpec = DISCRETE, seed: int = 0) -> Exploration:
    cfg = build_strict(ExplorationConfig, data, "exploration")
    return make_exploration(cfg, spec, seed=seed, where="exploration")


def test_schedules_anneal_over_collected_timesteps() -> None:
    ramp = Schedule(start=1.0, end=0.1, steps=100)
    assert scheduled(0.3, 10**9) == 0.3
    assert scheduled(ramp, 0) == 1.0 and scheduled(ramp, 50) == pytest.approx(0.55) and scheduled(ramp, 500) == 0.1
    egreedy = exploration({"type": "egreedy", "epsilon": {"start": 1.0, "end": 0.0, "steps": 400}})
    swaps = []
    for _ in range(100):  # 4 envs x 100 steps: epsilon falls from 1 to 0 on the way
        swaps.append(np.mean(egreedy.perturb(np.zeros(4, np.int64), np.zeros(4)) != 0))
    assert egreedy.timesteps == 400 and np.mean(swaps[:10]) > 0.5 and np.mean(swaps[-10:]) < 0.1


def test_epsilon_greedy_rate_and_randomized_multipliers() -> None:
    fixed = exploration({"type": "egreedy", "epsilon": 0.5})
    swapped = fixed.perturb(np.zeros(4000, np.int64), np.zeros(4000))
    assert 0.3 < np.mean(swapped != 0) < 0.45  # half are re-drawn, a quarter of those draw 0 again
    spread = exploration({"type": "egreedy", "epsilon": 1.0, "randomize": True}, seed=1)
    spread.reset(1000)
    rates = spread.rates(np.zeros(1000))
    assert 0.0 <= rates.min() < 0.05 and 0.95 < rates.max() <= 1.0  # envs explore at different rates
    before = rates.copy()
    done = np.zeros(1000, bool)
    done[:10] = True
    spread.reset_envs(done)  # a new episode in 10 envs: only their multipliers change
    after = spread.rates(np.zeros(1000))
    assert not np.allclose(after[:10], before[:10]) and np.array_equal(after[10:], before[10:])


def test_bilevel_moves_within_a_rollout() -> None:
    bilevel = exploration({"type": "bilevel", "horizon": 100, "start": 0.8, "end": 0.0})
    bilevel.reset(3)
    np.testing.assert_allclose(bilevel.rates(np.array([0, 50, 200])), [0.8, 0.4, 0.0])


def test_gaussian_noise_is_clipped_and_refused_for_discrete_actions() -> None:
    gaussian = exploration({"type": "gaussian", "std": 0.2}, CONTINUOUS)
    noisy = gaussian.perturb(np.full((4000, 1), 0.9, np.float32), np.zeros(4000))
    assert noisy.dtype == np.float32 and noisy.max() <= 1.0 and 0.1 < noisy.std() < 0.2
    with pytest.raises(ConfigError, match="gaussian exploration needs continuous actions.*use `\\{type: egreedy"):
        exploration({"type": "gaussian", "std": 0.2}, DISCRETE)
    exploration({"type": "gaussian", "std": 1.5}, CONTINUOUS)  # a std may exceed 1
    with pytest.raises(ConfigError, match="an epsilon \\(a probability\\) must be in \\[0, 1\\], got 1.5"):
        exploration({"type": "egreedy", "epsilon": {"start": 1.5, "end": 0.1, "steps": 10}})


def test_state_round_trip_continues_the_same_stream() -> None:
    data = {"type": "bilevel", "horizon": 10, "start": {"start": 1.0, "end": 0.2, "steps": 50}, "randomize": True}
    first = exploration(data, seed=5)
    first.reset(8)
    for t in range(7):
        first.perturb(np.zeros(8, np.int64), np.full(8, t))
    saved = first.state_dict()
    resumed = exploration(data, seed=99)
    resumed.load_state_dict(saved)
    for t in range(7, 20):
        a = first.perturb(np.zeros(8, np.int64), np.full(8, t))
        b = resumed.perturb(np.zeros(8, np.int64), np.full(8, t))
        np.testing.assert_array_equal(a, b)
    assert resumed.timesteps == first.timesteps == 160


@config
class StickyConfig(ExplorationConfig):
    """The plugin's typed config (no fields of its own)."""


class Sticky(Exploration):
    """A plugin: always action 1."""

    Config = StickyConfig

    def _perturb(self, actions: np.ndarray, time: np.ndarray) -> np.ndarray:
        return np.ones_like(actions)


def test_policies_carry_their_exploration_and_plugins_plug_in() -> None:
    ctx = PolicyContext(spec=DISCRETE, n_envs=3, seed=0)
    plain = make_policy(policy_config("random"), ctx)
    assert not isinstance(plain, ExploringPolicy)
    sticky = make_policy(policy_config({"type": "random", "exploration": {"type": f"{__name__}:Sticky"}}), ctx)
    assert isinstance(sticky, ExploringPolicy)
    sticky.reset(3)
    obs = {"observation": np.zeros((3, 2), np.float32)}
    assert sticky.act(obs, np.zeros((3, 2), np.float32), np.zeros(3)).tolist() == [1, 1, 1]
    with pytest.raises(ConfigError, match="is not an exploration config"):
        policy_config({"type": "random", "exploration": {"type": "amago_pipe.envs.exploration:scheduled"}})
