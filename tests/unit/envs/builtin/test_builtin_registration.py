"""The `amago_pipe/...` ids and the kshot factory resolve from an EnvConfig, with no import by the user."""

from __future__ import annotations

import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from amago_pipe.config.envs import EnvConfig
from amago_pipe.envs.builtin import BUILTIN_ENVS, register_builtin_envs
from amago_pipe.envs.factory import EnvFactory
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.errors import ConfigError

KSHOT = "amago_pipe.envs.builtin:kshot"


def test_ids_register_on_first_use() -> None:
    for env_id in BUILTIN_ENVS:
        gym.registry.pop(env_id, None)
    env = EnvFactory.from_config(EnvConfig(id="amago_pipe/TMaze-v0", kwargs={"corridor_length": 3}))()
    assert set(BUILTIN_ENVS) <= set(gym.registry)
    assert env.unwrapped.corridor_length == 3  # type: ignore[attr-defined]
    register_builtin_envs()  # idempotent: no "overriding environment" re-registration
    assert gym.registry["amago_pipe/TMaze-v0"].entry_point == BUILTIN_ENVS["amago_pipe/TMaze-v0"]


@pytest.mark.parametrize("env_id", sorted(BUILTIN_ENVS))
def test_every_id_passes_the_gymnasium_checker(env_id: str) -> None:
    register_builtin_envs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "the env is wrapped", unbounded Box with noise
        check_env(gym.make(env_id), skip_render_check=True)


@pytest.mark.parametrize(
    ("cfg", "obs_shape", "n_actions"),
    [
        (EnvConfig(id="amago_pipe/TMaze-v0", kwargs={"corridor_length": 20}), (2,), 4),
        (EnvConfig(id="amago_pipe/DarkKeyDoor-v0", kwargs={"room_size": 5, "k": 3}), (4,), 4),
        (EnvConfig(id="amago_pipe/DarkKeyDoor-v0", kwargs={"reset_signal": False}), (3,), 4),
        (EnvConfig(id="amago_pipe/DelayedRecall-v0", kwargs={"n_cues": 3, "delay": 5, "distractor_std": 0.1}), (4,), 3),
        (EnvConfig(factory=KSHOT, kwargs={"env_id": "CartPole-v1", "k": 3}), (5,), 2),
        (
            EnvConfig(
                factory=KSHOT, kwargs={"env_id": "amago_pipe/TMaze-v0", "k": 2, "kwargs": {"corridor_length": 2}}
            ),
            (3,),
            4,
        ),
    ],
)
def test_make_batched_env_from_config(cfg: EnvConfig, obs_shape: tuple[int, ...], n_actions: int) -> None:
    with make_batched_env(cfg, n_envs=2) as env:
        assert env.spec.observations["observation"].shape == obs_shape
        assert env.spec.action.n == n_actions
        step = env.reset(seed=0)
        assert step.obs["observation"].shape == (2, *obs_shape)


def test_time_limit_from_config_still_applies() -> None:
    env = EnvFactory.from_config(EnvConfig(id="amago_pipe/TMaze-v0", max_episode_steps=2))()
    env.reset(seed=0)
    assert env.step(0)[3] is False and env.step(0)[3] is True


@pytest.mark.parametrize(
    ("cfg", "match"),
    [
        (EnvConfig(id="amago_pipe/TMaz-v0"), r"env\.id: cannot make gymnasium env 'amago_pipe/TMaz-v0'"),
        (
            EnvConfig(id="amago_pipe/TMaze-v0", kwargs={"corridor_length": 0}),
            r"env\.kwargs: gymnasium env 'amago_pipe/TMaze-v0' rejected kwargs \['corridor_length'\] "
            r"\(TMaze: corridor_length must be at least 1, got 0\)",
        ),
        (EnvConfig(factory=KSHOT, kwargs={"env_id": "CartPole-v1"}), r"calling 'amago_pipe.envs.builtin:kshot'"),
    ],
)
def test_config_errors(cfg: EnvConfig, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        EnvFactory.from_config(cfg)()


def test_async_workers_resolve_the_ids() -> None:
    with make_batched_env(EnvConfig(id="amago_pipe/DarkKeyDoor-v0", mode="async", n_envs=2)) as env:
        assert env.reset(seed=0).obs["observation"].shape == (2, 4)
