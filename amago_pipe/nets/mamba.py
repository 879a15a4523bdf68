"""The `mamba` trajectory encoder: residual Mamba blocks (mamba-ssm parameter names) with conv + SSM state.
Pure torch (mamba-ssm imported at the point of use); must not import stores, YAML or pipelines.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from amago_pipe.config.nets import MambaConfig
from amago_pipe.errors import ConfigError
from amago_pipe.nets.base import TrajEncoder, TrajState, check_done_mask, check_sequence
from amago_pipe.nets.layers import norm_layer
from amago_pipe.nets.selective_scan import load_mamba_kernel, selective_scan_cuda, selective_scan_torch


class MambaMixer(nn.Module):
    """One Mamba (S6) mixer: gated, causal depthwise conv, input-dependent selective scan."""

    def __init__(
        self,
        d_model: int,
        *,
        d_state: int = 16,
        d_conv: int = 4,
        expand: int = 2,
        backend: str = "auto",
        scan_chunk: int = 64,
        dt_min: float = 1e-3,
        dt_max: float = 0.1,
    ):
        super().__init__()
        d_inner = expand * d_model
        self.d_inner, self.d_state, self.d_conv = d_inner, d_state, d_conv
        self.dt_rank = math.ceil(d_model / 16)
        self.backend, self.scan_chunk = backend, scan_chunk
        self._kernel: Callable[..., Any] | None = None  # mamba-ssm, imported at the first full-sequence call
        self._kernel_checked = False
        self.in_proj = nn.Linear(d_model, 2 * d_inner, bias=False)
        self.conv1d = nn.Conv1d(d_inner, d_inner, d_conv, groups=d_inner, padding=d_conv - 1)
        self.x_proj = nn.Linear(d_inner, self.dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, d_inner, bias=True)
        self.out_proj = nn.Linear(d_inner, d_model, bias=False)
        A = torch.arange(1, d_state + 1, dtype=torch.float32).repeat(d_inner, 1)  # (Di, N)
        self.A_log = nn.Parameter(torch.log(A))
        self.D = nn.Parameter(torch.ones(d_inner))
        with torch.no_grad():  # mamba-ssm's dt initialisation: softplus(bias) spread log-uniformly in [dt_min, dt_max]
            nn.init.uniform_(self.dt_proj.weight, -(self.dt_rank**-0.5), self.dt_rank**-0.5)
            dt = torch.exp(torch.rand(d_inner) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
            dt = dt.clamp(min=1e-4)
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))

    def forward(
        self, x: torch.Tensor, conv_state: torch.Tensor | None, ssm_state: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x `(B, L, D)`; states `(B, Di, d_conv - 1)`, `(B, Di, N)` or None (fresh). Returns y and new states."""
        xs, z = self.in_proj(x).chunk(2, dim=-1)  # (B, L, Di) each
        xs, conv_state = self._causal_conv(xs, conv_state)  # (B, L, Di)
        dt_low, Bm, C = self.x_proj(xs).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        A = -torch.exp(self.A_log.float())  # (Di, N)
        kernel = self._kernel_for(xs, ssm_state)
        if kernel is not None:
            dt = F.linear(dt_low, self.dt_proj.weight)  # (B, L, Di), bias added inside the kernel
            y, ssm_state = selective_scan_cuda(kernel, xs, dt, A, Bm, C, self.D, self.dt_proj.bias)
        else:
            delta = F.softplus(self.dt_proj(dt_low))  # (B, L, Di)
            y, ssm_state = selective_scan_torch(xs, delta, A, Bm, C, self.D, ssm_state, self.scan_chunk)
        y = y * F.silu(z)  # (B, L, Di)
        return self.out_proj(y), conv_state, ssm_state

    def _causal_conv(self, xs: torch.Tensor, conv_state: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Depthwise causal conv over time, continuing from `conv_state` (the last d_conv - 1 inputs)."""
        batch, _, d_inner = xs.shape
        if conv_state is None:
            conv_state = xs.new_zeros(batch, d_inner, self.d_conv - 1)
        padded = torch.cat((conv_state.to(xs.dtype), xs.transpose(1, 2)), dim=2)  # (B, Di, d_conv - 1 + L)
        out = F.conv1d(padded, self.conv1d.weight, self.conv1d.bias, groups=d_inner)  # (B, Di, L)
        return F.silu(out).transpose(1, 2), padded[:, :, -(self.d_conv - 1) :]

    def _kernel_for(self, xs: torch.Tensor, ssm_state: torch.Tensor | None) -> Callable[..., Any] | None:
        """mamba-ssm's scan for a fresh full-sequence forward; None means the PyTorch recurrence.

        Rollout steps and continuations (a state given) always use the recurrence, so a model trained
        with `backend: cuda` still runs stepwise on a machine without mamba-ssm.
        """
        if self.backend == "torch" or ssm_state is not None or xs.shape[1] == 1:
            return None
        if not self._kernel_checked:
            self._kernel = load_mamba_kernel(required=self.backend == "cuda")
            self._kernel_checked = True
        if not xs.is_cuda:
            if self.backend == "cuda":
                raise ConfigError(
                    "traj_encoder.backend: 'cuda' needs CUDA tensors (mamba-ssm kernels), got a "
                    f"{xs.device.type} tensor; set backend: auto or torch to run elsewhere"
                )
            return None
        return self._kernel


class MambaTrajEncoder(TrajEncoder):
    """Pre-norm residual Mamba blocks; state `{"conv": (n_layers, B, Di, d_conv-1), "ssm": (n_layers, B, Di, N)}`.

    Mamba needs no position information: `time` is checked but not used.
    """

    def __init__(self, *, d_in: int, max_seq_len: int, cfg: MambaConfig):
        super().__init__()
        self.d_in, self.out_dim = d_in, cfg.d_model
        self.inp = nn.Linear(d_in, cfg.d_model)
        self.norms = nn.ModuleList(norm_layer(cfg.norm, cfg.d_model) for _ in range(cfg.n_layers))
        self.mixers = nn.ModuleList(
            MambaMixer(
                cfg.d_model,
                d_state=cfg.d_state,
                d_conv=cfg.d_conv,
                expand=cfg.expand,
                backend=cfg.backend,
                scan_chunk=cfg.scan_chunk,
            )
            for _ in range(cfg.n_layers)
        )
        with torch.no_grad():  # GPT-2 style: shrink residual branches by the depth
            for mixer in self.mixers:
                mixer.out_proj.weight.div_(math.sqrt(cfg.n_layers))  # type: ignore[union-attr,operator]
        self.out_norm = norm_layer(cfg.norm, cfg.d_model)

    def forward(
        self, seq: torch.Tensor, time: torch.Tensor, state: TrajState | None = None
    ) -> tuple[torch.Tensor, TrajState]:
        check_sequence(seq, time, self.d_in, "mamba traj_encoder")
        x = self.inp(seq)  # (B, L, D)
        convs, ssms = [], []
        for i, (norm, mixer) in enumerate(zip(self.norms, self.mixers, strict=True)):
            conv_state = None if state is None else state["conv"][i]
            ssm_state = None if state is None else state["ssm"][i]
            y, conv_state, ssm_state = mixer(norm(x), conv_state, ssm_state)
            x = x + y  # (B, L, D)
            convs.append(conv_state)
            ssms.append(ssm_state)
        return self.out_norm(x), {"conv": torch.stack(convs), "ssm": torch.stack(ssms)}

    def init_state(self, batch: int, device: torch.device | str | None = None) -> TrajState:
        first: MambaMixer = self.mixers[0]  # type: ignore[assignment]
        dev = torch.device(device) if device is not None else self.inp.weight.device
        n_layers = len(self.mixers)
        return {
            "conv": torch.zeros(n_layers, batch, first.d_inner, first.d_conv - 1, device=dev),
            "ssm": torch.zeros(n_layers, batch, first.d_inner, first.d_state, device=dev),
        }

    def reset(self, state: TrajState, done_mask: torch.Tensor) -> TrajState:
        done = check_done_mask(done_mask, state["ssm"].shape[1], "mamba traj_encoder")
        keep = (~done).to(state["ssm"].dtype).to(state["ssm"].device)
        return {"conv": state["conv"] * keep[None, :, None, None], "ssm": state["ssm"] * keep[None, :, None, None]}
