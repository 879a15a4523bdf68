"""Config of the learning updates (`agent`, `multitask`) and their typed blocks: the behaviour-cloning `filter`,
the TD `targets` and the policy `samples`. A field only one option reads lives in that option's block.

Config only: no torch, no click. Old flat keys are refused with their new form (`config/agent_moved.py`).
"""

from __future__ import annotations

import math
from dataclasses import field
from typing import Any, ClassVar, Literal

from amago_pipe.config.agent_moved import moved_keys, upgrade_flat_agent
from amago_pipe.config.base import Component, config
from amago_pipe.config.build import FieldError
from amago_pipe.config.nets import ActorHeadConfig, CriticHeadConfig
from amago_pipe.config.registries import AGENTS, BC_FILTERS


def at_least(obj: object, minimum: float, *names: str) -> None:
    """FieldError for the first of `names` whose (non-null) value is below `minimum` (NaN fails too)."""
    for name in names:
        value = getattr(obj, name)
        if value is not None and not value >= minimum:
            raise FieldError(name, f"must be at least {minimum}, got {value}")


def _discount(name: str, value: float) -> None:
    if not 0.0 < value < 1.0:
        raise FieldError(name, f"discount factors must be in (0, 1), got {value}")


# ----------------------------------------------------------------------------------------------
# behaviour-cloning filters (`filter: {type: ...}`)
# ----------------------------------------------------------------------------------------------


@config
class BcFilterConfig(Component):
    """How advantage-filtered behaviour cloning weighs the data's actions by their advantage A (`filter:`)."""

    registry = BC_FILTERS


@config
class ExpFilterConfig(BcFilterConfig):
    """exp(beta A), clipped: the better an action than the policy's average, the more it is imitated (AWR)."""

    impl: ClassVar[str] = "amago_pipe.agents.filters:exp_weights"
    type: str = "exp"
    """Registered name (`exp`, `binary`, `leaky`) or `package.module:Class` of a plugin."""
    beta: float = 1.0
    """Inverse temperature; advantages are PopArt-normalised (raw / sigma), or as `scale_max` / `normalize` set."""
    max_weight: float = 20.0
    """Upper clip of the weights."""
    scale_max: float | None = None
    """Cap, in scaled-reward units, on the value scale advantages are divided by (raw advantage / min(PopArt's
    sigma, this)). With dense rewards sigma keeps growing as training propagates the values, which flattens the
    filter back towards the data's actions; 10 is one large (99th-percentile) reward under `reward_multiplier:
    auto`. null: PopArt's sigma; no effect without PopArt (docs/recipes.md: "Long offline runs")."""
    normalize: bool = False
    """Divide advantages by their batch standard deviation first (a scale-free temperature)."""

    def __post_init__(self) -> None:
        at_least(self, 0.0, "beta")
        if self.scale_max is None:
            return
        if not (self.scale_max > 0.0 and math.isfinite(self.scale_max)):
            raise FieldError("scale_max", f"must be a positive number or null, got {self.scale_max}")
        if self.normalize:
            raise FieldError("scale_max", "has no effect with normalize: true; set one of them")


@config
class BinaryFilterConfig(BcFilterConfig):
    """1[A > 0]: imitate the actions better than the policy's average, ignore the others (CRR's binary filter)."""

    impl: ClassVar[str] = "amago_pipe.agents.filters:binary_weights"
    type: str = "binary"
    """Registered name (`exp`, `binary`, `leaky`) or `package.module:Class` of a plugin."""


@config
class LeakyFilterConfig(BcFilterConfig):
    """1 for A > 0, `slope` otherwise: the binary filter that still imitates worse actions a little."""

    impl: ClassVar[str] = "amago_pipe.agents.filters:leaky_weights"
    type: str = "leaky"
    """Registered name (`exp`, `binary`, `leaky`) or `package.module:Class` of a plugin."""
    slope: float = 0.1
    """Weight of actions with A <= 0."""

    def __post_init__(self) -> None:
        at_least(self, 0.0, "slope")


# ----------------------------------------------------------------------------------------------
# TD targets and policy samples
# ----------------------------------------------------------------------------------------------


@config
class TargetsConfig:
    """How the critics' TD targets are built: n-step returns, their off-policy correction, the critics they use."""

    n_step: int = 4
    """TD targets over n steps of rewards (1: AMAGO's one-step target); stops at terminals, bootstraps at padding or
    the window end. See docs/recipes.md ("Why n-step targets") for why 4 is the default."""
    correction: Literal["none", "tree_backup"] = "none"
    """Off-policy correction of n-step targets (n_step > 1): `none` sums the data's rewards as they are (values lean
    towards the behaviour policy: conservative offline), `tree_backup` weights each later reward by the target
    policy's probability of the data actions leading to it (discrete kinds only; see docs/recipes.md: "The memory
    recipe")."""
    num_critics_td: int = 2
    """Critics drawn (with replacement, per sample) from the ensemble for each TD target."""
    reduce: Literal["auto", "min", "mean"] = "auto"
    """How the drawn critics are combined: `min` (clipped double-Q), `mean`, or `auto` (min when the agent's
    online_coeff > 0, else mean: `amago_pipe.config.auto`)."""

    def __post_init__(self) -> None:
        at_least(self, 1, "n_step", "num_critics_td")

    @classmethod
    def no_effect(cls, given: dict[str, Any]) -> list[tuple[str, str]]:
        """`tree_backup` written with `n_step: 1` (YAML only; Python may build it, and it then sums as `none`)."""
        if given.get("correction") == "tree_backup" and given.get("n_step", cls.n_step) == 1:
            why = "tree_backup has no effect with n_step: 1 (a one-step target has no later rewards to correct)"
            return [("correction", f"{why}; set n_step above 1 or remove correction")]
        return []


@config
class SamplesConfig:
    """Policy samples where actions are sampled rather than enumerated: continuous actions, and discrete kinds with
    too many joint actions to enumerate."""

    value: int = 4
    """Policy samples averaged to estimate V(s) = E_pi Q(s, a) for the advantage."""
    target: int = 1
    """Next-action samples averaged in each TD target."""

    def __post_init__(self) -> None:
        at_least(self, 1, "value", "target")


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
    """Critic head: an ensemble of `num_critics` critics, one output per discount factor, and its `loss`."""
    targets: TargetsConfig = field(default_factory=TargetsConfig)
    """TD targets, e.g. `{n_step: 4, correction: tree_backup, num_critics_td: 2, reduce: auto}`."""
    online_coeff: float = 1.0
    """Weight of the deterministic policy gradient term (through the reparameterised / probability-weighted action)."""
    offline_coeff: float = 1.0
    """Weight of the advantage-filtered behaviour cloning term (1 with `exp`: see docs/recipes.md)."""
    filter: BcFilterConfig = field(default_factory=ExpFilterConfig)
    """Behaviour-cloning filter of the advantage A, e.g. `{type: exp, beta: 1.0}`, `{type: binary}` or
    `{type: leaky, slope: 0.1}`."""
    reward_multiplier: float | Literal["auto"] = "auto"
    """Rewards are multiplied by this in the losses (keeps PopArt's value scale comfortable). `auto`: 10 / the
    99th percentile of |reward| over the training data's nonzero rewards (10 for rewards of size 1), fixed at the
    first update and kept in checkpoints (docs/recipes.md: "Reward scale")."""
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
    popart_per_task: bool = False
    """Keep PopArt's statistics per task (each episode's env name): tasks whose returns differ by orders of
    magnitude then each have their own value scale, instead of the large one drowning the small one's values
    (docs/multitask.md: "The scale problem"). The tasks are those of the training partitions and the online task
    set when the train stage starts, recorded in its checkpoints; data of another task is refused."""
    use_target_actor: bool = True
    """Sample the next action of TD targets from the Polyak-averaged actor (else the online actor)."""
    actor_trains_model: bool | float = True
    """Share of the actor's loss gradient that reaches the sequence model: true (all, as AMAGO), false (none: the
    model learns from the critic alone, as in SAC-AE / DrQ) or a number in [0, 1]."""
    history_coeff: float = 0.3
    """Weight of the history objective: from its state at step t the sequence model predicts the observation
    features of a random earlier step of the window (docs/recipes.md: "The history objective"); 1 for long or noisy
    memory tasks, 0: off."""
    samples: SamplesConfig = field(default_factory=SamplesConfig)
    """Policy samples of continuous actions (and discrete kinds too large to enumerate), e.g. `{value: 4, target: 1}`."""

    def __post_init__(self) -> None:
        _discount("gamma", self.gamma)
        for i, g in enumerate(self.gammas):
            _discount(f"gammas.{i}", g)
        if self.gamma in self.gammas:
            raise FieldError("gammas", f"lists the main gamma {self.gamma} again; give only the extra ones")
        if not 0.0 <= self.actor_trains_model <= 1.0:
            raise FieldError(
                "actor_trains_model", f"must be true, false or a number in [0, 1], got {self.actor_trains_model}"
            )
        at_least(self, 0.0, "online_coeff", "offline_coeff", "conservative_coeff", "history_coeff")
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
    def moved(cls, given: dict[str, Any]) -> dict[str, str]:
        """`{key: problem}` for the flat keys of before the typed blocks (2026-12-01) written in YAML, each with its new form (one line each)."""
        return moved_keys(given)

    @classmethod
    def upgrade(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Recorded data (a checkpoint's or policy file's metadata, a lock file) with its flat keys moved into their
        blocks: read by the builder with `Problems(upgrade=True)`."""
        return upgrade_flat_agent(data)

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
    targets: TargetsConfig = field(default_factory=lambda: TargetsConfig(reduce="mean"))  # type: ignore[call-arg]
    """TD targets; the drawn critics are averaged (`reduce: mean`, as AMAGO-2)."""
    online_coeff: float = 0.0
    """Weight of the deterministic policy gradient term (AMAGO-2 uses filtered BC alone)."""
    offline_coeff: float = 1.0
    """Weight of the advantage-filtered behaviour cloning term."""
    labels: Literal["two_hot", "hl_gauss"] = "two_hot"
    """Classification targets: two-hot on the two nearest bins, or a Gaussian histogram (HL-Gauss)."""
    hl_sigma: float = 0.75
    """HL-Gauss standard deviation in units of bin width."""
    samples: SamplesConfig = field(default_factory=lambda: SamplesConfig(value=3))  # type: ignore[call-arg]
    """Policy samples averaged to estimate V(s) for the advantage (discrete actions use the exact expectation)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.critic.output != "bins":
            raise FieldError("critic.output", "the multitask agent needs `critic: {output: bins}`")
        if self.hl_sigma <= 0:
            raise FieldError("hl_sigma", f"must be positive, got {self.hl_sigma}")
