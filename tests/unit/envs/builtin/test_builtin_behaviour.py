"""Behaviour policies of the built-in envs through `rollout`: successes and failures, memory-free baselines."""

from __future__ import annotations

import numpy as np
import pytest

from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.policies import policy_config, policy_from_text
from amago_pipe.envs.policies import PolicyContext, make_policy
from amago_pipe.envs.rollout import RolloutResult, rollout
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.errors import ConfigError, DataError

TMAZE = EnvConfig(id="amago_pipe/TMaze-v0", kwargs={"corridor_length": 8}, n_envs=4)
KEY_DOOR = EnvConfig(id="amago_pipe/DarkKeyDoor-v0", kwargs={"room_size": 5, "episode_length": 20, "k": 3}, n_envs=4)
RECALL = EnvConfig(id="amago_pipe/DelayedRecall-v0", kwargs={"delay": 4}, n_envs=4)


def run(cfg: EnvConfig, policy: str, episodes: int, epsilon: float = 0.0) -> RolloutResult:
    with make_batched_env(cfg) as env:
        ctx = PolicyContext(spec=env.spec, n_envs=env.n_envs, seed=1, env_name=cfg.env_name)
        config = policy_config({**policy_from_text(policy), "exploration": {"type": "egreedy", "epsilon": epsilon}})
        return rollout(env, make_policy(config, ctx), episodes, seed=0)


def test_tmaze_walker_succeeds_half_the_time_without_memory() -> None:
    result = run(TMAZE, "tmaze-walker", 200)
    flags = [s.success for s in result.stats]
    assert 0.4 < np.mean(flags) < 0.6 and all(s.length == 9 and s.terminated for s in result.stats)
    assert sorted({s.episode_return for s in result.stats}) == [0.0, 1.0]
    ep = result.episodes[0]
    assert ep.actions[:-1].tolist() == [0] * 8 and ep.actions[-1] in (2, 3)


def test_tmaze_walker_with_noise_still_has_successes_and_failures() -> None:
    result = run(TMAZE, "tmaze-walker", 100, epsilon=0.1)
    flags = {s.success for s in result.stats}
    assert flags == {True, False} and any(s.truncated for s in result.stats)


def test_key_door_explorer_finds_keys_and_doors() -> None:
    result = run(KEY_DOOR, "key-door-explorer", 24)
    info = result.summary()["info"]
    assert set(info) == {"amago_pipe/attempts"} | {
        f"amago_pipe/attempt_{i}_{what}" for i in (1, 2, 3) for what in ("return", "success")
    }
    rewards = np.concatenate([ep.rewards for ep in result.episodes])
    successes = [info[f"amago_pipe/attempt_{i}_success"] for i in (1, 2, 3)]
    assert (rewards == 1.0).sum() > 24 and 0.0 < np.mean(successes) < 1.0
    assert all(s.length <= 60 for s in result.stats)


@pytest.mark.parametrize("cfg", [TMAZE, KEY_DOOR, RECALL], ids=["tmaze", "key-door", "recall"])
def test_random_policy_runs_in_every_env(cfg: EnvConfig) -> None:
    result = run(cfg, "random", 8)
    assert len(result.episodes) == 8 and all(s.success is not None for s in result.stats)


def test_policy_names_validate_in_a_collect_config() -> None:
    assert policy_config("tmaze-walker").type == "tmaze-walker"
    assert policy_config("key-door-explorer:0.3").epsilon == 0.3


def test_policies_on_the_wrong_env() -> None:
    with make_batched_env(RECALL) as env:
        ctx = PolicyContext(spec=env.spec, n_envs=env.n_envs, env_name="recall")
    with pytest.raises(
        DataError, match=r"builtin policy 'tmaze-walker' needs observation \(2,\) and action discrete\(4\)"
    ):
        make_policy(policy_config("tmaze-walker"), ctx)
    with pytest.raises(DataError, match=r"builtin policy 'key-door-explorer' needs observation \(3,\)"):
        make_policy(policy_config("key-door-explorer"), ctx)
    with pytest.raises(ConfigError, match=r"'key-door-explorer:lots': expected a probability after ':'"):
        policy_config("key-door-explorer:lots")
