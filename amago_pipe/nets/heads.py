"""Actor heads (one action distribution per discount factor), the fused ensemble of K critics, and the
action features (one-hots, bits, values) that action-input critics take. Pure torch; must not import stores,
YAML or pipelines.
"""

from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Distribution

from amago_pipe.config.nets import ActorHeadConfig, CriticHeadConfig
from amago_pipe.errors import ConfigError
from amago_pipe.nets.bins import SymlogBins
from amago_pipe.nets.distributions import (
    categorical,
    gmm_params_per_action,
    multi_binary,
    multi_categorical,
    scaled_beta,
    tanh_gaussian,
    tanh_gmm,
)
from amago_pipe.nets.layers import activation, mlp
from amago_pipe.spec import ActionSpec, describe_action

SUPPORTED_KINDS = ("discrete", "continuous", "multibinary", "multidiscrete")
MAX_ENUMERATED_ACTIONS = 4096
"""`enumerate_actions` refuses action spaces with more joint actions than this."""


def _check_action_kind(action: ActionSpec, what: str) -> None:
    if action.kind not in SUPPORTED_KINDS:
        raise ConfigError(
            f"{what}: {describe_action(action)} actions are not supported (supported: {', '.join(SUPPORTED_KINDS)})"
        )


def action_features(action: ActionSpec, actions: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Actions in policy space -> the critic's input features `(..., action.dim)`.

    discrete ids `(...)` -> one-hot `(..., n)`; multidiscrete ids `(..., k)` -> concatenated one-hots
    `(..., sum(nvec))`; multibinary 0/1 and continuous values `(..., *shape)` or already flat `(..., A)` are
    flattened to `(..., A)` as `dtype`.
    """
    if action.kind == "discrete":
        return F.one_hot(actions.long(), action.n).to(dtype)  # (..., n)
    if action.kind == "multidiscrete":
        _check_trailing(action, actions, (len(action.nvec),))
        ids = actions.long().unbind(-1)  # k tensors (...)
        return torch.cat([F.one_hot(i, n) for i, n in zip(ids, action.nvec, strict=True)], dim=-1).to(dtype)
    shape = action.shape or (1,)
    if _ends_in(actions, shape):
        return actions.flatten(-len(shape)).to(dtype)  # (..., A)
    _check_trailing(action, actions, (action.dim,))  # already flat, as the actor's samples are
    return actions.to(dtype)  # (..., A)


def _ends_in(actions: torch.Tensor, shape: tuple[int, ...]) -> bool:
    return actions.dim() >= len(shape) and tuple(actions.shape[-len(shape) :]) == shape


def _check_trailing(action: ActionSpec, actions: torch.Tensor, shape: tuple[int, ...]) -> None:
    if not _ends_in(actions, shape):
        raise ValueError(
            f"action_features: {describe_action(action)} actions must end in shape {shape}, got {tuple(actions.shape)}"
        )


def enumerate_actions(action: ActionSpec) -> torch.Tensor:
    """Every joint action in policy space: ids `(M,)` (discrete), ids `(M, k)` (multidiscrete) or bits `(M, *shape)`.

    Feed `action_features(action, table)` to `CriticEnsemble.forward_candidates` for Q of every action.
    Continuous spaces and spaces with more than `MAX_ENUMERATED_ACTIONS` joint actions raise ValueError.
    """
    if action.kind == "discrete":
        sizes: tuple[int, ...] = (action.n,)
    elif action.kind == "multidiscrete":
        sizes = action.nvec
    elif action.kind == "multibinary":
        sizes = (2,) * action.dim
    else:
        raise ValueError(f"enumerate_actions: {describe_action(action)} actions cannot be enumerated")
    if math.prod(sizes) > MAX_ENUMERATED_ACTIONS:
        raise ValueError(
            f"enumerate_actions: {describe_action(action)} has {math.prod(sizes)} joint actions "
            f"(more than {MAX_ENUMERATED_ACTIONS}); use sampled actions instead"
        )
    table = torch.tensor(list(itertools.product(*(range(n) for n in sizes))), dtype=torch.int64)  # (M, k)
    if action.kind == "multibinary":
        return table.reshape(-1, *action.shape)  # (M, *shape)
    return table[:, 0] if action.kind == "discrete" else table


class ActorHead(nn.Module):
    """MLP from the state `(B, L, D)` to G action distributions with batch shape `(B, L, G)`, in one output layer.

    Distribution parameters are float32 even under autocast.
    """

    def __init__(self, d_state: int, action: ActionSpec, num_gammas: int, cfg: ActorHeadConfig):
        super().__init__()
        _check_action_kind(action, "actor head")
        self.action, self.num_gammas, self.cfg = action, num_gammas, cfg
        if action.kind == "continuous" and cfg.continuous_dist == "gmm":
            self.params_per_gamma = gmm_params_per_action(action.dim, cfg.gmm_components)
        elif action.kind == "continuous":
            self.params_per_gamma = 2 * action.dim
        else:
            self.params_per_gamma = action.dim  # logits (discrete: n, multibinary: A, multidiscrete: sum(nvec))
        self.net = mlp(
            d_state,
            cfg.d_hidden,
            cfg.n_layers,
            num_gammas * self.params_per_gamma,
            act=cfg.activation,
            dropout=cfg.dropout,
        )

    def forward(self, state: torch.Tensor, valid: torch.Tensor | None = None, *, acting: bool = False) -> Distribution:
        """G distributions at `state (B, L, D)`; discrete actions where `valid (B, L, n)` is 0 get no probability
        (steps whose mask is all 0, e.g. padding, are left unmasked). `acting`: only the acting gamma's (the last),
        batch shape `(B, L, 1)`."""
        return self.distribution(self.params(state, acting=acting), valid)

    def params(self, state: torch.Tensor, *, acting: bool = False) -> torch.Tensor:
        """Distribution parameters `(B, L, G, P)` at `state (B, L, D)` (`acting`: the last gamma's, `(B, L, 1, P)`)."""
        params = self.net(state).float().unflatten(-1, (self.num_gammas, self.params_per_gamma))  # (B, L, G, P)
        return params[..., -1:, :] if acting else params

    def act(self, params: torch.Tensor, valid: torch.Tensor | None = None, *, greedy: bool) -> torch.Tensor:
        """Actions of `distribution(params, valid)`: the mode, or a sample. Discrete ones skip building the
        distribution (a rollout step's largest cost after the network); they draw as `Categorical.sample` does."""
        if self.action.kind != "discrete":
            dist = self.distribution(params, valid)
            return dist.mode if greedy else dist.sample()
        logits = params if valid is None else mask_logits(params, valid)  # (B, L, G, n)
        if greedy:
            return logits.argmax(-1)
        probs = logits.softmax(-1)
        return torch.multinomial(probs.reshape(-1, probs.shape[-1]), 1, True).reshape(probs.shape[:-1])

    def distribution(self, params: torch.Tensor, valid: torch.Tensor | None = None) -> Distribution:
        """The distributions of `params (B, L, G, P)`, masked by `valid (B, L, n)` as `forward` says."""
        if self.action.kind == "discrete":
            return categorical(params if valid is None else mask_logits(params, valid))
        if self.action.kind == "multibinary":
            return multi_binary(params)
        if self.action.kind == "multidiscrete":
            return multi_categorical(params, self.action.nvec)
        if self.cfg.continuous_dist == "beta":
            return scaled_beta(params)
        if self.cfg.continuous_dist == "gmm":
            return tanh_gmm(params, self.cfg.gmm_components, self.cfg.log_std_min, self.cfg.log_std_max)
        return tanh_gaussian(params, self.cfg.log_std_min, self.cfg.log_std_max)


MASKED_LOGIT = -1e4
"""Logit of a masked action: probability 0 in float32, yet a finite log-probability (no NaN in the losses)."""


def mask_logits(logits: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Logits `(B, L, G, n)` with the actions where `valid (B, L, n)` is 0 set to `MASKED_LOGIT`."""
    invalid = (valid <= 0.5) & (valid > 0.5).any(-1, keepdim=True)  # an all-zero mask (padding) masks nothing
    return logits.masked_fill(invalid[..., None, :], MASKED_LOGIT)


def _grouped_uniform(shape: tuple[int, ...], fan_in: int) -> nn.Parameter:
    bound = 1.0 / math.sqrt(fan_in)
    return nn.Parameter(torch.empty(shape).uniform_(-bound, bound))


class CriticEnsemble(nn.Module):
    """K critics x G discount factors, fused.

    Action-input critics (continuous, multibinary, multidiscrete, and discrete with `discrete_as_continuous`):
    `forward(state (B, L, D), action)` with `action_features` `(B, L, A)` shared by every gamma or
    `(B, L, G, A)` one per gamma -> `(K, B, L, G)` values, or `(K, B, L, G, bins)` logits; `forward_candidates`
    evaluates M candidate actions at once. Discrete (`self.discrete`): `forward(state)` -> `(K, B, L, G, A)`
    values (Q of every action), or `(K, B, L, G, A, bins)`. Outputs are float32 even under autocast.

    All K critics run as batched matmuls (no Python loop). The first layer splits
    `W [s; a] = W_s s + W_a a`: the state part is computed once for all G per-gamma actions, and an
    action shared by every gamma skips the G copies entirely (G times fewer rows).
    """

    def __init__(self, d_state: int, action: ActionSpec, num_gammas: int, cfg: CriticHeadConfig):
        super().__init__()
        _check_action_kind(action, "critic head")
        K, H, G = cfg.num_critics, cfg.d_hidden, num_gammas
        self.num_critics, self.d_hidden, self.num_gammas = K, H, G
        self.discrete = action.kind == "discrete" and not cfg.discrete_as_continuous
        """True when `forward(state)` outputs Q of every action; False when the action is an input."""
        self.action_dim = action.dim
        self.bins = SymlogBins(cfg.num_bins, cfg.symlog_low, cfg.symlog_high) if cfg.output == "bins" else None
        self.out_shape: tuple[int, ...] = ((self.action_dim,) if self.discrete else ()) + (
            (cfg.num_bins,) if self.bins is not None else ()
        )
        out = math.prod(self.out_shape)
        fan_in = d_state + (0 if self.discrete else self.action_dim)
        self.in_state_w = _grouped_uniform((K, d_state, H), fan_in)  # first layer, state part
        self.in_b = _grouped_uniform((K, 1, H), fan_in)
        self.in_action_w = None if self.discrete else _grouped_uniform((K, self.action_dim, H), fan_in)
        self.hidden_w = nn.ParameterList(_grouped_uniform((K, H, H), H) for _ in range(cfg.n_layers - 1))
        self.hidden_b = nn.ParameterList(_grouped_uniform((K, 1, H), H) for _ in range(cfg.n_layers - 1))
        self.out_w = _grouped_uniform((K, G, H, out), H)  # one output layer per (critic, gamma)
        self.out_b = _grouped_uniform((K, G, out), H)
        if self.bins is not None:  # uniform bin probabilities at init (DreamerV3)
            nn.init.zeros_(self.out_w)
            nn.init.zeros_(self.out_b)
        self.act = activation(cfg.activation)

    def forward(self, state: torch.Tensor, action: torch.Tensor | None = None) -> torch.Tensor:
        B, L, _ = state.shape
        K, H, G, N = self.num_critics, self.d_hidden, self.num_gammas, B * L
        s = torch.matmul(state.reshape(N, -1), self.in_state_w) + self.in_b  # (K, N, H), once for all gammas
        if self.discrete or action is None or action.dim() != 4:
            if not self.discrete:
                s = s + self._action_part(action, B, L)  # (K, N, H)
            h = self._hidden(self.act(s))  # (K, N, H)
            w = self.out_w.permute(0, 2, 1, 3).reshape(K, H, -1)  # (K, H, G*O)
            out = torch.bmm(h, w).view(K, N, G, -1)  # (K, N, G, O)
        else:
            a = self._action_part(action, B, L).view(K, N, G, H)  # one action per gamma
            h = self._hidden(self.act(s[:, :, None] + a).view(K, N * G, H))  # (K, N*G, H), rows ordered (n, g)
            out = self._per_gamma_output(h, N)  # (K, N, G, O)
        out = out.float() + self.out_b[:, None]  # (K, N, G, O); float32 even under autocast
        return out.reshape(K, B, L, G, *self.out_shape)

    def _action_part(self, action: torch.Tensor | None, B: int, L: int) -> torch.Tensor:
        if action is None or self.in_action_w is None:
            raise ValueError("critic head: action-input critics need an action input (see `action_features`)")
        if action.shape[:2] != (B, L) or action.shape[-1] != self.action_dim or action.dim() not in (3, 4):
            raise ValueError(
                f"critic head: action must be (B, L, A) or (B, L, G, A) with A={self.action_dim}, "
                f"got {tuple(action.shape)} for state (B={B}, L={L})"
            )
        flat = action.reshape(-1, self.action_dim).to(self.in_action_w.dtype)  # (N [* G], A)
        return torch.matmul(flat, self.in_action_w)  # (K, N [* G], H)

    def forward_candidates(self, state: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """An action-input critic at M candidate actions shared by every (b, l), in one pass.

        `state (B, L, D)`, `candidates (M, A)` (e.g. `action_features(spec, enumerate_actions(spec))`) ->
        `(K, B, L, G, M)` values or `(K, B, L, G, M, bins)`: the layout of a discrete critic's output, so exact
        expectations over actions work the same way. The state part of the first layer is computed once.
        """
        if self.in_action_w is None:
            raise ValueError(
                "critic head: forward_candidates needs an action-input critic; this one outputs Q of every action"
            )
        if candidates.dim() != 2 or candidates.shape[1] != self.action_dim:
            raise ValueError(
                f"critic head: candidates must be (M, A) with A={self.action_dim}, got {tuple(candidates.shape)}"
            )
        B, L, _ = state.shape
        K, H, G, N, M = self.num_critics, self.d_hidden, self.num_gammas, B * L, candidates.shape[0]
        s = torch.matmul(state.reshape(N, -1), self.in_state_w) + self.in_b  # (K, N, H)
        a = torch.matmul(candidates.to(self.in_action_w.dtype), self.in_action_w)  # (K, M, H)
        h = self._hidden(self.act(s[:, :, None] + a[:, None]).view(K, N * M, H))  # (K, N*M, H)
        w = self.out_w.permute(0, 2, 1, 3).reshape(K, H, -1)  # (K, H, G*O)
        out = torch.bmm(h, w).view(K, N, M, G, -1).float() + self.out_b[:, None, None]  # (K, N, M, G, O)
        return out.transpose(2, 3).reshape(K, B, L, G, M, *self.out_shape)

    def _per_gamma_output(self, h: torch.Tensor, n: int) -> torch.Tensor:
        """Row (n, g) through gamma g's output layer: `(K, N*G, H)` -> `(K, N, G, O)`."""
        K, G, H, n_out = self.num_critics, self.num_gammas, self.d_hidden, self.out_w.shape[-1]
        if n_out == 1:  # all G outputs per row in one matmul, keep the diagonal: no copy of h (G*H extra MACs per row)
            dense = torch.bmm(h, self.out_w[..., 0].transpose(1, 2))  # (K, N*G, G)
            return dense.view(K, n, G, G).diagonal(dim1=2, dim2=3)[..., None]  # (K, N, G, 1)
        return torch.einsum("kngh,kgho->kngo", h.view(K, n, G, H), self.out_w)  # (K, N, G, O)

    def _hidden(self, h: torch.Tensor) -> torch.Tensor:
        """Grouped hidden layers: `(K, N, H)` batched matmul per critic."""
        for w, b in zip(self.hidden_w, self.hidden_b, strict=True):
            h = self.act(torch.baddbmm(b, h, w))  # (K, N, H)
        return h

    def values(self, output: torch.Tensor) -> torch.Tensor:
        """Scalar values from `forward`'s output (decodes bin logits; identity for scalar critics)."""
        return output if self.bins is None else self.bins.decode(output)
