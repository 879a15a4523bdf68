"""Sample-time relabeling of windows sampled from a real store of GoalMaze random walks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_strategies import maze_reward, random_walks

from amago_pipe.config.build import build_strict
from amago_pipe.config.relabel import RelabelConfig
from amago_pipe.relabel import window_relabeler
from amago_pipe.store import TrajectoryStore


@pytest.mark.parametrize(("n_goals", "strategy"), [(1, "future"), (1, "random"), (2, "all")])
def test_relabeled_windows_pay_their_new_goals(tmp_path: Path, n_goals: int, strategy: str) -> None:
    spec, episodes = random_walks(n_goals, 40, seed=3)
    store = TrajectoryStore.create(str(tmp_path / "s.zarr"), spec)
    with store.writer("protected") as w:
        for ep in episodes:
            w.add(ep)
    cfg = build_strict(RelabelConfig, {
        "strategy": {"type": strategy}, "ratio": 0.75,
        "reward": {"type": "function", "function": "test_strategies:maze_reward"},
    })  # fmt: skip
    relabel = window_relabeler(cfg, spec, where="stages.train")
    batch = store.sample(32, 12, rng=np.random.default_rng(0))
    out = relabel(batch, np.random.default_rng(1))
    again = relabel(batch, np.random.default_rng(1))
    np.testing.assert_array_equal(out.obs["desired_goal"], again.obs["desired_goal"])  # deterministic
    changed = ~(out.obs["desired_goal"] == batch.obs["desired_goal"]).reshape(32, -1).all(1)
    assert 8 <= changed.sum() <= 32
    assert (out.mask <= batch.mask).all()  # windows are only ever cut
    for b in np.flatnonzero(changed):
        n = int(out.mask[b].sum())
        achieved, desired = out.obs["achieved_goal"][b], out.obs["desired_goal"][b]
        if n_goals == 1:
            np.testing.assert_array_equal(out.rewards[b, :n], maze_reward(achieved[1 : n + 1], desired[:n], {}))
        if strategy != "random":
            assert out.rewards[b, :n].sum() == n_goals and out.terminated[b, n - 1]  # reached, then cut
        assert (out.rewards[b, n:] == 0).all() and (out.obs["desired_goal"][b, n + 1 :] == 0).all()
    np.testing.assert_array_equal(batch.rewards, store.sample(32, 12, rng=np.random.default_rng(0)).rewards)
