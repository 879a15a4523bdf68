"""The two simplest trajectory encoders: `ff` (no memory, the ablation) and `gru`.

Pure torch; must not import stores, YAML or pipelines.
"""

from __future__ import annotations

import torch
from torch import nn

from amago_pipe.config.nets import FFTrajConfig, GruConfig
from amago_pipe.nets.base import TrajEncoder, TrajState, check_done_mask, check_sequence
from amago_pipe.nets.layers import Dropout, activation, norm_layer
from amago_pipe.nets.onednn_linear import Linear


class _ResidualMlpBlock(nn.Module):
    """x + W2 act(W1 norm(x)), pre-norm."""

    def __init__(self, d_model: int, act: str, norm: str, dropout: float):
        super().__init__()
        self.norm = norm_layer(norm, d_model)
        self.ff = nn.Sequential(
            Linear(d_model, 4 * d_model),
            activation(act),
            Dropout(dropout),
            Linear(4 * d_model, d_model),
            Dropout(dropout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.ff(self.norm(x))  # (B, L, D)


class FFTrajEncoder(TrajEncoder):
    """Each timestep alone through a residual MLP; the state is empty (no memory)."""

    def __init__(self, *, d_in: int, max_seq_len: int, cfg: FFTrajConfig):
        super().__init__()
        self.d_in, self.out_dim = d_in, cfg.d_model
        self.inp = Linear(d_in, cfg.d_model)
        self.blocks = nn.ModuleList(
            _ResidualMlpBlock(cfg.d_model, cfg.activation, cfg.norm, cfg.dropout) for _ in range(cfg.n_layers)
        )
        self.out_norm = norm_layer(cfg.norm, cfg.d_model)

    def forward(
        self, seq: torch.Tensor, time: torch.Tensor, state: TrajState | None = None
    ) -> tuple[torch.Tensor, TrajState]:
        check_sequence(seq, time, self.d_in, "ff traj_encoder")
        x = self.inp(seq)  # (B, L, D)
        for block in self.blocks:
            x = block(x)
        return self.out_norm(x), {}

    def init_state(self, batch: int, device: torch.device | str | None = None) -> TrajState:
        return {}

    def reset(self, state: TrajState, done_mask: torch.Tensor) -> TrajState:
        return state


class GruTrajEncoder(TrajEncoder):
    """A stacked GRU; state `{"h": (n_layers, B, d_model)}`."""

    def __init__(self, *, d_in: int, max_seq_len: int, cfg: GruConfig):
        super().__init__()
        self.d_in, self.out_dim = d_in, cfg.d_model
        self.n_layers = cfg.n_layers
        self.gru = nn.GRU(d_in, cfg.d_model, num_layers=cfg.n_layers, batch_first=True, dropout=cfg.dropout)
        if cfg.gate_init != "uniform":
            chrono_init(self.gru, max_seq_len, units=cfg.d_model if cfg.gate_init == "chrono" else cfg.d_model // 2)
        self.out_norm = norm_layer(cfg.norm, cfg.d_model)

    def forward(
        self, seq: torch.Tensor, time: torch.Tensor, state: TrajState | None = None
    ) -> tuple[torch.Tensor, TrajState]:
        check_sequence(seq, time, self.d_in, "gru traj_encoder")
        h0 = None if state is None else state["h"].to(seq.dtype)
        out, h = self.gru(seq, h0)  # (B, L, D), (n_layers, B, D)
        return self.out_norm(out), {"h": h}

    def init_state(self, batch: int, device: torch.device | str | None = None) -> TrajState:
        param = next(self.gru.parameters())
        return {"h": torch.zeros(self.n_layers, batch, self.out_dim, device=device or param.device, dtype=param.dtype)}

    def reset(self, state: TrajState, done_mask: torch.Tensor) -> TrajState:
        done = check_done_mask(done_mask, state["h"].shape[1], "gru traj_encoder")
        keep = (~done).to(state["h"].dtype)[None, :, None]  # (1, B, 1)
        return {"h": state["h"] * keep}


@torch.no_grad()
def chrono_init(gru: nn.GRU, max_seq_len: int, *, units: int) -> None:
    """Chrono initialisation (Tallec & Ollivier, 2018) of the last `units` units of every layer: update-gate
    biases log U(1, T - 1), T = max_seq_len, so each starts out keeping its state for about 1 + exp(b) steps,
    spread over [2, T], instead of halving it every step; the other units keep PyTorch's initialisation.
    nn.GRU keeps the gates' biases as (reset, update, new) blocks; the update gate z keeps the old state:
    h' = (1 - z) n + z h."""
    hidden = gru.hidden_size
    chrono = slice(2 * hidden - units, 2 * hidden)
    for layer in range(gru.num_layers):
        getattr(gru, f"bias_ih_l{layer}")[chrono] = 0.0
        getattr(gru, f"bias_hh_l{layer}")[chrono] = torch.empty(units).uniform_(1.0, max(2.0, max_seq_len - 1.0)).log()
