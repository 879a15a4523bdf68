"""Config of online training (`online:` in a train stage), warm starts (`init_from:`) and partition schedules.

Config only: no torch, no numpy. The loop itself is `amago_pipe.train.online`.
"""

from __future__ import annotations

from dataclasses import field
from typing import Literal

from amago_pipe.config.base import config
from amago_pipe.config.build import FieldError
from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.policies import EpsilonGreedyConfig, ExplorationConfig, Schedule

Part = Literal["model", "actor", "critic"]
PARTS: tuple[Part, ...] = ("model", "actor", "critic")
"""What `init_from.parts` may name: the shared sequence model, the actor head, the critic heads (with PopArt)."""


def _default_exploration() -> ExplorationConfig:
    annealed = Schedule(start=1.0, end=0.05, steps=100_000)  # type: ignore[call-arg]
    return EpsilonGreedyConfig(epsilon=annealed, randomize=True)  # type: ignore[call-arg]


@config
class OnlineConfig:
    """Collect with the current policy every epoch into a FIFO partition while the learner trains on it."""

    env: EnvConfig
    """The environment the policy acts in (parallel envs: `n_envs`, `mode`); its spaces must match the store's."""
    exploration: ExplorationConfig = field(default_factory=_default_exploration)
    """How collected actions are perturbed; default: epsilon-greedy annealed 1.0 -> 0.05 over 100k timesteps,
    each env at its own random fraction of it (AMAGO's default, shorter)."""
    timesteps_per_epoch: int = 1000
    """Env timesteps (over all envs) collected before each epoch's updates; with `updates_per_epoch` this sets
    the update-to-data ratio (gradient steps per collected timestep). 0: the learner does not act; decoupled
    actors (`amago-pipe collect --follow RUN_DIR`) fill the partition and the learner waits for their data."""
    start_at_epoch: int = 0
    """First epoch that collects (epochs before it train on what the store already holds: offline-then-online)."""
    save_every: tuple[int, int] | None = None
    """Save long episodes in pieces of a random length in [low, high] timesteps (endless tasks); null: whole episodes."""
    partition: str = "fifo"
    """Store partition the collected episodes go to (bounded by `store: {partitions: {fifo: {capacity_timesteps}}}`)."""
    greedy: bool = False
    """Act with the most likely action before exploration (else sample from the policy)."""

    def __post_init__(self) -> None:
        if self.timesteps_per_epoch < 0:
            raise FieldError(
                "timesteps_per_epoch",
                f"must be >= 0 (0: only decoupled actors collect), got {self.timesteps_per_epoch}",
            )
        if self.start_at_epoch < 0:
            raise FieldError("start_at_epoch", f"must be >= 0, got {self.start_at_epoch}")
        if self.save_every is not None and not 1 <= self.save_every[0] <= self.save_every[1]:
            raise FieldError("save_every", f"expected [low, high] with 1 <= low <= high, got {list(self.save_every)}")
        if not self.partition or self.partition == "protected":
            raise FieldError("partition", "collect into a fifo partition (e.g. fifo), never into 'protected'")


@config
class InitFromConfig:
    """Start training from the weights of an earlier train stage (fine-tuning, offline-to-online)."""

    stage: str
    """A train stage of this pipeline; it must be in `needs`."""
    which: Literal["latest", "best"] | int = "latest"
    """`latest`, `best` (the epoch with the highest validation return; needs `validate:` there) or a kept epoch."""
    parts: list[Part] = field(default_factory=lambda: list(PARTS))
    """Which weights to copy; the rest start fresh."""

    def __post_init__(self) -> None:
        if not self.parts:
            raise FieldError("parts", f"name at least one of {', '.join(PARTS)}")


@config
class PartitionPhase:
    """From epoch `from_epoch` on, sample the partitions with these weights."""

    from_epoch: int
    """First epoch (counted from 0) of this phase."""
    weights: dict[str, float]
    """Mixture weights, like the stage's `partitions`."""

    def __post_init__(self) -> None:
        if self.from_epoch < 0:
            raise FieldError("from_epoch", f"must be >= 0, got {self.from_epoch}")
        if sum(self.weights.values()) <= 0 or min(self.weights.values(), default=0) < 0:
            raise FieldError("weights", f"weights must be >= 0 with a positive sum, got {self.weights}")
