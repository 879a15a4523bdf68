"""The `transformer` trajectory encoder: pre-norm blocks with NormFormer norms and a rolling KV cache.
Pure torch; must not import stores, YAML or pipelines.
"""

from __future__ import annotations

import torch
from torch import nn

from amago_pipe.config.nets import TransformerConfig
from amago_pipe.nets.attention import CausalSelfAttention
from amago_pipe.nets.base import TrajEncoder, TrajState, check_done_mask, check_sequence
from amago_pipe.nets.kv_cache import AttentionPlan, cache_from_full, empty_cache, plan_cached, plan_full, reset_cache
from amago_pipe.nets.layers import Dropout, activation, linear, norm_layer
from amago_pipe.nets.onednn_linear import Linear
from amago_pipe.nets.positions import LearnedTimeEmbedding, Rotary, SinusoidalTimeEmbedding


class TransformerBlock(nn.Module):
    """x += drop(norm'(attn(norm(x)))); x += drop(W2 norm'(drop(act(W1 norm(x))))) — norm' are NormFormer's."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        d_model, d_ff = cfg.d_model, cfg.d_ff or 4 * cfg.d_model
        extra = cfg.norm if cfg.normformer_norms else "none"
        self.norm_attn = norm_layer(cfg.norm, d_model)
        self.attn = CausalSelfAttention(
            d_model,
            cfg.n_heads,
            backend=cfg.attention,
            sigma_reparam=cfg.sigma_reparam,
            head_scaling=cfg.head_scaling,
            dropout_attn=cfg.dropout_attn,
            dropout_qkv=cfg.dropout_qkv,
        )
        self.norm_attn_out = norm_layer(extra, d_model)
        self.norm_ff = norm_layer(cfg.norm, d_model)
        self.ff1 = linear(d_model, d_ff, sigma_reparam=cfg.sigma_reparam)
        self.act = activation(cfg.activation)
        self.norm_ff_mid = norm_layer(extra, d_ff)
        self.ff2 = linear(d_ff, d_model, sigma_reparam=cfg.sigma_reparam)
        self.drop = Dropout(cfg.dropout_ff)

    def forward(self, x: torch.Tensor, layer: int, plan: AttentionPlan) -> torch.Tensor:
        x = x + self.drop(self.norm_attn_out(self.attn(self.norm_attn(x), layer, plan)))  # (B, L, D)
        h = self.norm_ff_mid(self.drop(self.act(self.ff1(self.norm_ff(x)))))  # (B, L, d_ff)
        return x + self.drop(self.ff2(h))  # (B, L, D)


class TransformerTrajEncoder(TrajEncoder):
    """Causal Transformer over timestep vectors; state is the rolling KV cache (see `kv_cache`).

    Each step attends to at most `window` steps (default and cap: `max_seq_len`), in training and in
    rollouts, so stepwise inference with the cache equals the full (sliding-window) forward.
    """

    def __init__(self, *, d_in: int, max_seq_len: int, cfg: TransformerConfig):
        super().__init__()
        self.d_in, self.out_dim = d_in, cfg.d_model
        self.n_layers, self.n_heads = cfg.n_layers, cfg.n_heads
        self.head_dim = cfg.d_model // cfg.n_heads
        self.window = min(cfg.window or max_seq_len, max_seq_len)
        self.inp = Linear(d_in, cfg.d_model)
        self.time_emb: nn.Module | None = None
        self.rotary: Rotary | None = None
        if cfg.pos_emb == "fixed":
            self.time_emb = SinusoidalTimeEmbedding(cfg.d_model)
        elif cfg.pos_emb == "learned":
            self.time_emb = LearnedTimeEmbedding(cfg.d_model, cfg.max_time)
        elif cfg.pos_emb == "rope":
            self.rotary = Rotary(self.head_dim)
        self.emb_drop = Dropout(cfg.dropout_emb)
        self.blocks = nn.ModuleList(TransformerBlock(cfg) for _ in range(cfg.n_layers))
        self.out_norm = norm_layer(cfg.norm, cfg.d_model)
        self.static_cache = False
        """Static KV-cache shapes: set by traced stepwise programs (exports, acting; see `kv_cache`)."""
        self.cache_out_of_place = False
        """Out-of-place KV-cache writes: set by exported stepwise programs (ONNX needs them)."""

    def forward(
        self, seq: torch.Tensor, time: torch.Tensor, state: TrajState | None = None
    ) -> tuple[torch.Tensor, TrajState]:
        check_sequence(seq, time, self.d_in, "transformer traj_encoder")
        length = seq.shape[1]
        x = self.inp(seq)  # (B, L, D)
        if self.time_emb is not None:
            x = x + self.time_emb(time).to(x.dtype)
        x = self.emb_drop(x)
        if state is None:
            plan = plan_full(length, self.window, seq.device)
        else:
            plan = plan_cached(
                state, length, self.window, static=self.static_cache, out_of_place=self.cache_out_of_place
            )
        if self.rotary is not None:
            plan.rope = self.rotary.angles(time)
        for layer, block in enumerate(self.blocks):
            x = block(x, layer, plan)
        out = self.out_norm(x)  # (B, L, D)
        return out, (cache_from_full(plan, length, self.window) if state is None else state)

    def init_state(self, batch: int, device: torch.device | str | None = None) -> TrajState:
        param = self.inp.weight
        return empty_cache(
            self.n_layers,
            batch,
            self.n_heads,
            self.window,
            self.head_dim,
            device=torch.device(device) if device is not None else param.device,
            dtype=param.dtype,
        )

    def reset(self, state: TrajState, done_mask: torch.Tensor) -> TrajState:
        done = check_done_mask(done_mask, state["count"].shape[0], "transformer traj_encoder")
        return reset_cache(state, done.to(state["count"].device))
