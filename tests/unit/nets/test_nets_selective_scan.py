"""The pure-PyTorch selective scan: gradients (gradcheck in float64), values against a naive loop, bf16 autocast."""

from __future__ import annotations

import pytest
import torch

from amago_pipe.config.nets import MambaConfig
from amago_pipe.nets import build_traj_encoder
from amago_pipe.nets.selective_scan import _SelectiveScan, selective_scan_torch


def naive_scan(u, delta, A, Bm, C, D, h):  # type: ignore[no-untyped-def]
    ys = []
    for t in range(u.shape[1]):
        h = torch.exp(delta[:, t, :, None] * A) * h + (delta[:, t] * u[:, t])[..., None] * Bm[:, t, None, :]
        ys.append((h * C[:, t, None, :]).sum(-1) + D * u[:, t])
    return torch.stack(ys, 1), h


@pytest.mark.parametrize("chunk", [1, 3, 8])
def test_gradients_match_finite_differences(chunk: int) -> None:
    L, B, Di, N = 7, 2, 3, 4
    args = [
        torch.randn(L, B, Di, dtype=torch.float64),
        torch.rand(L, B, Di, dtype=torch.float64) + 0.1,
        -torch.rand(Di, N, dtype=torch.float64) - 0.2,
        torch.randn(L, B, N, dtype=torch.float64),
        torch.randn(L, B, N, dtype=torch.float64),
        torch.randn(B, Di, N, dtype=torch.float64),
    ]
    args = [a.requires_grad_() for a in args]
    assert torch.autograd.gradcheck(lambda *a: _SelectiveScan.apply(*a, chunk), args)


def test_values_and_gradients_match_a_naive_loop() -> None:
    B, L, Di, N = 3, 20, 5, 4
    inputs = [
        torch.randn(B, L, Di),
        torch.rand(B, L, Di),
        -torch.rand(Di, N) * 3,
        torch.randn(B, L, N),
        torch.randn(B, L, N),
    ]
    inputs = [x.requires_grad_() for x in inputs]
    D, h0 = torch.randn(Di), torch.randn(B, Di, N)
    y, h = selective_scan_torch(*inputs, D, h0, chunk=6)
    y_ref, h_ref = naive_scan(*inputs, D, h0)
    torch.testing.assert_close(y, y_ref)
    torch.testing.assert_close(h, h_ref)
    weights = torch.randn_like(y)
    grads = torch.autograd.grad((y * weights).sum() + h.sum(), inputs)
    grads_ref = torch.autograd.grad((y_ref * weights).sum() + h_ref.sum(), inputs)
    for g, g_ref in zip(grads, grads_ref, strict=True):
        torch.testing.assert_close(g, g_ref, atol=1e-4, rtol=1e-4)


def test_mamba_trains_under_bf16_autocast() -> None:
    """`mixed_precision: bf16` on a GPU: the scan stays in float32 inside autocast (its matmuls used to mix dtypes)."""
    torch.manual_seed(0)
    enc = build_traj_encoder(MambaConfig(d_model=32, n_layers=2, backend="torch"), 8, 64)
    seq, time = torch.randn(2, 40, 8), torch.arange(40).repeat(2, 1)
    ref, _ = enc(seq, time)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = enc(seq, time)
    out.float().square().mean().backward()
    grads = [p.grad for p in enc.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert float((out.detach().float() - ref.detach()).norm() / ref.detach().norm()) < 5e-2
