"""Config of the `evaluate` stage: roll out a trained checkpoint in parallel envs and report returns.

Config only: no torch, no click, no gymnasium.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from amago_pipe.config.base import config
from amago_pipe.config.build import FieldError
from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.stages import StageConfig


@config
class EvaluateStageConfig(StageConfig):
    """Evaluate a trained policy: N episodes over parallel envs; report.json, summary.md and plots."""

    impl: ClassVar[str] = "amago_pipe.pipeline.stages.evaluate:EvaluateStage"

    env: EnvConfig
    """The environment to evaluate in (id or factory, n_envs, sync/async mode)."""
    episodes: int = 50
    """Number of episodes (spread evenly over the parallel envs)."""
    checkpoint: Literal["latest", "best"] | int = "latest"
    """Which weights of the train stage: `latest`, `best` (needs validation during training) or an epoch number."""
    train_stage: str | None = None
    """Name of the train stage to load from; null picks the one train stage among `needs`."""
    greedy: bool = True
    """Act with the most likely action (else sample from the policy)."""
    seed: int | None = None
    """Seed of the env resets and the policy; null derives it from the pipeline seed."""
    plots: bool = True
    """Write return plots (PNG) next to the report."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where the policy acts: `auto` picks a CUDA GPU when torch sees one (the envs step on the CPU either way)."""
    baseline: str | None = None
    """An earlier evaluate stage (in `needs`) to compare with: summary.md and report.json show its mean return
    as "before" beside this one's (e.g. before and after online fine-tuning)."""

    def __post_init__(self) -> None:
        if self.episodes < 1:
            raise FieldError("episodes", f"must be at least 1, got {self.episodes}")
        if isinstance(self.checkpoint, int) and self.checkpoint < 1:
            raise FieldError("checkpoint", f"epoch numbers start at 1, got {self.checkpoint}")
