"""Transformer specifics: backends agree, the cache reads only filled slots, mixed precision rollouts run."""

from __future__ import annotations

import torch

from amago_pipe.config.nets import TransformerConfig
from amago_pipe.nets import build_traj_encoder
from amago_pipe.nets.kv_cache import empty_cache, plan_cached

SMALL = {"d_model": 32, "n_heads": 4, "n_layers": 2}


def test_sdpa_and_vanilla_backends_agree() -> None:
    sdpa = build_traj_encoder(TransformerConfig(**SMALL, window=5), 6, 8).eval()
    vanilla = build_traj_encoder(TransformerConfig(**SMALL, window=5, attention="vanilla"), 6, 8).eval()
    vanilla.load_state_dict(sdpa.state_dict())
    seq, time = torch.randn(2, 13, 6), torch.arange(13).repeat(2, 1)
    with torch.no_grad():
        torch.testing.assert_close(sdpa(seq, time)[0], vanilla(seq, time)[0], atol=1e-5, rtol=0)


def test_cache_reads_only_filled_slots_and_rolls_over() -> None:
    cache = empty_cache(1, 2, 1, 4, 2, device=torch.device("cpu"), dtype=torch.float32)
    lengths = []
    for _ in range(6):
        plan = plan_cached(cache, 1, window=4)
        lengths.append(plan.ring_len)
    assert lengths == [1, 2, 3, 4, 4, 4]
    assert cache["count"].tolist() == [6, 6]
    assert sorted(cache["key_step"][0].tolist()) == [2, 3, 4, 5]  # the last `window` steps


def test_bf16_autocast_rollout_runs() -> None:
    enc = build_traj_encoder(TransformerConfig(**SMALL), 6, 8).eval()
    seq, time = torch.randn(2, 10, 6), torch.arange(10).repeat(2, 1)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        full, _ = enc(seq, time)
        state, outs = enc.init_state(2), []
        for t in range(10):
            out, state = enc(seq[:, t : t + 1], time[:, t : t + 1], state)
            outs.append(out)
    torch.testing.assert_close(torch.cat(outs, 1).float(), full.float(), atol=0.1, rtol=0.1)


def test_cpu_bf16_autocast_attends_in_float32_and_trains() -> None:
    """`mixed_precision: bf16` on a CPU: products in bf16, attention itself in float32 (its bf16 CPU backward is
    ~5x slower); the output stays within bf16's precision of the float32 forward and every weight gets a gradient."""
    torch.manual_seed(0)
    enc = build_traj_encoder(TransformerConfig(**SMALL), 6, 16)
    seq, time = torch.randn(2, 16, 6), torch.arange(16).repeat(2, 1)
    seen: list[torch.dtype] = []
    real_sdpa = torch.nn.functional.scaled_dot_product_attention

    def recording(q: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        seen.append(q.dtype)
        return real_sdpa(q, *args, **kwargs)  # type: ignore[arg-type]

    enc.eval()
    with torch.no_grad():
        ref, _ = enc(seq, time)
    torch.nn.functional.scaled_dot_product_attention = recording  # type: ignore[assignment]
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out, _ = enc(seq, time)
    finally:
        torch.nn.functional.scaled_dot_product_attention = real_sdpa
    assert seen == [torch.float32] * SMALL["n_layers"]
    assert float((out.detach().float() - ref).norm() / ref.norm()) < 5e-2
    enc.train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = enc(seq, time)
    out.float().square().mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in enc.parameters() if p.requires_grad)
