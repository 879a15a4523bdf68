"""`linear` and `Linear`: `F.linear` / `nn.Linear` whose large float32 CPU products run on oneDNN.

On AMD EPYC CPUs oneDNN's matmul is ~1.5x MKL's sgemm (which torch's CPU linear calls) for the learner's shapes;
on Intel CPUs MKL is as fast or faster (0.75-1.0x there), so they keep `F.linear`. Same maths, another summation
order (float32 rounding). Traced, exported, compiled, autocast and small products keep `F.linear`. Pure torch;
must not import stores, YAML or pipelines.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

ONEDNN_MIN_MACS = 1 << 25
"""Products smaller than this (rows x in x out multiply-adds) stay on `F.linear`: oneDNN costs ~12 us more per
call, which only large products repay (rollout steps never get here)."""


def _cpu_vendor() -> str:
    """The CPU's vendor id as Linux reports it (`GenuineIntel`, `AuthenticAMD`, ...; '' where unknown)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("vendor_id")), "")
    except OSError:
        return ""


AVAILABLE = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
"""This torch has oneDNN's linear op."""
_enabled = [AVAILABLE and _cpu_vendor() != "GenuineIntel"]


@contextlib.contextmanager
def plain_kernels() -> Iterator[None]:
    """Within it, every product runs on `F.linear` (a reference for tests and comparisons)."""
    before = _enabled[0]
    _enabled[0] = False
    try:
        yield
    finally:
        _enabled[0] = before


def use_onednn(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether `linear(x, weight)` takes oneDNN: plain float32 CPU tensors, a large product, eager mode."""
    return (
        _enabled[0]
        and type(x) is torch.Tensor  # not a FakeTensor or another subclass (torch.export)
        and not torch.compiler.is_compiling()
        and x.numel() * weight.shape[0] >= ONEDNN_MIN_MACS  # early: it rules out every rollout step at once
        and not (torch.jit.is_tracing() or torch.jit.is_scripting())
        and x.device.type == "cpu"
        and x.dtype == weight.dtype == torch.float32
        and not torch.is_autocast_enabled("cpu")
    )


def _product(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x (..., I) @ weight (O, I)^T + bias (O,) on oneDNN -> (..., O); `weight` may be a transposed view."""
    rows = x.reshape(-1, x.shape[-1])  # (N, I)
    out = torch.ops.mkldnn._linear_pointwise(rows, weight, bias, "none", [], "")  # (N, O)
    return out.view(*x.shape[:-1], weight.shape[0])  # type: ignore[no-any-return]


class _OneDnnLinear(torch.autograd.Function):
    """Forward and input gradient on oneDNN; the weight gradient on torch's mm (oneDNN is no faster there)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return _product(x, weight, bias)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        g = grad.reshape(-1, grad.shape[-1])  # (N, O)
        need_x, need_w, need_b = ctx.needs_input_grad
        grad_x = _product(grad, weight.t(), None) if need_x else None  # (..., I)
        grad_w = g.t().mm(x.reshape(-1, x.shape[-1])) if need_w else None  # (O, I)
        grad_b = g.sum(0) if need_b and ctx.has_bias else None  # (O,)
        return grad_x, grad_w, grad_b


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`F.linear(x, weight, bias)`, on oneDNN where `use_onednn` says so."""
    if not use_onednn(x, weight):
        return F.linear(x, weight, bias)
    wants_grad = x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)
    if torch.is_grad_enabled() and wants_grad:
        return _OneDnnLinear.apply(x, weight, bias)  # type: ignore[no-any-return]
    return _product(x, weight, bias)


class Linear(nn.Linear):
    """`nn.Linear` (same parameters and state-dict keys) whose forward is `linear`."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)
