"""Episode validation: every mismatch names the episode, the key, what was found and what was expected."""

from __future__ import annotations

import numpy as np
import pytest

from amago_pipe.errors import DataError
from amago_pipe.store import Episode
from amago_pipe.testing.episodes import example_specs, random_episode

SPECS = example_specs()


def _episode(kind: str = "box", length: int = 4) -> Episode:
    return random_episode(SPECS[kind], length, np.random.default_rng(0), env_name="Env-v0", source="unit")


def test_length_and_return() -> None:
    ep = _episode(length=4)
    ep.rewards = np.array([1.0, 2.0, 0.5, -1.0], dtype=np.float32)
    assert ep.length == 4 and ep.total_return == pytest.approx(2.5)


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_random_episodes_of_every_kind_are_valid(kind: str) -> None:
    random_episode(SPECS[kind], 3, np.random.default_rng(1)).validate(SPECS[kind])


def test_missing_and_extra_observation_keys() -> None:
    ep = _episode()
    ep.obs["extra"] = ep.obs.pop("observation")
    with pytest.raises(
        DataError,
        match=r"episode \(env 'Env-v0', source 'unit'\): observations keys \['extra'\].*missing \['observation'\]; unexpected \['extra'\]",
    ):
        ep.validate(SPECS["box"])


def test_wrong_observation_rows() -> None:
    ep = _episode()
    ep.obs["observation"] = ep.obs["observation"][:-1]
    with pytest.raises(
        DataError, match=r"observations\['observation'\] has shape \(4, 3\), expected \(5, 3\) \(T\+1 rows"
    ):
        ep.validate(SPECS["box"])


def test_unsafe_dtype_is_refused_and_safe_one_accepted() -> None:
    ep = _episode("multibinary")
    ep.obs["observation"] = ep.obs["observation"].astype(np.float32)
    with pytest.raises(DataError, match=r"observations\['observation'\] has dtype float32, expected int8"):
        ep.validate(SPECS["multibinary"])
    ok = _episode("box")
    ok.obs["observation"] = ok.obs["observation"].astype(np.float64)  # same kind: cast on write
    ok.validate(SPECS["box"])


@pytest.mark.parametrize(
    ("kind", "actions", "message"),
    [
        (
            "discrete",
            np.zeros((4, 3), np.int64),
            r"actions have shape \(4, 3\), expected \(4,\) for discrete\(3\) \(discrete actions are stored as integer ids, not one-hot\)",
        ),
        ("discrete", np.full(4, 3, np.int64), r"discrete actions range over \[3, 3\], expected ids in \[0, 2\]"),
        ("discrete", np.zeros(4, np.float32), r"actions have dtype float32, expected integers for discrete\(3\)"),
        ("multibinary", np.full((4, 4), 2, np.int64), r"multibinary actions range over \[2, 2\], expected 0 or 1"),
        (
            "multidiscrete",
            np.tile([2, 5], (4, 1)),
            r"multidiscrete actions out of range; expected 0 <= a\[i\] < nvec = \[3, 5\]",
        ),
        ("box", np.zeros((4, 3), np.float32), r"actions have shape \(4, 3\), expected \(4, 2\) for continuous\(2,\)"),
    ],
)
def test_bad_actions(kind: str, actions: np.ndarray, message: str) -> None:
    ep = _episode(kind)
    ep.actions = actions
    with pytest.raises(DataError, match=message):
        ep.validate(SPECS[kind])


def test_step_arrays_and_metadata() -> None:
    ep = _episode()
    ep.terminated = np.zeros(3, bool)
    with pytest.raises(DataError, match=r"terminated has shape \(3,\), expected \(4,\) for T=4 actions"):
        ep.validate(SPECS["box"])
    ep = _episode()
    ep.meta = {"f": object()}
    with pytest.raises(DataError, match="meta is not JSON-serialisable"):
        ep.validate(SPECS["box"])
    ep = _episode()
    ep.time_start = -1
    with pytest.raises(DataError, match="time_start is -1, expected a non-negative integer"):
        ep.validate(SPECS["box"])


def test_empty_episode_and_missing_goals() -> None:
    ep = _episode()
    ep.actions = ep.actions[:0]
    with pytest.raises(DataError, match=r"has no steps \(actions shape \(0, 2\)\); expected T >= 1"):
        ep.validate(SPECS["box"])
    goal_ep = _episode("goals")
    del goal_ep.goals["desired_goal"]
    with pytest.raises(
        DataError, match=r"goals keys \['achieved_goal'\] do not match the spec's \['achieved_goal', 'desired_goal'\]"
    ):
        goal_ep.validate(SPECS["goals"])
