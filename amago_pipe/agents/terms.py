"""The per-update terms of `Agent`'s losses, one function per kind of critic.

`discrete_terms` (Q of every discrete action from one critic pass), `enumerated_terms` (action-input critics over a
few joint actions) and `sampled_terms` (continuous actions, or too many joint actions: sampled estimates); `terms`
picks the agent's one. They read only what `TermsAgent` names (heads, settings, value scale), so this module does
not import the agent. Pure torch + nets; no stores, YAML, pipelines or envs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch
from torch.distributions import Categorical, Distribution

from amago_pipe.agents.losses import shift_steps
from amago_pipe.config.agent import AgentConfig
from amago_pipe.nets.heads import ActorHead, CriticEnsemble, action_features
from amago_pipe.spec import DataSpec

if TYPE_CHECKING:  # annotations only
    from amago_pipe.data.batch import Batch

DATA_ACTION_CLIP = 0.999
"""Continuous data actions are clipped to +-this for log-likelihoods (tanh's inverse is infinite at +-1)."""


@dataclass
class Terms:
    """Everything the losses need, in normalised value units. Shapes: (B, L, K, G) or (B, L, G)."""

    critic_out: torch.Tensor
    """Critic output at the data actions: (K, B, L, G) values or (K, B, L, G, N) bin logits."""
    targets: torch.Tensor
    """(B, L, G) raw-scale TD targets."""
    q_data: torch.Tensor
    """(B, L, K, G) Q(s, a_data), no gradient."""
    q_pi: torch.Tensor
    """(B, L, K, G) Q(s, a ~ pi) with gradient into the actor only."""
    v_pi: torch.Tensor
    """(B, L, G) E_pi Q(s, a), no gradient."""
    logp_data: torch.Tensor
    """(B, L, G) log pi(a_data | s)."""
    entropy: torch.Tensor
    """(B, L, G) policy entropy (a one-sample estimate for continuous actions)."""
    conservative: torch.Tensor | None = None
    """(B, L, K, G) logsumexp_a Q(s, a) - Q(s, a_data) with gradient into the critics (`conservative_coeff`)."""


class TermsAgent(Protocol):
    """What the terms read of an agent (`amago_pipe.agents.agent.Agent` is one): its heads, settings and value
    scale; the sequence model stays outside (the terms start from its states)."""

    cfg: AgentConfig
    spec: DataSpec
    discrete: bool
    enumerated: bool
    tree_backup: bool
    gammas: torch.Tensor
    action_table: torch.Tensor
    candidates: torch.Tensor
    actor: ActorHead
    target_actor: ActorHead
    critic: CriticEnsemble
    target_critic: CriticEnsemble

    def values(
        self,
        out: torch.Tensor,
        *,
        raw: bool = False,
        axis: int = -1,
        detach: bool = False,
        task: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Critic outputs -> normalised (or raw-scale) values (the batch two axes before G; its task ids `task`)."""
        ...

    def targets(
        self,
        batch: Batch,
        next_values: torch.Tensor,
        next_q_data: torch.Tensor | None = None,
        traces: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """TD targets (B, L, G) from next values (B, L, K, G)."""
        ...

    def frozen_critic(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The critics with detached weights."""
        ...

    def valid_actions(self, obs: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """The action mask of observations, if any."""
        ...


def terms(agent: TermsAgent, states: torch.Tensor, batch: Batch) -> Terms:
    """The loss terms of a batch from the sequence model's states (B, L+1, D), by the agent's kind of critic."""
    if agent.discrete:
        return discrete_terms(agent, states, batch)
    return enumerated_terms(agent, states, batch) if agent.enumerated else sampled_terms(agent, states, batch)


def discrete_terms(agent: TermsAgent, states: torch.Tensor, batch: Batch) -> Terms:
    """Discrete actions: exact expectations over actions from one critic pass (Q of every action)."""
    s, s_next = states[:, :-1], states[:, 1:].detach()  # (B, L, D)
    task = batch.task  # (B,) task ids (per-task PopArt) or None
    valid, valid_next = _valid(agent, batch)
    bsz, length = batch.mask.shape
    with torch.no_grad():
        next_actor = agent.target_actor if agent.cfg.use_target_actor else agent.actor
        probs_next = next_actor(s_next, valid_next).probs  # (B, L, G, A)
        q_next = agent.values(agent.target_critic(s_next), raw=True, axis=-2, task=task)  # (K, B, L, G, A)
        v_next = (q_next * probs_next).sum(-1).permute(1, 2, 0, 3)  # (B, L, K, G)
        data_terms: tuple[torch.Tensor, ...] = ()
        if agent.tree_backup:  # Q_target(s_{t+1}, a_{t+1}) and pi(a_{t+1} | s_{t+1}) of the data's next action
            a_next = shift_steps(batch.actions, 1, 0)  # (B, L)
            q_ids = a_next[None, :, :, None, None].expand(*q_next.shape[:-1], 1)
            p_ids = a_next[:, :, None, None].expand(*probs_next.shape[:-1], 1)
            data_terms = (
                q_next.gather(-1, q_ids).squeeze(-1).permute(1, 2, 0, 3),
                probs_next.gather(-1, p_ids).squeeze(-1),
            )
        targets = agent.targets(batch, v_next, *data_terms)  # (B, L, G)
    out = agent.critic(s)  # (K, B, L, G, A[, N])
    ids = batch.actions[None, :, :, None, None].expand(out.shape[0], bsz, length, out.shape[3], 1)
    critic_out = _gather_action(out, ids)  # (K, B, L, G[, N])
    dist = agent.actor(_actor_input(agent, s), valid)  # batch (B, L, G)
    q_all = agent.values(out.detach(), axis=-2, detach=True, task=task)  # (K, B, L, G, A)
    q_pi = (q_all * dist.probs).sum(-1).permute(1, 2, 0, 3)  # (B, L, K, G): gradient into the actor
    q_data = q_all.gather(-1, ids).squeeze(-1).permute(1, 2, 0, 3)  # (B, L, K, G)
    logp = dist.log_prob(_data_actions(agent, batch.actions))  # (B, L, G)
    conservative = None
    if agent.cfg.conservative_coeff > 0:  # CQL(H) in normalised units, gradient into the critics only
        q_grad = agent.values(out, axis=-2, detach=True, task=task)  # (K, B, L, G, A)
        gap = torch.logsumexp(q_grad, dim=-1) - q_grad.gather(-1, ids).squeeze(-1)  # (K, B, L, G)
        conservative = gap.permute(1, 2, 0, 3)
    return Terms(critic_out, targets, q_data, q_pi, q_pi.detach().mean(2), logp, dist.entropy(), conservative)


def enumerated_terms(agent: TermsAgent, states: torch.Tensor, batch: Batch) -> Terms:
    """Discrete kinds with action-input critics and few joint actions: exact expectations over all M of them."""
    s, s_next = states[:, :-1], states[:, 1:].detach()  # (B, L, D)
    task = batch.task  # (B,) task ids (per-task PopArt) or None
    valid, valid_next = _valid(agent, batch)
    with torch.no_grad():
        next_dist = (agent.target_actor if agent.cfg.use_target_actor else agent.actor)(s_next, valid_next)
        probs_next = _joint_probs(agent, next_dist)  # (B, L, G, M)
        q_next = agent.values(
            agent.target_critic.forward_candidates(s_next, agent.candidates), raw=True, axis=-2, task=task
        )
        v_next = (q_next * probs_next).sum(-1).permute(1, 2, 0, 3)  # (B, L, K, G)
        data_terms = _next_data_terms(agent, s_next, next_dist, batch) if agent.tree_backup else ()
        targets = agent.targets(batch, v_next, *data_terms)  # (B, L, G)
    critic_out = agent.critic(s, _features(agent, batch.actions))  # (K, B, L, G[, N])
    dist = agent.actor(_actor_input(agent, s), valid)  # batch (B, L, G)
    with torch.no_grad():
        q_all = agent.values(agent.critic.forward_candidates(s, agent.candidates), axis=-2, task=task)  # (K,B,L,G,M)
        q_data = agent.values(critic_out, task=task).permute(1, 2, 0, 3)  # (B, L, K, G)
    q_pi = (q_all * _joint_probs(agent, dist)).sum(-1).permute(1, 2, 0, 3)  # (B, L, K, G): gradient into the actor
    logp = dist.log_prob(_data_actions(agent, batch.actions))  # (B, L, G)
    return Terms(critic_out, targets, q_data, q_pi, q_pi.detach().mean(2), logp, dist.entropy())


def sampled_terms(agent: TermsAgent, states: torch.Tensor, batch: Batch) -> Terms:
    """Action-input critics at sampled actions: reparameterised policy gradient through a frozen view of the
    critics (continuous), or a score-function estimate (discrete kinds with too many joint actions)."""
    s, s_next = states[:, :-1], states[:, 1:].detach()  # (B, L, D)
    task = batch.task  # (B,) task ids (per-task PopArt) or None
    valid, valid_next = _valid(agent, batch)
    with torch.no_grad():
        next_dist = (agent.target_actor if agent.cfg.use_target_actor else agent.actor)(s_next, valid_next)
        v_next = torch.stack(
            [
                agent.values(agent.target_critic(s_next, _features(agent, next_dist.sample())), raw=True, task=task)
                for _ in range(agent.cfg.samples.target)
            ]
        ).mean(0)  # (K, B, L, G)
        data_terms = (
            _next_data_terms(agent, s_next, next_dist, batch)
            if agent.tree_backup and agent.spec.action.kind != "continuous"
            else ()
        )
        targets = agent.targets(batch, v_next.permute(1, 2, 0, 3), *data_terms)  # (B, L, G)
    critic_out = agent.critic(s, _features(agent, batch.actions))  # (K, B, L, G[, N]): shared by all gammas
    dist = agent.actor(_actor_input(agent, s), valid)  # batch (B, L, G), event (A,)
    if dist.has_rsample:
        a_pi = dist.rsample()  # (B, L, G, A)
        q_pi = agent.values(agent.frozen_critic(s.detach(), a_pi), detach=True, task=task).permute(1, 2, 0, 3)
        with torch.no_grad():
            extra = [
                agent.values(agent.critic(s, dist.sample()), task=task).mean(0)
                for _ in range(agent.cfg.samples.value - 1)
            ]
            v_pi = torch.stack([q_pi.mean(2), *extra]).mean(0)  # (B, L, G)
        entropy = -dist.log_prob(a_pi.detach())  # (B, L, G)
    else:
        q_pi, v_pi = _score_function_q(agent, s.detach(), dist, task)
        entropy = dist.entropy()
    with torch.no_grad():
        q_data = agent.values(critic_out, task=task).permute(1, 2, 0, 3)  # (B, L, K, G)
    logp = dist.log_prob(_data_actions(agent, batch.actions))  # (B, L, G)
    return Terms(critic_out, targets, q_data, q_pi, v_pi.detach(), logp, entropy)


def _score_function_q(
    agent: TermsAgent, states: torch.Tensor, dist: Distribution, task: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Q(s, a~pi) (B, L, K, G) carrying a score-function policy gradient, and E_pi Q (B, L, G).

    S = max(2, samples.value) samples with a leave-one-out baseline (RLOO): the forward value is
    mean_s Q(s, a_s); the gradient is mean_s (Q(s, a_s) - mean_{j!=s} Q(s, a_j)) grad log pi(a_s|s) (unbiased).
    The critics get no gradient.
    """
    n = max(2, agent.cfg.samples.value)
    actions = dist.sample((n,))  # (S, B, L, G[, k])
    with torch.no_grad():
        q = torch.stack(
            [agent.values(agent.critic(states, _features(agent, a)), task=task) for a in actions]
        )  # (S, K, B, L, G)
        q = q.permute(0, 2, 3, 1, 4)  # (S, B, L, K, G)
        baseline = (q.sum(0, keepdim=True) - q) / (n - 1)  # (S, B, L, K, G) leave-one-out
    logp = dist.log_prob(actions)[:, :, :, None]  # (S, B, L, 1, G)
    q_pi = (q + (q - baseline) * (logp - logp.detach())).mean(0)  # (B, L, K, G)
    return q_pi, q.mean((0, 3))


def _next_data_terms(
    agent: TermsAgent, s_next: torch.Tensor, next_dist: Distribution, batch: Batch
) -> tuple[torch.Tensor, torch.Tensor]:
    """Tree-backup inputs for action-input critics of discrete kinds: Q_target(s_{t+1}, a_{t+1}) (B, L, K, G)
    raw-scale and pi(a_{t+1} | s_{t+1}) (B, L, G), a_{t+1} the data's next action."""
    a_next = shift_steps(batch.actions, 1, 0)  # (B, L[, A]) a_{t+1}
    q = agent.values(agent.target_critic(s_next, _features(agent, a_next)), raw=True, task=batch.task)  # (K, B, L, G)
    return q.permute(1, 2, 0, 3), next_dist.log_prob(_data_actions(agent, a_next)).exp()


def _valid(agent: TermsAgent, batch: Batch) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The action masks (B, L, n) of each step's state and of the next state's (None, None without a mask)."""
    valid = agent.valid_actions(batch.obs)  # (B, L+1, n)
    return (None, None) if valid is None else (valid[:, :-1], valid[:, 1:])


def _actor_input(agent: TermsAgent, states: torch.Tensor) -> torch.Tensor:
    """The states the actor's loss sees: their gradient into the sequence model scaled by `actor_trains_model`."""
    share = float(agent.cfg.actor_trains_model)
    if share == 1.0:
        return states
    frozen = states.detach()
    return frozen if share == 0.0 else frozen + share * (states - frozen)


def _features(agent: TermsAgent, actions: torch.Tensor) -> torch.Tensor:
    """Policy-space actions -> the critic's input features (one-hots, bits or values)."""
    return action_features(agent.spec.action, actions)


def _data_actions(agent: TermsAgent, actions: torch.Tensor) -> torch.Tensor:
    """Data actions for `log_prob`, one copy per gamma: ids (B, L, G[, k]), bits or clipped values (B, L, G, A)."""
    kind = agent.spec.action.kind
    if kind != "discrete":
        actions = actions.flatten(2)  # (B, L, A) or (B, L, k)
    if kind == "continuous":  # tanh's inverse is infinite at +-1
        actions = actions.clamp(-DATA_ACTION_CLIP, DATA_ACTION_CLIP)
    elif kind == "multibinary":
        actions = actions.float()
    return actions.unsqueeze(2).expand(*actions.shape[:2], len(agent.gammas), *actions.shape[2:])


def _joint_probs(agent: TermsAgent, dist: Distribution) -> torch.Tensor:
    """(B, L, G, M) probabilities of the enumerated joint actions `agent.action_table`."""
    if isinstance(dist, Categorical):
        return dist.probs  # the table is arange(n)
    table = agent.action_table.reshape(-1, 1, 1, 1, *agent.action_table.shape[1:])  # (M, 1, 1, 1[, k])
    return dist.log_prob(table).exp().permute(1, 2, 3, 0)


def _gather_action(out: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Pick the data action's entry of discrete critic outputs (K, B, L, G, A[, N])."""
    if out.dim() == 6:  # bins: (K, B, L, G, A, N)
        idx = ids[..., None].expand(*ids.shape, out.shape[-1])  # (K, B, L, G, 1, N)
        return out.gather(4, idx).squeeze(4)
    return out.gather(-1, ids).squeeze(-1)
