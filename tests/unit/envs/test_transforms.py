"""Env wrappers (`env.wrappers`): each wrapper's spaces and values on real gymnasium envs, the plugin form, task sets,
the DataSpec record, and every wrapper that does not fit its space refused naming its key."""

from __future__ import annotations

import importlib.util
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from pixel_env import PixelSideEnv

from amago_pipe.config.build import build_strict
from amago_pipe.config.envs import EnvConfig
from amago_pipe.envs.factory import EnvFactory
from amago_pipe.envs.transforms import LUMA, resize_weights
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.errors import ConfigError
from amago_pipe.spec import DataSpec

PIXEL = "pixel_env:make_pixel_env"


def env_config(wrappers: list[dict[str, Any]], **extra: Any) -> EnvConfig:
    source = {} if "tasks" in extra or "id" in extra else {"factory": PIXEL}
    cfg: EnvConfig = build_strict(EnvConfig, {**source, "n_envs": 1, **extra, "wrappers": wrappers})
    return cfg


def make(wrappers: list[dict[str, Any]], **extra: Any) -> gym.Env:  # type: ignore[type-arg]
    return EnvFactory.from_config(env_config(wrappers, **extra), where="env")()


def test_frame_stack_of_a_vector_env_keeps_the_last_k_oldest_first() -> None:
    env = make([{"type": "frame_stack", "k": 3}], id="CartPole-v1")
    assert env.observation_space.shape == (12,)
    first, _ = env.reset(seed=0)
    np.testing.assert_array_equal(first.reshape(3, 4), np.repeat(first[:4][None], 3, 0))  # a reset repeats it
    second, *_ = env.step(0)
    third, *_ = env.step(1)
    np.testing.assert_array_equal(third[:8], np.concatenate([first[:4], second[8:]]))
    assert env.observation_space.contains(third)
    again, _ = env.reset(seed=1)  # a new episode forgets the old frames
    np.testing.assert_array_equal(again[:4], again[8:])


def test_resize_grayscale_and_stack_of_a_pixel_env() -> None:
    env = make([{"type": "resize", "size": [12, 8]}, {"type": "grayscale"}, {"type": "frame_stack", "k": 4}])
    assert env.observation_space == gym.spaces.Box(0, 255, (12, 8, 4), np.uint8)
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step(0)
    assert obs.dtype == np.uint8 and obs.shape == (12, 8, 4) and env.observation_space.contains(obs)
    raw = PixelSideEnv()
    raw.reset(seed=0)
    frame, *_ = raw.step(0)  # the same frame, unwrapped
    gray = np.rint(frame.astype(np.float32) @ LUMA)  # (24, 24)
    expected = gray.reshape(12, 2, 8, 3).mean(axis=(1, 3))  # area resize of 24x24 to 12x8: block means
    np.testing.assert_allclose(obs[..., -1], expected, atol=1.0)  # grayscale after resize: rounding differs by <1


def test_resize_weights_average_blocks_and_interpolate() -> None:
    np.testing.assert_allclose(resize_weights(4, 2), [[0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5]])
    np.testing.assert_allclose(resize_weights(5, 2), [[0.4, 0.4, 0.2, 0, 0], [0, 0, 0.2, 0.4, 0.4]], atol=1e-6)
    np.testing.assert_allclose(resize_weights(2, 4), [[1, 0], [0.75, 0.25], [0.25, 0.75], [0, 1]])
    assert np.allclose(resize_weights(210, 84).sum(axis=1), 1.0)


def test_grayscale_of_stacked_rgb_frames_gives_one_channel_per_frame() -> None:
    env = make([{"type": "frame_stack", "k": 2}, {"type": "grayscale"}])
    assert env.observation_space.shape == (24, 24, 2)
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs[..., 0], obs[..., 1])
    assert set(np.unique(obs)) == {round(40 * LUMA.sum()), round(250 * LUMA[0] + 40 * LUMA[1:].sum())}


def test_plugin_wrapper_then_builtin_on_a_dict_key_of_minigrid() -> None:
    pytest.importorskip("minigrid")
    wrappers = [
        {"type": "minigrid.wrappers:RGBImgPartialObsWrapper", "kwargs": {"tile_size": 4}},  # any gymnasium Wrapper
        {"type": "resize", "size": [14, 14]},  # the one uint8 image key of the Dict: `image`
        {"type": "grayscale", "key": "image"},
    ]
    env = make(wrappers, id="MiniGrid-Empty-5x5-v0", obs_keys=["image", "direction"])
    assert env.observation_space["image"] == gym.spaces.Box(0, 255, (14, 14, 1), np.uint8)
    obs, _ = env.reset(seed=0)
    assert sorted(obs) == ["direction", "image"] and obs["image"].shape == (14, 14, 1)


def test_plugin_function_with_kwargs_and_the_data_spec_records_the_wrappers() -> None:
    wrappers = [{"type": "pixel_env:Invert", "kwargs": {"offset": 5}}, {"type": "grayscale"}]
    with make_batched_env(env_config(wrappers, n_envs=2)) as env:
        step = env.reset(seed=0)
        assert step.obs["observation"].shape == (2, 24, 24, 1)
        assert int(step.obs["observation"].max()) == round((255 - 40 + 5) * LUMA.sum())
        assert env.spec.transforms == [
            {"type": "pixel_env:Invert", "kwargs": {"offset": 5}},
            {"type": "grayscale", "key": None},
        ]
        assert DataSpec.from_json(env.spec.to_json()) == env.spec


def test_wrappers_apply_to_each_task_of_a_task_set() -> None:
    tasks = [{"id": "CartPole-v1", "name": "cart"}, {"id": "Acrobot-v1", "name": "acro"}]
    with make_batched_env(env_config([{"type": "frame_stack", "k": 2}], tasks=tasks, n_envs=2)) as env:
        assert env.spec.observations["observation"].shape == (12,)  # Acrobot's 6 features stacked, CartPole padded
        step = env.reset(seed=0)
        cart = step.obs["observation"][0]
        np.testing.assert_array_equal(cart[:4], cart[4:8])  # CartPole's 4 features twice, then padding
        np.testing.assert_array_equal(cart[8:], 0)


def test_data_spec_wrappers_must_match_unless_unknown() -> None:
    a = env_spec([{"type": "grayscale"}])
    b = env_spec([{"type": "grayscale"}, {"type": "frame_stack", "k": 1}])
    with pytest.raises(Exception, match=r"wrappers differ: store came through \[grayscale\(\)\], .* has \[grayscale"):
        a.check_compatible(b)
    a.check_compatible(DataSpec(a.observations, a.action))  # a converted dataset: wrappers not known


def env_spec(wrappers: list[dict[str, Any]]) -> DataSpec:
    with make_batched_env(env_config(wrappers)) as env:
        return env.spec


@pytest.mark.parametrize(
    ("wrappers", "extra", "message"),
    [
        ([{"type": "grayscale"}], {"id": "CartPole-v1"}, r"env\.wrappers\.0 \(grayscale\): the observation does not fit: "
         r"needs an image \(H, W\) or \(H, W, C\), got a vector Box\(shape \(4,\), float32\)"),
        ([{"type": "resize", "size": [8, 8]}], {"id": "CartPole-v1"}, r"env\.wrappers\.0 \(resize\): .* got a vector"),
        ([{"type": "grayscale"}, {"type": "grayscale"}], {}, r"env\.wrappers\.1 \(grayscale\): .* has 1 channel\(s\) "
         r"\(already one gray channel"),
        ([{"type": "frame_stack", "key": "image"}], {}, r"env\.wrappers\.0\.key: 'image' given, but the observation is "
         r"Box\(shape \(24, 24, 3\), uint8\), not a Dict"),
        ([{"type": "resize", "size": [4, 4]}], {"id": "FrozenLake-v1"}, r"env\.wrappers\.0 \(resize\): .* needs an image "
         r"\(a Box\), got Discrete\(16\)"),
        ([{"type": "pixel_env:Invert", "kwargs": {"scale": 2}}], {}, r"env\.wrappers\.0\.type: calling "
         r"'pixel_env:Invert' with the env and kwargs \['scale'\] failed"),
        ([{"type": "builtins:id"}], {}, r"env\.wrappers\.0\.type: 'builtins:id' returned int, expected a gymnasium\.Env"),
        ([{"type": "math:pi"}], {}, r"env\.wrappers\.0\.type: 'math:pi' is float, not callable"),
        ([{"type": "atari"}], {"id": "CartPole-v1"}, r"env\.wrappers\.0 \(atari\): wraps ALE envs .* 'CartPole-v1' is "
         r"not one"),
    ],
)  # fmt: skip
def test_a_wrapper_that_does_not_fit_is_refused_naming_its_key(
    wrappers: list[dict[str, Any]], extra: dict[str, Any], message: str
) -> None:
    if any(w["type"] == "atari" for w in wrappers) and importlib.util.find_spec("ale_py") is None:
        pytest.skip("the atari wrapper needs ale-py to tell an ALE env (without it: MissingDependencyError)")
    with pytest.raises(ConfigError, match=message):
        make(wrappers, **extra)


def test_config_errors_name_the_key() -> None:
    with pytest.raises(ConfigError, match=r"wrappers\.1\.type: unknown wrapper 'grayscal' \(known: atari, frame_stack, "
                       r"grayscale, resize, success_on_reward\); did you mean 'grayscale'\?"):  # fmt: skip
        env_config([{"type": "frame_stack"}, {"type": "grayscal"}])
    with pytest.raises(ConfigError, match=r"wrappers\.0\.size: must be two positive sizes"):
        env_config([{"type": "resize", "size": [0, 84]}])
    with pytest.raises(ConfigError, match=r"wrappers\.0\.sticky_actions: must be a probability in \[0, 1\)"):
        env_config([{"type": "atari", "sticky_actions": 1.5}])
    with pytest.raises(ConfigError, match=r"wrappers\.0\.sizes: unknown key 'sizes' .*did you mean 'size'"):
        env_config([{"type": "resize", "sizes": [84, 84]}])
    with pytest.raises(ConfigError, match=r"wrappers: wrappers wrap each env; an already_vectorized env"):
        env_config([{"type": "grayscale"}], id="CartPole-v1", mode="already_vectorized")


def test_atari_without_ale_py_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from amago_pipe.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "ale_py", None)  # `import ale_py` raises ImportError
    with pytest.raises(MissingDependencyError, match=r"pip install -e \"\.\[atari\]\"") as info:
        make([{"type": "atari"}], id="ALE/Pong-v5")
    assert info.value.exit_code == 4
