"""GPU-only comparisons (skipped without CUDA): the CUDA paths against the CPU/float64 ones, mamba-ssm, flash-attn."""

from __future__ import annotations

import pytest
import torch

from amago_pipe.config.nets import MambaConfig, TransformerConfig
from amago_pipe.nets import build_traj_encoder
from amago_pipe.nets.mamba import MambaMixer

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def test_torch_mamba_mixer_equals_mamba_ssm() -> None:
    mamba_ssm = pytest.importorskip("mamba_ssm")
    ours = MambaMixer(64, d_state=16, d_conv=4, expand=2, backend="torch").cuda()
    ref = mamba_ssm.Mamba(d_model=64, d_state=16, d_conv=4, expand=2).cuda()
    assert set(ours.state_dict()) == set(ref.state_dict())
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(3, 200, 64, device="cuda")
    y_ours, _, _ = ours(x, None, None)
    torch.testing.assert_close(y_ours, ref(x), atol=1e-4, rtol=1e-3)
    kernel = MambaMixer(64, d_state=16, d_conv=4, expand=2, backend="cuda").cuda()
    kernel.load_state_dict(ours.state_dict())
    y_kernel, _, ssm_kernel = kernel(x, None, None)
    _, _, ssm_ours = ours(x, None, None)
    torch.testing.assert_close(y_kernel, y_ours, atol=1e-4, rtol=1e-3)
    torch.testing.assert_close(ssm_kernel, ssm_ours, atol=1e-4, rtol=1e-3)


def test_mamba_encoder_kernel_training_forward_equals_stepwise_rollout() -> None:
    pytest.importorskip("mamba_ssm")
    enc = build_traj_encoder(MambaConfig(d_model=32, n_layers=2, backend="cuda"), 8, 64).cuda().eval()
    seq, time = torch.randn(2, 40, 8, device="cuda"), torch.arange(40, device="cuda").repeat(2, 1)
    full, _ = enc(seq, time)
    state, outs = enc.init_state(2), []
    for t in range(40):
        out, state = enc(seq[:, t : t + 1], time[:, t : t + 1], state)
        outs.append(out)
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("window", [None, 16])
def test_flash_attention_equals_sdpa_in_bf16(window: int | None) -> None:
    pytest.importorskip("flash_attn")
    cfg = TransformerConfig(d_model=64, n_heads=4, window=window, dropout_emb=0.0, dropout_ff=0.0)
    sdpa = build_traj_encoder(cfg, 8, 64).cuda().eval()
    flash = build_traj_encoder(TransformerConfig(**{**cfg.to_dict(), "attention": "flash"}), 8, 64).cuda().eval()
    flash.load_state_dict(sdpa.state_dict())
    seq, time = torch.randn(2, 64, 8, device="cuda"), torch.arange(64, device="cuda").repeat(2, 1)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        a, _ = sdpa(seq, time)
        b, _ = flash(seq, time)
    torch.testing.assert_close(a.float(), b.float(), atol=3e-2, rtol=3e-2)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach().double() - b.detach().double()).norm() / b.detach().double().norm())


def test_torch_mamba_scan_on_cuda_matches_float64_cpu() -> None:
    """The hand-written scan and its backward give the same output and gradients on the GPU as in float64."""
    ref = MambaMixer(32, backend="torch", scan_chunk=16).double()
    gpu = MambaMixer(32, backend="torch", scan_chunk=16).cuda()
    gpu.load_state_dict(ref.state_dict())
    x = torch.randn(3, 100, 32, dtype=torch.float64)
    x_gpu = x.float().cuda().requires_grad_()
    x.requires_grad_()
    y_ref, _, _ = ref(x, None, None)
    y_gpu, _, _ = gpu(x_gpu, None, None)
    assert _rel(y_gpu.cpu(), y_ref) < 1e-4
    weight = torch.randn_like(y_ref)
    (y_ref * weight).sum().backward()
    (y_gpu * weight.float().cuda()).sum().backward()
    assert _rel(x_gpu.grad.cpu(), x.grad) < 1e-4
    for (name, p_ref), p_gpu in zip(ref.named_parameters(), gpu.parameters(), strict=True):
        assert _rel(p_gpu.grad.cpu(), p_ref.grad) < 1e-3, name


@pytest.mark.parametrize("window", [None, 16])
def test_sdpa_on_cuda_matches_vanilla_and_bf16_stays_close(window: int | None) -> None:
    """sdpa (CUDA kernels) equals the explicit attention in fp32; bf16 autocast is within bf16's rounding."""
    cfg = TransformerConfig(d_model=64, n_heads=4, window=window, dropout_emb=0.0, dropout_ff=0.0)
    sdpa = build_traj_encoder(cfg, 8, 128).cuda().eval()
    vanilla = build_traj_encoder(TransformerConfig(**{**cfg.to_dict(), "attention": "vanilla"}), 8, 128).cuda().eval()
    vanilla.load_state_dict(sdpa.state_dict())
    seq, time = torch.randn(4, 128, 8, device="cuda"), torch.arange(128, device="cuda").repeat(4, 1)
    with torch.no_grad():
        a, _ = sdpa(seq, time)
        b, _ = vanilla(seq, time)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            c, _ = sdpa(seq, time)
    assert _rel(a, b) < 1e-3
    assert _rel(c.float(), b) < 2e-2
