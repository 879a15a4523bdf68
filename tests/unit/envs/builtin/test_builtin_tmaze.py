"""TMaze contract: cue only at t=0, junction flag, reward values, success flag, episode length, seeding."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from amago_pipe.envs.builtin.tmaze import DOWN, LEFT, RIGHT, UP, TMaze


def walk_to_junction(env: TMaze) -> list[np.ndarray]:
    """Step right corridor_length times; return the observations seen (junction last)."""
    seen = []
    for _ in range(env.corridor_length):
        obs, reward, terminated, truncated, info = env.step(RIGHT)
        assert (reward, terminated, truncated, info) == (0.0, False, False, {})
        seen.append(obs)
    return seen


@pytest.mark.parametrize("kwargs", [{}, {"corridor_length": 3, "distractor_std": 0.5}])
def test_passes_the_gymnasium_checker(kwargs: dict) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unbounded Box warning with noise
        check_env(TMaze(**kwargs))


def test_cue_only_at_t0_and_the_cued_arm_pays_one() -> None:
    env = TMaze(corridor_length=5)
    obs, _ = env.reset(seed=0)
    assert obs.tolist() == [env.cue, 0.0] and env.cue in (1, -1)
    seen = walk_to_junction(env)
    assert [o.tolist() for o in seen] == [[0.0, 0.0]] * 4 + [[0.0, 1.0]]
    obs, reward, terminated, truncated, info = env.step(UP if env.cue == 1 else DOWN)
    assert (reward, terminated, truncated, info) == (1.0, True, False, {"success": True})
    assert obs.tolist() == [0.0, 0.0]


def test_wrong_arm_pays_zero_and_detours_are_penalised() -> None:
    env = TMaze(corridor_length=4, max_steps=8)
    env.reset(seed=1)
    rewards = [env.step(a)[1] for a in (UP, LEFT, RIGHT, DOWN)]  # no move, no move (x=0), move, no move
    assert rewards == [-0.25, -0.25, 0.0, -0.25]
    assert [env.step(RIGHT)[1] for _ in range(4)] == [0.0, 0.0, 0.0, -0.25]  # the 4th bumps the junction wall
    _, reward, terminated, _, info = env.step(DOWN if env.cue == 1 else UP)
    assert (reward, terminated, info["success"]) == (0.0, True, False)


def test_truncated_at_max_steps_without_success() -> None:
    env = TMaze(corridor_length=3)
    env.reset(seed=0)
    steps = [env.step(LEFT) for _ in range(4)]
    assert [s[3] for s in steps] == [False, False, False, True]
    assert not any(s[2] for s in steps) and steps[-1][4] == {"success": False}
    assert sum(s[1] for s in steps) == pytest.approx(-4 / 3)


def test_seeding_is_deterministic_and_both_cues_occur() -> None:
    env = TMaze()
    cues = [env.reset(seed=s)[0][0] for s in range(20)]
    assert cues == [env.reset(seed=s)[0][0] for s in range(20)]
    assert set(cues) == {1.0, -1.0}


def test_distractor_noise_hides_nothing_of_the_junction() -> None:
    env = TMaze(corridor_length=3, distractor_std=1.0)
    env.reset(seed=0)
    seen = walk_to_junction(env)
    assert all(o[0] != 0.0 for o in seen) and [o[1] for o in seen] == [0.0, 0.0, 1.0]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"corridor_length": 0}, "corridor_length must be at least 1, got 0"),
        ({"distractor_std": -1.0}, "distractor_std must be >= 0"),
        ({"corridor_length": 5, "max_steps": 5}, r"max_steps=5 is shorter than the shortest episode"),
    ],
)
def test_bad_kwargs(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        TMaze(**kwargs)
