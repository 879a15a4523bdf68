"""Config of the `train` stage and of the learning updates it runs (`agent`, `multitask`).

Hyperparameters only (shapes come from the store's DataSpec). Config only: no torch, no click.
"""

from __future__ import annotations

import math
from dataclasses import field, fields
from typing import Any, ClassVar, Literal, cast

from amago_pipe.config.base import Component, config
from amago_pipe.config.build import FieldError
from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.nets import ActorHeadConfig, CriticHeadConfig, ModelConfig
from amago_pipe.config.online import InitFromConfig, OnlineConfig, PartitionPhase
from amago_pipe.config.registries import AGENTS
from amago_pipe.config.relabel import RelabelConfig
from amago_pipe.config.stages import StageConfig

RECURRENT_LR_SCALE = 10.0
"""`model_lr_scale: auto` for the recurrent trajectory encoders: at 10x recall under distractor noise went from chance
to 1.0 with a GRU (3 of 3 seeds) and Mamba (1 of 5; every seed by 6x the updates), T-Maze corridor 100 with Mamba from
0 to 1.0 (docs/recipes.md: "The sequence model's learning rate")."""


def _at_least(obj: object, minimum: float, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if value is not None and not value >= minimum:  # NaN fails too
            raise FieldError(name, f"must be at least {minimum}, got {value}")


def _discount(name: str, value: float) -> None:
    if not 0.0 < value < 1.0:
        raise FieldError(name, f"discount factors must be in (0, 1), got {value}")


def _check_filter_scale(cap: float | None, *, normalize: bool) -> None:
    if cap is None:
        return
    if not (cap > 0.0 and math.isfinite(cap)):
        raise FieldError("filter_scale_max", f"must be a positive number or null, got {cap}")
    if normalize:
        raise FieldError("filter_scale_max", "has no effect with filter_normalize: true; set one of them")


_EXP_ONLY = ("filter_beta", "filter_max_weight", "filter_scale_max", "filter_normalize")
_FILTER_READERS = {**dict.fromkeys(_EXP_ONLY, "exp"), "leak_slope": "leaky"}
"""Agent fields read by one behaviour-cloning filter only (`fbc_filter`), and that filter."""


# ----------------------------------------------------------------------------------------------
# agents
# ----------------------------------------------------------------------------------------------


@config
class AgentConfig(Component):
    """AMAGO's update: multi-gamma actor-critic over one shared sequence model (`type: agent`)."""

    registry = AGENTS
    impl: ClassVar[str] = "amago_pipe.agents.agent:Agent"

    type: str = "agent"
    """Registered name (`agent`, `multitask`) or `package.module:Class` of a plugin."""
    gamma: float = 0.999
    """Discount factor of the policy that acts (the last of the multi-gamma outputs)."""
    gammas: tuple[float, ...] = (0.9, 0.99)
    """Extra discount factors trained alongside `gamma` (multi-gamma); [] trains `gamma` alone."""
    actor: ActorHeadConfig = field(default_factory=ActorHeadConfig)
    """Actor head: one action distribution per discount factor."""
    critic: CriticHeadConfig = field(default_factory=lambda: CriticHeadConfig(num_critics=4))  # type: ignore[call-arg]
    """Critic head: an ensemble of `num_critics` critics, one output per discount factor."""
    num_critics_td: int = 2
    """Critics drawn (with replacement, per sample) from the ensemble for each TD target."""
    td_reduce: Literal["auto", "min", "mean"] = "auto"
    """How the drawn critics are combined: `min` (clipped double-Q), `mean`, or `auto` (min when online_coeff > 0)."""
    online_coeff: float = 1.0
    """Weight of the deterministic policy gradient term (through the reparameterised / probability-weighted action)."""
    offline_coeff: float = 1.0
    """Weight of the advantage-filtered behaviour cloning term (1 with `exp`: see docs/recipes.md)."""
    fbc_filter: Literal["binary", "exp", "leaky"] = "exp"
    """Behaviour-cloning filter of the advantage A: `binary` 1[A > 0], `exp` exp(beta A), `leaky` 1 or leak_slope."""
    filter_beta: float = 1.0
    """Inverse temperature of the `exp` filter; advantages are PopArt-normalised (raw / sigma), or as
    `filter_scale_max` / `filter_normalize` set."""
    filter_max_weight: float = 20.0
    """Upper clip of the `exp` filter's weights."""
    filter_scale_max: float | None = None
    """`exp` filter: cap, in scaled-reward units, on the value scale advantages are divided by (raw advantage /
    min(PopArt's sigma, this)). With dense rewards sigma keeps growing as training propagates the values, which
    flattens the filter back towards the data's actions; 10 is one large (99th-percentile) reward under
    `reward_multiplier: auto`. null: PopArt's sigma; no effect without PopArt (docs/recipes.md: "Long offline runs")."""
    filter_normalize: bool = False
    """`exp` filter: divide advantages by their batch standard deviation first (a scale-free temperature)."""
    leak_slope: float = 0.1
    """Weight of actions with A <= 0 under the `leaky` filter."""
    reward_multiplier: float | Literal["auto"] = "auto"
    """Rewards are multiplied by this in the losses (keeps PopArt's value scale comfortable). `auto`: 10 / the
    99th percentile of |reward| over the training data's nonzero rewards (10 for rewards of size 1), fixed at the
    first update and kept in checkpoints (docs/recipes.md: "Reward scale")."""
    n_step: int = 4
    """TD targets over n steps of rewards (1: AMAGO's one-step target); stops at terminals, bootstraps at padding or the window end. See docs/recipes.md ("Why n-step targets") for why 4 is the default."""
    nstep_correction: Literal["none", "tree_backup"] = "none"
    """Off-policy correction of n-step targets: `none` sums the data's rewards as they are (values lean towards the behaviour policy: conservative offline), `tree_backup` weights each later reward by the target policy's probability of the data actions leading to it (discrete kinds only; see docs/recipes.md: "The memory recipe")."""
    critic_loss: Literal["mse", "huber"] = "mse"
    """Regression loss of PopArt-normalised TD errors: `mse`, or `huber` (linear beyond 1: a surprising target moves the critics by a bounded step)."""
    conservative_coeff: float = 0.0
    """Discrete actions: weight of a conservative critic term (CQL(H), Kumar et al. 2020), the log-sum-exp of
    every action's normalised Q minus the data action's, which lowers the values of actions the data never
    takes in a state; offline, their overestimated values otherwise attract the policy gradient. 0: off."""
    tau: float = 0.003
    """Polyak rate of the target actor and critics."""
    policy_average: float = 0.01
    """Polyak rate of an average of the sequence model and actor weights (0.01: about the last 100 updates) that
    validation, the saved policy files (evaluate, export, `collect --follow`) and warm starts (`init_from`) act
    with: it swings far less from update to update than the live weights. Updates and in-process online
    collection use the live weights. 0: everything acts with the live weights."""
    popart: bool = True
    """Normalise value targets and outputs with PopArt (per discount factor)."""
    popart_beta: float = 5e-4
    """PopArt's statistics update rate."""
    use_target_actor: bool = True
    """Sample the next action of TD targets from the Polyak-averaged actor (else the online actor)."""
    actor_trains_model: bool | float = True
    """Share of the actor's loss gradient that reaches the sequence model: true (all, as AMAGO), false (none: the
    model learns from the critic alone, as in SAC-AE / DrQ) or a number in [0, 1]."""
    history_coeff: float = 0.3
    """Weight of the history objective: from its state at step t the sequence model predicts the observation
    features of a random earlier step of the window (docs/recipes.md: "The history objective"); 1 for long or noisy
    memory tasks, 0: off."""
    value_samples: int = 4
    """Continuous actions: policy samples averaged to estimate V(s) = E_pi Q(s, a) for the advantage."""
    target_samples: int = 1
    """Continuous actions: next-action samples averaged in each TD target."""

    def __post_init__(self) -> None:
        _discount("gamma", self.gamma)
        for i, g in enumerate(self.gammas):
            _discount(f"gammas.{i}", g)
        if self.gamma in self.gammas:
            raise FieldError("gammas", f"lists the main gamma {self.gamma} again; give only the extra ones")
        _at_least(self, 1, "num_critics_td", "value_samples", "target_samples", "n_step")
        if not 0.0 <= self.actor_trains_model <= 1.0:
            raise FieldError(
                "actor_trains_model", f"must be true, false or a number in [0, 1], got {self.actor_trains_model}"
            )
        _at_least(
            self,
            0.0,
            "online_coeff",
            "offline_coeff",
            "filter_beta",
            "leak_slope",
            "conservative_coeff",
            "history_coeff",
        )
        _check_filter_scale(self.filter_scale_max, normalize=self.filter_normalize)
        if self.online_coeff == 0.0 and self.offline_coeff == 0.0:
            raise FieldError("offline_coeff", "online_coeff and offline_coeff are both 0: the actor would not learn")
        if not 0.0 < self.tau <= 1.0:
            raise FieldError("tau", f"must be in (0, 1], got {self.tau}")
        if not 0.0 <= self.policy_average <= 1.0:
            raise FieldError("policy_average", f"must be in [0, 1] (0 = off), got {self.policy_average}")
        if not 0.0 < self.popart_beta < 1.0:
            raise FieldError("popart_beta", f"must be in (0, 1), got {self.popart_beta}")
        if self.reward_multiplier != "auto" and not (
            self.reward_multiplier > 0.0 and math.isfinite(self.reward_multiplier)
        ):
            raise FieldError("reward_multiplier", f"must be a positive number or 'auto', got {self.reward_multiplier}")

    @classmethod
    def no_effect(cls, given: dict[str, Any]) -> list[tuple[str, str]]:
        """`(key, problem)` for keys written in YAML (`given`) that the chosen options ignore. Values equal to the
        default do not count (a file restating one still takes `--set` of the option); Python may build anything."""
        defaults = {f.name: f.default for f in fields(cast(Any, cls))}
        chosen = {name: given.get(name, defaults[name]) for name in ("fbc_filter", "n_step", "nstep_correction")}
        out = [
            (key, f"has no effect with fbc_filter: {chosen['fbc_filter']} (only the {reader} filter reads it); "
             f"remove {key} or set fbc_filter: {reader}")
            for key, reader in _FILTER_READERS.items()
            if key in given and given[key] != defaults[key] and chosen["fbc_filter"] != reader
        ]  # fmt: skip
        if chosen["nstep_correction"] == "tree_backup" and chosen["n_step"] == 1:
            why = "tree_backup has no effect with n_step: 1 (a one-step target has no later rewards to correct)"
            out.append(("nstep_correction", f"{why}; set n_step above 1 or remove nstep_correction"))
        return out

    @property
    def all_gammas(self) -> tuple[float, ...]:
        """Every trained discount factor; the acting `gamma` is last."""
        return (*self.gammas, self.gamma)


@config
class MultiTaskConfig(AgentConfig):
    """AMAGO-2's update: critics classify returns over symlog bins; filtered BC with several policy samples."""

    impl: ClassVar[str] = "amago_pipe.agents.multitask:MultiTaskAgent"

    type: str = "multitask"
    """Registered name (`agent`, `multitask`) or `package.module:Class` of a plugin."""
    critic: CriticHeadConfig = field(default_factory=lambda: CriticHeadConfig(output="bins"))  # type: ignore[call-arg]
    """Critic head (must have `output: bins`): logits over symlog-spaced value bins per discount factor."""
    online_coeff: float = 0.0
    """Weight of the deterministic policy gradient term (AMAGO-2 uses filtered BC alone)."""
    offline_coeff: float = 1.0
    """Weight of the advantage-filtered behaviour cloning term."""
    td_reduce: Literal["auto", "min", "mean"] = "mean"
    """How the drawn critics are combined in the TD target (AMAGO-2 takes the mean)."""
    labels: Literal["two_hot", "hl_gauss"] = "two_hot"
    """Classification targets: two-hot on the two nearest bins, or a Gaussian histogram (HL-Gauss)."""
    hl_sigma: float = 0.75
    """HL-Gauss standard deviation in units of bin width."""
    value_samples: int = 3
    """Policy samples averaged to estimate V(s) for the advantage (discrete actions use the exact expectation)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.critic.output != "bins":
            raise FieldError("critic.output", "the multitask agent needs `critic: {output: bins}`")
        if self.hl_sigma <= 0:
            raise FieldError("hl_sigma", f"must be positive, got {self.hl_sigma}")


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
        _at_least(self, 1, "log_interval")
        if self.console_interval <= 0:
            raise FieldError("console_interval", f"must be positive, got {self.console_interval}")


@config
class ValidateConfig:
    """Rollouts of the current policy during training; the best mean return is kept as the `best` checkpoint."""

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

    def __post_init__(self) -> None:
        _at_least(self, 1, "episodes", "every", "patience")


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
    trajectory encoders (`gru`, `mamba`), 1 otherwise (docs/recipes.md: "The sequence model's learning rate")."""
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
    """bf16 autocast (GPU)."""
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
        _at_least(self, 1, "max_seq_len", "batch_size", "epochs", "updates_per_epoch", "grad_accum")
        _at_least(self, 1, "ckpt_interval", "keep_last", "num_threads", "prefetch")
        _at_least(self, 0, "warmup_steps", "weight_decay", "grad_clip")
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

    @property
    def model_lr_multiplier(self) -> float:
        """`model_lr_scale` resolved: `auto` is 10 for a recurrent trajectory encoder (gru, mamba), else 1."""
        if self.model_lr_scale != "auto":
            return float(self.model_lr_scale)
        return RECURRENT_LR_SCALE if self.model.traj_encoder.recurrent else 1.0

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
