"""bench_homing_probe's targets: the best-rewarded position of the earlier attempts, fixed within an attempt."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_homing_probe import POS_SCALE, homing_targets


def test_targets_are_the_earlier_attempts_best_position() -> None:
    # one episode: attempt 1 = observations 0-3, attempt 2 starts at observation 4 (reset flag), 6 steps in all
    pos = np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0], [0, 0, 0], [0, 1, 0], [0, 2, 0]], np.float32)
    flag = np.array([1, 0, 0, 0, 1, 0, 0], np.float32)[:, None]
    obs = np.concatenate([pos, flag], axis=1)[None]  # (1, 7, 4)
    rewards = np.array([[1.0, 5.0, 2.0, 9.0, 7.0, 8.0]], np.float32)  # reward 3 is the dropped last observation's
    target, keep = homing_targets(obs, rewards, np.ones((1, 6), bool))
    np.testing.assert_array_equal(keep[0], [False] * 4 + [True] * 3)
    np.testing.assert_allclose(target[0, 4:] / POS_SCALE, [[2, 0, 0]] * 3)  # reward 5 at observation 2
