"""Dark Key-To-Door contract: dark observations, key/door rewards, layout kept for k attempts and redrawn on reset."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from amago_pipe.envs.builtin.key_door import KeyDoorRoom, make_dark_key_door
from amago_pipe.envs.builtin.kshot import KShot
from amago_pipe.envs.builtin.tmaze import DOWN, LEFT, RIGHT, UP


def room_of(env: KShot) -> KeyDoorRoom:
    room = env.unwrapped
    assert isinstance(room, KeyDoorRoom)
    return room


def path_to(start: tuple[int, int], goal: tuple[int, int]) -> list[int]:
    """Moves from start to goal: along x first, then y."""
    dx, dy = goal[0] - start[0], goal[1] - start[1]
    return [RIGHT if dx > 0 else LEFT] * abs(dx) + [DOWN if dy > 0 else UP] * abs(dy)


def oracle_attempt(env: KShot) -> list[tuple]:
    """Walk to the key then to the door (may pass the door on the way, which gives nothing without the key)."""
    room = room_of(env)
    key, door = room.layout
    moves = path_to(room.position, key) + path_to(key, door)
    return [env.step(a) for a in moves]


def test_passes_the_gymnasium_checker() -> None:
    check_env(KeyDoorRoom(room_size=4, episode_length=6), skip_render_check=True)  # no render modes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "the env is wrapped" warning
        check_env(make_dark_key_door(room_size=4, episode_length=6, k=3))


def test_key_then_door_pays_one_each_and_ends_the_attempt() -> None:
    env = make_dark_key_door(room_size=5, episode_length=30, k=2)
    env.reset(seed=3)
    for attempt in (1, 2):
        steps = oracle_attempt(env)
        assert [s[1] for s in steps].count(1.0) == 2 and sum(s[1] for s in steps) == 2.0
        info = steps[-1][4]
        assert info[f"amago_pipe/attempt_{attempt}_return"] == 2.0 and info["success"]
        assert info[f"amago_pipe/attempt_{attempt}_success"] == 1.0 and info["amago_pipe/attempts"] == attempt
    assert steps[-1][2] and not steps[-1][3]  # the outer episode ends with the k-th attempt


def test_observation_is_position_time_and_reset_flag_only() -> None:
    env = make_dark_key_door(room_size=5, episode_length=4, k=3)
    obs, _ = env.reset(seed=0)
    x, y = room_of(env).position
    assert obs.tolist() == [x / 4, y / 4, 0.0, 1.0]
    rng = np.random.default_rng(0)
    done, flags = False, 0
    while not done:
        last_time = obs[2]
        obs, _, terminated, truncated, _ = env.step(int(rng.integers(4)))
        done = terminated or truncated
        x, y = room_of(env).position
        assert obs[:2].tolist() == [x / 4, y / 4]
        if obs[3] == 1.0:  # first observation of the next attempt
            flags += 1
            assert obs[2] == 0.0
        else:
            assert obs[2] == pytest.approx(last_time + 0.25)
    assert flags == 2


def test_layout_is_kept_for_k_attempts_and_redrawn_on_reset() -> None:
    env = make_dark_key_door(room_size=6, episode_length=5, k=4)
    rng = np.random.default_rng(0)
    layouts, starts = set(), set()
    for episode in range(6):
        obs, _ = env.reset(seed=episode) if episode < 3 else env.reset()
        seen = {room_of(env).layout}
        done = False
        while not done:
            obs, _, terminated, truncated, info = env.step(int(rng.integers(4)))
            done = terminated or truncated
            if obs[-1] == 1.0:  # a new attempt began: same layout, a fresh start cell
                seen.add(room_of(env).layout)
                starts.add(room_of(env).position)
        assert len(seen) == 1 and info["amago_pipe/attempts"] == 4
        layouts |= seen
    assert len(layouts) == 6 and len(starts) > 1


def test_time_limit_truncates_an_attempt() -> None:
    room = KeyDoorRoom(room_size=3, episode_length=3)
    room.reset(seed=0)
    start, taken = room.position, set(room.layout)
    move = next(m for m in (RIGHT, LEFT, UP, DOWN) if room_after(start, m) not in taken)
    back = move if room_after(start, move) == start else {RIGHT: LEFT, LEFT: RIGHT, UP: DOWN, DOWN: UP}[move]
    steps = [room.step(a) for a in (move, back, move)]  # never on the key or the door
    assert [s[1:4] for s in steps] == [(0.0, False, False), (0.0, False, False), (0.0, False, True)]
    assert steps[-1][4] == {"success": False}


def room_after(cell: tuple[int, int], move: int, size: int = 3) -> tuple[int, int]:
    dx, dy = {RIGHT: (1, 0), LEFT: (-1, 0), UP: (0, -1), DOWN: (0, 1)}[move]
    return min(max(cell[0] + dx, 0), size - 1), min(max(cell[1] + dy, 0), size - 1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"room_size": 1}, "room_size must be at least 2, got 1"), ({"episode_length": 0}, "episode_length must be")],
)
def test_bad_kwargs(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        KeyDoorRoom(**kwargs)
