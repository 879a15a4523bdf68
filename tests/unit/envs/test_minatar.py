"""The MinAtar adapter: every game in one (10, 10, 10) space with its own actions, channels padded with zeros,
clear errors. Built only (no jitted step: the smoke run of minatar-multigame.yaml steps them). Skipped without
the `gymnax` extra."""

from __future__ import annotations

import numpy as np
import pytest

from amago_pipe.errors import ConfigError

pytest.importorskip("gymnax", reason="the `gymnax` extra (pip install 'amago-pipe[gymnax]') is not installed")

from amago_pipe.envs.minatar import MinAtarGame


def test_games_share_one_space_and_keep_their_actions() -> None:
    breakout, seaquest = MinAtarGame(game="Breakout"), MinAtarGame(game="Seaquest")
    assert breakout.observation_space == seaquest.observation_space
    assert breakout.observation_space.shape == (10, 10, 10) and breakout.observation_space.dtype == np.float32
    assert (breakout.action_space.n, seaquest.action_space.n) == (3, 6)
    grid = np.ones((1, 10, 10, 4), np.float32)  # a batch of one Breakout observation
    padded = breakout._obs(grid)
    assert padded.shape == (10, 10, 10) and padded[..., :4].all() and not padded[..., 4:].any()


def test_bad_games_and_channels_are_one_clear_error() -> None:
    with pytest.raises(ConfigError, match=r"'Breakuot' is not a MinAtar game .*did you mean 'Breakout'"):
        MinAtarGame(game="Breakuot")
    with pytest.raises(ConfigError, match=r"Seaquest has 10 object channels"):
        MinAtarGame(game="Seaquest", channels=4)
