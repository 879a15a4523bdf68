"""Task sets: config rules, unified spaces, fixed tasks per slot or drawn per reset, task names on every episode."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from amago_pipe.config.build import build_strict
from amago_pipe.config.envs import EnvConfig
from amago_pipe.envs.rollout import rollout
from amago_pipe.envs.stats import flat_metrics
from amago_pipe.envs.tasks import unify_actions, unify_observations
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.envs.wrapper import env_seeds
from amago_pipe.errors import ConfigError


class RandomPolicy:
    """Uniform discrete actions (any count up to `n`)."""

    def __init__(self, n: int, seed: int = 0):
        self.n, self.rng = n, np.random.default_rng(seed)

    def reset(self, n_envs: int) -> None:
        pass

    def reset_envs(self, mask: np.ndarray) -> None:
        pass

    def act(self, obs: dict[str, np.ndarray], rl2: np.ndarray, time: np.ndarray) -> np.ndarray:
        return self.rng.integers(0, self.n, size=len(time))


def env_config(**data: Any) -> EnvConfig:
    return build_strict(EnvConfig, data)  # type: ignore[no-any-return]


CLASSIC = [{"id": "CartPole-v1"}, {"id": "Acrobot-v1", "weight": 2}]
"""Two tasks whose spaces differ: 4 vs 6 observation features, 2 vs 3 actions."""


def test_config_refuses_what_a_task_set_cannot_mean() -> None:
    cases = [
        ({"tasks": CLASSIC, "id": "CartPole-v1"}, r"either `tasks: \[...\]` or a single `id`"),
        ({"tasks": []}, "give at least one task"),
        ({"tasks": [{"id": "CartPole-v1", "weight": 0}]}, r"weight: must be > 0, got 0"),
        ({"tasks": [{"id": "CartPole-v1", "weight": -1.5}]}, r"must be > 0, got -1.5"),
        ({"tasks": [{"id": "CartPole-v1"}, {"id": "CartPole-v1"}]}, r"task name 'CartPole-v1' is also tasks\[0\]"),
        (
            {"tasks": CLASSIC, "held_out": [{"id": "CartPole-v1", "name": "cp"}]},
            r"held-out task 'cp' is the same env and kwargs as tasks\[0\]",
        ),
        ({"tasks": CLASSIC, "held_out": [{"id": "MountainCar-v0", "name": "Acrobot-v1"}]}, r"is also tasks\[1\]"),
        ({"id": "CartPole-v1", "held_out": [{"id": "Acrobot-v1"}]}, "held-out tasks need a task set"),
        ({"tasks": CLASSIC, "mode": "already_vectorized"}, "use mode sync or async"),
        ({"tasks": [{"factory": "nocolon"}]}, "is not an import path"),
    ]
    for data, message in cases:
        with pytest.raises(ConfigError, match=message):
            env_config(**data)


def test_task_names_default_to_id_and_kwargs() -> None:
    cfg = env_config(
        tasks=[{"id": "amago_pipe/Recall-v0", "kwargs": {"delay": 5}}, {"id": "CartPole-v1", "name": "cp"}]
    )
    assert [t.task_name for t in cfg.tasks or []] == ["amago_pipe/Recall-v0(delay=5)", "cp"]
    assert cfg.env_name == "amago_pipe/Recall-v0(delay=5)+cp"


def test_spaces_are_padded_and_joined_or_refused_naming_both_tasks() -> None:
    names = ("a", "b")
    box = gym.spaces.Box(-1, 1, (4,), np.float32)
    space, notes = unify_observations(names, [box, gym.spaces.Box(1, 2, (6,), np.float32)], where="env")
    assert space.shape == (6,) and space.low.tolist() == [-1] * 4 + [0] * 2  # type: ignore[attr-defined]
    assert space.high.tolist() == [2] * 6  # type: ignore[attr-defined]
    assert notes == ["zero-padded to 6 features: a (4)"]
    space, notes = unify_actions(names, [gym.spaces.Discrete(2), gym.spaces.Discrete(5)], where="env")
    assert (
        space == gym.spaces.Discrete(5)
        and "missing actions are masked (observation 'action_mask') for a (2)" in notes[0]
    )
    with pytest.raises(ConfigError, match=r"tasks 'a' and 'b' have action spaces that cannot be joined"):
        unify_actions(names, [gym.spaces.Discrete(2), gym.spaces.Box(-1, 1, (2,))], where="env")
    with pytest.raises(ConfigError, match=r"tasks 'a' and 'b' have observation spaces .* Box\(0, 255, \(8, 8, 3\)"):
        unify_observations(names, [box, gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)], where="env")


def test_slots_keep_their_task_and_every_episode_is_named() -> None:
    cfg = env_config(tasks=CLASSIC, n_envs=3, max_episode_steps=40)
    with make_batched_env(cfg) as env:
        assert env.spec.observations["observation"].shape == (6,) and env.spec.action.n == 3
        assert env.tasks is not None and env.tasks.slot_tasks(3, where="env") == [0, 1, 1]  # weights 1:2
        result = rollout(env, RandomPolicy(3), 12, seed=0)
    by_slot = {(s.env_index, s.env_name) for s in result.stats}
    assert by_slot == {(0, "CartPole-v1"), (1, "Acrobot-v1"), (2, "Acrobot-v1")}
    assert env.spec.observations["action_mask"].shape == (3,)  # 2 vs 3 actions: each task's own ids marked
    for ep in result.episodes:
        obs = ep.obs["observation"]
        if ep.env_name == "CartPole-v1":
            assert not obs[:, 4:].any() and obs[:, :4].any()  # padded with zeros
        own = 2 if ep.env_name == "CartPole-v1" else 3
        assert (ep.obs["action_mask"] == [1.0] * own + [0.0] * (3 - own)).all()
        assert ep.length <= 40
    summary = result.summary()
    assert set(summary["per_env"]) == {"CartPole-v1", "Acrobot-v1"}
    assert summary["task_mean"]["return_mean"] == pytest.approx(
        np.mean([summary["per_env"][k]["return_mean"] for k in ("CartPole-v1", "Acrobot-v1")])
    )
    metrics = flat_metrics(summary)
    assert {"task/CartPole-v1/return_mean", "task/Acrobot-v1/env_steps", "task_mean/return_mean"} <= set(metrics)


def test_a_task_is_drawn_by_weight_at_each_reset_and_reproducibly() -> None:
    cfg = env_config(
        tasks=[{"id": "CartPole-v1", "weight": 3}, {"id": "Acrobot-v1"}],
        tasks_per="reset",
        n_envs=2,
        max_episode_steps=5,
    )

    def names(seed: int) -> list[tuple[int, str]]:
        with make_batched_env(cfg) as env:
            return [(s.env_index, s.env_name) for s in rollout(env, RandomPolicy(3), 200, seed=seed).stats]

    first = names(0)
    counts = Counter(name for _, name in first)
    assert 0.6 < counts["CartPole-v1"] / 200 < 0.9  # weight 3:1
    assert {name for i, name in first if i == 0} == {"CartPole-v1", "Acrobot-v1"}  # one slot runs both
    assert names(0) == first and names(1) != first


def test_held_out_tasks_run_only_in_evaluation_and_are_summarised_apart() -> None:
    cfg = env_config(tasks=CLASSIC, held_out=[{"id": "MountainCar-v0", "name": "car"}], n_envs=3, max_episode_steps=20)
    with make_batched_env(cfg) as env:  # collection and training: training tasks only
        assert env.tasks is not None and env.tasks.names == ("CartPole-v1", "Acrobot-v1")
    with make_batched_env(cfg, held_out=True) as env:
        summary = rollout(env, RandomPolicy(3), 9, seed=0).summary()
    assert summary["held_out"]["tasks"] == ["car"] and summary["held_out"]["episodes"] == 3
    assert summary["training"]["tasks"] == ["Acrobot-v1", "CartPole-v1"] and summary["training"]["episodes"] == 6
    assert json.dumps(summary)  # JSON-able for reports


def test_slots_cannot_hold_more_tasks_than_envs() -> None:
    cfg = env_config(tasks=CLASSIC, n_envs=1)
    with pytest.raises(ConfigError, match=r"n_envs: 1 env slots cannot each hold one of 2 tasks.*tasks_per: reset"):
        make_batched_env(cfg)


def test_nearby_seeds_give_unrelated_env_streams() -> None:
    assert len(set(env_seeds(1, 8)) | set(env_seeds(2, 8))) == 16
    cfg = env_config(id="CartPole-v1", n_envs=4)

    def first_obs(seed: int) -> set[bytes]:
        with make_batched_env(cfg) as env:
            return {row.tobytes() for row in env.reset(seed=seed).obs["observation"]}

    assert not first_obs(1) & first_obs(2)  # gymnasium's seed + i shared 3 of 4 envs here
    assert first_obs(1) == first_obs(1)
