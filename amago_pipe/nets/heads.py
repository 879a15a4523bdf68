"""Actor heads (one action distribution per discount factor) and the fused ensemble of K critics.
Pure torch; must not import stores, YAML or pipelines.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.distributions import Distribution

from amago_pipe.config.nets import ActorHeadConfig, CriticHeadConfig
from amago_pipe.errors import ConfigError
from amago_pipe.nets.bins import SymlogBins
from amago_pipe.nets.distributions import categorical, multi_binary, scaled_beta, tanh_gaussian
from amago_pipe.nets.layers import activation, mlp
from amago_pipe.spec import ActionSpec, describe_action


def _check_action_kind(action: ActionSpec, what: str) -> None:
    if action.kind not in ("discrete", "continuous", "multibinary"):
        raise ConfigError(
            f"{what}: {describe_action(action)} actions are not supported (supported: discrete, continuous, multibinary)"
        )


class ActorHead(nn.Module):
    """MLP from the state `(B, L, D)` to G action distributions with batch shape `(B, L, G)`, in one output layer.

    Distribution parameters are float32 even under autocast.
    """

    def __init__(self, d_state: int, action: ActionSpec, num_gammas: int, cfg: ActorHeadConfig):
        super().__init__()
        _check_action_kind(action, "actor head")
        self.action, self.num_gammas, self.cfg = action, num_gammas, cfg
        if action.kind == "continuous":
            self.params_per_gamma = 2 * action.dim
        else:
            self.params_per_gamma = action.dim  # logits (discrete: n, multibinary: A)
        self.net = mlp(
            d_state,
            cfg.d_hidden,
            cfg.n_layers,
            num_gammas * self.params_per_gamma,
            act=cfg.activation,
            dropout=cfg.dropout,
        )

    def forward(self, state: torch.Tensor) -> Distribution:
        params = self.net(state).float().unflatten(-1, (self.num_gammas, self.params_per_gamma))  # (B, L, G, P)
        if self.action.kind == "discrete":
            return categorical(params)
        if self.action.kind == "multibinary":
            return multi_binary(params)
        if self.cfg.continuous_dist == "beta":
            return scaled_beta(params)
        return tanh_gaussian(params, self.cfg.log_std_min, self.cfg.log_std_max)


def _grouped_uniform(shape: tuple[int, ...], fan_in: int) -> nn.Parameter:
    bound = 1.0 / math.sqrt(fan_in)
    return nn.Parameter(torch.empty(shape).uniform_(-bound, bound))


class CriticEnsemble(nn.Module):
    """K critics x G discount factors, fused.

    Continuous / multi-binary: `forward(state (B, L, D), action)` with `action (B, L, A)` shared by every
    gamma or `(B, L, G, A)` one per gamma -> `(K, B, L, G)` values, or `(K, B, L, G, bins)` logits.
    Discrete: `forward(state)` -> `(K, B, L, G, A)` values (Q of every action), or `(K, B, L, G, A, bins)`.
    Outputs are float32 even under autocast.

    All K critics run as batched matmuls (no Python loop). The first layer splits
    `W [s; a] = W_s s + W_a a`: the state part is computed once for all G per-gamma actions, and an
    action shared by every gamma skips the G copies entirely (G times fewer rows).
    """

    def __init__(self, d_state: int, action: ActionSpec, num_gammas: int, cfg: CriticHeadConfig):
        super().__init__()
        _check_action_kind(action, "critic head")
        K, H, G = cfg.num_critics, cfg.d_hidden, num_gammas
        self.num_critics, self.d_hidden, self.num_gammas = K, H, G
        self.discrete = action.kind == "discrete"
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
            raise ValueError("critic head: continuous and multi-binary critics need an action input")
        if action.shape[:2] != (B, L) or action.shape[-1] != self.action_dim or action.dim() not in (3, 4):
            raise ValueError(
                f"critic head: action must be (B, L, A) or (B, L, G, A) with A={self.action_dim}, "
                f"got {tuple(action.shape)} for state (B={B}, L={L})"
            )
        flat = action.reshape(-1, self.action_dim).to(self.in_action_w.dtype)  # (N [* G], A)
        return torch.matmul(flat, self.in_action_w)  # (K, N [* G], H)

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
