"""Behaviour policies: random, scripted (builtin and module:function), the short forms, and their error messages."""

from __future__ import annotations

import numpy as np
import pytest

from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.policies import policy_config
from amago_pipe.envs.policies import PolicyContext, make_policy
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.errors import ConfigError, DataError
from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec

TOY = "amago_pipe.envs.toy:make_toy_env"


def ctx_for(env_cfg: EnvConfig) -> PolicyContext:
    with make_batched_env(env_cfg) as env:
        return PolicyContext(spec=env.spec, n_envs=env.n_envs, seed=3, env_name=env.env_name)


def step_inputs(
    n: int, obs: dict[str, np.ndarray], rl2_dim: int
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    return obs, np.zeros((n, rl2_dim), np.float32), np.zeros(n, np.int64)


def test_random_policy_covers_the_action_space() -> None:
    ctx = ctx_for(EnvConfig(factory=TOY, kwargs={"action": "continuous"}, n_envs=4))
    policy = make_policy(policy_config("random"), ctx)
    acts = np.concatenate([policy.act(*step_inputs(4, {}, 3)) for _ in range(50)])
    assert acts.shape == (200, 2) and acts.min() >= -1.0 and acts.max() <= 1.0 and acts.std() > 0.4
    ctx = ctx_for(EnvConfig(id="CartPole-v1", n_envs=4))
    ids = np.concatenate([make_policy(policy_config("random"), ctx).act(*step_inputs(4, {}, 3)) for _ in range(20)])
    assert set(ids.tolist()) == {0, 1}


def test_scripted_by_import_path_equals_builtin() -> None:
    ctx = ctx_for(EnvConfig(id="CartPole-v1", n_envs=2))
    obs = {"observation": np.array([[0, 0, 0.1, 0], [0, 0, -0.1, 0]], dtype=np.float32)}
    builtin = make_policy(policy_config("cartpole-pd"), ctx).act(*step_inputs(2, obs, 3))
    by_path = make_policy(policy_config("scripted:amago_pipe.envs.scripted:cartpole_pd"), ctx).act(
        *step_inputs(2, obs, 3)
    )
    np.testing.assert_array_equal(builtin, [1, 0])
    np.testing.assert_array_equal(by_path, builtin)


def test_pendulum_controller_returns_unit_actions() -> None:
    ctx = ctx_for(EnvConfig(id="Pendulum-v1", n_envs=1))
    obs = {"observation": np.array([[1.0, 0.5, 0.0]], dtype=np.float32)}  # near the top, leaning: full torque
    act = make_policy(policy_config("pendulum-energy"), ctx).act(*step_inputs(1, obs, 2))
    np.testing.assert_allclose(act, [[-1.0]])  # -2 N m in env units is -1 in policy units


def test_unknown_policy_suggests_a_name() -> None:
    with pytest.raises(ConfigError, match=r"policy.type: unknown policy 'cartpole-pdd'.*did you mean 'cartpole-pd'"):
        policy_config("cartpole-pdd")
    with pytest.raises(ConfigError, match="policy.function: missing required key 'function'"):
        policy_config({"type": "scripted"})
    with pytest.raises(ConfigError, match="'cartpole-pd' takes no ':' argument"):
        policy_config("cartpole-pd:3")
    with pytest.raises(ConfigError, match=r"policy.epsilon: a probability must be in \[0, 1\], got 2"):
        policy_config("key-door-explorer:2")
    ctx = ctx_for(EnvConfig(id="CartPole-v1", n_envs=1))
    with pytest.raises(ConfigError, match="module 'amago_pipe.envs.scripted' has no attribute 'nope'"):
        make_policy(policy_config("scripted:amago_pipe.envs.scripted:nope"), ctx)


def test_short_forms_parse_into_the_typed_configs() -> None:
    assert (
        policy_config("checkpoint:train:best").to_dict()
        == policy_config({"type": "checkpoint", "stage": "train", "which": "best"}).to_dict()
    )
    assert policy_config("checkpoint:train:3").which == 3
    assert policy_config("checkpoint:runs/p.safetensors").path == "runs/p.safetensors"
    assert policy_config("scripted:pkg.mod:fn").function == "pkg.mod:fn"
    with pytest.raises(ConfigError, match="give a train `stage:` .* or a policy file `path:`, exactly one"):
        policy_config({"type": "checkpoint"})


def test_builtin_controller_on_the_wrong_env() -> None:
    ctx = ctx_for(EnvConfig(id="Pendulum-v1", n_envs=1))
    with pytest.raises(
        DataError, match=r"builtin policy 'cartpole-pd' needs observation \(4,\) and action discrete\(2\)"
    ):
        make_policy(policy_config("cartpole-pd"), ctx)


def bad_controller(obs: dict[str, np.ndarray], rng: np.random.Generator) -> str:
    return "left"


def test_scripted_controller_returning_garbage() -> None:
    spec = DataSpec({"observation": ArraySpec((4,), "float32")}, ActionSpec("discrete", (), n=2))
    policy = make_policy(policy_config(f"scripted:{__name__}:bad_controller"), PolicyContext(spec=spec, n_envs=1))
    with pytest.raises(DataError, match="returned 'left', which is not an action for discrete"):
        policy.act({"observation": np.zeros((1, 4), np.float32)}, np.zeros((1, 3), np.float32), np.zeros(1))
