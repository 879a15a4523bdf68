"""Behaviour policies and exploration as typed components (`policy: {type: ...}`, `exploration: {type: ...}`).

Config only: no torch, no numpy, no gymnasium. The implementations live in `amago_pipe.envs` (policies,
exploration) and `amago_pipe.train.policy_loading` (checkpoint), imported when a policy is built.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, ClassVar

from amago_pipe.config.base import Component, config
from amago_pipe.config.build import FieldError
from amago_pipe.config.registries import EXPLORATION, POLICIES
from amago_pipe.errors import ConfigError

# ----------------------------------------------------------------------------------------------
# schedules and exploration
# ----------------------------------------------------------------------------------------------


@config
class Schedule:
    """A value annealed linearly over collected timesteps: `start` at 0, `end` from `steps` on."""

    start: float
    """Value at the first collected timestep."""
    end: float
    """Value from timestep `steps` on."""
    steps: int
    """Collected timesteps (over all envs) over which the value moves from `start` to `end`."""

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise FieldError("steps", f"must be at least 1, got {self.steps}")


Scheduled = float | Schedule
"""A constant, or a `Schedule` over collected timesteps."""


def _check_range(obj: object, name: str, low: float, high: float | None, what: str) -> None:
    value = getattr(obj, name)
    values = [value.start, value.end] if isinstance(value, Schedule) else [value]
    for v in values:
        if v < low or (high is not None and v > high):
            bound = f"[{low:g}, {high:g}]" if high is not None else f">= {low:g}"
            raise FieldError(name, f"{what} must be in {bound}, got {v:g}")


@config
class ExplorationConfig(Component):
    """How a behaviour policy's actions are perturbed while collecting; state (timesteps seen) is checkpointable."""

    registry = EXPLORATION

    randomize: bool = False
    """Scale the rate of each env by a multiplier drawn uniformly in [0, 1] at each episode start (as AMAGO does),
    so parallel envs explore at different rates."""


@config
class NoExplorationConfig(ExplorationConfig):
    """The policy's own actions, unchanged."""

    impl: ClassVar[str] = "amago_pipe.envs.exploration:NoExploration"
    type: str = "none"
    """Registered name or `package.module:Class` of a plugin."""


@config
class EpsilonGreedyConfig(ExplorationConfig):
    """With probability epsilon a step takes a uniformly random action (any action space)."""

    impl: ClassVar[str] = "amago_pipe.envs.exploration:EpsilonGreedy"
    type: str = "egreedy"
    """Registered name or `package.module:Class` of a plugin."""
    epsilon: Scheduled = 0.1
    """Probability of a random action: a number, or `{start, end, steps}` annealed over collected timesteps."""

    def __post_init__(self) -> None:
        _check_range(self, "epsilon", 0.0, 1.0, "an epsilon (a probability)")


@config
class BilevelEpsilonGreedyConfig(ExplorationConfig):
    """Epsilon-greedy whose epsilon also moves within each rollout: `start` at its first step, `end` at step
    `horizon` (both may be annealed over training) — more exploration early in a meta-RL rollout."""

    impl: ClassVar[str] = "amago_pipe.envs.exploration:BilevelEpsilonGreedy"
    type: str = "bilevel"
    """Registered name or `package.module:Class` of a plugin."""
    horizon: int
    """Steps of a rollout over which epsilon moves from `start` to `end` (usually the env's time limit)."""
    start: Scheduled = 1.0
    """Epsilon at a rollout's first step: a number or `{start, end, steps}` over collected timesteps."""
    end: Scheduled = 0.05
    """Epsilon at step `horizon` and after: a number or `{start, end, steps}` over collected timesteps."""

    def __post_init__(self) -> None:
        if self.horizon < 1:
            raise FieldError("horizon", f"must be at least 1, got {self.horizon}")
        _check_range(self, "start", 0.0, 1.0, "an epsilon (a probability)")
        _check_range(self, "end", 0.0, 1.0, "an epsilon (a probability)")


@config
class GaussianConfig(ExplorationConfig):
    """Gaussian noise added to continuous actions (in the policy's [-1, 1] units), then clipped."""

    impl: ClassVar[str] = "amago_pipe.envs.exploration:Gaussian"
    type: str = "gaussian"
    """Registered name or `package.module:Class` of a plugin."""
    std: Scheduled = 0.1
    """Standard deviation: a number or `{start, end, steps}` over collected timesteps."""

    def __post_init__(self) -> None:
        _check_range(self, "std", 0.0, None, "a standard deviation")


# ----------------------------------------------------------------------------------------------
# behaviour policies
# ----------------------------------------------------------------------------------------------


@config
class PolicyConfig(Component):
    """A behaviour policy for collecting data; plugins: `type: package.module:Factory` whose `Config` is a
    subclass of this class and `Factory(config, ctx)` returns a RolloutPolicy."""

    registry = POLICIES

    exploration: ExplorationConfig = field(default_factory=NoExplorationConfig)
    """How actions are perturbed: `{type: none|egreedy|bilevel|gaussian|package.module:Class, ...}`."""

    def label(self) -> str:
        """Short name for reports and episode sources, e.g. `cartpole-pd+egreedy`."""
        noise = "" if self.exploration.type == "none" else f"+{self.exploration.type}"
        return f"{self.type}{noise}"


@config
class RandomPolicyConfig(PolicyConfig):
    """Uniformly random actions (uniform over the Box bounds for continuous actions)."""

    impl: ClassVar[str] = "amago_pipe.envs.policies:RandomPolicy"
    type: str = "random"
    """Registered name or `package.module:Class` of a plugin."""


@config
class ScriptedPolicyConfig(PolicyConfig):
    """Your controller `function(obs_dict, rng) -> env-space action`, called for each env."""

    impl: ClassVar[str] = "amago_pipe.envs.policies:scripted_policy"
    type: str = "scripted"
    """Registered name or `package.module:Class` of a plugin."""
    function: str
    """`package.module:function`; its source file is part of the collect stage's fingerprint."""

    def __post_init__(self) -> None:
        if ":" not in self.function:
            raise FieldError("function", f"expected 'package.module:function', got '{self.function}'")

    def label(self) -> str:
        """Short name for reports and episode sources."""
        return super().label().replace("scripted", f"scripted:{self.function}", 1)


@config
class CartpolePdConfig(PolicyConfig):
    """CartPole-v1: a PD rule on the pole (returns 500 without exploration)."""

    impl: ClassVar[str] = "amago_pipe.envs.scripted:cartpole_pd_policy"
    type: str = "cartpole-pd"
    """Registered name or `package.module:Class` of a plugin."""


@config
class PendulumEnergyConfig(PolicyConfig):
    """Pendulum-v1: energy pumping, then PD at the top (mean return about -140)."""

    impl: ClassVar[str] = "amago_pipe.envs.scripted:pendulum_energy_policy"
    type: str = "pendulum-energy"
    """Registered name or `package.module:Class` of a plugin."""


@config
class TmazeWalkerConfig(PolicyConfig):
    """T-Maze: walk right, pick up or down at random at the junction (success 0.5)."""

    impl: ClassVar[str] = "amago_pipe.envs.builtin.behaviour:tmaze_walker_policy"
    type: str = "tmaze-walker"
    """Registered name or `package.module:Class` of a plugin."""


@config
class KeyDoorExplorerConfig(PolicyConfig):
    """Dark Key-To-Door: sweeps the room row by row from a random heading, with random moves."""

    impl: ClassVar[str] = "amago_pipe.envs.builtin.behaviour:key_door_explorer_policy"
    type: str = "key-door-explorer"
    """Registered name or `package.module:Class` of a plugin."""
    epsilon: float = 0.1
    """Per-step probability of a uniformly random move (part of the sweep, not `exploration`)."""

    def __post_init__(self) -> None:
        _check_range(self, "epsilon", 0.0, 1.0, "a probability")


@config
class AlchemyPlayerConfig(PolicyConfig):
    """Symbolic Alchemy: drinks the potions it has seen fix a wrong feature, else untried ones, and cashes in at the
    target; remembers what each colour did across the trials of an episode unless `remember: false`."""

    impl: ClassVar[str] = "amago_pipe.envs.builtin.behaviour:alchemy_player_policy"
    type: str = "alchemy-player"
    """Registered name or `package.module:Class` of a plugin."""
    remember: bool = True
    """Keep the colours' effects from trial to trial (episode returns ~2.8), or forget them at each trial (~1.5)."""
    epsilon: float = 0.0
    """Per-step probability of a uniformly random action instead (part of the player, not `exploration`)."""

    def __post_init__(self) -> None:
        _check_range(self, "epsilon", 0.0, 1.0, "a probability")


@config
class ReachSearcherConfig(PolicyConfig):
    """Meta-World reach (`metaworld_kshot`, goal hidden): climbs the reward's gradient to the goal; remembers the
    best-rewarded position across the attempts of an episode and returns there first, unless `remember: false`."""

    impl: ClassVar[str] = "amago_pipe.envs.metaworld_player:reach_searcher_policy"
    type: str = "reach-searcher"
    """Registered name or `package.module:Class` of a plugin."""
    remember: bool = True
    """Go back to the best position of earlier attempts (at 40-step attempts success ~0.3 then ~0.9), or search
    afresh in every attempt (~0.35 each)."""
    window: int = 6
    """Steps of (position, reward) the gradient is fitted on."""
    epsilon: float = 0.0
    """Per-step probability of a uniformly random move instead (part of the player, not `exploration`)."""

    def __post_init__(self) -> None:
        _check_range(self, "epsilon", 0.0, 1.0, "a probability")
        if self.window < 4:
            raise FieldError("window", f"the fit needs at least 4 points (3-D gradient + offset), got {self.window}")


@config
class BabyAIBotConfig(PolicyConfig):
    """BabyAI levels: minigrid's planning bot (`minigrid.utils.baby_ai_bot`), which reads the level's layout and
    instruction from the env (mode: sync) and solves nearly every level; an expert for demonstrations."""

    impl: ClassVar[str] = "amago_pipe.envs.babyai_player:babyai_bot_policy"
    type: str = "babyai-bot"
    """Registered name or `package.module:Class` of a plugin."""
    epsilon: float = 0.0
    """Per-step probability of a uniformly random action instead; the bot replans from where that leaves it."""

    def __post_init__(self) -> None:
        _check_range(self, "epsilon", 0.0, 1.0, "a probability")


@config
class CheckpointPolicyConfig(PolicyConfig):
    """A trained policy: a train stage's `latest`/`best`/epoch weights, or a policy file."""

    impl: ClassVar[str] = "amago_pipe.train.policy_loading:checkpoint_policy"
    type: str = "checkpoint"
    """Registered name or `package.module:Class` of a plugin."""
    stage: str | None = None
    """A train stage of this pipeline (it must be in the collecting stage's `needs`)."""
    which: str | int = "latest"
    """`latest`, `best` (needs `validate:` in the train stage) or an epoch number."""
    path: str | None = None
    """A `.safetensors` policy file instead of a stage."""
    greedy: bool = False
    """Act with the most likely action (else sample from the policy)."""

    def __post_init__(self) -> None:
        if (self.stage is None) == (self.path is None):
            raise FieldError("stage", "give a train `stage:` (with `which:`) or a policy file `path:`, exactly one")
        if isinstance(self.which, str) and self.which not in ("latest", "best"):
            raise FieldError("which", f"expected latest, best or an epoch number, got '{self.which}'")

    def label(self) -> str:
        """Short name for reports and episode sources."""
        what = self.path if self.path else f"{self.stage}:{self.which}"
        return super().label().replace("checkpoint", f"checkpoint:{what}", 1)


def policy_from_text(text: str) -> dict[str, Any]:
    """The command line's short form as policy config data.

    `random`, `cartpole-pd`, ... -> `{type: NAME}`; `scripted:pkg.mod:fn` -> `{type: scripted, function: ...}`;
    `checkpoint:STAGE[:latest|best|N]` or `checkpoint:FILE.safetensors` -> `{type: checkpoint, ...}`;
    `key-door-explorer:0.2` -> `{type: key-door-explorer, epsilon: 0.2}`; a `pkg.mod:Factory` plugin as is.
    """
    name, sep, arg = text.partition(":")
    if sep and "." in name:
        return {"type": text}
    if not sep:
        return {"type": name}
    if name == "scripted":
        return {"type": name, "function": arg}
    if name == "checkpoint":
        if arg.endswith(".safetensors"):
            return {"type": name, "path": arg}
        stage, _, which = arg.partition(":")
        return {"type": name, "stage": stage, "which": int(which) if which.isdigit() else (which or "latest")}
    if name == "key-door-explorer":
        try:
            return {"type": name, "epsilon": float(arg)}
        except ValueError as e:
            raise ConfigError(f"policy: '{text}': expected a probability after ':', e.g. key-door-explorer:0.2") from e
    raise ConfigError(f"policy: '{text}': '{name}' takes no ':' argument; write '{name}'")


EXPLORATION_MAIN_FIELD = {"egreedy": "epsilon", "gaussian": "std", "bilevel": "horizon"}
"""The field `TYPE:VALUE` sets in the command line's short form of an exploration component."""


def exploration_from_text(text: str) -> dict[str, Any]:
    """`none`, `egreedy:0.3`, `gaussian:0.2`, `bilevel:200` (the horizon) as exploration config data."""
    name, sep, value = text.partition(":")
    if not sep:
        return {"type": name}
    main = EXPLORATION_MAIN_FIELD.get(name)
    if main is None:
        raise ConfigError(
            f"exploration: '{text}': '{name}' takes no ':' value (known: none, egreedy:P, gaussian:STD, bilevel:HORIZON)"
        )
    try:
        number: float | int = int(value) if main == "horizon" else float(value)
    except ValueError as e:
        raise ConfigError(f"exploration: '{text}': '{value}' is not a number, e.g. {name}:0.3") from e
    return {"type": name, main: number}


def policy_config(policy: str | dict[str, Any], *, where: str = "policy") -> PolicyConfig:
    """A PolicyConfig built strictly from config data or the short text form (ConfigError lists every problem)."""
    from amago_pipe.config.build import build_strict

    data = policy_from_text(policy) if isinstance(policy, str) else policy
    built = build_strict(PolicyConfig, data, where)
    assert isinstance(built, PolicyConfig)
    return built
