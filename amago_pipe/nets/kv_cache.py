"""The Transformer's rolling KV cache (a ring of the last `window` steps per environment) and attention plans.
Pure torch; must not import stores, YAML or pipelines.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from amago_pipe.nets.base import TrajState


@dataclass
class AttentionPlan:
    """What every attention layer of one forward needs: masks, rotary angles and the cache to use."""

    window: int
    """Most steps a query may see (itself included)."""
    mask: torch.Tensor | None
    """Bool mask, true = attend: `(L, L)` without a cache, `(B, 1, L, R [+ L])` with one (R = ring_len)."""
    is_causal: bool
    """Let the backend apply a plain causal mask (no explicit mask)."""
    rope: tuple[torch.Tensor, torch.Tensor] | None = None
    """Rotary cos/sin `(B, 1, L, Dh/2)` when rotary embeddings are used."""
    cache: TrajState | None = None
    """The rolling cache being read and written, or None for a full-sequence forward."""
    single_step: bool = False
    """L == 1 with a cache: write the new key first, then attend over the ring alone."""
    slots: torch.Tensor | None = None
    """`(B, n)` ring slots receiving the last n = min(L, W) new keys."""
    ring_len: int = 0
    """Leading ring slots worth reading: slots past every env's count are empty (cost grows with context)."""
    new_kv: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)
    """Per-layer K/V collected by a full-sequence forward, to build the returned state."""
    static: bool = False
    """Static shapes (every ring slot read, no host sync): for traced and exported programs."""
    out_of_place: bool = False
    """Write K/V into new cache tensors (ONNX programs need it; a traced program may write in place)."""


def empty_cache(
    n_layers: int, batch: int, n_heads: int, window: int, head_dim: int, *, device: torch.device, dtype: torch.dtype
) -> TrajState:
    """A cache with nothing seen.

    `k`, `v` `(n_layers, B, H, W, Dh)`; `key_step (B, W)` the step each ring slot holds (-1: empty);
    `count (B,)` steps seen since the last reset. Slot order does not matter to attention, so rolling
    over costs no copy, and a step reads only the slots some environment has filled.
    """
    kv_shape = (n_layers, batch, n_heads, window, head_dim)
    return {
        "k": torch.zeros(kv_shape, device=device, dtype=dtype),
        "v": torch.zeros(kv_shape, device=device, dtype=dtype),
        "key_step": torch.full((batch, window), -1, device=device, dtype=torch.long),
        "count": torch.zeros(batch, device=device, dtype=torch.long),
    }


def plan_full(length: int, window: int, device: torch.device) -> AttentionPlan:
    """Plan a forward without a cache: plain causal when it fits the window, else a banded mask."""
    if length <= window:
        return AttentionPlan(window=window, mask=None, is_causal=True)
    idx = torch.arange(length, device=device)
    diff = idx[:, None] - idx[None, :]  # (L, L)
    return AttentionPlan(window=window, mask=(diff >= 0) & (diff < window), is_causal=False)


def plan_cached(
    cache: TrajState, length: int, window: int, *, static: bool = False, out_of_place: bool = False
) -> AttentionPlan:
    """Plan a forward that continues `cache` by `length` steps; updates `count`/`key_step` in place.

    `static`: read every ring slot (empty ones masked) instead of only the filled ones: the same result with
    static shapes and no host sync, for traced and exported programs. `out_of_place`: K/V writes make new
    cache tensors (ONNX)."""
    count, key_step = cache["count"], cache["key_step"]  # (B,), (B, W)
    if static:
        seen = window
    else:
        seen = int(count.max()) if count.numel() else 0  # one host sync per call; bounds the slots read
    q_step = count[:, None] + torch.arange(length, device=count.device)  # (B, L)
    n = min(length, window)
    write_steps = q_step[:, length - n :]  # (B, n)
    slots = write_steps % window  # (B, n)
    if length == 1:
        ring_len = min(window, seen + 1)
        key_step.scatter_(1, slots, write_steps)  # the new key joins the ring before attention
        used = key_step[:, :ring_len]  # (B, R)
        mask = ((used >= 0) & (q_step - used < window))[:, None, None, :]  # (B, 1, 1, R)
    else:
        ring_len = min(window, seen)
        keys = torch.cat((key_step[:, :ring_len], q_step), dim=1)  # (B, R + L)
        diff = q_step[:, :, None] - keys[:, None, :]  # (B, L, R + L)
        mask = ((keys[:, None, :] >= 0) & (diff >= 0) & (diff < window))[:, None]  # (B, 1, L, R + L)
        key_step.scatter_(1, slots, write_steps)
    count.add_(length)
    return AttentionPlan(
        window=window,
        mask=mask,
        is_causal=False,
        cache=cache,
        single_step=length == 1,
        slots=slots,
        ring_len=ring_len,
        static=static,
        out_of_place=out_of_place,
    )


def write_slots(plan: AttentionPlan, name: str, layer: int, new: torch.Tensor) -> torch.Tensor:
    """Write `new (B, H, n, Dh)` into the ring `plan.cache[name][layer] (B, H, W, Dh)` at `plan.slots (B, n)`;
    returns the ring. In place, or (`plan.out_of_place`) into a new cache tensor, which ONNX programs need."""
    full = plan.cache[name]  # type: ignore[index]
    ring = full[layer]
    index = plan.slots[:, None, :, None].expand(-1, ring.shape[1], -1, ring.shape[3])  # type: ignore[index]
    if not plan.out_of_place:
        ring.scatter_(2, index, new.to(ring.dtype))
        return ring
    ring = ring.scatter(2, index, new.to(ring.dtype))
    plan.cache[name] = torch.cat((full[:layer], ring[None], full[layer + 1 :]))  # type: ignore[index]
    return ring


def cache_from_full(plan: AttentionPlan, length: int, window: int) -> TrajState:
    """The state after a full-sequence forward of `length` steps (its last `window` keys in the ring)."""
    k_all = torch.stack([k for k, _ in plan.new_kv])  # (n_layers, B, H, L, Dh)
    v_all = torch.stack([v for _, v in plan.new_kv])
    n_layers, batch, n_heads, _, head_dim = k_all.shape
    cache = empty_cache(n_layers, batch, n_heads, window, head_dim, device=k_all.device, dtype=k_all.dtype)
    n = min(length, window)
    steps = torch.arange(length - n, length, device=k_all.device)  # (n,)
    slots = steps % window
    cache["k"][:, :, :, slots] = k_all[:, :, :, length - n :]
    cache["v"][:, :, :, slots] = v_all[:, :, :, length - n :]
    cache["key_step"][:, slots] = steps
    cache["count"].fill_(length)
    return cache


def reset_cache(cache: TrajState, done: torch.Tensor) -> TrajState:
    """Forget the environments in `done (B,) bool` (their slots become empty; K/V need no clearing)."""
    return {
        "k": cache["k"],
        "v": cache["v"],
        "key_step": torch.where(done[:, None], -1, cache["key_step"]),
        "count": torch.where(done, 0, cache["count"]),
    }
