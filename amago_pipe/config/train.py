"""Config of the `train` stage: data, schedule, logging, validation; its `agent:` is in `config/agent.py`.

Hyperparameters only (shapes come from the store's DataSpec). Config only: no torch, no click.
"""

from __future__ import annotations

import math
from dataclasses import field
from typing import ClassVar, Literal

from amago_pipe.config.agent import AgentConfig, MultiTaskConfig, at_least
from amago_pipe.config.base import config
from amago_pipe.config.build import FieldError
from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.nets import ModelConfig
from amago_pipe.config.online import InitFromConfig, OnlineConfig, PartitionPhase
from amago_pipe.config.relabel import RelabelConfig
from amago_pipe.config.stages import StageConfig

__all__ = ["AgentConfig", "LoggingConfig", "MultiTaskConfig", "TrainStageConfig", "ValidateConfig"]


# ----------------------------------------------------------------------------------------------
# logging and validation
# ----------------------------------------------------------------------------------------------


@config
class LoggingConfig:
    """Where training metrics go: `metrics.jsonl` always, wandb when enabled, a console line, plots."""

    wandb: Literal["disabled", "offline", "online"] = "disabled"
    """Weights & Biases mode: `offline` logs locally (sync later with `wandb sync`), `online` needs network."""
    project: str = "amago-pipe"
    """wandb project."""
    entity: str | None = None
    """wandb entity (team or user); null uses your default."""
    group: str | None = None
    """wandb run group; null uses the pipeline name."""
    log_interval: int = 50
    """Gradient steps between two `train/` lines in metrics.jsonl."""
    console_interval: float = 2.0
    """Seconds between two refreshes of the live progress line."""
    plots: bool = True
    """Write learning-curve PNGs (`plots/`) at the end of training."""

    def __post_init__(self) -> None:
        at_least(self, 1, "log_interval")
        if self.console_interval <= 0:
            raise FieldError("console_interval", f"must be positive, got {self.console_interval}")


@config
class ValidateConfig:
    """Rollouts of the current policy during training; the best validation (by `rank_by`) is kept as the `best`
    checkpoint."""

    env: EnvConfig
    """The environment to validate in."""
    episodes: int = 10
    """Episodes per validation."""
    every: int = 5
    """Validate every this many epochs (and after the last one)."""
    greedy: bool = True
    """Act with the most likely action (else sample from the policy)."""
    patience: int | None = None
    """Stop training early once this many validations in a row have not beaten the best one (its checkpoint is
    kept as `best`; validations before online collection or the last `partition_schedule` phase starts do not
    count); null trains every epoch."""
    rank_by: Literal["return", "success"] = "return"
    """What `best` and `patience` rank validations by, over the training tasks (held-out tasks are reported, never
    selected on): the mean return, or the success rate (envs that report success, e.g. Meta-World, or MiniGrid
    with `wrappers: [{type: success_on_reward}]`) where a shaped return does not track success."""

    def __post_init__(self) -> None:
        at_least(self, 1, "episodes", "every", "patience")


# ----------------------------------------------------------------------------------------------
# the stage
# ----------------------------------------------------------------------------------------------


@config
class TrainStageConfig(StageConfig):
    """Train an agent on store partitions, offline or while collecting online, with exact checkpoint resume."""

    impl: ClassVar[str] = "amago_pipe.pipeline.stages.train:TrainStage"

    partitions: dict[str, float] = field(default_factory=lambda: {"protected": 1.0})
    """Store partitions to sample from and their mixture weights, e.g. `{protected: 0.25, fifo: 0.75}`."""
    max_seq_len: int = 64
    """Timesteps per training window (the model sees max_seq_len + 1 observations)."""
    batch_size: int = 24
    """Windows per gradient step (per process; each of grad_accum micro-batches has this size)."""
    sample_mode: Literal["timesteps", "episodes", "starts"] = "timesteps"
    """Window placement: uniform over timesteps, over episodes, or over window starts (AMAGO's sampler)."""
    sample_balance: Literal["none", "task"] = "none"
    """`task`: every task (the episodes' env name) of a partition gets the same share of its windows, however
    much data each has (multi-task runs); `none`: in proportion to the data."""
    epochs: int = 20
    """Epochs to train; an epoch is `updates_per_epoch` gradient steps followed by checkpoints and logs."""
    updates_per_epoch: int = 500
    """Gradient steps per epoch."""
    lr: float = 3e-4
    """Peak learning rate of AdamW."""
    warmup_steps: int = 500
    """Linear learning-rate warmup, in gradient steps."""
    model_lr_scale: float | Literal["auto"] = "auto"
    """The sequence model's learning rate (and the history head's) relative to `lr`. `auto`: 10 for the recurrent
    trajectory encoders (`gru`, `mamba`), 1 otherwise (`amago_pipe.config.auto`; docs/recipes.md: "The sequence
    model's learning rate")."""
    weight_decay: float = 1e-4
    """AdamW weight decay (not applied to biases and norms)."""
    grad_clip: float = 1.0
    """Clip the global gradient norm to this value (0 disables clipping)."""
    grad_accum: int = 1
    """Micro-batches accumulated into each gradient step."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """Shared sequence model: timestep encoder and trajectory encoder."""
    agent: AgentConfig = field(default_factory=AgentConfig)
    """Learning update (`type: agent | multitask | package.module:Class`)."""
    ckpt_interval: int = 5
    """Keep a full training checkpoint every this many epochs (`latest` is written after every epoch)."""
    keep_last: int = 3
    """How many interval checkpoints and per-epoch policy weights to keep (older ones are deleted)."""
    deterministic: bool = False
    """Deterministic mode: deterministic kernels and one CPU thread, so a resumed run ends bit-identical."""
    seed: int | None = None
    """Seed of weights and sampling; null derives it from the pipeline seed."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Device of a single-process run (`accelerate launch` chooses for multi-process runs)."""
    mixed_precision: Literal["no", "bf16"] = "no"
    """bf16 autocast: a CUDA GPU, or a CPU with AMX or AVX512-BF16 (refused on other CPUs, where it is emulated)."""
    compile: bool = False
    """Compile the update with torch.compile (GPU; slow to start)."""
    num_threads: int | None = None
    """torch CPU threads; null keeps torch's default (1 in deterministic mode)."""
    prefetch: int = 4
    """Batches prepared ahead by the background loader thread."""
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    """metrics.jsonl, wandb, console and plots."""
    validate: ValidateConfig | None = None
    """Validation rollouts every few epochs with best-checkpoint tracking; null disables them."""
    online: OnlineConfig | None = None
    """Collect with the current policy every epoch into a fifo partition (online / offline-to-online); null: offline."""
    init_from: InitFromConfig | None = None
    """Start from the weights of another train stage (in `needs`), e.g. offline pretraining before online."""
    partition_schedule: list[PartitionPhase] = field(default_factory=list)
    """Phases of partition weights by epoch, e.g. `[{from_epoch: 10, weights: {protected: 0.25, fifo: 0.75}}]`."""
    relabel: RelabelConfig | None = None
    """Relabel a fraction `ratio` of the sampled windows in hindsight (goals from inside each window; the same
    strategies as the `relabel` stage; its `seed` is unused: windows follow the sampling stream); null: none."""

    def __post_init__(self) -> None:
        at_least(self, 1, "max_seq_len", "batch_size", "epochs", "updates_per_epoch", "grad_accum")
        at_least(self, 1, "ckpt_interval", "keep_last", "num_threads", "prefetch")
        at_least(self, 0, "warmup_steps", "weight_decay", "grad_clip")
        if not self.partitions:
            raise FieldError("partitions", "give at least one partition, e.g. {protected: 1.0}")
        for name, weight in self.partitions.items():
            if weight < 0 or not math.isfinite(weight):
                raise FieldError(f"partitions.{name}", f"mixture weights must be >= 0, got {weight}")
        if sum(self.partitions.values()) <= 0:
            raise FieldError("partitions", f"mixture weights sum to 0 ({self.partitions}); give one a positive weight")
        if not (0.0 < self.lr < 1.0):
            raise FieldError("lr", f"must be in (0, 1), got {self.lr}")
        if self.model_lr_scale != "auto" and not (0.0 < self.model_lr_scale <= 100.0):  # NaN fails too
            raise FieldError("model_lr_scale", f"must be 'auto' or in (0, 100], got {self.model_lr_scale}")
        _check_online(self)

    def weights_at(self, epoch: int) -> dict[str, float]:
        """Partition mixture weights of `epoch` (0-based): the last schedule phase started by then, else `partitions`."""
        started = [p for p in self.partition_schedule if p.from_epoch <= epoch]
        return dict(max(started, key=lambda p: p.from_epoch).weights) if started else dict(self.partitions)


def _check_online(cfg: TrainStageConfig) -> None:
    starts = [p.from_epoch for p in cfg.partition_schedule]
    if starts != sorted(set(starts)):
        raise FieldError("partition_schedule", f"phases must have increasing from_epoch, got {starts}")
    if cfg.online is None:
        return
    used = set(cfg.partitions).union(*(p.weights for p in cfg.partition_schedule))
    if cfg.online.partition not in used:
        raise FieldError(
            "online.partition",
            f"'{cfg.online.partition}' gets no weight in `partitions` ({cfg.partitions}) or `partition_schedule`, "
            f"so what is collected would never be trained on; add e.g. `partitions: {{{cfg.online.partition}: 1.0}}`",
        )
    if cfg.online.start_at_epoch >= cfg.epochs:
        raise FieldError("online.start_at_epoch", f"{cfg.online.start_at_epoch} is not before `epochs` ({cfg.epochs})")
