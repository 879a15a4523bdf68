"""`benchmarks/bench_multitask_probe.py`'s windows are the learner's: the same batch as the store's sampler gives for
the same episode and start, with the returns-to-go and the T-Maze cue beside it. No training is run."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))


def tmaze_store(path: Path) -> object:
    """A store of 6 random-policy T-Maze episodes (corridor 3, 12 steps at most) in partition `protected`."""
    from amago_pipe.config.build import build_strict
    from amago_pipe.config.envs import EnvConfig
    from amago_pipe.config.policies import RandomPolicyConfig
    from amago_pipe.envs.policies import PolicyContext, make_policy
    from amago_pipe.envs.rollout import rollout
    from amago_pipe.envs.vector import make_batched_env
    from amago_pipe.store import TrajectoryStore

    kwargs = {"corridor_length": 3, "max_steps": 12}
    env = make_batched_env(build_strict(EnvConfig, {"id": "amago_pipe/TMaze-v0", "kwargs": kwargs, "n_envs": 2}))
    try:
        store = TrajectoryStore.create(path, env.spec)
        policy = make_policy(RandomPolicyConfig(), PolicyContext(spec=env.spec, n_envs=env.n_envs, seed=0))
        with store.writer("protected", atomic=True) as writer:
            rollout(env, policy, 6, seed=0, keep_episodes=False, on_episode=lambda ep, _: writer.add(ep))
    finally:
        env.close()
    return TrajectoryStore.open(path)


def test_probe_windows_equal_the_store_windows(tmp_path: Path) -> None:
    from bench_multitask_probe import TaskWindows, load_tasks, returns_to_go  # type: ignore[import-not-found]

    from amago_pipe.data.batch import Batch, window_to_batch

    store = tmaze_store(tmp_path / "store.zarr")
    spec, tasks, _ = load_tasks(str(tmp_path / "store.zarr"), ["protected"])
    (name,) = tasks
    gammas = np.array([0.5, 0.9])
    windows = TaskWindows(spec, tasks, 5, gammas, 10.0)
    mine = windows.sample(64, np.random.default_rng(0))
    theirs = window_to_batch(store.sample(64, 5, partitions={"protected": 1.0}, rng=np.random.default_rng(1)), spec)
    # every window of the store's is one of the probe's (episode, start) windows, field by field
    episodes = tasks[name]
    fields = ("rl2", "time", "actions", "rewards", "terminated", "truncated", "mask")

    def same(ours: Batch, b: int) -> bool:
        obs = torch.equal(ours.obs["observation"][0], theirs.obs["observation"][b])
        return obs and all(torch.equal(getattr(ours, f)[0], getattr(theirs, f)[b]) for f in fields)

    for b in range(64):
        start = int(theirs.time[b, 0])
        fits = [e for e, ep in enumerate(episodes) if start <= max(len(ep.actions) - 5, 0)]
        assert any(same(window_to_batch(windows._windows([(0, e, start)])[0], spec), b) for e in fits), b
    # returns-to-go: scaled rewards discounted to the episode's end; the cue only where a window starts at t=0
    ep = episodes[0]
    expected = [sum(0.9**k * 10.0 * r for k, r in enumerate(ep.rewards[t:])) for t in range(len(ep.rewards))]
    assert np.allclose(windows.rtg[0][0][:, 1], expected)
    assert np.allclose(returns_to_go(np.array([1.0, 0.0, 2.0]), gammas)[:, 0], [1.5, 1.0, 2.0])
    starts = mine.batch.time[:, 0]
    assert set(mine.cue[starts == 0].tolist()) <= {-1.0, 1.0} and set(mine.cue[starts > 0].tolist()) <= {0.0}
    assert (mine.rtg[~mine.batch.mask] == 0).all()
