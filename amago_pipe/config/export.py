"""Config of the `export` stage: a self-contained, verified artifact of a trained policy.

Config only: no torch. The implementation is `amago_pipe.pipeline.stages.export`.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from amago_pipe.config.base import config
from amago_pipe.config.build import FieldError
from amago_pipe.config.stages import StageConfig


@config
class ExportStageConfig(StageConfig):
    """Export a train stage's policy: weights, TorchScript/ONNX step programs with explicit memory, a manifest and
    a model card, verified against the original agent; written to `artifact/` in the stage folder."""

    impl: ClassVar[str] = "amago_pipe.pipeline.stages.export:ExportStage"

    train_stage: str | None = None
    """The train stage to export; null picks the one train stage upstream (directly or behind an evaluate stage)."""
    checkpoint: Literal["latest", "best"] | int = "latest"
    """Which policy of the train stage: `latest`, `best` (needs validation during training) or an epoch number."""
    forms: list[Literal["torchscript", "torch_export", "onnx"]] | None = None
    """Portable programs to write; null: TorchScript and torch.export, and ONNX when the `onnx` extra is installed."""
    verify_episodes: int = 4
    """Recorded episodes (the longest of the train stage's partitions) replayed through every form."""
    verify_steps: int | None = None
    """Steps of the replay; null: twice the context (at least the longest episode, at most 2,000)."""
    tolerance: float = 1e-3
    """Largest relative difference of an exported form's actions from the original agent's."""

    def __post_init__(self) -> None:
        if self.verify_episodes < 1:
            raise FieldError("verify_episodes", f"must be at least 1, got {self.verify_episodes}")
        if self.verify_steps is not None and self.verify_steps < 1:
            raise FieldError("verify_steps", f"must be at least 1 (or null), got {self.verify_steps}")
        if self.tolerance < 0:
            raise FieldError("tolerance", f"must be >= 0, got {self.tolerance}")
