"""The Procgen adapter: spaces, one level (and its start state) for both attempts, a new level per episode, and
clear errors. Skipped without the `procgen` extra."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from amago_pipe.errors import ConfigError

pytest.importorskip("procgen", reason="the `procgen` extra (pip install 'amago-pipe[procgen]') is not installed")

from amago_pipe.envs.procgen import procgen_kshot


def test_spaces_are_a_64x64x3_frame_and_the_reset_flag() -> None:
    env = procgen_kshot(game="coinrun", k=2, attempt_steps=3)
    assert env.observation_space["rgb"].shape == (64, 64, 3) and env.observation_space["rgb"].dtype == np.uint8
    assert env.observation_space["reset"].shape == (1,) and env.action_space.n == 15
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs) and obs["reset"][0] == 1.0


def test_both_attempts_play_the_same_level_from_the_same_start() -> None:
    env = procgen_kshot(game="maze", k=2, attempt_steps=6)
    obs, _ = env.reset(seed=3)
    starts, levels, rng = [obs["rgb"].copy()], {env.unwrapped.task}, np.random.default_rng(0)
    info: dict[str, object] = {}
    for _ in range(12):
        obs, _, terminated, truncated, info = env.step(int(rng.integers(15)))
        levels.add(env.unwrapped.task)
        if obs["reset"][0] == 1.0:
            starts.append(obs["rgb"].copy())
        if terminated or truncated:
            break
    assert len(starts) == 2 and np.array_equal(starts[0], starts[1])  # attempt 2 restarts the level exactly
    assert len(levels) == 1 and info["amago_pipe/attempts"] == 2 and "amago_pipe/attempt_2_return" in info
    seen = set()
    for _ in range(4):
        env.reset()
        seen.add(env.unwrapped.task)
    assert len(seen) > 1 and all(0 <= level < 200 for level in seen)  # a new training level per episode


def test_held_out_levels_start_past_the_training_ones() -> None:
    env = procgen_kshot(game="maze", start_level=100000, num_levels=0)
    env.reset(seed=1)
    assert env.unwrapped.task >= 100000


def test_bad_games_and_a_missing_extra_are_one_clear_error() -> None:
    with pytest.raises(ConfigError, match=r"'coinrn' is not a Procgen game .*did you mean 'coinrun'"):
        procgen_kshot(game="coinrn")
    with pytest.raises(ConfigError, match=r"attempt_steps: must be at least 1"):
        procgen_kshot(attempt_steps=0)
    code = (
        "import sys; sys.modules['procgen'] = None\n"
        "from amago_pipe.envs.procgen import procgen_kshot\n"
        "try:\n    procgen_kshot()\nexcept Exception as e:\n    print(type(e).__name__, e.exit_code, e)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert out.startswith("MissingDependencyError 4") and "pip install 'amago-pipe[procgen]'" in out, out
