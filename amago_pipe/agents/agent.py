"""`agent`: AMAGO's update — multi-gamma actor-critic on one shared sequence model, in one forward pass.

Work is shared wherever the maths allows: one sequence-model pass per update; discrete critics output Q
of every action, so the target, the policy gradient and the advantage reuse one critic pass each; the
data action's Q is computed once for every gamma. Pure torch + nets; no stores, YAML, pipelines or envs.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.func import functional_call

from amago_pipe.agents.averaging import PolicyAverage
from amago_pipe.agents.history import HistoryHead
from amago_pipe.agents.losses import actor_loss, critic_loss, masked_mean, nstep_td_targets, polyak_update
from amago_pipe.agents.popart import PopArt
from amago_pipe.agents.terms import Terms, terms
from amago_pipe.config import auto
from amago_pipe.config.agent import AgentConfig
from amago_pipe.config.nets import ModelConfig
from amago_pipe.errors import ConfigError, DataError
from amago_pipe.nets.build import build_actor_head, build_critic_head, build_sequence_model
from amago_pipe.nets.heads import action_features, enumerate_actions
from amago_pipe.spec import ActionSpec, DataSpec, action_mask_key, describe_action

if TYPE_CHECKING:  # annotation only: acting with a policy needs no data loading
    from amago_pipe.data.batch import Batch

SUPPORTED_ACTIONS = ("discrete", "continuous", "multibinary", "multidiscrete")
EXACT_MAX_ACTIONS = 32
"""Action-input critics of discrete kinds with at most this many joint actions take exact expectations over every
action (a no-grad critic pass over B*L*M rows); larger spaces use a score-function estimate."""


class Agent(nn.Module):
    """Sequence model + actor (G distributions) + K-critic ensemble + PopArt + Polyak targets."""

    SEQUENCE_MODEL_PARAMS = ("model.", "history.")
    """Name prefixes of the sequence model's parameters and its history head's (what `model_lr_scale` speeds up)."""

    gammas: torch.Tensor
    reward_multiplier: torch.Tensor
    action_table: torch.Tensor
    """(M, ...) every joint action of a small discrete-kind space (empty otherwise)."""
    candidates: torch.Tensor
    """(M, A) their critic input features."""

    def __init__(
        self, spec: DataSpec, model_cfg: ModelConfig, cfg: AgentConfig, *, max_seq_len: int, tasks: Sequence[str] = ()
    ):
        super().__init__()
        if spec.action.kind not in SUPPORTED_ACTIONS:
            raise DataError(
                f"agent '{cfg.type}': {describe_action(spec.action)} actions are not supported "
                f"(supported: {', '.join(SUPPORTED_ACTIONS)})"
            )
        self.cfg, self.spec = cfg, spec
        gammas = cfg.all_gammas
        self.model = build_sequence_model(model_cfg, spec, max_seq_len + 1)
        d = self.model.out_dim
        self.actor = build_actor_head(cfg.actor, d, spec.action, len(gammas))
        self.critic = build_critic_head(cfg.critic, d, spec.action, len(gammas))
        self.discrete = self.critic.discrete  # Q of every action from one pass (not with discrete_as_continuous)
        if cfg.conservative_coeff > 0 and not self.discrete:
            raise ConfigError(
                "agent.conservative_coeff: needs a critic with one output per discrete action (not continuous, "
                f"multi-binary or multi-discrete actions, nor discrete_as_continuous); got "
                f"{describe_action(spec.action)} actions; set it to 0"
            )
        kind = spec.action.kind
        self.enumerated = (
            kind != "continuous" and not self.discrete and _joint_actions(spec.action) <= EXACT_MAX_ACTIONS
        )
        table = enumerate_actions(spec.action) if self.enumerated else torch.zeros(0, dtype=torch.int64)
        table = table.float() if kind == "multibinary" else table  # Bernoulli.log_prob takes floats
        self.register_buffer("action_table", table, persistent=False)  # (M, ...) every joint action
        feats = action_features(spec.action, table) if self.enumerated else torch.zeros(0, spec.action.dim)
        self.register_buffer("candidates", feats, persistent=False)  # (M, A) their critic inputs
        self.target_actor = copy.deepcopy(self.actor).requires_grad_(False)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.history = HistoryHead(d, self.model.feature_dim, max_seq_len + 1) if cfg.history_coeff > 0 else None
        """Predicts earlier steps' observation features from the states (`history_coeff`)."""
        self.policy_avg = PolicyAverage(self.model, self.actor) if cfg.policy_average > 0 else None
        """The Polyak-averaged sequence model and actor that policy files hold (`policy_average` > 0)."""
        self.task_names = tuple(tasks)
        """The tasks (episode env names) PopArt keeps statistics of, in `Batch.task` id order (`popart_per_task`);
        empty: one set of statistics for all the data."""
        self.popart = PopArt(len(gammas), n_tasks=max(1, len(tasks)), beta=cfg.popart_beta, enabled=cfg.popart)
        fixed = 0.0 if cfg.reward_multiplier == "auto" else float(cfg.reward_multiplier)
        self.register_buffer("reward_multiplier", torch.tensor(fixed, dtype=torch.float32))
        """Rewards' factor in the TD targets (checkpointed); `auto` leaves it 0 until the learner fixes it from the
        data (`amago_pipe.train.runtime.resolve_reward_multiplier`)."""
        self._reward_multiplier_checked = fixed > 0
        self.register_buffer("gammas", torch.tensor(gammas, dtype=torch.float32), persistent=False)
        self.tree_backup = cfg.targets.correction == "tree_backup" and cfg.targets.n_step > 1
        """Correct n-step targets with tree backup (an extra target-critic pass on action-input critics)."""
        self.td_reduce = auto.td_reduce(cfg)
        """How the drawn critics are combined in TD targets (`targets.reduce`, `auto` resolved)."""
        self.bc_weights = cfg.filter.implementation()
        """The behaviour-cloning filter (`filter: {type: ...}`): (advantage, mask, sigma, cfg) -> weights (B, L, G)."""
        self.mask_key = action_mask_key(spec)
        """The observation key of a discrete action mask (`amago_pipe.spec.ACTION_MASK_KEY`), if the data has one."""

    # ---- the update -----------------------------------------------------------------------------
    def forward(self, batch: Batch) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """The named loss terms of one batch, each already weighted (the learner sums them), and detached metrics
        (`<name>_loss` per term among them). A new term is one more entry here and its coefficient's field in
        `AgentConfig`."""
        cfg = self.cfg
        states, features = self.model.encode(batch.obs, batch.rl2, batch.time)  # (B, L+1, D), (B, L+1, F)
        t = terms(self, states, batch)
        losses = {"critic": self.critic_objective(t.critic_out, t.targets, batch.mask, batch.task)}
        advantage = t.q_data.mean(2) - t.v_pi  # (B, L, G)
        weights = self.bc_weights(advantage, batch.mask, self.popart.sigma_of(batch.task), cfg.filter)  # (B, L, G)
        losses["actor"] = actor_loss(
            t.q_pi.min(dim=2).values,  # (B, L, G): the most pessimistic critic
            t.logp_data,
            weights,
            batch.mask,
            online_coeff=cfg.online_coeff,
            offline_coeff=cfg.offline_coeff,
        )
        metrics = self._metrics(t, advantage, weights, batch)
        if t.conservative is not None:
            losses["conservative"] = cfg.conservative_coeff * masked_mean(t.conservative, batch.mask)
            metrics["conservative_gap"] = masked_mean(t.conservative.detach(), batch.mask)
        if self.history is not None:
            losses["history"] = cfg.history_coeff * self.history.loss(states, features, batch.obs_mask)
        metrics.update({f"{name}_loss": loss.detach() for name, loss in losses.items()})
        return losses, metrics

    # ---- named pieces shared with `multitask` ---------------------------------------------------
    def targets(
        self,
        batch: Batch,
        next_values: torch.Tensor,
        next_q_data: torch.Tensor | None = None,
        traces: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """TD targets (B, L, G) from raw next values (B, L, K, G); folds them into PopArt's statistics.

        `next_q_data` (B, L, K, G) and `traces` (B, L, G) feed the tree-backup correction (`targets.correction`).
        """
        if not self._reward_multiplier_checked:  # once: an `auto` multiplier must have been fixed by now
            if float(self.reward_multiplier) <= 0:
                raise ConfigError(
                    "agent.reward_multiplier: 'auto' has not been fixed from the data yet (the learner does it "
                    "before the first update: amago_pipe.train.runtime.resolve_reward_multiplier); give a number "
                    "to train the agent outside the learner"
                )
            self._reward_multiplier_checked = True
        correct = self.tree_backup and traces is not None
        targets = nstep_td_targets(
            batch.rewards * self.reward_multiplier,
            batch.terminated,
            batch.mask,
            next_values,
            self.gammas,
            n=self.cfg.targets.n_step,
            num_td=self.cfg.targets.num_critics_td,
            reduce=self.td_reduce,
            next_q_data=next_q_data if correct else None,
            traces=traces if correct else None,
        )
        self.popart.update(targets, batch.mask, batch.task)
        return targets

    def critic_objective(
        self, critic_out: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor, task: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Regression in PopArt-normalised units: critic_out (K, B, L, G), targets (B, L, G), task ids (B,)."""
        q = self.popart(critic_out, task=task).permute(1, 2, 0, 3)  # (B, L, K, G)
        return critic_loss(q, self.popart.normalize(targets, task=task), mask, kind=self.cfg.critic.loss)

    def values(
        self,
        out: torch.Tensor,
        *,
        raw: bool = False,
        axis: int = -1,
        detach: bool = False,
        task: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Critic outputs -> normalised (or raw-scale) values; G is on `axis`, the batch two axes before it (its
        task ids `task` (B,) pick PopArt's statistics under `popart_per_task`)."""
        return self.popart(out, normalized=not raw, detach=detach, axis=axis, task=task)

    def frozen_critic(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The critics with their weights detached: gradients reach the actions only (no copy, no extra grads)."""
        params = {k: v.detach() for k, v in self.critic.named_parameters()}
        return functional_call(self.critic, params, (states, actions))  # type: ignore[no-any-return]

    @torch.no_grad()
    def update_targets(self) -> None:
        """Polyak-average the target actor and critics (and the policy average) towards the online ones."""
        polyak_update(self.target_actor.parameters(), self.actor.parameters(), self.cfg.tau)
        polyak_update(self.target_critic.parameters(), self.critic.parameters(), self.cfg.tau)
        if self.policy_avg is not None:
            self.policy_avg.follow(self.model, self.actor, self.cfg.policy_average)

    def reset_policy_average(self) -> None:
        """Restart the policy average at the live weights (after a warm start replaced them)."""
        if self.policy_avg is not None:
            self.policy_avg.follow(self.model, self.actor, None)

    @contextlib.contextmanager
    def acting_weights(self) -> Iterator[None]:
        """Within it, `model` and `actor` hold the weights the policy files get (the average, if any)."""
        with (
            contextlib.nullcontext() if self.policy_avg is None else self.policy_avg.swapped_in(self.model, self.actor)
        ):
            yield

    # ---- acting ---------------------------------------------------------------------------------
    def valid_actions(self, obs: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """The action mask `(..., n)` of observations `obs` (float), or None without one."""
        return None if self.mask_key is None else obs[self.mask_key].float()

    def act(self, states: torch.Tensor, *, greedy: bool, valid: torch.Tensor | None = None) -> torch.Tensor:
        """Actions of the acting gamma (the last) for states (N, D): ids (N,) / (N, k), bits or values in [-1, 1];
        discrete ids only where `valid (N, n)` (the action mask) is 1."""
        return self.act_on(self.actor.params(states[:, None], acting=True)[:, 0], greedy=greedy, valid=valid)

    def act_on(self, params: torch.Tensor, *, greedy: bool, valid: torch.Tensor | None = None) -> torch.Tensor:
        """`act` from the acting gamma's distribution parameters `(N, 1, P)` (`actor.params(..., acting=True)`)."""
        a = self.actor.act(params[:, None], None if valid is None else valid[:, None], greedy=greedy)  # (N, 1, 1[, A])
        return a[:, 0, 0].reshape(-1, *self.spec.action.shape)  # (N, *action shape)

    def policy_state_dict(self) -> dict[str, torch.Tensor]:
        """The weights needed to act: sequence model and actor (their average under `policy_average`)."""
        if self.policy_avg is None:
            return {k: v for k, v in self.state_dict().items() if k.startswith(("model.", "actor."))}
        return self.policy_avg.policy_state_dict()

    # ---- logging --------------------------------------------------------------------------------
    def _metrics(self, t: Terms, advantage: torch.Tensor, weights: torch.Tensor, batch: Batch) -> dict[str, Any]:
        mask = batch.mask
        with torch.no_grad():
            main = (slice(None), slice(None), -1)  # the acting gamma
            q_raw = self.popart.denormalize(t.q_data.mean(2), task=batch.task)  # (B, L, G)
            mu, sigma = (s.reshape(self.popart.n_tasks, -1)[:, -1].float() for s in (self.popart.mu, self.popart.sigma))
            out = {
                "q_mean": masked_mean(q_raw[main], mask),
                "td_target_mean": masked_mean(t.targets[main], mask),
                "advantage_mean": masked_mean(advantage[main], mask),
                "bc_filter_rate": masked_mean((weights > 0.5).float(), mask),
                "logp_data": masked_mean(t.logp_data.detach()[main], mask),
                "entropy": masked_mean(t.entropy.detach()[main], mask),
                "popart_mu": mu.mean(),
                "popart_sigma": sigma.mean(),
            }
            for i, name in enumerate(self.task_names):  # each task's value scale (`popart_per_task`)
                out |= {f"popart_mu/{name}": mu[i], f"popart_sigma/{name}": sigma[i]}
            return out


def _joint_actions(action: ActionSpec) -> int:
    """Number of joint actions of a discrete kind."""
    if action.kind == "multidiscrete":
        return math.prod(action.nvec)
    if action.kind == "multibinary":
        return 2**action.dim
    return action.n
