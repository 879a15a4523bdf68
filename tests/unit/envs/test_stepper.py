"""The online Stepper: keeps envs and episodes running between calls; long episodes come out in pieces."""

from __future__ import annotations

import numpy as np

from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.policies import RandomPolicyConfig
from amago_pipe.envs.policies import PolicyContext, make_policy
from amago_pipe.envs.stepper import Stepper
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.store import Episode

TOY = "amago_pipe.envs.toy:make_toy_env"


def stepper(n_envs: int, save_every: tuple[int, int] | None, **kwargs: int) -> Stepper:
    env = make_batched_env(EnvConfig(factory=TOY, kwargs=kwargs, n_envs=n_envs))
    policy = make_policy(RandomPolicyConfig(), PolicyContext(spec=env.spec, n_envs=n_envs, seed=0))
    return Stepper(env, policy, seed=0, source="online:test", save_every=save_every)


def test_episodes_continue_across_calls() -> None:
    runner = stepper(2, None, min_len=5, max_len=5)
    got: list[Episode] = []
    first = runner.run(3, on_episode=got.append)
    assert not got and first.env_steps == 6  # nothing finished in 3 steps of 5-step episodes
    second = runner.run(4, on_episode=got.append)
    assert len(got) == 2 and all(ep.length == 5 for ep in got) and len(second.stats) == 2
    assert [ep.obs["step"].tolist() for ep in got] == [[0, 1, 2, 3, 4, 5]] * 2
    runner.env.close()


def test_long_episodes_come_out_in_pieces_that_join_up() -> None:
    runner = stepper(3, (4, 7), min_len=23, max_len=23)
    pieces: list[Episode] = []
    result = runner.run(24, on_episode=pieces.append)  # each env finishes one 23-step episode
    runner.env.close()
    assert len(result.stats) == 3 and all(s.length == 23 for s in result.stats)
    for piece in pieces:
        assert 1 <= piece.length <= 7 and piece.time_start == int(piece.obs["step"][0])  # the time index carries on
    assert sorted(p.time_start for p in pieces).count(0) == 3
    whole = [p for p in pieces if p.terminated.any()]
    assert len(whole) == 3 and all(int(p.obs["step"][-1]) == 23 for p in whole)
    for p in pieces:  # a piece ends where the next one starts: observations are consecutive step counts
        np.testing.assert_array_equal(p.obs["step"], np.arange(p.time_start, p.time_start + p.length + 1))
    # the next episodes are 1 step old (below the smallest piece): every piece belongs to a finished episode
    total = sum(float(p.rewards.sum()) for p in pieces)
    assert abs(total - sum(s.episode_return for s in result.stats)) < 1e-6 and sum(p.length for p in pieces) == 69
