"""Behaviour policies for rollouts: `random`, scripted `module:function` controllers, and exploration noise.

`make_policy("name[:arg]", ctx)` resolves a name through the POLICIES registry. numpy only, no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from amago_pipe.actions import ActionCodec
from amago_pipe.config.collect import parse_policy, policy_problem
from amago_pipe.envs.protocol import RolloutPolicy
from amago_pipe.errors import ConfigError, DataError
from amago_pipe.registry import import_path
from amago_pipe.spec import DataSpec, describe_action

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


PolicyFactory = Callable[[str | None, PolicyContext], RolloutPolicy]
"""Registered in POLICIES: `factory(arg, ctx)` where `arg` is the text after the first ':' (or None)."""


def check_policy_name(policy: str, *, where: str) -> None:
    """Raise ConfigError when `policy` names no known behaviour policy (imports nothing)."""
    problem = policy_problem(policy)
    if problem:
        raise ConfigError(f"{where}: {problem}", path=where)


def make_policy(policy: str, ctx: PolicyContext, *, noise: float = 0.0) -> RolloutPolicy:
    """Build the policy named `policy` ('name[:arg]'); wrap it with exploration noise when `noise` > 0."""
    from amago_pipe.config.registries import POLICIES

    check_policy_name(policy, where=ctx.where)
    check_noise(noise, ctx.spec, where=f"{ctx.where.removesuffix('policy')}noise")
    name, arg = parse_policy(policy)
    factory: PolicyFactory = POLICIES.get(name, where=ctx.where)
    built = factory(arg, ctx)
    if noise > 0.0:
        return NoisyPolicy(built, ctx.spec, noise=noise, seed=ctx.seed + 7919)
    return built


def check_noise(noise: float, spec: DataSpec, *, where: str) -> None:
    """Raise ConfigError when `noise` cannot be an epsilon (discrete kinds: a probability in [0, 1])."""
    if spec.action.kind != "continuous" and not 0.0 <= noise <= 1.0:
        raise ConfigError(
            f"{where}: noise {noise:g} is the probability of a random action for {describe_action(spec.action)} "
            f"actions, so it must be in [0, 1]",
            path=where,
        )


def add_noise(actions: np.ndarray, codec: ActionCodec, noise: float, rng: np.random.Generator) -> np.ndarray:
    """Policy-space noise: epsilon-random ids for discrete kinds, Gaussian (std=noise) in [-1, 1] otherwise."""
    if noise <= 0.0:
        return actions
    if codec.kind == "continuous":
        noisy = actions + rng.normal(0.0, noise, size=actions.shape)  # (N, *shape)
        return np.clip(noisy, -1.0, 1.0).astype(np.float32)
    swap = rng.random(actions.shape) < noise
    return np.where(swap, random_actions(codec, actions.shape[0], rng), actions)


def random_actions(codec: ActionCodec, n: int, rng: np.random.Generator) -> np.ndarray:
    """n uniform policy-space actions: ids for discrete kinds, uniform [-1, 1] for continuous."""
    spec = codec.spec
    if spec.kind == "discrete":
        return rng.integers(0, spec.n, size=n)
    if spec.kind == "multidiscrete":
        return rng.integers(0, np.asarray(spec.nvec), size=(n, len(spec.nvec)))
    if spec.kind == "multibinary":
        return rng.integers(0, 2, size=(n, *spec.shape))
    return rng.uniform(-1.0, 1.0, size=(n, *spec.shape)).astype(np.float32)


class RandomPolicy:
    """Uniformly random actions (uniform over the Box bounds for continuous actions)."""

    def __init__(self, ctx: PolicyContext):
        self.codec = ActionCodec(ctx.spec.action)
        self.rng = np.random.default_rng(ctx.seed)

    def reset(self, n_envs: int) -> None:
        pass

    def reset_envs(self, done_mask: np.ndarray) -> None:
        pass

    def act(self, obs: dict[str, np.ndarray], rl2: np.ndarray, time: np.ndarray) -> np.ndarray:
        return random_actions(self.codec, rl2.shape[0], self.rng)


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


class NoisyPolicy:
    """Wraps any RolloutPolicy and perturbs its policy-space actions (see `add_noise`)."""

    def __init__(self, inner: RolloutPolicy, spec: DataSpec, *, noise: float, seed: int):
        self.inner = inner
        self.noise = noise
        self.codec = ActionCodec(spec.action)
        self.rng = np.random.default_rng(seed)

    def reset(self, n_envs: int) -> None:
        self.inner.reset(n_envs)

    def reset_envs(self, done_mask: np.ndarray) -> None:
        self.inner.reset_envs(done_mask)

    def act(self, obs: dict[str, np.ndarray], rl2: np.ndarray, time: np.ndarray) -> np.ndarray:
        return add_noise(np.asarray(self.inner.act(obs, rl2, time)), self.codec, self.noise, self.rng)


def random_policy(arg: str | None, ctx: PolicyContext) -> RandomPolicy:
    """Policy factory for `policy: random`."""
    return RandomPolicy(ctx)


def scripted_policy(arg: str | None, ctx: PolicyContext) -> ScriptedPolicy:
    """Policy factory for `policy: scripted:package.module:function`."""
    fn = import_path(arg or "", what="scripted policy", where=ctx.where)
    if not callable(fn):
        raise ConfigError(f"{ctx.where}: '{arg}' is not callable; expected function(obs_dict, rng) -> action")
    return ScriptedPolicy(fn, ctx, name=arg or "scripted")


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
