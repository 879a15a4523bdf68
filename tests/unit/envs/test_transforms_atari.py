"""The `atari` wrapper on real ALE games (skipped without the `atari` extra): frame skipping with max-pooling, sticky
actions set in the emulator, no-op starts, life-loss terminals, the time limit in agent steps, and its refusals."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from amago_pipe.config.build import build_strict
from amago_pipe.config.envs import EnvConfig
from amago_pipe.envs.factory import EnvFactory
from amago_pipe.errors import ConfigError

ale_py = pytest.importorskip("ale_py", reason='the atari wrapper needs ale-py: pip install -e ".[atari]"')


def make(atari: dict[str, Any], **extra: Any) -> gym.Env:  # type: ignore[type-arg]
    cfg = build_strict(EnvConfig, {"id": "ALE/Breakout-v5", **extra, "wrappers": [{"type": "atari", **atari}]})
    return EnvFactory.from_config(cfg, where="env")()


def test_each_step_is_frame_skip_frames_max_pooled() -> None:
    env = make({"frame_skip": 4, "sticky_actions": 0.0, "noop_max": 0})
    assert env.unwrapped.ale.getFloat("repeat_action_probability") == 0.0 and env.unwrapped._frameskip == 1
    raw = gym.make("ALE/Breakout-v5", frameskip=1, repeat_action_probability=0.0)
    env.reset(seed=3)
    raw.reset(seed=3)
    for action in (1, 3, 2, 3, 3):  # FIRE, then moves: the frames change
        obs, *_, info = env.step(action)
        frames = [raw.step(action)[0] for _ in range(4)]
        np.testing.assert_array_equal(obs, np.maximum(frames[2], frames[3]))
    assert info["episode_frame_number"] == 20
    assert env.observation_space == raw.observation_space


def test_sticky_actions_are_the_emulators_and_noops_follow_the_seed() -> None:
    env = make({"sticky_actions": 0.25, "noop_max": 30})
    assert env.unwrapped.ale.getFloat("repeat_action_probability") == pytest.approx(0.25)
    starts = []
    for seed in (0, 0, 1):
        env.reset(seed=seed)
        starts.append(env.unwrapped.ale.getEpisodeFrameNumber())
    assert starts[0] == starts[1] and 1 <= starts[0] <= 30 and 1 <= starts[2] <= 30


def test_life_loss_ends_the_episode_and_the_time_limit_counts_agent_steps() -> None:
    env = make({"terminal_on_life_loss": True, "noop_max": 0})
    env.reset(seed=0)
    lives = env.unwrapped.ale.lives()
    for _ in range(2000):
        _, _, terminated, truncated, _ = env.step(1)  # FIRE and stay: the ball is missed
        if terminated or truncated:
            break
    assert terminated and 0 < env.unwrapped.ale.lives() < lives  # a life lost, the game not over
    limited = make({"frame_skip": 4, "noop_max": 0}, max_episode_steps=3)
    limited.reset(seed=0)
    outcomes = [limited.step(0)[3] for _ in range(3)]
    assert outcomes == [False, False, True] and limited.unwrapped.ale.getEpisodeFrameNumber() == 12


def test_an_env_that_skips_frames_itself_or_conflicting_kwargs_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"env\.kwargs: frameskip=4 conflicts with env\.wrappers\.0 \(atari\)"):
        make({}, kwargs={"frameskip": 4})
    # a factory env is made as its kwargs say: the wrapper checks it
    factory = {"factory": "gymnasium:make", "kwargs": {"id": "ALE/Pong-v5"}, "wrappers": [{"type": "atari"}]}
    cfg = build_strict(EnvConfig, factory)
    with pytest.raises(
        ConfigError, match=r"env\.wrappers\.0\.frame_skip: the env already skips frames \(frameskip=4\)"
    ):
        EnvFactory.from_config(cfg, where="env")()


def test_gymnasiums_module_prefixed_id_is_an_ale_env() -> None:
    cfg = build_strict(EnvConfig, {"id": "ale_py:ALE/Pong-v5", "wrappers": [{"type": "atari"}]})  # the CLI's form
    env = EnvFactory.from_config(cfg, where="env")()
    assert env.unwrapped.ale.getInt("frame_skip") == 1  # made with frameskip=1: the wrapper repeats actions
    env.close()
