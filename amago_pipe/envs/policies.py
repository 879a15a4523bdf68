"""Behaviour policies for rollouts: `random`, scripted `module:function` controllers, and how any is built.

`make_policy(config, ctx)` builds the policy a `PolicyConfig` names and wraps it with its exploration.
numpy only, no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from amago_pipe.actions import ActionCodec
from amago_pipe.config.policies import PolicyConfig, ScriptedPolicyConfig
from amago_pipe.envs.exploration import ExploringPolicy, make_exploration, random_actions
from amago_pipe.envs.protocol import RolloutPolicy
from amago_pipe.errors import ConfigError, DataError
from amago_pipe.registry import import_path
from amago_pipe.spec import DataSpec, action_mask_key, describe_action

if TYPE_CHECKING:
    from amago_pipe.envs.wrapper import BatchedEnv

ScriptedFn = Callable[[dict[str, np.ndarray], np.random.Generator], Any]
"""`function(obs_dict, rng) -> env-space action` for ONE env (flat observation keys, no batch axis)."""


@dataclass(frozen=True)
class PolicyContext:
    """What a policy factory may use to build a policy for one rollout."""

    spec: DataSpec
    """Observation keys and action space of the env."""
    n_envs: int
    seed: int = 0
    env_name: str = ""
    upstream: Mapping[str, Path] = field(default_factory=dict)
    """Output folders of upstream stages (checkpoint policies look for their weights there)."""
    where: str = "policy"
    """Config path used in error messages."""
    env: BatchedEnv | None = None
    """The env the policy will act in, for players that read its state (`babyai-bot`); None where a policy must act
    from observations alone."""


PolicyFactory = Callable[[Any, PolicyContext], RolloutPolicy]
"""A policy config's implementation: `factory(config, ctx)` (a class or a function)."""


def make_policy(config: PolicyConfig, ctx: PolicyContext) -> RolloutPolicy:
    """Build the behaviour policy `config` names, wrapped by its exploration unless that is `none`."""
    factory: PolicyFactory = config.implementation()
    if not callable(factory):
        raise ConfigError(f"{ctx.where}.type: '{config.type}' is not callable; expected factory(config, ctx)")
    built = factory(config, ctx)
    if config.exploration.type == "none":
        return built
    where = f"{ctx.where}.exploration"
    return ExploringPolicy(built, make_exploration(config.exploration, ctx.spec, seed=ctx.seed + 7919, where=where))


class RandomPolicy:
    """Uniformly random actions (uniform over the Box bounds for continuous actions; among the valid ones under an
    action mask)."""

    def __init__(self, config: PolicyConfig, ctx: PolicyContext):
        self.codec = ActionCodec(ctx.spec.action)
        self.rng = np.random.default_rng(ctx.seed)
        self.mask_key = action_mask_key(ctx.spec)

    def reset(self, n_envs: int) -> None:
        pass

    def reset_envs(self, done_mask: np.ndarray) -> None:
        pass

    def act(self, obs: dict[str, np.ndarray], rl2: np.ndarray, time: np.ndarray) -> np.ndarray:
        valid = None if self.mask_key is None else obs[self.mask_key]
        return random_actions(self.codec, rl2.shape[0], self.rng, valid)


class ScriptedPolicy:
    """Runs `function(obs_dict, rng) -> env-space action` for each env; returns policy-space actions."""

    def __init__(self, fn: ScriptedFn, ctx: PolicyContext, *, name: str = "scripted"):
        self.fn = fn
        self.name = name
        self.codec = ActionCodec(ctx.spec.action)
        self.rng = np.random.default_rng(ctx.seed)
        self.where = ctx.where

    def reset(self, n_envs: int) -> None:
        pass

    def reset_envs(self, done_mask: np.ndarray) -> None:
        pass

    def act(self, obs: dict[str, np.ndarray], rl2: np.ndarray, time: np.ndarray) -> np.ndarray:
        n = rl2.shape[0]
        out = [self.fn({k: v[i] for k, v in obs.items()}, self.rng) for i in range(n)]
        try:
            env_actions = np.asarray(out, dtype=np.float32 if self.codec.kind == "continuous" else np.int64)
        except (TypeError, ValueError) as e:
            raise DataError(
                f"{self.where}: scripted policy '{self.name}' returned {out[0]!r}, which is not an action for "
                f"{describe_action(self.codec.spec)}"
            ) from e
        env_actions = env_actions.reshape(n, *self.codec.spec.shape)  # (N, ...)
        return self.codec.to_unit(env_actions)


def scripted_policy(config: ScriptedPolicyConfig, ctx: PolicyContext) -> ScriptedPolicy:
    """Policy factory for `policy: {type: scripted, function: package.module:function}`."""
    fn = import_path(config.function, what="scripted policy", where=f"{ctx.where}.function")
    if not callable(fn):
        raise ConfigError(
            f"{ctx.where}.function: '{config.function}' is not callable; expected function(obs_dict, rng) -> action"
        )
    return ScriptedPolicy(fn, ctx, name=config.function)


def check_env_shape(ctx: PolicyContext, *, name: str, obs_shape: tuple[int, ...], action: str) -> None:
    """Raise DataError when a builtin controller is used on an env of another shape."""
    obs = ctx.spec.observations
    found_action = describe_action(ctx.spec.action)
    if list(obs) != ["observation"] or obs["observation"].shape != obs_shape or found_action != action:
        found_obs = {k: v.shape for k, v in obs.items()}
        raise DataError(
            f"{ctx.where}: builtin policy '{name}' needs observation {obs_shape} and action {action}; "
            f"env '{ctx.env_name}' has observations {found_obs} and action {found_action}"
        )
