"""The trajectory-encoder contract, run over every TRAJ_ENCODERS entry (plus transformer variants).

Shapes, causality, stepwise == full forward (L=1 steps and chunks, resets inside a batch, rollouts
past max_seq_len vs the sliding-window forward), batch independence, gradients to every parameter.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from amago_pipe.config.build import resolve_component_class
from amago_pipe.config.nets import TrajEncoderConfig
from amago_pipe.config.registries import TRAJ_ENCODERS
from amago_pipe.nets import TrajEncoder, build_traj_encoder

D_IN, MAX_SEQ_LEN, TOL = 7, 6, 1e-5
SMALL = {
    "ff": {"d_model": 24},
    "gru": {"d_model": 24},
    "transformer": {"d_model": 24, "n_heads": 4, "n_layers": 2},
    "mamba": {"d_model": 16, "n_layers": 2, "d_state": 4, "scan_chunk": 5},
}
"""Small sizes per registered name; an entry not listed here is tested with its defaults."""
VARIANTS = {
    "transformer-rope": ("transformer", {"pos_emb": "rope"}),
    "transformer-learned-window3": ("transformer", {"pos_emb": "learned", "window": 3, "max_time": 16}),
    "transformer-vanilla": ("transformer", {"attention": "vanilla"}),
    "transformer-plain": (
        "transformer",
        {"sigma_reparam": False, "normformer_norms": False, "head_scaling": False, "activation": "gelu", "norm": "rms"},
    ),
    "transformer-no-pos": ("transformer", {"pos_emb": "none"}),
}
CASES = {name: (name, {}) for name in TRAJ_ENCODERS.names()} | VARIANTS


def make(case: str) -> TrajEncoder:
    name, extra = CASES[case]
    cls = resolve_component_class(TrajEncoderConfig, name, "test")
    cfg = cls(type=name, **SMALL.get(name, {}), **extra)
    return build_traj_encoder(cfg, D_IN, MAX_SEQ_LEN).eval()


def inputs(batch: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    seq = torch.randn(batch, length, D_IN)
    time = torch.arange(length).repeat(batch, 1) + torch.randint(0, 5, (batch, 1))
    return seq, time


def step_through(enc: TrajEncoder, seq: torch.Tensor, time: torch.Tensor, chunk: int = 1) -> torch.Tensor:
    state = enc.init_state(seq.shape[0])
    outs = []
    for start in range(0, seq.shape[1], chunk):
        part = slice(start, start + chunk)
        out, state = enc(seq[:, part], time[:, part], state)
        outs.append(out)
    return torch.cat(outs, dim=1)


pytestmark = pytest.mark.parametrize("case", sorted(CASES))


def test_output_shape_and_state(case: str) -> None:
    enc = make(case)
    seq, time = inputs(3, 5)
    out, state = enc(seq, time)
    assert out.shape == (3, 5, enc.out_dim) and torch.isfinite(out).all()
    out1, _ = enc(seq[:, :1], time[:, :1], enc.init_state(3))
    assert out1.shape == (3, 1, enc.out_dim)
    assert isinstance(state, dict) and all(isinstance(v, torch.Tensor) for v in state.values())


@torch.no_grad()
def test_causal(case: str) -> None:
    enc = make(case)
    seq, time = inputs(2, 2 * MAX_SEQ_LEN)
    t = MAX_SEQ_LEN - 2
    out, _ = enc(seq, time)
    seq2, time2 = seq.clone(), time.clone()
    seq2[:, t + 1 :] = torch.randn_like(seq2[:, t + 1 :]) * 3
    time2[:, t + 1 :] += 7
    out2, _ = enc(seq2, time2)
    torch.testing.assert_close(out2[:, : t + 1], out[:, : t + 1], atol=1e-6, rtol=0)
    assert not torch.allclose(out2[:, t + 1 :], out[:, t + 1 :])


@torch.no_grad()
@pytest.mark.parametrize("chunk", [1, 4])
def test_stepwise_equals_full_past_max_seq_len(case: str, chunk: int) -> None:
    enc = make(case)
    seq, time = inputs(3, 3 * MAX_SEQ_LEN + 2)
    full, _ = enc(seq, time)  # for the transformer: the sliding-window (max_seq_len) forward
    stepped = step_through(enc, seq, time, chunk)
    assert (stepped - full).abs().max().item() < TOL


@torch.no_grad()
def test_continue_from_full_forward_state(case: str) -> None:
    enc = make(case)
    seq, time = inputs(2, 2 * MAX_SEQ_LEN + 1)
    full, _ = enc(seq, time)
    head, state = enc(seq[:, :8], time[:, :8])
    tail, _ = enc(seq[:, 8:], time[:, 8:], state)
    assert (torch.cat((head, tail), dim=1) - full).abs().max().item() < TOL


@torch.no_grad()
def test_resets_inside_batch_equal_per_episode_forward(case: str) -> None:
    enc = make(case)
    total = 2 * MAX_SEQ_LEN + 5
    resets = {0: [], 1: [3], 2: [4, 2 * MAX_SEQ_LEN + 1], 3: [MAX_SEQ_LEN + 2]}  # env -> steps starting an episode
    batch = len(resets)
    seq = torch.randn(batch, total, D_IN)
    time = torch.zeros(batch, total, dtype=torch.long)
    for env, starts in resets.items():
        bounds = [0, *starts, total]
        for a, b in itertools.pairwise(bounds):
            time[env, a:b] = torch.arange(b - a)
    state, outs = enc.init_state(batch), []
    for t in range(total):
        done = torch.tensor([t in resets[env] for env in range(batch)])
        state = enc.reset(state, done)
        out, state = enc(seq[:, t : t + 1], time[:, t : t + 1], state)
        outs.append(out)
    stepped = torch.cat(outs, dim=1)
    for env, starts in resets.items():
        bounds = [0, *starts, total]
        for a, b in itertools.pairwise(bounds):
            expected, _ = enc(seq[env : env + 1, a:b], time[env : env + 1, a:b])
            err = (stepped[env, a:b] - expected[0]).abs().max().item()
            assert err < TOL, f"env {env}, episode [{a}, {b}): max abs error {err}"


@torch.no_grad()
def test_batch_independence(case: str) -> None:
    enc = make(case)
    seq, time = inputs(4, 9)
    out, _ = enc(seq, time)
    seq2, time2 = seq.clone(), time.clone()
    seq2[1:] = torch.randn_like(seq2[1:])
    time2[1:] += 3
    out2, _ = enc(seq2, time2)
    torch.testing.assert_close(out2[0], out[0], atol=1e-6, rtol=0)
    alone, _ = enc(seq[:1], time[:1])
    torch.testing.assert_close(alone[0], out[0], atol=TOL, rtol=0)


def test_gradients_reach_every_parameter(case: str) -> None:
    enc = make(case).train()
    seq, time = inputs(3, 2 * MAX_SEQ_LEN)
    seq.requires_grad_(True)
    out, _ = enc(seq, time)
    (out * torch.randn_like(out)).sum().backward()
    missing = [n for n, p in enc.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert not missing, f"no gradient for {missing}"
    assert seq.grad is not None and torch.isfinite(seq.grad).all()


def test_reset_leaves_other_envs_alone(case: str) -> None:
    enc = make(case)
    seq, time = inputs(2, 5)
    with torch.no_grad():
        _, state = enc(seq[:, :4], time[:, :4], enc.init_state(2))
        state_b = {k: v.clone() for k, v in state.items()}
        out_a, _ = enc(seq[:, 4:], time[:, 4:], enc.reset(state, torch.tensor([False, True])))
        out_b, _ = enc(seq[:, 4:], time[:, 4:], state_b)
    torch.testing.assert_close(out_a[0], out_b[0], atol=1e-6, rtol=0)
    if enc.init_state(2):  # encoders with memory check the mask's shape
        with pytest.raises(ValueError, match=r"done_mask must have shape \(2,\)"):
            enc.reset(enc.init_state(2), torch.tensor([True]))


def test_bf16_autocast_training_and_rollout_run(case: str) -> None:
    enc = make(case).train()
    seq, time = inputs(2, MAX_SEQ_LEN + 2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = enc(seq, time)
        out.float().square().mean().backward()
        with torch.no_grad():
            state = enc.init_state(2)
            for t in range(3):
                step, state = enc(seq[:, t : t + 1], time[:, t : t + 1], state)
    assert torch.isfinite(out.float()).all() and torch.isfinite(step.float()).all()
