"""Env id namespaces: registered like every other registry, a plugin's own namespace included."""

from __future__ import annotations

import gymnasium as gym
import pytest

from amago_pipe.envs.namespaces import ENV_NAMESPACES, register_namespace
from amago_pipe.errors import MissingDependencyError

CALLS: list[str] = []


def register_mine() -> None:
    CALLS.append("mine")


def test_the_project_namespaces_are_registry_entries() -> None:
    assert {"amago_pipe", "popgym", "gymnax", "ALE"} <= set(ENV_NAMESPACES.names())
    register_namespace("amago_pipe/TMaze-v0")
    assert "amago_pipe/TMaze-v0" in gym.registry
    register_namespace("CartPole-v1")  # no namespace: left to gymnasium
    register_namespace("unknown_ns/Env-v0")  # not ours: left to gymnasium (its unknown-id error names it)


def test_a_plugin_adds_its_own_namespace() -> None:
    ENV_NAMESPACES.register("mine", f"{__name__}:register_mine")
    register_namespace("mine/Thing-v0")
    assert CALLS == ["mine"]


def test_a_namespace_whose_package_is_missing_names_the_install() -> None:
    pytest.importorskip("gymnasium")
    try:
        import ale_py  # noqa: F401
    except ImportError:
        with pytest.raises(MissingDependencyError, match=r"pip install"):
            register_namespace("ALE/Pong-v5")
    else:
        register_namespace("ALE/Pong-v5")
        assert "ALE/Pong-v5" in gym.registry
