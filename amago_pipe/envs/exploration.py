"""Exploration strategies (the EXPLORATION components) and the policy wrapper that applies them. numpy only.

An exploration perturbs policy-space actions once per step of all envs. Its clock is the number of collected
timesteps (over all envs), which drives annealed `Schedule`s; with `randomize`, each env's rate is scaled by a
multiplier drawn uniformly in [0, 1] at its episode start. `state_dict()` / `load_state_dict()` carry the
clock, the multipliers and the random generator, so an online run resumes its schedule exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from amago_pipe.actions import ActionCodec
from amago_pipe.config.policies import (
    BilevelEpsilonGreedyConfig,
    EpsilonGreedyConfig,
    ExplorationConfig,
    GaussianConfig,
    Scheduled,
)
from amago_pipe.envs.protocol import RolloutPolicy
from amago_pipe.errors import ConfigError
from amago_pipe.spec import DataSpec, action_mask_key, describe_action


def scheduled(value: Scheduled, timesteps: int) -> float:
    """The value of a constant or a linear `Schedule` after `timesteps` collected timesteps."""
    if isinstance(value, int | float):
        return float(value)
    if timesteps >= value.steps:
        return float(value.end)
    return float(value.start + (value.end - value.start) * timesteps / value.steps)


def random_actions(codec: ActionCodec, n: int, rng: np.random.Generator, valid: np.ndarray | None = None) -> np.ndarray:
    """n uniform policy-space actions: ids for discrete kinds (among the 1s of an action mask `valid (n, ids)`),
    uniform [-1, 1] for continuous."""
    spec = codec.spec
    if spec.kind == "discrete" and valid is not None:
        allowed = np.asarray(valid) > 0.5  # (n, ids)
        pick = np.floor(rng.random(n) * allowed.sum(-1))  # (n,): the how-many-th valid id
        return np.argmax(np.cumsum(allowed, axis=-1) > pick[:, None], axis=-1)
    if spec.kind == "discrete":
        return rng.integers(0, spec.n, size=n)
    if spec.kind == "multidiscrete":
        return rng.integers(0, np.asarray(spec.nvec), size=(n, len(spec.nvec)))
    if spec.kind == "multibinary":
        return rng.integers(0, 2, size=(n, *spec.shape))
    return rng.uniform(-1.0, 1.0, size=(n, *spec.shape)).astype(np.float32)


class Exploration:
    """Base of exploration strategies: the clock, the per-env multipliers, the state; subclasses `_perturb`."""

    def __init__(self, config: ExplorationConfig, spec: DataSpec, *, seed: int = 0, where: str = "exploration"):
        self.config = config
        self.codec = ActionCodec(spec.action)
        self.rng = np.random.default_rng(seed)
        self.timesteps = 0
        self.multiplier = np.ones(0)
        self.mask_key = action_mask_key(spec)
        self.valid: np.ndarray | None = None
        """The action mask (N, n) of the step being perturbed, when the data has one: random ids respect it."""

    def reset(self, n_envs: int) -> None:
        """Draw every env's multiplier (all ones unless `randomize`)."""
        self.multiplier = self._draw(n_envs)

    def reset_envs(self, done_mask: np.ndarray) -> None:
        """New episodes start in the envs of `done_mask`: draw their multipliers again."""
        self.multiplier[done_mask] = self._draw(int(done_mask.sum()))

    def _draw(self, n: int) -> np.ndarray:
        return self.rng.uniform(0.0, 1.0, size=n) if self.config.randomize else np.ones(n)

    def perturb(self, actions: np.ndarray, time: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
        """Perturbed actions (N, ...) for one step of all envs; `time` (N,) is each env's step in its rollout,
        `valid` (N, n) the action mask of discrete actions, if any."""
        if len(self.multiplier) != len(actions):
            self.reset(len(actions))
        self.valid = valid
        out = self._perturb(np.asarray(actions), np.asarray(time))
        self.timesteps += len(actions)
        return out

    def _perturb(self, actions: np.ndarray, time: np.ndarray) -> np.ndarray:
        return actions

    def rates(self, time: np.ndarray) -> np.ndarray:
        """Each env's current rate (epsilon or std) at rollout step `time` (N,), for logs."""
        return np.zeros(len(time))

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state: the clock, the multipliers and the random generator."""
        return {
            "timesteps": self.timesteps,
            "multiplier": self.multiplier.tolist(),
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state_dict()` output."""
        self.timesteps = int(state["timesteps"])
        self.multiplier = np.asarray(state["multiplier"], dtype=np.float64)
        self.rng.bit_generator.state = state["rng"]


class NoExploration(Exploration):
    """The policy's actions, unchanged (the clock still counts)."""


class EpsilonGreedy(Exploration):
    """With probability epsilon (times the env's multiplier) a step takes a uniformly random action."""

    config: EpsilonGreedyConfig

    def rates(self, time: np.ndarray) -> np.ndarray:
        return scheduled(self.config.epsilon, self.timesteps) * self.multiplier

    def _perturb(self, actions: np.ndarray, time: np.ndarray) -> np.ndarray:
        swap = self.rng.random(len(actions)) < self.rates(time)  # (N,); always draw both: a fixed random stream
        swap = swap.reshape(len(actions), *([1] * (actions.ndim - 1)))
        random = random_actions(self.codec, len(actions), self.rng, self.valid)
        return np.where(swap, random, actions).astype(actions.dtype)


class BilevelEpsilonGreedy(EpsilonGreedy):
    """Epsilon moves from `start` at a rollout's first step to `end` at step `horizon`; both may anneal."""

    config: BilevelEpsilonGreedyConfig  # type: ignore[assignment]

    def rates(self, time: np.ndarray) -> np.ndarray:
        cfg = self.config
        first, last = scheduled(cfg.start, self.timesteps), scheduled(cfg.end, self.timesteps)
        frac = np.clip(np.asarray(time, dtype=np.float64) / cfg.horizon, 0.0, 1.0)
        return (first + (last - first) * frac) * self.multiplier


class Gaussian(Exploration):
    """Adds N(0, std * multiplier) to continuous policy-space actions and clips them to [-1, 1]."""

    config: GaussianConfig

    def __init__(self, config: GaussianConfig, spec: DataSpec, *, seed: int = 0, where: str = "exploration"):
        if spec.action.kind != "continuous":
            raise ConfigError(
                f"{where}: gaussian exploration needs continuous actions; the env has "
                f"{describe_action(spec.action)} actions: use `{{type: egreedy, epsilon: ...}}`",
                path=where,
            )
        super().__init__(config, spec, seed=seed, where=where)

    def rates(self, time: np.ndarray) -> np.ndarray:
        return scheduled(self.config.std, self.timesteps) * self.multiplier

    def _perturb(self, actions: np.ndarray, time: np.ndarray) -> np.ndarray:
        std = self.rates(time).reshape(len(actions), *([1] * (actions.ndim - 1)))
        noisy = actions + self.rng.normal(0.0, 1.0, size=actions.shape) * std
        return np.clip(noisy, -1.0, 1.0).astype(np.float32)


def make_exploration(config: ExplorationConfig, spec: DataSpec, *, seed: int, where: str) -> Exploration:
    """Build the exploration a config names (a plugin must subclass `Exploration`)."""
    cls = config.implementation()
    if not (isinstance(cls, type) and issubclass(cls, Exploration)):
        raise ConfigError(
            f"{where}.type: '{config.type}' is not an exploration; a plugin must subclass "
            "amago_pipe.envs.exploration.Exploration and set `Config` to its ExplorationConfig subclass",
            path=f"{where}.type",
        )
    built: Exploration = cls(config, spec, seed=seed, where=where)
    return built


class ExploringPolicy:
    """A RolloutPolicy whose actions pass through an Exploration."""

    def __init__(self, inner: RolloutPolicy, exploration: Exploration):
        self.inner = inner
        self.exploration = exploration

    def reset(self, n_envs: int) -> None:
        self.inner.reset(n_envs)
        self.exploration.reset(n_envs)

    def reset_envs(self, done_mask: np.ndarray) -> None:
        self.inner.reset_envs(done_mask)
        self.exploration.reset_envs(done_mask)

    def act(self, obs: dict[str, np.ndarray], rl2: np.ndarray, time: np.ndarray) -> np.ndarray:
        key = self.exploration.mask_key
        valid = None if key is None else obs[key]
        return self.exploration.perturb(np.asarray(self.inner.act(obs, rl2, time)), time, valid)
