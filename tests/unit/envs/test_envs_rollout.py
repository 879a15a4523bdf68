"""rollout(): episode boundaries under NEXT_STEP autoreset, per-env quotas, policy memory resets, stats."""

from __future__ import annotations

import numpy as np
import pytest

from amago_pipe.config.envs import EnvConfig
from amago_pipe.envs.rollout import rollout
from amago_pipe.envs.stats import EpisodeStats, summarize
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.errors import DataError

TOY = "amago_pipe.envs.toy:make_toy_env"


class CountingPolicy:
    """Keeps a per-env step counter as its 'memory' and checks it against the env's time index."""

    def __init__(self, action: int = 1, shape: tuple[int, ...] = ()):
        self.action, self.shape = action, shape
        self.counter = np.zeros(0, dtype=np.int64)
        self.resets = 0

    def reset(self, n_envs: int) -> None:
        self.counter = np.zeros(n_envs, dtype=np.int64)

    def reset_envs(self, done_mask: np.ndarray) -> None:
        self.counter[done_mask] = 0
        self.resets += int(done_mask.sum())

    def act(self, obs: dict[str, np.ndarray], rl2: np.ndarray, time: np.ndarray) -> np.ndarray:
        fresh = self.counter == 0
        np.testing.assert_array_equal(time, self.counter)  # memory is reset exactly at episode starts
        assert not rl2[fresh].any()  # rl2 is zero at the first step
        self.counter += 1
        return np.full((len(time), *self.shape), self.action)


def test_episodes_have_clean_boundaries_and_quotas() -> None:
    with make_batched_env(EnvConfig(factory=TOY, kwargs={"min_len": 1, "max_len": 5}, n_envs=3, name="toy")) as env:
        policy = CountingPolicy(action=2)
        result = rollout(env, policy, 7, seed=0, source="test", meta={"k": 1})
    assert len(result.episodes) == len(result.stats) == 7
    assert sorted(np.bincount([s.env_index for s in result.stats]).tolist()) == [2, 2, 3]
    for ep, st in zip(result.episodes, result.stats):
        ep_len = ep.length
        np.testing.assert_array_equal(ep.obs["step"], np.arange(ep_len + 1))  # no reset obs glued on
        np.testing.assert_array_equal(ep.obs["pos"][:, 0], np.arange(ep_len + 1))
        np.testing.assert_array_equal(ep.actions, np.full(ep_len, 2))
        assert ep.actions.dtype == np.int64 and ep.rewards.dtype == np.float32
        assert ep.terminated[-1] and not ep.terminated[:-1].any() and not ep.truncated.any()
        assert (ep.env_name, ep.source, ep.meta, ep.time_start) == ("toy", "test", {"k": 1}, 0)
        assert (st.length, st.episode_return, st.success) == (ep_len, 2.0 * ep_len, True)
        assert st.info == {"amago_pipe/score": 10.0 * ep_len}
    assert policy.resets >= 7 - 3  # every episode but each env's last is followed by a reset


def test_long_episodes_grow_the_buffer() -> None:
    cfg = EnvConfig(factory=TOY, kwargs={"min_len": 300, "max_len": 700, "action": "continuous"}, n_envs=2)
    with make_batched_env(cfg) as env:
        result = rollout(env, CountingPolicy(action=0, shape=(2,)), 5, seed=1)
    for ep in result.episodes:
        np.testing.assert_array_equal(ep.obs["step"], np.arange(ep.length + 1))
        assert ep.actions.shape == (ep.length, 2) and ep.actions.dtype == np.float32
        np.testing.assert_allclose(ep.actions, 1.0)  # unit 0 -> middle of [-2, 4]


def test_truncation_is_not_termination() -> None:
    cfg = EnvConfig(factory=TOY, kwargs={"terminate": False}, n_envs=2, max_episode_steps=4)
    with make_batched_env(cfg) as env:
        result = rollout(env, CountingPolicy(), 4, seed=0, keep_episodes=True)
    for ep, st in zip(result.episodes, result.stats):
        assert ep.length == 4 and ep.truncated[-1] and not ep.terminated.any()
        assert st.truncated and not st.terminated


def test_on_episode_callback_and_keep_episodes_false() -> None:
    seen: list[int] = []
    with make_batched_env(EnvConfig(factory=TOY, n_envs=2)) as env:
        result = rollout(
            env, CountingPolicy(), 5, seed=0, keep_episodes=False, on_episode=lambda ep, st: seen.append(ep.length)
        )
    assert result.episodes == [] and len(seen) == 5 and result.env_steps > 0
    with make_batched_env(EnvConfig(factory=TOY, n_envs=2)) as env:  # statistics only: no data buffers
        stats_only = rollout(env, CountingPolicy(), 5, seed=0, keep_episodes=False)
    assert [s.length for s in stats_only.stats] == seen and stats_only.episodes == []


def test_same_seed_same_episodes() -> None:
    def run() -> list[int]:
        with make_batched_env(EnvConfig(factory=TOY, kwargs={"min_len": 1, "max_len": 9}, n_envs=2)) as env:
            return [ep.length for ep in rollout(env, CountingPolicy(), 6, seed=42).episodes]

    assert run() == run()


def test_bad_policy_actions_raise() -> None:
    class Bad(CountingPolicy):
        def act(self, obs: dict[str, np.ndarray], rl2: np.ndarray, time: np.ndarray) -> np.ndarray:
            return np.full(len(time), 7)

    with (
        make_batched_env(EnvConfig(factory=TOY, n_envs=2)) as env,
        pytest.raises(DataError, match=r"action ids \[7, 7\] outside"),
    ):
        rollout(env, Bad(), 2, seed=0)


def test_summarize() -> None:
    stats = [EpisodeStats("a", 0, float(r), 10, True, False, success=r > 5) for r in range(10)]
    stats.append(EpisodeStats("b", 1, 100.0, 5, False, True, info={"amago_pipe/x": 2.0}))
    out = summarize(stats)
    assert out["episodes"] == 11 and out["return_min"] == 0.0 and out["return_max"] == 100.0
    assert out["return_bottom_quintile"] == pytest.approx(0.5)  # mean of the worst 2 of 11
    assert out["success_rate"] == pytest.approx(4 / 10) and out["info"] == {"amago_pipe/x": 2.0}
    assert set(out["per_env"]) == {"a", "b"} and out["per_env"]["b"]["episodes"] == 1
    assert summarize([]) == {"episodes": 0}
