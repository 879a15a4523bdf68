"""`mode: already_vectorized`: an env that steps the whole batch itself (gymnasium's CartPole numpy batch env)."""

from __future__ import annotations

import pytest
from test_envs_rollout import CountingPolicy

from amago_pipe.config.build import FieldError
from amago_pipe.config.envs import EnvConfig
from amago_pipe.envs.rollout import rollout
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.errors import ConfigError

CARTPOLE_BATCH = "gymnasium.envs.classic_control.cartpole:CartPoleVectorEnv"


@pytest.mark.parametrize("source", ["id", "factory"])
def test_batch_env_episodes_have_clean_boundaries_and_memory_resets(source: str) -> None:
    where = {"id": "CartPole-v1"} if source == "id" else {"factory": CARTPOLE_BATCH}
    cfg = EnvConfig(**where, n_envs=4, mode="already_vectorized", max_episode_steps=30)  # type: ignore[arg-type]
    with make_batched_env(cfg) as env:
        assert env.n_envs == 4 and env.spec.action.kind == "discrete"
        policy = CountingPolicy(action=1)  # checks time == its counter, reset exactly at episode starts
        result = rollout(env, policy, 12, seed=0)
    assert len(result.episodes) == 12 and policy.resets >= 12 - 4  # the last ones may end the rollout
    for ep in result.episodes:
        assert 1 <= ep.length <= 30 and ep.time_start == 0
        assert ep.rewards.sum() == ep.length  # CartPole pays 1 per step; no reset step glued on
        assert ep.terminated[-1] or ep.truncated[-1]
        assert not (ep.terminated[:-1].any() or ep.truncated[:-1].any())


def test_batch_env_refusals_name_the_fix() -> None:
    with pytest.raises(ConfigError, match="cannot be made as an already vectorized env.*mode: sync"):
        make_batched_env(EnvConfig(id="amago_pipe/DelayedRecall-v0", n_envs=2, mode="already_vectorized"))
    single = "gymnasium.envs.classic_control.cartpole:CartPoleEnv"
    with pytest.raises(ConfigError, match="already_vectorized factory takes `num_envs`"):
        make_batched_env(EnvConfig(factory=single, n_envs=2, mode="already_vectorized"))
    with pytest.raises(FieldError, match="steps as one batch"):
        EnvConfig(id="CartPole-v1", mode="already_vectorized", on_error="skip")
