"""Mamba's selective scan: a pure-PyTorch recurrence with a hand-written backward, and the mamba-ssm kernel.
Pure torch (mamba-ssm imported at the point of use); must not import stores, YAML or pipelines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from amago_pipe.errors import MissingDependencyError

MAMBA_HINT = "pip install mamba-ssm causal-conv1d (or `pip install amago-pipe[gpu]`; needs a CUDA GPU)"


def load_mamba_kernel(required: bool) -> Callable[..., Any] | None:
    """mamba-ssm's `selective_scan_fn`; None when absent (MissingDependencyError if `required`)."""
    try:
        from mamba_ssm.ops.selective_scan_interface import selective_scan_fn
    except (ImportError, OSError) as e:
        if required:
            raise MissingDependencyError(
                f"traj_encoder.backend: 'cuda' needs the mamba-ssm package ({e}); {MAMBA_HINT}; "
                "or set traj_encoder.backend: torch"
            ) from e
        return None
    fn: Callable[..., Any] = selective_scan_fn
    return fn


def _discretize(
    u: torch.Tensor, delta: torch.Tensor, A: torch.Tensor, Bm: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Time-major chunk: u/delta `(T, B, Di)`, Bm `(T, B, N)` -> decay exp(dt A) and drive dt B u, `(T, B, Di, N)`."""
    decay = torch.exp(delta[..., None] * A)  # (T, B, Di, N)
    drive = (delta * u)[..., None] * Bm[:, :, None, :]  # (T, B, Di, N)
    return decay, drive


def _states(decay: torch.Tensor, drive: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """h_t = decay_t h_{t-1} + drive_t from `h (B, Di, N)`: every state of the chunk, `(T, B, Di, N)`."""
    out = torch.empty_like(drive)
    for t in range(drive.shape[0]):
        h = torch.addcmul(drive[t], decay[t], h, out=out[t])
    return out


def _scan(
    u: torch.Tensor,
    delta: torch.Tensor,
    A: torch.Tensor,
    Bm: torch.Tensor,
    C: torch.Tensor,
    h0: torch.Tensor,
    chunk: int,
) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    """The recurrence, time-major: outputs `(L, B, Di)`, the last state and the first state of each chunk."""
    starts, ys = [], []
    h = h0
    for s in range(0, u.shape[0], chunk):
        part = slice(s, s + chunk)
        starts.append(h)
        hs = _states(*_discretize(u[part], delta[part], A, Bm[part]), h)  # (T, B, Di, N)
        ys.append(torch.matmul(hs, C[part, :, :, None])[..., 0])  # (T, B, Di)
        h = hs[-1]
    return torch.cat(ys, dim=0), h.clone(), starts


class _SelectiveScan(torch.autograd.Function):
    """The recurrence with a hand-written backward (a reverse scan); states are recomputed per chunk in
    backward from the chunk's first state, so memory never holds all `(L, B, Di, N)` states."""

    @staticmethod
    def forward(ctx: Any, u: Any, delta: Any, A: Any, Bm: Any, C: Any, h0: Any, chunk: int) -> Any:
        y, h, starts = _scan(u, delta, A, Bm, C, h0, chunk)
        ctx.save_for_backward(u, delta, A, Bm, C, torch.stack(starts))
        ctx.chunk = chunk
        return y, h

    @staticmethod
    def backward(ctx: Any, dy: Any, dh_last: Any) -> Any:
        u, delta, A, Bm, C, starts = ctx.saved_tensors
        du, ddelta, dB, dC = (torch.empty_like(x) for x in (u, delta, Bm, C))
        dA = torch.zeros_like(A)
        carry = torch.zeros_like(starts[0]) if dh_last is None else dh_last.clone()  # dL/dh at the chunk end
        for c in reversed(range(starts.shape[0])):
            part = slice(c * ctx.chunk, (c + 1) * ctx.chunk)
            u_c, delta_c, B_c, dy_c = u[part], delta[part], Bm[part], dy[part]
            decay, drive = _discretize(u_c, delta_c, A, B_c)
            hs = _states(decay, drive, starts[c])  # (T, B, Di, N)
            dhs = dy_c[..., None] * C[part][:, :, None, :]  # (T, B, Di, N): dL/dh_t, plus the future below
            for t in reversed(range(hs.shape[0])):
                carry = decay[t] * dhs[t].add_(carry)
            dC[part] = torch.matmul(dy_c[:, :, None, :], hs)[:, :, 0]  # (T, B, N)
            dB[part] = torch.matmul((delta_c * u_c)[:, :, None, :], dhs)[:, :, 0]  # (T, B, N)
            g_du = torch.matmul(dhs, B_c[..., None])[..., 0]  # dL/d(dt u), (T, B, Di)
            g_decay = dhs.mul_(decay)  # dL/d(dt A) = dL/dh_t * decay_t * h_{t-1}
            g_decay[1:].mul_(hs[:-1])
            g_decay[0].mul_(starts[c])
            dA += (g_decay * delta_c[..., None]).sum((0, 1))
            ddelta[part] = (g_decay * A).sum(-1) + g_du * u_c
            du[part] = g_du * delta_c
        return du, ddelta, dA, dB, dC, carry, None


def selective_scan_torch(
    u: torch.Tensor,
    delta: torch.Tensor,
    A: torch.Tensor,
    Bm: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor,
    h0: torch.Tensor | None = None,
    chunk: int = 64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """y `(B, L, Di)` and the last state `(B, Di, N)`; `delta` is already positive (softplus applied).

    Runs in float32, time-major inside. Backward recomputes each chunk's states from its first one
    (kept by forward), so training memory holds `L / chunk` states plus one chunk's temporaries.
    """
    dtype = u.dtype
    batch, _, d_inner = u.shape
    A = A.float()
    h = h0.float() if h0 is not None else u.new_zeros(batch, d_inner, A.shape[1], dtype=torch.float32)
    u_t, delta_t, B_t, C_t = (x.float().transpose(0, 1).contiguous() for x in (u, delta, Bm, C))  # (L, B, ...)
    with torch.autocast(u.device.type, enabled=False):  # float32 under bf16 autocast too (its matmuls would not be)
        if torch.is_grad_enabled():
            y, h_last = _SelectiveScan.apply(u_t, delta_t, A, B_t, C_t, h, chunk)
        else:  # inference: plain ops, which traced and exported programs can hold
            y, h_last, _ = _scan(u_t, delta_t, A, B_t, C_t, h, chunk)
    y = y.transpose(0, 1) + u.float() * D.float()  # (B, L, Di)
    return y.to(dtype), h_last


def selective_scan_cuda(
    kernel: Callable[..., Any],
    u: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    Bm: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor,
    dt_bias: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """mamba-ssm's fused kernel from a zero state; `dt` is before bias and softplus. Same shapes as the torch scan."""
    y, last = kernel(
        u.transpose(1, 2).contiguous(),  # (B, Di, L)
        dt.transpose(1, 2).contiguous(),  # (B, Di, L)
        A,
        Bm.transpose(1, 2).contiguous(),  # (B, N, L)
        C.transpose(1, 2).contiguous(),  # (B, N, L)
        D.float(),
        delta_bias=dt_bias.float(),
        delta_softplus=True,
        return_last_state=True,
    )
    return y.transpose(1, 2), last  # (B, L, Di), (B, Di, N)
