"""Attention backends (`sdpa`, `flash`, `vanilla`) and the causal self-attention layer that uses the KV cache.
Pure torch (flash-attn imported at the point of use); must not import stores, YAML or pipelines.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from amago_pipe.errors import ConfigError, MissingDependencyError
from amago_pipe.nets.kv_cache import AttentionPlan, write_slots
from amago_pipe.nets.layers import Dropout, linear
from amago_pipe.nets.positions import Rotary

BACKENDS = ("sdpa", "flash", "vanilla")
FLASH_HINT = (
    "pip install flash-attn --no-build-isolation (or `pip install amago-pipe[gpu]`; needs a CUDA GPU); "
    "or set traj_encoder.attention: sdpa"
)


def load_flash_attn() -> Callable[..., torch.Tensor]:
    """`flash_attn.flash_attn_func`, or MissingDependencyError with the install hint."""
    try:
        from flash_attn import flash_attn_func
    except ImportError as e:
        raise MissingDependencyError(
            f"traj_encoder.attention: 'flash' needs the flash-attn package, which is not installed ({e}); {FLASH_HINT}"
        ) from e
    fn: Callable[..., torch.Tensor] = flash_attn_func
    return fn


def flash_attn_missing() -> str:
    """Why flash-attn cannot be imported here (the ImportError's text), '' when it can: checked before a run."""
    try:
        load_flash_attn()
    except MissingDependencyError as e:
        return str(e.__cause__)
    return ""


def band_mask(length: int, window: int, device: torch.device) -> torch.Tensor:
    """`(L, L)` bool mask, true where key j may be seen by query i: `i - window < j <= i`."""
    idx = torch.arange(length, device=device)
    diff = idx[:, None] - idx[None, :]  # (L, L) query minus key
    return (diff >= 0) & (diff < window)


def vanilla_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, is_causal: bool, dropout_p: float
) -> torch.Tensor:
    """Reference softmax(q k^T / sqrt(Dh)) v; `mask` true = attend. q `(B, H, Lq, Dh)`, k/v `(B, H, Lk, Dh)`."""
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))  # (B, H, Lq, Lk)
    if is_causal:
        mask = band_mask(q.shape[-2], q.shape[-2], q.device)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    probs = scores.softmax(dim=-1)
    if dropout_p > 0:
        probs = F.dropout(probs, p=dropout_p)
    return probs @ v  # (B, H, Lq, Dh)


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with optional NormFormer head scaling, rotary keys and a KV cache."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        backend: str = "sdpa",
        sigma_reparam: bool = False,
        head_scaling: bool = False,
        dropout_attn: float = 0.0,
        dropout_qkv: float = 0.0,
    ):
        super().__init__()
        if backend not in BACKENDS:
            raise ConfigError(f"traj_encoder.attention: unknown backend '{backend}' (known: {', '.join(BACKENDS)})")
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.backend = backend
        self._flash: Callable[..., torch.Tensor] | None = None  # imported at the first flash call
        self.qkv = linear(d_model, 3 * d_model, sigma_reparam=sigma_reparam)
        self.out = linear(d_model, d_model, sigma_reparam=sigma_reparam)
        self.head_scale = nn.Parameter(torch.ones(n_heads)) if head_scaling else None
        self.dropout_attn, self.qkv_dropout = dropout_attn, Dropout(dropout_qkv)

    def forward(self, x: torch.Tensor, layer: int, plan: AttentionPlan) -> torch.Tensor:
        B, L, D = x.shape
        qkv = self.qkv_dropout(self.qkv(x)).view(B, L, 3, self.n_heads, self.head_dim)  # (B, L, 3, H, Dh)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # (B, H, L, Dh) each
        if plan.rope is not None:
            cos, sin = plan.rope
            q, k = Rotary.rotate(q, cos, sin), Rotary.rotate(k, cos, sin)
        out = self._attend_with_cache(q, k, v, layer, plan)  # (B, H, L, Dh)
        if self.head_scale is not None:
            out = out * self.head_scale.to(out.dtype)[None, :, None, None]
        return self.out(out.transpose(1, 2).reshape(B, L, D))  # (B, L, D)

    def _attend_with_cache(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer: int, plan: AttentionPlan
    ) -> torch.Tensor:
        if plan.cache is None:  # full-sequence forward: remember K/V for the returned state
            plan.new_kv.append((k, v))
            return self._attend(q, k, v, plan.mask, plan.is_causal, plan.window)
        cache_k, cache_v = plan.cache["k"][layer], plan.cache["v"][layer]  # (B, H, W, Dh)
        slots = plan.slots
        if slots is None:
            raise RuntimeError("attention plan with a cache but no slots (plan it with kv_cache.plan_cached)")
        if plan.single_step:  # write first, then attend over the ring (no copy of the cache)
            cache_k = write_slots(plan, "k", layer, k)
            cache_v = write_slots(plan, "v", layer, v)
            ring_k = cache_k[:, :, : plan.ring_len].to(q.dtype)  # (B, H, R, Dh); a no-op unless under autocast
            ring_v = cache_v[:, :, : plan.ring_len].to(q.dtype)
            if not q.is_cuda:  # one query: the plain product is ~3x faster than CPU sdpa with a mask
                return vanilla_attention(q, ring_k, ring_v, plan.mask, False, 0.0)
            return self._attend(q, ring_k, ring_v, plan.mask, False, plan.window, cached=True)
        keys = torch.cat((cache_k[:, :, : plan.ring_len].to(k.dtype), k), dim=2)  # (B, H, R + L, Dh)
        values = torch.cat((cache_v[:, :, : plan.ring_len].to(v.dtype), v), dim=2)
        out = self._attend(q, keys, values, plan.mask, False, plan.window, cached=True)
        n = slots.shape[1]
        write_slots(plan, "k", layer, k[:, :, -n:])
        write_slots(plan, "v", layer, v[:, :, -n:])
        return out

    def _attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor | None,
        is_causal: bool,
        window: int,
        cached: bool = False,
    ) -> torch.Tensor:
        dropout_p = self.dropout_attn if self.training else 0.0
        if self.backend == "vanilla":
            return vanilla_attention(q, k, v, mask, is_causal, dropout_p)
        if self.backend == "flash" and not cached:  # cached rollout steps use sdpa (same maths)
            return self._flash_attention(q, k, v, window, dropout_p)
        if q.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            # CPU flash attention's bf16 backward is ~5x slower than its float32 one (measured on AMX): keep float32
            with torch.autocast("cpu", enabled=False):
                q, k, v = q.float(), k.float(), v.float()
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal)

    def _flash_attention(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int, dropout_p: float
    ) -> torch.Tensor:
        if self._flash is None:
            self._flash = load_flash_attn()
        if not q.is_cuda or q.dtype not in (torch.float16, torch.bfloat16):
            raise ConfigError(
                f"traj_encoder.attention: 'flash' runs on CUDA tensors in float16/bfloat16, got {q.device.type} "
                f"{str(q.dtype).removeprefix('torch.')}; train with bf16 mixed precision on a GPU or use attention: sdpa"
            )
        flash = self._flash
        kwargs: dict[str, Any] = {"dropout_p": dropout_p, "causal": True}
        if window < q.shape[2]:
            kwargs["window_size"] = (window - 1, 0)
        out = flash(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), **kwargs)  # (B, L, H, Dh)
        return out.transpose(1, 2)
