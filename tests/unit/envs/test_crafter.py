"""The Crafter instruction adapter: spaces, instructions and rewards, the per-achievement info, and that the
relabelers' recomputed rewards equal the env's. Skipped without the `crafter` extra."""

from __future__ import annotations

import numpy as np
import pytest

from amago_pipe.errors import ConfigError

pytest.importorskip("crafter", reason="the `crafter` extra (pip install 'amago-pipe[crafter]') is not installed")

from amago_pipe.envs.crafter import ACHIEVEMENTS, CrafterInstructions, goal_id, instruction_text
from amago_pipe.relabel.goals import GoalLayout, outcome
from amago_pipe.spec import flatten_space


def _episode(env: CrafterInstructions, seed: int) -> tuple[list[dict], list[float], dict]:
    obs, _ = env.reset(seed=seed)
    observations, rewards, rng, info = [obs], [], np.random.default_rng(seed), {}
    while True:
        obs, reward, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
        observations.append(obs)
        rewards.append(reward)
        if terminated or truncated:
            return observations, rewards, info


def test_spaces_are_an_image_and_the_goal_sequence_as_word_ids() -> None:
    env = CrafterInstructions(n_goals=3, max_steps=5)
    spec = flatten_space(env.observation_space)
    assert spec["image"].shape == (64, 64, 3) and spec["image"].dtype == "uint8"
    assert spec["desired_goal"].shape == (3,) and spec["desired_goal"].text is not None  # a text key
    assert spec["achieved_goal"].shape == () and env.action_space.n == 17
    assert instruction_text([goal_id("collect_wood"), 0, goal_id("place_table")]) == "collect_wood, place_table"
    assert spec["desired_goal"].text.decode([goal_id("wake_up")]) == "wakeup"


def test_rewards_follow_the_instruction_and_relabeling_recomputes_them_exactly() -> None:
    env = CrafterInstructions(n_goals=2, goals=["collect_sapling", "place_plant", "wake_up"], max_steps=400)
    observations, rewards, info = _episode(env, seed=2)
    desired = np.stack([o["desired_goal"] for o in observations])
    assert set(desired[0]) <= {goal_id(a) for a in ("collect_sapling", "place_plant", "wake_up")}
    reached = int(info["amago_pipe/goals_reached"])
    assert sum(rewards) == reached and (desired[-1][:reached] == 0).all()  # reached goals read as padding
    assert info["success"] == (reached == 2)
    assert set(info) >= {f"amago_pipe/unlocked_{a}" for a in ACHIEVEMENTS}
    instructed = {k for k in info if k.startswith("amago_pipe/goal_")}
    assert len(instructed) == 2
    spec = flatten_space(env.observation_space)
    layout = GoalLayout(
        "achieved_goal", "desired_goal", ("obs",), ("obs",), spec["achieved_goal"].shape, spec["desired_goal"].shape[0]
    )
    achieved = np.stack([o["achieved_goal"] for o in observations])
    result = outcome(layout, achieved, desired[0], lambda a, d: env.compute_reward(a, d, {}), 1.0)
    np.testing.assert_array_equal(result.rewards, np.asarray(rewards, np.float32))
    # a goal sequence made of what the episode did (as `some`/`all` relabel it) is reached, in order
    done = [int(a) for i, a in enumerate(achieved[1:]) if a and a != achieved[i]]
    if len(done) >= 2 and done[0] != done[1]:
        relabeled = outcome(
            layout, achieved, np.asarray(done[:2], np.int32), lambda a, d: env.compute_reward(a, d, {}), 1.0
        )
        assert relabeled.done_at >= 0 and relabeled.rewards.sum() == 2


def test_compute_reward_pays_only_a_real_goal_done_last() -> None:
    env = CrafterInstructions(n_goals=1, max_steps=5)
    wood = goal_id("collect_wood")
    got = env.compute_reward(np.array([wood, wood, 0, 0]), np.array([wood, goal_id("wake_up"), 0, wood]), {})
    np.testing.assert_array_equal(got, [1.0, 0.0, 0.0, 0.0])


def test_bad_goals_are_one_clear_error() -> None:
    with pytest.raises(
        ConfigError, match=r"'collect_woood' is not a Crafter achievement .*did you mean 'collect_wood'"
    ):
        CrafterInstructions(goals=["collect_woood"])
    with pytest.raises(ConfigError, match=r"n_goals: must be in 1..2"):
        CrafterInstructions(n_goals=3, goals=["collect_wood", "wake_up"])
