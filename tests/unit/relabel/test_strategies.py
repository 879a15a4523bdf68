"""Property tests of the relabelers on episodes from the real GoalMaze env (single goals and goal sequences)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np
import pytest

from amago_pipe.config.build import build_strict
from amago_pipe.config.relabel import RelabelConfig
from amago_pipe.envs.builtin.goal_maze import MASK, GoalMaze
from amago_pipe.errors import ConfigError, DataError
from amago_pipe.relabel import RelabelReport, build_relabeler, goal_pool, relabel_stream
from amago_pipe.spec import DataSpec, flatten_obs, from_spaces
from amago_pipe.store import Episode

SINGLE = ("final", "future", "episode", "random", "none")
SEQUENCE = ("none", "some", "all")
REWARD_FN = "amago_pipe.envs.builtin.goal_maze:GoalMaze.compute_reward"


def maze_reward(achieved: Any, desired: Any, info: Any) -> np.ndarray:
    return GoalMaze.compute_reward(None, achieved, desired, info)  # type: ignore[arg-type]


def random_walks(n_goals: int, episodes: int, seed: int = 0, size: int = 5) -> tuple[DataSpec, list[Episode]]:
    env = GoalMaze(size=size, n_goals=n_goals, layout="open")
    rng = np.random.default_rng(seed)
    out = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed * 1000 + i)
        rows, actions, rewards, term, trunc = [flatten_obs(obs)], [], [], [], []
        done = False
        while not done:
            a = int(rng.integers(4))
            obs, r, te, tr, _ = env.step(a)
            rows.append(flatten_obs(obs))
            actions.append(a), rewards.append(r), term.append(te), trunc.append(tr)
            done = te or tr
        out.append(
            Episode(
                obs={k: np.stack([r[k] for r in rows]) for k in rows[0]},
                actions=np.asarray(actions),
                rewards=np.asarray(rewards, np.float32),
                terminated=np.asarray(term),
                truncated=np.asarray(trunc),
                source="walk",
                time_start=3 * i,
            )
        )
    return from_spaces(env.observation_space, env.action_space), out


def relabeler(spec: DataSpec, strategy: str | dict[str, Any], **over: Any) -> Any:
    data = {
        "strategy": {"type": strategy} if isinstance(strategy, str) else strategy,
        "reward": {"type": "function", "function": f"{__name__}:maze_reward"},
    }
    data.update(over)
    return build_relabeler(build_strict(RelabelConfig, data), spec, where="relabel")


def active_goal(row: np.ndarray) -> np.ndarray:
    """The first goal of a sequence row that is not masked."""
    open_goals = [g for g in row if not (g == MASK).all()]
    return open_goals[0] if open_goals else row[-1]


@pytest.mark.parametrize(("n_goals", "strategy"), [(1, s) for s in SINGLE] + [(3, s) for s in SEQUENCE])
@pytest.mark.parametrize("terminate", [True, False])
def test_relabeled_rewards_match_compute_reward_and_keep_time(n_goals: int, strategy: str, terminate: bool) -> None:
    spec, episodes = random_walks(n_goals, 12)
    before = copy.deepcopy(episodes)
    rel = relabeler(spec, strategy, terminate_on_success=terminate)
    pool = goal_pool(episodes, rel.layout, 50, seed=0) if rel.needs_pool else None
    copies = 0
    for i, ep in enumerate(episodes):
        for out in rel.relabel(ep, np.random.default_rng(i), name=f"episode {i}", pool=pool):
            copies += 1
            out.validate(spec)
            assert out.time_start == ep.time_start
            n = out.length
            assert n == ep.length if not terminate or strategy == "none" else n <= ep.length
            for key in ("observation", "achieved_goal"):
                np.testing.assert_array_equal(out.obs[key], ep.obs[key][: n + 1])
            np.testing.assert_array_equal(out.actions, ep.actions[:n])
            achieved, desired = out.obs["achieved_goal"], out.obs["desired_goal"]
            if n_goals == 1:
                assert (desired == desired[0]).all()  # one goal for the whole episode
                expected = maze_reward(achieved[1:], desired[:-1], {})
            else:
                expected = np.array([maze_reward(achieved[t + 1][None], active_goal(desired[t])[None], {})[0]
                                     for t in range(n)])  # fmt: skip
                reached = (desired == MASK).all(-1).sum(-1)
                assert (np.diff(reached) >= 0).all() and reached[0] == 0
            np.testing.assert_array_equal(out.rewards, expected)
            if terminate and strategy != "none":
                done = out.meta["relabel"]["reached"]
                assert bool(out.terminated[-1]) == done and not out.terminated[:-1].any()
                assert bool(out.truncated[-1]) == (not done)
    assert copies > 0
    for a, b in zip(before, episodes, strict=True):  # the source episodes are untouched
        for key in a.obs:
            np.testing.assert_array_equal(a.obs[key], b.obs[key])
        np.testing.assert_array_equal(a.rewards, b.rewards)
        np.testing.assert_array_equal(a.terminated, b.terminated)


@pytest.mark.parametrize(("n_goals", "strategy"), [(1, "future"), (1, "random"), (3, "some"), (3, "all")])
def test_relabeled_goals_are_reached_where_they_should_be(n_goals: int, strategy: str) -> None:
    spec, episodes = random_walks(n_goals, 20, seed=2)
    rel = relabeler(spec, strategy)
    outs = [o for i, ep in enumerate(episodes) for o in rel.relabel(ep, np.random.default_rng(i), name="e",
                                                                     pool=episodes[0].obs["achieved_goal"])]  # fmt: skip
    reached = [o.meta["relabel"]["reached"] for o in outs]
    if strategy in ("random", "some"):  # goals of other episodes / original goals kept: some reached, some not
        assert 0 < np.mean(reached) < 1
        assert strategy == "random" or all(o.total_return >= 1 for o in outs)  # the replaced goals are reached
    else:
        assert all(reached)  # goals achieved later in the same episode are always reached
    if strategy == "all":  # a sequence's terminal is at its last success and every goal paid once
        assert all(o.total_return == n_goals for o in outs)


def test_all_replaces_the_sequence_in_time_order() -> None:
    spec, episodes = random_walks(3, 5, seed=4, size=7)
    rel = relabeler(spec, "all", terminate_on_success=False)
    for i, ep in enumerate(episodes):
        (out,) = rel.relabel(ep, np.random.default_rng(i), name="e")
        goals = out.obs["desired_goal"][0]
        achieved = ep.obs["achieved_goal"]
        t = 1
        for g in goals:  # each goal is achieved after the one before it
            t = next(s for s in range(t, ep.length + 1) if (achieved[s] == g).all()) + 1
        assert out.meta["relabel"]["reached"] and out.length == ep.length


def test_stream_is_deterministic_under_a_seed_and_reports() -> None:
    spec, episodes = random_walks(1, 30, seed=1, size=7)

    def run(seed: int) -> tuple[list[Episode], dict[str, Any]]:
        report = RelabelReport()
        rel = relabeler(spec, {"type": "future", "k": 2})
        out = list(relabel_stream(episodes, rel, ratio=0.5, seed=seed, report=report))
        return out, report.to_json()

    a, ra = run(7)
    b, rb = run(7)
    c, _ = run(8)
    assert ra == rb and len(a) == len(b) == 2 * ra["episodes_relabeled"]
    assert 0 < ra["episodes_relabeled"] < 30 and ra["episodes_in"] == 30
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.obs["desired_goal"], y.obs["desired_goal"])
    assert [x.length for x in a] != [x.length for x in c]
    assert ra["success_rate_out"] == 1.0 and ra["reward_mismatch_steps"] == 0
    assert ra["success_rate_in"] == pytest.approx(np.mean([e.total_return > 0 for e in episodes]), abs=1e-4)


def test_goal_fields_as_well_as_observations_are_rewritten() -> None:
    spec, episodes = random_walks(1, 4)
    with_goals = DataSpec(spec.observations, spec.action, goals={k: spec.observations[k] for k in
                                                                 ("achieved_goal", "desired_goal")})  # fmt: skip
    eps = [
        dataclasses.replace(e, goals={k: e.obs[k].copy() for k in ("achieved_goal", "desired_goal")}) for e in episodes
    ]
    (out,) = relabeler(with_goals, "final").relabel(eps[0], np.random.default_rng(0), name="e")
    out.validate(with_goals)
    np.testing.assert_array_equal(out.goals["desired_goal"], out.obs["desired_goal"])
    assert (out.goals["desired_goal"] == eps[0].obs["achieved_goal"][-1]).all()


# ------------------------------------------------------------------------------------------ bad input


def bad_shape(achieved: Any, desired: Any, info: Any) -> np.ndarray:
    return np.zeros((len(achieved), 1))


def bad_dtype(achieved: Any, desired: Any, info: Any) -> np.ndarray:
    return np.array(["yes"] * len(achieved))


def raises(achieved: Any, desired: Any, info: Any) -> np.ndarray:
    raise KeyError("info['goal_tolerance']")


def nan_reward(achieved: Any, desired: Any, info: Any) -> np.ndarray:
    return np.full(len(achieved), np.nan)


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        ("bad_shape", r"returned shape \(\d+, 1\) for \d+ goal pairs .*expected \(\d+,\)"),
        ("bad_dtype", r"returned dtype <U3 .*expected numbers"),
        ("raises", r"failed on the goal fields \('achieved_goal' \(\d+, 2\) float32.*KeyError"),
        ("nan_reward", r"returned nan .*must be finite"),
    ],
)
def test_a_bad_reward_function_names_the_episode_and_fields(fn: str, message: str) -> None:
    spec, episodes = random_walks(1, 2)
    rel = relabeler(spec, "final", reward={"type": "function", "function": f"{__name__}:{fn}"})
    with pytest.raises(DataError, match=f"partition 'p' episode 1: the reward function '{__name__}:{fn}' {message}"):
        rel.relabel(episodes[1], np.random.default_rng(0), name="partition 'p' episode 1")


def test_strategy_must_fit_the_goal_layout() -> None:
    spec, _ = random_walks(1, 1)
    with pytest.raises(ConfigError, match=r"relabel.strategy.type: strategy 'all' is for goal sequences.*use final"):
        relabeler(spec, "all")
    seq, _ = random_walks(2, 1)
    with pytest.raises(ConfigError, match=r"strategy 'future' is for single goals.*sequence of 2 goals.*none, some"):
        relabeler(seq, "future")


def test_data_without_goals_is_refused_with_the_fix() -> None:
    import gymnasium as gym

    spec = from_spaces(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2))
    with pytest.raises(DataError, match=r"no goal field 'achieved_goal' \(observation keys: observation; .*GoalEnv"):
        relabeler(spec, "final")


def test_env_reward_needs_compute_reward() -> None:
    spec, _ = random_walks(1, 1)
    with pytest.raises(ConfigError, match=r"env 'CartPole-v1' has no compute_reward"):
        relabeler(spec, "final", reward={"type": "env", "env": {"id": "CartPole-v1"}})
    rel = relabeler(spec, "final", reward={"type": "env", "env": {"id": "amago_pipe/GoalMaze-v0"}})
    assert rel.reward.for_episode("e")(np.zeros((2, 2)), np.array([[0, 0], [1, 0]]))[1] == 0.0


def test_config_errors() -> None:
    with pytest.raises(ConfigError, match="ratio"):
        build_strict(RelabelConfig, {"ratio": 1.5})
    with pytest.raises(ConfigError, match="failure_reward"):
        build_strict(RelabelConfig, {"reward": {"type": "threshold", "failure_reward": 2.0}})
    with pytest.raises(ConfigError, match="strategy.type"):
        build_strict(RelabelConfig, {"strategy": {"type": "futur"}})
