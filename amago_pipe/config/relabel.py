"""Config of hindsight relabeling: strategies and goal rewards as typed components, the `relabel` stage, and
the sample-time `relabel:` section of a train stage.

Config only: no numpy, no torch. Implementations live in `amago_pipe.relabel` (and the env's own
`compute_reward` in `amago_pipe.envs.goal_reward`).
"""

from __future__ import annotations

from dataclasses import field
from typing import ClassVar

from amago_pipe.config.base import Component, config
from amago_pipe.config.build import FieldError
from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.registries import GOAL_REWARDS, RELABELERS
from amago_pipe.config.stages import StageConfig

# ----------------------------------------------------------------------------------------------
# strategies
# ----------------------------------------------------------------------------------------------

POOL_SIZE = 10_000
"""Achieved goals kept for strategies that draw goals from other episodes (`random`, plugins)."""


@config
class StrategyConfig(Component):
    """Where the new goal of a relabeled copy comes from; plugins subclass `amago_pipe.relabel.Relabeler`."""

    registry = RELABELERS


@config
class FinalConfig(StrategyConfig):
    """One copy per episode, its goal the goal achieved at the last step (single goals)."""

    impl: ClassVar[str] = "amago_pipe.relabel.strategies:Final"
    type: str = "final"
    """Registered name or `package.module:Class` of a plugin."""


@config
class FutureConfig(StrategyConfig):
    """k copies per episode, their goals achieved at random steps after the first action (single goals)."""

    impl: ClassVar[str] = "amago_pipe.relabel.strategies:Future"
    type: str = "future"
    """Registered name or `package.module:Class` of a plugin."""
    k: int = 4
    """Relabeled copies per episode."""

    def __post_init__(self) -> None:
        if self.k < 1:
            raise FieldError("k", f"must be at least 1, got {self.k}")


@config
class EpisodeGoalsConfig(FutureConfig):
    """k copies per episode, their goals achieved at random steps of the episode, its start included."""

    impl: ClassVar[str] = "amago_pipe.relabel.strategies:EpisodeGoals"
    type: str = "episode"
    """Registered name or `package.module:Class` of a plugin."""


@config
class RandomGoalsConfig(FutureConfig):
    """k copies per episode, their goals achieved in other episodes of the source data (single goals)."""

    impl: ClassVar[str] = "amago_pipe.relabel.strategies:RandomGoals"
    type: str = "random"
    """Registered name or `package.module:Class` of a plugin."""
    pool: int = POOL_SIZE
    """Achieved goals kept (a uniform reservoir sample of the source data) to draw from."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pool < 1:
            raise FieldError("pool", f"must be at least 1, got {self.pool}")


@config
class NoRelabelConfig(StrategyConfig):
    """Episodes copied unchanged (the control of the other strategies)."""

    impl: ClassVar[str] = "amago_pipe.relabel.strategies:NoRelabel"
    type: str = "none"
    """Registered name or `package.module:Class` of a plugin."""


@config
class SomeGoalsConfig(StrategyConfig):
    """A random number (1..k) of leading goals of a goal sequence replaced by goals achieved later, in order."""

    impl: ClassVar[str] = "amago_pipe.relabel.strategies:SomeGoals"
    type: str = "some"
    """Registered name or `package.module:Class` of a plugin."""


@config
class AllGoalsConfig(StrategyConfig):
    """The whole goal sequence replaced by k goals achieved later in the episode, in time order."""

    impl: ClassVar[str] = "amago_pipe.relabel.strategies:AllGoals"
    type: str = "all"
    """Registered name or `package.module:Class` of a plugin."""


# ----------------------------------------------------------------------------------------------
# goal rewards
# ----------------------------------------------------------------------------------------------


@config
class GoalRewardConfig(Component):
    """How the reward of a step under a new goal is recomputed; plugins: `type: package.module:factory` whose
    `factory(config, where=...)` returns `compute_reward(achieved, desired, info)`."""

    registry = GOAL_REWARDS

    success_reward: float = 1.0
    """A step reaches its goal when its recomputed reward is at least this (gymnasium-robotics' sparse rewards
    are 0 on success and -1 otherwise: set 0)."""


@config
class ThresholdRewardConfig(GoalRewardConfig):
    """`success_reward` when the achieved goal is within `distance` (Euclidean) of the desired one, else
    `failure_reward`."""

    impl: ClassVar[str] = "amago_pipe.relabel.rewards:threshold_reward"
    type: str = "threshold"
    """Registered name or `package.module:Class` of a plugin."""
    distance: float = 0.05
    """Largest distance that counts as reaching the goal."""
    failure_reward: float = 0.0
    """Reward of a step that does not reach the goal."""

    def __post_init__(self) -> None:
        if self.distance < 0:
            raise FieldError("distance", f"must be >= 0, got {self.distance}")
        if self.failure_reward >= self.success_reward:
            raise FieldError(
                "failure_reward", f"must be below success_reward ({self.success_reward:g}), got {self.failure_reward:g}"
            )


@config
class EnvRewardConfig(GoalRewardConfig):
    """The env's own `compute_reward(achieved_goal, desired_goal, info)` (gymnasium-robotics' GoalEnv API)."""

    impl: ClassVar[str] = "amago_pipe.envs.goal_reward:env_reward"
    type: str = "env"
    """Registered name or `package.module:Class` of a plugin."""
    env: EnvConfig
    """The env to build (once, not stepped), e.g. `{id: amago_pipe/GoalMaze-v0, kwargs: {size: 9}}`."""


@config
class FunctionRewardConfig(GoalRewardConfig):
    """A `package.module:function` with the signature `compute_reward(achieved, desired, info) -> (N,)`."""

    impl: ClassVar[str] = "amago_pipe.relabel.rewards:function_reward"
    type: str = "function"
    """Registered name or `package.module:Class` of a plugin."""
    function: str
    """Import path of the reward function, called on batches (N, *G) of goal pairs."""

    def __post_init__(self) -> None:
        if ":" not in self.function:
            raise FieldError("function", f"'{self.function}' is not an import path; expected 'package.module:name'")


# ----------------------------------------------------------------------------------------------
# relabeling, as a stage and at sample time
# ----------------------------------------------------------------------------------------------


@config
class RelabelConfig:
    """What to relabel with: a strategy, a goal reward, the goal fields, and how episodes end."""

    strategy: StrategyConfig = field(default_factory=FutureConfig)
    """`{type: final|future|episode|random, k}` for single goals, `{type: none|some|all}` for goal sequences."""
    reward: GoalRewardConfig = field(default_factory=ThresholdRewardConfig)
    """`{type: threshold|env|function, ...}`: how rewards under the new goals are recomputed."""
    ratio: float = 1.0
    """Fraction of episodes (stage) or sampled windows (train) that are relabeled."""
    achieved_key: str = "achieved_goal"
    """Observation key or goal field holding the achieved goal (T+1, *G)."""
    desired_key: str = "desired_goal"
    """Observation key or goal field holding the desired goal (*G) or goal sequence (k, *G); every copy of it
    (observation and goal field) is rewritten."""
    mask_value: float = -1.0
    """Value written over the goals of a sequence that were already reached."""
    terminate_on_success: bool = True
    """A relabeled episode ends (terminated) at the step that reaches its (last) goal, as the env would have;
    false keeps lengths and the env's own terminals (e.g. gymnasium-robotics, which never terminates)."""
    seed: int | None = None
    """Seed of the goal choices; null derives it from the pipeline seed and the stage name."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.ratio <= 1.0:
            raise FieldError("ratio", f"must be in [0, 1] (a fraction), got {self.ratio:g}")


@config
class RelabelStageConfig(StageConfig, RelabelConfig):
    """Relabel the episodes of source partitions in hindsight and write the copies to a target partition."""

    impl: ClassVar[str] = "amago_pipe.pipeline.stages.relabel:RelabelStage"

    sources: list[str] = field(default_factory=lambda: ["protected"])
    """Store partitions to read (left untouched)."""
    target: str = "relabeled"
    """Store partition the relabeled copies are written to (a re-run replaces what this stage wrote)."""

    def __post_init__(self) -> None:
        RelabelConfig.__post_init__(self)
        if not self.sources:
            raise FieldError("sources", "name at least one partition to relabel, e.g. [protected]")
        if self.target in self.sources:
            raise FieldError(
                "target", f"'{self.target}' is also a source; write the copies to another partition, e.g. relabeled"
            )
